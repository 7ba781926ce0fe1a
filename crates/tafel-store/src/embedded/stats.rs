//! The embedded store's metrics: updated by the writer, log and flusher threads
//! with relaxed atomics (once per group or sync, never per row), read by
//! [`Store::metrics`](crate::Store::metrics).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::stats::{Histo, RowCounts, StoreMetric, BYTES, COUNTS, SECONDS};

pub(super) struct EmbeddedStats {
    /// Jobs per group the writer committed (one observation per group).
    pub(super) group_jobs: Histo,
    /// How long each log `fdatasync` took.
    pub(super) log_sync: Histo,
    pub(super) log_bytes: AtomicU64,
    /// How long the writer stood still for each checkpoint's durable commit.
    pub(super) checkpoint_seconds: Histo,
    /// Bytes of log records each checkpoint covered.
    pub(super) checkpoint_log_bytes: Histo,
    /// Bytes of records in the log half now being written, and its size.
    pub(super) log_fill: AtomicU64,
    pub(super) log_capacity: AtomicU64,
    pub(super) rows: RowCounts,
}

impl Default for EmbeddedStats {
    fn default() -> Self {
        EmbeddedStats {
            group_jobs: Histo::new(COUNTS),
            log_sync: Histo::new(SECONDS),
            log_bytes: AtomicU64::new(0),
            checkpoint_seconds: Histo::new(SECONDS),
            checkpoint_log_bytes: Histo::new(BYTES),
            log_fill: AtomicU64::new(0),
            log_capacity: AtomicU64::new(0),
            rows: RowCounts::default(),
        }
    }
}

impl EmbeddedStats {
    pub(super) fn metrics(&self, page_bytes: u64) -> Vec<StoreMetric> {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        let mut out = vec![
            StoreMetric::histogram(
                "commit_group_size",
                "Writes committed together in one group (one log sync for them all).",
                &self.group_jobs,
            ),
            StoreMetric::histogram(
                "log_sync_seconds",
                "Time of each write-ahead log sync (fdatasync).",
                &self.log_sync,
            ),
            StoreMetric::counter(
                "log_written_bytes",
                "Bytes of write-ahead log records written.",
                &self.log_bytes,
            ),
            StoreMetric::histogram(
                "checkpoint_seconds",
                "Time the writer stood still for each checkpoint's durable commit.",
                &self.checkpoint_seconds,
            ),
            StoreMetric::histogram(
                "checkpoint_log_bytes",
                "Bytes of log records each checkpoint covered (made redundant).",
                &self.checkpoint_log_bytes,
            ),
            StoreMetric {
                name: "page_written_bytes",
                help: "Bytes of store pages the flusher wrote to the data file (checkpoints).",
                value: crate::stats::MetricValue::Counter(page_bytes),
            },
            StoreMetric::gauge(
                "log_fill_bytes",
                "Bytes of records in the log half now being written; a checkpoint empties it.",
                load(&self.log_fill),
            ),
            StoreMetric::gauge(
                "log_capacity_bytes",
                "Bytes a log half holds.",
                load(&self.log_capacity),
            ),
        ];
        self.rows.metrics(&mut out);
        out
    }
}
