//! Backup and restore of a whole Tafel store: every account's service
//! properties, tables with their access policies and secondary-index
//! definitions (the entries are made again as the rows load), and entities, as of one
//! instant, in one versioned, checksummed, compressed file ([`format`]).
//!
//! A backup reads a store [`Snapshot`](tafel_store::Snapshot): the embedded
//! store's published redb snapshot or one PostgreSQL transaction, so it never
//! holds half a batch or a write from after it began, while the server goes on
//! serving. A restore checks the whole file before it writes anything, and
//! writes only into an empty store, of either backend; until it has loaded all
//! of it, the store carries a marker that keeps it from being served.

pub mod format;
mod restore;
mod take;

pub use format::{Counts, Info, Reader};
pub use restore::{check, restore, unfinished_restore, verify, RestoreProgress, UNFINISHED_MARKER};
pub use take::{info_now, take, ChunkError, Chunks};

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("not a Tafel backup file")]
    NotABackup,
    #[error("backup format version {0}; this Tafel reads versions 1 to {v}", v = format::VERSION)]
    Version(u32),
    #[error("the backup is truncated: it ends before its end record")]
    Truncated,
    #[error("the backup is damaged: {0}")]
    Corrupt(String),
    #[error("the target store is not empty ({0}): restore writes only into an empty store")]
    NotEmpty(String),
    #[error("restoring the index of {0}")]
    Index(String),
    #[error("the store: {0}")]
    Store(#[from] tafel_store::StoreError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
