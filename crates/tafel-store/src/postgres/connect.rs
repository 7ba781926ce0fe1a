//! Where the pool's connections live.
//!
//! A `tokio_postgres` connection is a socket plus a task that drives it, both
//! bound to the runtime that opened them. The HTTP layer serves requests on
//! several runtimes (one per serving thread) that stop one by one at shutdown,
//! so a connection opened from one of them would die with it while the other
//! threads still use the pooled connection. Connections are therefore opened and
//! driven on the runtime that created the store, which outlives the serving
//! threads.

use std::future::Future;
use std::pin::Pin;

use deadpool_postgres::Connect;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, Config, Error, NoTls};

pub(super) struct OnStoreRuntime {
    runtime: Handle,
}

impl OnStoreRuntime {
    /// Binds new connections to the runtime this is called on.
    pub(super) fn current() -> Self {
        OnStoreRuntime {
            runtime: Handle::current(),
        }
    }
}

type Connecting<'a> = Pin<Box<dyn Future<Output = Result<(Client, JoinHandle<()>), Error>> + Send + 'a>>;

impl Connect for OnStoreRuntime {
    fn connect(&self, config: &Config) -> Connecting<'_> {
        let config = config.clone();
        let on_store = self.runtime.spawn(open(config.clone()));
        Box::pin(async move {
            match on_store.await {
                Ok(result) => result,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                // The store's runtime is shutting down (the process is exiting):
                // a connection bound to the caller's runtime still serves.
                Err(_) => open(config).await,
            }
        })
    }
}

async fn open(config: Config) -> Result<(Client, JoinHandle<()>), Error> {
    let (client, connection) = config.connect(NoTls).await?;
    let driver = tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "postgres connection ended");
        }
    });
    Ok((client, driver))
}
