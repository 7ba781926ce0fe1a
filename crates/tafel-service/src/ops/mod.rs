//! The Table service operations over a [`Store`].

mod changes;
mod entities;
mod tables;
mod writes;

use std::sync::Arc;

use tafel_store::Store;

use crate::access::Access;
use crate::clock::Clock;

pub use changes::{ChangesQuery, MAX_CHANGES, MAX_WAIT};
pub use entities::{EntityQuery, EntitySink};
pub use tables::{TablePage, TableQuery};
pub use writes::{BatchFailure, IfMatch, WriteKind, WriteOp};

/// Who is asking, on which account.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub account: String,
    pub access: Access,
}

impl Ctx {
    pub fn full(account: impl Into<String>) -> Self {
        Ctx {
            account: account.into(),
            access: Access::Full,
        }
    }
}

/// The service: cheap to clone, shared by every request.
#[derive(Clone)]
pub struct Service {
    store: Arc<dyn Store>,
    clock: Arc<Clock>,
}

impl Service {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Service {
            store,
            clock: Arc::new(Clock::default()),
        }
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }
}
