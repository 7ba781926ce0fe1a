//! Errors a backend reports. The service layer maps them to Azure error codes.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The table named in an entity operation does not exist (any more).
    #[error("table not found")]
    TableNotFound,
    /// A create named a table whose delete is still removing its entities (a
    /// backend that deletes tables in the background). Maps to 409.
    #[error("table being deleted")]
    TableBeingDeleted,
    /// The backend failed: I/O, corruption, a lost connection. Maps to 500.
    #[error("storage backend failure: {0}")]
    Backend(BackendError),
    /// The write kept conflicting with concurrent writes (a shared database's
    /// serialization failures) and gave up; the client may retry. Maps to 503.
    #[error("storage backend busy: {0}")]
    Busy(String),
}

/// Why a store cannot serve now ([`Store::ready`](crate::Store::ready)); its
/// text is what the admin listener's `/ready` answers with.
#[derive(Debug, thiserror::Error)]
pub enum NotReady {
    #[error("the store is shut down")]
    ShutDown,
    #[error("the writer thread stopped")]
    WriterStopped,
    /// Writes fail until a restart or until space is freed (a failed log write
    /// or sync, a full disk): the reason the store gives them.
    #[error("{reason}")]
    Failing { kind: FailureKind, reason: String },
    /// A health check must not wait longer than this for the database.
    #[error("the database did not answer within {0:?}")]
    NoAnswer(std::time::Duration),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<BackendError> for NotReady {
    fn from(e: BackendError) -> Self {
        NotReady::Store(e.into())
    }
}

/// What kind of failure a backend failure is: what an operator does about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The disk or the quota is full: writes fail until space is freed.
    DiskFull,
    /// Another I/O error of the store's files.
    Io,
    /// The database could not be reached or dropped the connection.
    Unavailable,
    /// Stored bytes that do not decode.
    Corrupt,
    /// The store is shutting down, or its writer has stopped.
    Stopped,
    /// A broken invariant: a bug.
    Internal,
}

/// A backend failure: its kind, what was being done, and the error that caused
/// it (kept, not flattened to text, so its chain and `io::ErrorKind` survive).
/// Cheap to clone: one failed commit answers every write of its group.
#[derive(Debug, Clone)]
pub struct BackendError {
    pub kind: FailureKind,
    context: Cow<'static, str>,
    source: Option<Arc<dyn StdError + Send + Sync>>,
}

impl BackendError {
    pub fn new(kind: FailureKind, context: impl Into<Cow<'static, str>>) -> Self {
        BackendError {
            kind,
            context: context.into(),
            source: None,
        }
    }

    /// A failure of kind `kind` caused by `source`, whatever its chain holds (an
    /// `io::Error` on a socket to a database is the database out of reach, not a
    /// failure of this machine's disk).
    pub fn of_kind(
        kind: FailureKind,
        context: impl Into<Cow<'static, str>>,
        source: impl StdError + Send + Sync + 'static,
    ) -> Self {
        BackendError {
            kind,
            context: context.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// A failure caused by `source`; its kind is read from the first
    /// `io::Error` in the chain, if any, else `otherwise`.
    pub fn caused_by(
        otherwise: FailureKind,
        context: impl Into<Cow<'static, str>>,
        source: impl StdError + Send + Sync + 'static,
    ) -> Self {
        let kind = io_kind(&source).map_or(otherwise, kind_of_io);
        BackendError {
            kind,
            context: context.into(),
            source: Some(Arc::new(source)),
        }
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Some(s) => write!(f, "{}: {s}", self.context),
            None => f.write_str(&self.context),
        }
    }
}

impl StdError for BackendError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source.as_deref().map(|s| s as &(dyn StdError + 'static))
    }
}

impl From<BackendError> for StoreError {
    fn from(e: BackendError) -> Self {
        StoreError::Backend(e)
    }
}

impl StoreError {
    /// A failure with no error behind it (a broken invariant, a stopped writer).
    pub fn failure(kind: FailureKind, context: impl Into<Cow<'static, str>>) -> Self {
        StoreError::Backend(BackendError::new(kind, context))
    }

    /// The same error; a backend failure's context names the operation that met it.
    pub fn during(self, operation: &str) -> Self {
        match self {
            StoreError::Backend(mut e) => {
                e.context = format!("{operation}: {}", e.context).into();
                StoreError::Backend(e)
            }
            other => other,
        }
    }
}

/// The `io::ErrorKind` of the first `io::Error` in `e`'s chain.
pub fn io_kind(e: &(dyn StdError + 'static)) -> Option<io::ErrorKind> {
    let mut cur = Some(e);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            return Some(io.kind());
        }
        cur = e.source();
    }
    None
}

pub fn kind_of_io(kind: io::ErrorKind) -> FailureKind {
    match kind {
        io::ErrorKind::StorageFull => FailureKind::DiskFull,
        _ => FailureKind::Io,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_keeps_its_kind_and_its_cause_through_the_chain() {
        let full = io::Error::from(io::ErrorKind::StorageFull);
        let b = BackendError::caused_by(FailureKind::Io, "appending to the write-ahead log", full);
        assert_eq!(b.kind, FailureKind::DiskFull);
        assert_eq!(io_kind(&b), Some(io::ErrorKind::StorageFull));
        // Wrapped again, as a waiting write reports the log's failure.
        let later = BackendError::caused_by(FailureKind::Internal, "commit", b.clone());
        assert_eq!(later.kind, FailureKind::DiskFull);
        assert!(
            later
                .to_string()
                .starts_with("commit: appending to the write-ahead log: "),
            "{later}"
        );
    }

    #[test]
    fn an_error_without_io_keeps_the_kind_it_was_given() {
        let e = BackendError::caused_by(FailureKind::Unavailable, "pool", fmt::Error);
        assert_eq!(e.kind, FailureKind::Unavailable);
        assert!(e.source().is_some());
        assert_eq!(
            BackendError::new(FailureKind::Stopped, "writer stopped").to_string(),
            "writer stopped"
        );
    }
}
