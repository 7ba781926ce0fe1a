//! The Table service operations over a [`Store`].

mod changes;
mod entities;
mod expiry;
mod tables;
mod writes;

use std::sync::Arc;

use tafel_store::Store;

use crate::access::Access;
use crate::clock::Clock;

pub use changes::{ChangesQuery, MAX_CHANGES, MAX_WAIT};
pub use entities::{EntityQuery, EntitySink, QueryPage, QueryPlan};
pub use expiry::{DISCOVER_EVERY, SWEEP_EVERY};
pub use tables::{TablePage, TableQuery};
pub use writes::{BatchFailure, IfMatch, WriteKind, WriteOp};

/// Who is asking, on which account.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub account: String,
    pub access: Access,
    /// How to check, later in a long request, that the credential still holds;
    /// `None`: it cannot be revoked within a request's life (the account key).
    pub recheck: Option<Recheck>,
}

impl Ctx {
    pub fn full(account: impl Into<String>) -> Self {
        Ctx {
            account: account.into(),
            access: Access::Full,
            recheck: None,
        }
    }

    /// Fails with the credential's refusal if it no longer holds (a SAS past its
    /// expiry, its stored access policy removed or changed, a token expired).
    pub async fn still_authorized(&self) -> crate::Result<()> {
        match &self.recheck {
            Some(r) => (r.0)().await,
            None => Ok(()),
        }
    }
}

/// The credential's verification, run again: built by the HTTP layer, which
/// verified it first. A long poll asks it before each delivery, so removing a
/// policy or passing an expiry ends what the credential started.
#[derive(Clone)]
pub struct Recheck(pub Arc<dyn Fn() -> BoxFuture<crate::Result<()>> + Send + Sync>);

/// A boxed, sendable future.
pub type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl std::fmt::Debug for Recheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recheck")
    }
}

/// The service: cheap to clone, shared by every request.
#[derive(Clone)]
pub struct Service {
    store: Arc<dyn Store>,
    clock: Arc<Clock>,
    /// Tables' TTL policies, cached (`ttl.rs`).
    policies: Arc<crate::ttl::Policies>,
}

impl Service {
    pub fn new(store: Arc<dyn Store>) -> Self {
        // The store keeps index entries from the stored forms it writes; how a
        // property becomes an entry is the service's (`index/encode.rs`).
        store.set_index_encoder(crate::index::encoder());
        Service {
            store,
            clock: Arc::new(Clock::default()),
            policies: Arc::default(),
        }
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }
}
