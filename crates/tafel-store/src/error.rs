//! Errors a backend reports. The service layer maps them to Azure error codes.

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The table named in an entity operation does not exist (any more).
    #[error("table not found")]
    TableNotFound,
    /// The backend failed: I/O, corruption, a lost connection. Maps to 500.
    #[error("storage backend failure: {0}")]
    Backend(String),
    /// The write kept conflicting with concurrent writes (a shared database's
    /// serialization failures) and gave up; the client may retry. Maps to 503.
    #[error("storage backend busy: {0}")]
    Busy(String),
}

impl StoreError {
    pub fn backend(e: impl std::fmt::Display) -> Self {
        StoreError::Backend(e.to_string())
    }
}
