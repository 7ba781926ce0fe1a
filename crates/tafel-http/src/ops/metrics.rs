//! The Prometheus registry and the request metrics the pipeline updates.
//!
//! A request costs a few atomic adds and no lock: every label value is a
//! `&'static str` from a fixed set, the series of each operation (and of its
//! answers without an error code) are looked up once and kept, and latency
//! goes to a lock-free fixed-bucket histogram per operation (prometheus-client's
//! own takes a mutex per observation) that a collector encodes at scrape time.
//! So the common case neither hashes, formats, allocates nor locks. What is
//! read at scrape time (the store's metrics, per-account table counts) the
//! admin listener (tafel-admin) adds to [`Metrics::render`].

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tafel_protocol::Operation;
use tafel_service::ErrorCode;
use tafel_stats::Histogram;

/// Request latency buckets, seconds: 100 µs to 10 s.
const LATENCY: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    operation: &'static str,
    status_class: &'static str,
    error_code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TableLabels {
    account: String,
    table: String,
}

/// Rows an entity query examined: a point read's 1 to a scan of millions.
const ROWS: &[f64] = &[1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6, 1e7];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabels {
    operation: &'static str,
}

/// Fixed-bucket histograms, one per value of one label (`values[i]` labels
/// `histograms[i]`), encoded under `name` for the values observed so far:
/// request latency by operation, rows examined by plan.
#[derive(Debug)]
struct ByLabel {
    name: &'static str,
    help: &'static str,
    label: &'static str,
    values: Vec<&'static str>,
    histograms: Arc<[Histogram]>,
}

impl ByLabel {
    fn new(
        name: &'static str,
        help: &'static str,
        label: &'static str,
        values: Vec<&'static str>,
        bounds: &'static [f64],
    ) -> Self {
        let histograms = values.iter().map(|_| Histogram::new(bounds)).collect();
        ByLabel {
            name,
            help,
            label,
            values,
            histograms,
        }
    }
}

impl Collector for ByLabel {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(self.name, self.help, None, MetricType::Histogram)?;
        for (value, h) in self.values.iter().zip(self.histograms.iter()) {
            let s = h.snapshot();
            if s.count == 0 {
                continue;
            }
            family
                .encode_family(&[(self.label, *value)])?
                .encode_histogram::<NoLabelSet>(s.sum, s.count, &s.buckets, None)?;
        }
        Ok(())
    }
}

/// The series of one operation, resolved on its first request.
struct OpSeries {
    bytes_in: Counter,
    bytes_out: Counter,
    /// Requests answered without an error code, by status class.
    plain: [OnceLock<Counter>; 5],
}

pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Arc<[Histogram]>,
    bytes_in: Family<OpLabels, Counter>,
    bytes_out: Family<OpLabels, Counter>,
    connections: Gauge,
    in_flight: Gauge,
    access_log_dropped: Counter,
    faults: Family<KindLabels, Counter>,
    ops: Box<[OnceLock<OpSeries>]>,
    /// Entity queries' rows examined, by plan kind (indexed as [`PLANS`]).
    rows_examined: Arc<[Histogram]>,
    table_scans: Family<TableLabels, Counter>,
    /// The tables `table_scans` names, at most [`SCANNED_TABLES`].
    scanned_tables: Mutex<HashSet<TableLabels>>,
}

/// Tables `tafel_table_scans_total` names one by one; scans of any other table
/// count under `table="(other)"`, a name no table can have.
const SCANNED_TABLES: usize = 1000;

/// The plan kinds of `x-tafel-query-plan`, without an index's properties.
const PLANS: [&str; 5] = ["point", "partition-range", "index", "table-scan", "other"];

