//! Instant resets for test suites: named savepoints of a whole store (the
//! admin listener's "snapshots"; not [`crate::Snapshot`], the point-in-time
//! read a backup takes) and the emptying of one account. A backend that cannot
//! do one says so with [`ResetError::Unsupported`].

/// A named savepoint, as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavepointInfo {
    pub name: String,
    /// When it was saved, in milliseconds since the Unix epoch.
    pub created_ms: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ResetError {
    /// The backend cannot do this; the message says why and what to do instead.
    #[error("{0}")]
    Unsupported(String),
    #[error("no snapshot named {0:?}")]
    NotFound(String),
    #[error("a snapshot named {0:?} exists already")]
    Exists(String),
    #[error(transparent)]
    Store(#[from] crate::StoreError),
}
