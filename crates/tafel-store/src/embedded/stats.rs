//! The embedded store's metrics: updated by the writer, log and flusher threads
//! with relaxed atomics (once per group or sync, never per row), read by
//! [`Store::metrics`](crate::Store::metrics).

use std::sync::atomic::{AtomicU64, Ordering};

use tafel_stats::{Histogram, BYTES, COUNTS, SECONDS};

use crate::stats::{RowCounts, StoreMetric};

pub(super) struct EmbeddedStats {
    /// Jobs per group the writer committed (one observation per group).
    pub(super) group_jobs: Histogram,
    /// How long each log `fdatasync` took.
    pub(super) log_sync: Histogram,
    pub(super) log_bytes: AtomicU64,
    /// How long the writer stood still for each checkpoint's durable commit.
    pub(super) checkpoint_seconds: Histogram,
    /// Bytes of log records each checkpoint covered.
    pub(super) checkpoint_log_bytes: Histogram,
    /// Bytes of records in the log half now being written, and its size.
    pub(super) log_fill: AtomicU64,
    /// Bytes the write buffer holds (`engine/buffer.rs`); a checkpoint folds it into redb.
    pub(super) write_buffer_bytes: AtomicU64,
    pub(super) log_capacity: AtomicU64,
    pub(super) rows: RowCounts,
    /// For tests to wait on events instead of sleeping: jobs the writer has
    /// applied (committed or found to change nothing), and checkpoints that
    /// waited for the log to publish the commits before them.
    #[cfg(test)]
    pub(super) jobs_done: AtomicU64,
    /// Groups run in redb's transaction (checkpoints among them) on a thread
    /// other than the writer's: in memory, a write's thread must leave them.
    #[cfg(test)]
    pub(super) direct_off_the_writer: AtomicU64,
    /// Folds of a non-empty write buffer into redb: by a group run in redb's
    /// transaction, or aside (tests).
    #[cfg(test)]
    pub(super) buffer_folds: AtomicU64,
    /// Tests set this to keep a fold aside (`engine/fold_aside.rs`), once
    /// committed, from becoming the buffer's; `at_fold_pause` says one is
    /// waiting for it to be cleared.
    #[cfg(test)]
    pub(super) hold_folds: std::sync::atomic::AtomicBool,
    #[cfg(test)]
    pub(super) at_fold_pause: std::sync::atomic::AtomicBool,
    /// Folds set aside so far.
    #[cfg(test)]
    pub(super) folds_set_aside: AtomicU64,
    /// Tests set this to keep the fold thread (`engine/pace.rs`) from folding
    /// until someone hurries it; `folds_hurried` counts folds finished so.
    #[cfg(test)]
    pub(super) hold_paced: std::sync::atomic::AtomicBool,
    #[cfg(test)]
    pub(super) at_paced_hold: std::sync::atomic::AtomicBool,
    #[cfg(test)]
    pub(super) folds_hurried: AtomicU64,
}

