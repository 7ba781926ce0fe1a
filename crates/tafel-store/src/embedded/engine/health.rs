//! Whether the engine can still write, and why not: the one place that says so.
//!
//! Two failures break it. A failed write or sync of the store file is recorded
//! by the page file, whose flusher and waiters test it under their own lock; a
//! failed write or sync of the log is recorded here. Either way the state on
//! disk is unknown, so every later write fails and readers keep the last
//! durable snapshot, until a restart replays the log — except after a full
//! disk, when the store reopens itself (`reopen.rs`) with a fresh `Health`.

use std::sync::OnceLock;

use super::page_file::Durable;
use crate::error::{kind_of_io, BackendError, FailureKind};

pub(in crate::embedded) struct Health {
    pages: Durable,
    log: OnceLock<BackendError>,
}

impl Health {
    pub(in crate::embedded) fn new(pages: Durable) -> Self {
        Health {
            pages,
            log: OnceLock::new(),
        }
    }

    /// Records that the log could not be written or synced: every later write fails.
    pub(in crate::embedded) fn log_failed(&self, e: std::io::Error) {
        tracing::error!(error = %e, "write-ahead log failed; failing every write until restart");
        let _ = self
            .log
            .set(BackendError::caused_by(FailureKind::Io, "write-ahead log", e));
    }

    /// The log's failure, the error every write after it is answered with.
    pub(in crate::embedded) fn log_failure(&self) -> Option<&BackendError> {
        self.log.get()
    }

    /// Why every write fails, if it does (the store file's failure first: its
    /// kind says whether the disk is full).
    pub(in crate::embedded) fn broken(&self) -> Option<(FailureKind, String)> {
        if let Some((kind, e)) = self.pages.failure() {
            let kind = kind_of_io(kind);
            let until = match kind {
                FailureKind::DiskFull => "writes fail until space is freed",
                _ => "writes fail until a restart",
            };
            return Some((kind, format!("writing the store file failed ({e}); {until}")));
        }
        self.log.get().map(|_| {
            (
                FailureKind::Io,
                "the write-ahead log failed; writes fail until a restart".to_owned(),
            )
        })
    }
}
