//! The postgres backend's metrics: conflicts rerun and given up, time spent
//! waiting for a pooled connection, the pool's size, and the rows scans read.

use std::sync::atomic::{AtomicU64, Ordering};

use deadpool_postgres::Pool;

use tafel_stats::{Histogram, SECONDS};

use crate::stats::{MetricValue, RowCounts, StoreMetric};

pub(super) struct PgStats {
    /// Attempts run again after a conflict (serialization failure, deadlock, a
    /// key inserted meanwhile).
    pub(super) retries: AtomicU64,
    /// Operations that still conflicted after every attempt: answered `ServerBusy`.
    pub(super) busy: AtomicU64,
    /// How long each request waited for a pooled connection.
    pub(super) pool_wait: Histogram,
    pub(super) rows: RowCounts,
}

impl Default for PgStats {
    fn default() -> Self {
        PgStats {
            retries: AtomicU64::new(0),
            busy: AtomicU64::new(0),
            pool_wait: Histogram::new(SECONDS),
            rows: RowCounts::default(),
        }
    }
}

impl PgStats {
    pub(super) fn conflict_retried(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn gave_up(&self) {
        self.busy.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn metrics(&self, pool: &Pool) -> Vec<StoreMetric> {
        let status = pool.status();
        let mut out = vec![
            StoreMetric::counter(
                "postgres_retries",
                "Transaction attempts run again after a conflict with another transaction.",
                &self.retries,
            ),
            StoreMetric::counter(
                "postgres_busy",
                "Operations that kept conflicting through every attempt (answered 503 ServerBusy).",
                &self.busy,
            ),
            StoreMetric::histogram(
                "postgres_pool_wait_seconds",
                "Time each database operation waited for a pooled connection.",
                &self.pool_wait,
            ),
            StoreMetric::gauge(
                "postgres_pool_connections",
                "Connections the pool holds now (idle and in use).",
                status.size as f64,
            ),
            StoreMetric::gauge(
                "postgres_pool_idle_connections",
                "Pooled connections idle now.",
                status.available as f64,
            ),
            StoreMetric::gauge(
                "postgres_pool_max_connections",
                "Connections the pool may hold (--postgres-pool).",
                status.max_size as f64,
            ),
            StoreMetric {
                name: "postgres_pool_waiting",
                help: "Operations waiting for a pooled connection now.",
                value: MetricValue::Gauge(status.waiting as f64),
            },
        ];
        self.rows.metrics(&mut out);
        out
    }
}