#[cfg(test)]
impl EmbeddedStats {
    /// The fold thread's pause while tests hold it: until `hurry` is set.
    pub(super) fn hold_paced_fold(&self, hurry: &std::sync::atomic::AtomicBool) {
        use std::sync::atomic::Ordering;
        self.at_paced_hold
            .store(self.hold_paced.load(Ordering::Acquire), Ordering::Release);
        while self.hold_paced.load(Ordering::Acquire) && !hurry.load(Ordering::Relaxed) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

impl Default for EmbeddedStats {
    fn default() -> Self {
        EmbeddedStats {
            group_jobs: Histogram::new(COUNTS),
            log_sync: Histogram::new(SECONDS),
            log_bytes: AtomicU64::new(0),
            checkpoint_seconds: Histogram::new(SECONDS),
            checkpoint_log_bytes: Histogram::new(BYTES),
            log_fill: AtomicU64::new(0),
            write_buffer_bytes: AtomicU64::new(0),
            log_capacity: AtomicU64::new(0),
            rows: RowCounts::default(),
            #[cfg(test)]
            jobs_done: AtomicU64::new(0),
            #[cfg(test)]
            direct_off_the_writer: AtomicU64::new(0),
            #[cfg(test)]
            buffer_folds: AtomicU64::new(0),
            #[cfg(test)]
            hold_folds: std::sync::atomic::AtomicBool::new(false),
            #[cfg(test)]
            at_fold_pause: std::sync::atomic::AtomicBool::new(false),
            #[cfg(test)]
            folds_set_aside: AtomicU64::new(0),
            #[cfg(test)]
            hold_paced: std::sync::atomic::AtomicBool::new(false),
            #[cfg(test)]
            at_paced_hold: std::sync::atomic::AtomicBool::new(false),
            #[cfg(test)]
            folds_hurried: AtomicU64::new(0),
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
                "Bytes of log records each checkpoint covered (made redundant), values a record repeats counted in full.",
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
                "write_buffer_bytes",
                "Bytes of changes in the write buffer, not yet folded into the store file; a checkpoint folds them.",
                load(&self.write_buffer_bytes),
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::embedded::scan_tests::{open, runtime, tempdir, ACCOUNT};
    use crate::error::NotReady;
    use crate::key::{EntityKey, KeyRange};
    use crate::stats::{MetricValue, StoreMetric};
    use crate::test_support::ScanEntities;
    use crate::traits::{Mutation, ScanRequest, Store};

    fn metric<'a>(metrics: &'a [StoreMetric], name: &str) -> &'a MetricValue {
        &metrics
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("{name}"))
            .value
    }

    #[test]
    fn ready_until_the_log_fails_or_the_store_shuts_down() {
        let dir = tempdir().expect("temp dir");
        runtime().block_on(async {
            let store = open(dir.path());
            store.ready().await.expect("a fresh store is ready");
            store.shutdown().await.expect("shutdown");
            let reason = store.ready().await.expect_err("a shut down store is not ready");
            assert!(reason.to_string().contains("shut down"), "{reason}");
        });
        let dir = tempdir().expect("temp dir");
        runtime().block_on(async {
            let store = open(dir.path());
            store
                .opening_now()
                .health()
                .log_failed(std::io::Error::other("a failed sync, for the test"));
            let reason = store.ready().await.expect_err("a failed log is not ready");
            assert!(matches!(reason, NotReady::Failing { .. }), "{reason:?}");
            assert!(reason.to_string().contains("write-ahead log"), "{reason}");
        });
    }

    #[test]
    fn groups_syncs_scanned_rows_and_tables_are_counted() {
        let dir = tempdir().expect("temp dir");
        runtime().block_on(async {
            let store = open(dir.path());
            for t in ["a", "b", "c"] {
                store.create_table(ACCOUNT, t).await.expect("create");
            }
            for i in 0..5u8 {
                let key = EntityKey::new("p", &format!("r{i}"));
                store
                    .write_entities(
                        ACCOUNT,
                        "a",
                        vec![key],
                        Box::new(move |_: &[Option<&[u8]>]| vec![Mutation::Put(vec![i])]),
                    )
                    .await
                    .expect("write");
            }
            // Rows with an even value: 3 of 5.
            let filter: crate::traits::RowFilter = Arc::new(|_, v: &[u8]| v[0].is_multiple_of(2));
            let request = ScanRequest {
                ranges: vec![KeyRange::all()],
                limit: 100,
                filter: Some(filter),
                deadline: None,
            };
            assert_eq!(
                store
                    .scan_entities(ACCOUNT, "a", request)
                    .await
                    .expect("scan")
                    .rows
                    .len(),
                3
            );

            let m = store.metrics();
            // One at a time: 3 table creations and 5 writes, each its own group.
            match metric(&m, "commit_group_size") {
                MetricValue::Histogram(h) => assert_eq!((h.count, h.sum), (8, 8.0)),
                other => panic!("{other:?}"),
            }
            match metric(&m, "log_sync_seconds") {
                MetricValue::Histogram(h) => assert!(h.count >= 1 && h.count <= 8, "{h:?}"),
                other => panic!("{other:?}"),
            }
            assert!(matches!(metric(&m, "query_rows_scanned"), MetricValue::Counter(5)));
            assert!(matches!(metric(&m, "query_rows_returned"), MetricValue::Counter(3)));
            assert!(matches!(metric(&m, "log_capacity_bytes"), MetricValue::Gauge(v) if *v > 0.0));
            assert_eq!(store.count_tables(ACCOUNT).await.expect("count"), 3);
            assert_eq!(store.count_tables("other").await.expect("count"), 0);
            store.shutdown().await.expect("shutdown");
        });
    }
}