/// One finished request, as metrics see it.
pub struct Outcome {
    pub operation: Operation,
    pub status: u16,
    pub error: Option<ErrorCode>,
    pub seconds: f64,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("tafel");
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = ByLabel::new(
            "request_duration_seconds",
            "Time from a request's arrival to its response, by operation",
            "operation",
            Operation::ALL.iter().map(|op| op.as_str()).collect(),
            LATENCY,
        );
        let rows_examined = ByLabel::new(
            "query_rows_examined",
            "Entities an entity query read to answer its page, by plan (x-tafel-query-plan without the index's properties)",
            "plan",
            PLANS.to_vec(),
            ROWS,
        );
        let (latency_histograms, rows_histograms) = (latency.histograms.clone(), rows_examined.histograms.clone());
        let bytes_in = Family::<OpLabels, Counter>::default();
        let bytes_out = Family::<OpLabels, Counter>::default();
        let connections = Gauge::default();
        let in_flight = Gauge::default();
        let access_log_dropped = Counter::default();
        let faults = Family::<KindLabels, Counter>::default();
        let table_scans = Family::<TableLabels, Counter>::default();
        registry.register_collector(Box::new(rows_examined));
        registry.register(
            "table_scans",
            "Entity queries answered by reading the whole table, by account and table",
            table_scans.clone(),
        );
        registry.register(
            "requests",
            "Table API requests answered, by operation, status class and error code",
            requests.clone(),
        );
        registry.register_collector(Box::new(latency));
        registry.register(
            "request_body_bytes",
            "Bytes of request bodies read, by operation",
            bytes_in.clone(),
        );
        registry.register(
            "response_body_bytes",
            "Bytes of response bodies sent, by operation",
            bytes_out.clone(),
        );
        registry.register(
            "open_connections",
            "Table API connections open now",
            connections.clone(),
        );
        registry.register(
            "requests_in_flight",
            "Table API requests being served now",
            in_flight.clone(),
        );
        registry.register(
            "access_log_dropped_lines",
            "Access log lines dropped because the log writer fell behind",
            access_log_dropped.clone(),
        );
        registry.register(
            "faults_injected",
            "Faults injected into Table API requests by fault rules, by kind",
            faults.clone(),
        );
        Metrics {
            registry,
            requests,
            latency: latency_histograms,
            bytes_in,
            bytes_out,
            connections,
            in_flight,
            access_log_dropped,
            faults,
            ops: Operation::ALL.iter().map(|_| OnceLock::new()).collect(),
            rows_examined: rows_histograms,
            table_scans,
            scanned_tables: Mutex::default(),
        }
    }

    fn series(&self, op: Operation) -> Option<&OpSeries> {
        let slot = self.ops.get(op.index())?;
        Some(slot.get_or_init(|| {
            let labels = OpLabels { operation: op.as_str() };
            OpSeries {
                bytes_in: self.bytes_in.get_or_create_owned(&labels),
                bytes_out: self.bytes_out.get_or_create_owned(&labels),
                plain: Default::default(),
            }
        }))
    }

    /// Counts one answered request.
    pub fn observe(&self, o: &Outcome) {
        let Some(series) = self.series(o.operation) else { return };
        if let Some(h) = self.latency.get(o.operation.index()) {
            h.observe(o.seconds);
        }
        // Most requests have no body (and HEAD answers none): skip adding 0.
        if o.bytes_in > 0 {
            series.bytes_in.inc_by(o.bytes_in);
        }
        if o.bytes_out > 0 {
            series.bytes_out.inc_by(o.bytes_out);
        }
        let class = usize::from(o.status / 100).clamp(1, 5) - 1;
        let labels = |error_code| RequestLabels {
            operation: o.operation.as_str(),
            status_class: CLASSES[class],
            error_code,
        };
        match o.error {
            None => {
                series.plain[class]
                    .get_or_init(|| self.requests.get_or_create_owned(&labels("")))
                    .inc();
            }
            // Errors are the rarer case: a map lookup, still no allocation.
            Some(code) => {
                self.requests.get_or_create(&labels(code.as_str())).inc();
            }
        }
    }

    pub fn connection_opened(&self) {
        self.connections.inc();
    }

    pub fn connection_closed(&self) {
        self.connections.dec();
    }

    pub fn request_started(&self) {
        self.in_flight.inc();
    }

    pub fn request_finished(&self) {
        self.in_flight.dec();
    }

    /// Requests of the Table API being served now (what shutdown drains).
    pub fn requests_in_flight(&self) -> i64 {
        self.in_flight.get()
    }

    /// Counts a fault a rule injected (only while rules are set).
    pub fn fault_injected(&self, kind: &'static str) {
        self.faults.get_or_create(&KindLabels { kind }).inc();
    }

    /// Counts an entity query's plan (a kind of [`PLANS`]) and the rows it
    /// examined; a table scan also by its table.
    pub fn query_planned(&self, plan: &'static str, examined: u64, account: &str, table: &str) {
        if let Some(i) = PLANS.iter().position(|p| *p == plan) {
            if let Some(h) = self.rows_examined.get(i) {
                h.observe(examined as f64);
            }
        }
        if plan == "table-scan" {
            let mut labels = TableLabels {
                account: account.to_owned(),
                table: table.to_owned(),
            };
            // A table scan reads the table: a lock here costs nothing beside it.
            if let Ok(mut seen) = self.scanned_tables.lock() {
                if !seen.contains(&labels) {
                    if seen.len() < SCANNED_TABLES {
                        seen.insert(labels.clone());
                    } else {
                        labels.table = "(other)".into();
                    }
                }
            }
            self.table_scans.get_or_create(&labels).inc();
        }
    }

    pub fn access_log_dropped(&self) {
        self.access_log_dropped.inc();
    }

    /// The exposition in Prometheus text format (0.0.4): the request metrics,
    /// then what the admin listener read at scrape time (the store's metrics,
    /// readiness, table counts), which this layer does not know.
    pub fn render(&self, scrape: Box<dyn Collector>) -> Result<String, std::fmt::Error> {
        let mut out = String::with_capacity(16 << 10);
        prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)?;
        let mut at_scrape = Registry::default();
        at_scrape.register_collector(scrape);
        prometheus_client::encoding::prometheus_text::encode(&mut out, &at_scrape)?;
        Ok(out)
    }
}
