//! Deleted tables kept restorable (`serve --table-soft-delete`, docs/lifecycle.md):
//! what a backend reports of them and why a restore fails.

use crate::error::StoreError;

/// A deleted table still restorable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeletedTable {
    /// Its id, unique in the account; what a restore names.
    pub id: u64,
    /// Its name as created.
    pub name: String,
    /// When it was deleted, and until when it stays restorable (ns since the Unix epoch).
    pub deleted_ns: u64,
    pub until_ns: u64,
    /// Its counters as of its deletion.
    pub entities: u64,
    pub bytes: u64,
}

/// Why listing or restoring deleted tables failed.
#[derive(Debug, thiserror::Error)]
pub enum UndeleteError {
    /// The backend cannot do this; the message says so.
    #[error("{0}")]
    Unsupported(String),
    /// No deleted table of that id (never was, restored, or past its retention).
    #[error("no deleted table has that id")]
    NotFound,
    /// A table of that name exists: restore under another name.
    #[error("a table named {0:?} exists")]
    NameTaken(String),
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for UndeleteError {
    fn from(e: StoreError) -> Self {
        UndeleteError::Store(e)
    }
}
