//! Where the pool's connections live, and the pool itself (its limits).
//!
//! A `tokio_postgres` connection is a socket plus a task that drives it, both
//! bound to the runtime that opened them. The HTTP layer serves requests on
//! several runtimes (one per serving thread) that stop one by one at shutdown,
//! so a connection opened from one of them would die with it while the other
//! threads still use the pooled connection. Connections are therefore opened and
//! driven on the runtime that created the store, which outlives the serving
//! threads.
//!
//! Each connection is plain or TLS as the sslmode says ([`super::tls`]).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use deadpool_postgres::{Connect, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime, Timeouts};
use tokio::runtime::Handle;
use tokio::task::JoinHandle;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Config, Error, NoTls, Socket};

use super::tls::{self, Connector};
use crate::error::{BackendError, FailureKind, StoreError};

/// Limits that turn a database out of reach into a prompt error (503 to the
/// client) rather than a hang, unless the URL sets them: how long to wait for a
/// connection, and for the database to acknowledge what was sent (a cut link
/// where packets vanish, not a closed port).
pub(super) fn fail_fast(config: &mut tokio_postgres::Config) {
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(5));
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(Duration::from_secs(10));
    }
    if config.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60) {
        config.keepalives_idle(Duration::from_secs(30));
    }
}

/// A pool of at most `size` connections opened with `config`, each set up by `hook`.
pub(super) fn pool(
    config: tokio_postgres::Config,
    connector: tls::Connector,
    size: usize,
    hook: Option<deadpool_postgres::Hook>,
) -> Result<Pool, StoreError> {
    let manager = Manager::from_connect(
        config,
        OnStoreRuntime::current(connector),
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let mut builder = Pool::builder(manager)
        .max_size(size.max(1))
        .runtime(Runtime::Tokio1)
        // A request waits this long for a connection before failing, not forever.
        .timeouts(Timeouts {
            wait: Some(Duration::from_secs(10)),
            create: Some(Duration::from_secs(10)),
            recycle: Some(Duration::from_secs(5)),
        });
    if let Some(hook) = hook {
        builder = builder.post_create(hook);
    }
    builder
        .build()
        .map_err(|e| BackendError::caused_by(FailureKind::Internal, "building the connection pool", e).into())
}

pub(super) struct OnStoreRuntime {
    runtime: Handle,
    connector: Connector,
}

impl OnStoreRuntime {
    /// Binds new connections, opened with `connector`, to the runtime this is called on.
    pub(super) fn current(connector: Connector) -> Self {
        OnStoreRuntime {
            runtime: Handle::current(),
            connector,
        }
    }
}

type Connecting<'a> = Pin<Box<dyn Future<Output = Result<(Client, JoinHandle<()>), Error>> + Send + 'a>>;

impl Connect for OnStoreRuntime {
    fn connect(&self, config: &Config) -> Connecting<'_> {
        let (config, connector) = (config.clone(), self.connector.clone());
        let on_store = self.runtime.spawn(open(config.clone(), self.connector.clone()));
        Box::pin(async move {
            match on_store.await {
                Ok(result) => result,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                // The store's runtime is shutting down (the process is exiting):
                // a connection bound to the caller's runtime still serves.
                Err(_) => open(config, connector).await,
            }
        })
    }
}

async fn open(config: Config, connector: Connector) -> Result<(Client, JoinHandle<()>), Error> {
    match connector {
        Connector::Plain => drive(&config, NoTls).await,
        Connector::Tls(tls) => drive(&config, tls).await,
    }
}

async fn drive<T>(config: &Config, tls: T) -> Result<(Client, JoinHandle<()>), Error>
where
    T: MakeTlsConnect<Socket> + Send + 'static,
    T::Stream: Send + 'static,
    T::TlsConnect: Send,
    <T::TlsConnect as tokio_postgres::tls::TlsConnect<Socket>>::Future: Send,
{
    let (client, connection) = config.connect(tls).await?;
    let driver = tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "postgres connection ended");
        }
    });
    Ok((client, driver))
}

/// `e` and its causes, each said once. The first connection's failure is what
/// an operator sees at startup, and tokio-postgres' own message ("error
/// performing TLS handshake", "db error") leaves out why.
pub(super) fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let said = c.to_string();
        if !out.contains(&said) {
            out = format!("{out}: {said}");
        }
        cause = c.source();
    }
    out
}
