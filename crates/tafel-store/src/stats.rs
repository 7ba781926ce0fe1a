//! What a backend tells operators about itself: counters, gauges and
//! fixed-bucket histograms it updates with a few atomic operations, and a
//! snapshot of them ([`Store::metrics`](crate::Store::metrics)) that the admin
//! listener (tafel-admin) turns into Prometheus text. The store knows nothing of
//! Prometheus: it names its metrics and says what they mean, no more.

use std::sync::atomic::{AtomicU64, Ordering};

use tafel_stats::{Histogram, HistogramSnapshot};

/// One metric as of the snapshot.
#[derive(Debug, Clone)]
pub struct StoreMetric {
    /// The name below the `tafel_store_` prefix; a counter's without `_total`.
    pub name: &'static str,
    pub help: &'static str,
    pub value: MetricValue,
}

#[derive(Debug, Clone)]
pub enum MetricValue {
    Counter(u64),
    Gauge(f64),
    Histogram(HistogramSnapshot),
}

impl StoreMetric {
    pub fn counter(name: &'static str, help: &'static str, c: &AtomicU64) -> Self {
        StoreMetric {
            name,
            help,
            value: MetricValue::Counter(c.load(Ordering::Relaxed)),
        }
    }

    pub fn gauge(name: &'static str, help: &'static str, v: f64) -> Self {
        StoreMetric {
            name,
            help,
            value: MetricValue::Gauge(v),
        }
    }

    pub fn histogram(name: &'static str, help: &'static str, h: &Histogram) -> Self {
        StoreMetric {
            name,
            help,
            value: MetricValue::Histogram(h.snapshot()),
        }
    }
}

/// Rows a backend's scans examined and returned: a query whose filter the
/// planner could not turn into key ranges examines many rows per row returned.
#[derive(Debug, Default)]
pub struct RowCounts {
    pub scanned: AtomicU64,
    pub returned: AtomicU64,
}

impl RowCounts {
    pub fn add(&self, scanned: u64, returned: u64) {
        self.scanned.fetch_add(scanned, Ordering::Relaxed);
        self.returned.fetch_add(returned, Ordering::Relaxed);
    }

    pub fn metrics(&self, out: &mut Vec<StoreMetric>) {
        out.push(StoreMetric::counter(
            "query_rows_scanned",
            "Rows entity queries examined (before their filter).",
            &self.scanned,
        ));
        out.push(StoreMetric::counter(
            "query_rows_returned",
            "Rows entity queries returned.",
            &self.returned,
        ));
    }
}
