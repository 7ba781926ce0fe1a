//! Bounds on what clients can make the server hold: connections, request
//! heads and bodies in memory, and how long a request's head and body may take. Beyond
//! them clients wait (a connection in the listen backlog, a body whose sends
//! stall), or get an answer, never an unbounded share of the machine.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::head_budget::HeadBudget;

/// Bytes of body memory one permit of [`Limits::body_memory`] stands for.
pub(crate) const PERMIT_BYTES: usize = 1024;

/// The limits, as configured (`tafel serve --max-connections`, …).
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Bytes of request bodies held in memory at once, over all requests.
    pub body_memory: usize,
    /// Bytes of request heads held in memory at once, over all connections
    /// (`head_budget.rs`).
    pub head_memory: usize,
    /// How long a request's head may take to arrive (and a TLS client's first byte).
    pub header_timeout: Duration,
    /// How long a request's body may take to arrive once its head has.
    pub body_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_connections: 16_384,
            body_memory: 256 << 20,
            head_memory: 64 << 20,
            header_timeout: Duration::from_secs(30),
            // Azure's longest `timeout` for a table operation.
            body_timeout: Duration::from_secs(30),
        }
    }
}

/// The limits in force: the settings, and the body memory left.
pub struct Limits {
    pub settings: Settings,
    body_memory: Arc<Semaphore>,
    pub(crate) heads: Arc<HeadBudget>,
}

impl Limits {
    pub fn new(settings: Settings) -> Self {
        Limits {
            body_memory: Arc::new(Semaphore::new(budget_permits(&settings))),
            heads: HeadBudget::new(settings.head_memory),
            settings,
        }
    }

    /// Room for `bytes` more of request body, waiting for it if need be; held
    /// until the permit is dropped. More than the whole budget waits for all of it.
    pub(crate) async fn body_room(&self, bytes: usize) -> OwnedSemaphorePermit {
        let wanted = bytes.div_ceil(PERMIT_BYTES).clamp(1, budget_permits(&self.settings));
        let permits = u32::try_from(wanted).unwrap_or(u32::MAX);
        match self.body_memory.clone().acquire_many_owned(permits).await {
            Ok(p) => p,
            // Never closed; should it be, waiting is pointless.
            Err(_) => std::future::pending().await,
        }
    }
}

/// Permits the whole body-memory budget stands for.
fn budget_permits(settings: &Settings) -> usize {
    (settings.body_memory / PERMIT_BYTES).clamp(1, Semaphore::MAX_PERMITS)
}

impl Default for Limits {
    fn default() -> Self {
        Limits::new(Settings::default())
    }
}
