//! How a long run reports its progress: to whatever shows it. The library counts
//! and the caller displays (the `tafel` binary draws a bar or prints lines), so
//! the library holds no terminal code.

/// Told of the work as it is done. Called from the tasks doing it: must be cheap.
pub trait Progress: Send + Sync {
    /// `rows` more rows done, `bytes` more bytes written (0 where not counted).
    fn add(&self, rows: u64, bytes: u64);
    /// What a long-running command adds to its counts from now on (a follow's lag).
    fn status(&self, status: &str);
}
