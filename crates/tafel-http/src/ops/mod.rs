//! What the Table API pipeline reports to operators while it serves: the
//! request metrics ([`metrics`]), the access log ([`access_log`]), the fault
//! rules in force, and the drain state shutdown sets ([`Ops`]).
//!
//! The pipeline reports each request here once it is answered
//! ([`Ops::finish`]). The admin listener (the tafel-admin crate, on a port of
//! its own) reads and renders it; this layer serves no operator endpoint.

pub mod access_log;
pub mod metrics;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use tafel_protocol::{names, Operation};
use tafel_service::ErrorCode;

pub use access_log::{AccessLog, Credential, Destination, LogFormat};
pub use metrics::Metrics;

/// What operations needs of the serving path: metrics, the access log, and
/// whether the node is draining.
pub struct Ops {
    pub metrics: Metrics,
    /// Fault rules in force (none by default).
    pub faults: crate::faults::Faults,
    access_log: Option<AccessLog>,
    draining: AtomicBool,
    /// `--scan-warn-rows`: warn of a query that examined more rows than this
    /// without an index.
    scan_warn_rows: Option<u64>,
}

/// A request being served; reported by [`Ops::finish`].
pub struct Request<'a> {
    pub started: Instant,
    pub operation: Operation,
    pub error: Option<ErrorCode>,
    pub status: u16,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// What the access log alone needs (left empty when it is off).
    pub request_id: &'a str,
    pub account: &'a str,
    pub table: &'a str,
    pub credential: Credential,
    pub peer: Option<SocketAddr>,
    pub user_agent: &'a str,
    /// The kind of fault injected into it (`""`: none).
    pub fault: &'static str,
    /// How an entity query found its page (`None` for other operations).
    pub query: Option<QueryPlan<'a>>,
    /// An entity query's `$filter`, only while scans are warned of.
    pub filter: &'a str,
}

/// How an entity query found its page, from the headers the protocol layer
/// answered with (`x-tafel-query-plan`, `x-tafel-rows-examined`).
#[derive(Clone, Copy, Debug)]
pub struct QueryPlan<'a> {
    /// The header's value: `point`, `partition-range`, `index:P[,Q…]`, `table-scan`.
    pub plan: &'a str,
    pub examined: u64,
}

impl<'a> QueryPlan<'a> {
    pub fn of(headers: &'a http::HeaderMap) -> Option<Self> {
        let plan = headers.get(names::X_TAFEL_QUERY_PLAN)?.to_str().ok()?;
        let examined = headers.get(names::X_TAFEL_ROWS_EXAMINED)?.to_str().ok()?.parse().ok()?;
        Some(QueryPlan { plan, examined })
    }

    /// The plan without an index's property names, as a metric label.
    pub fn kind(&self) -> &'static str {
        match self.plan {
            "point" => "point",
            "partition-range" => "partition-range",
            "table-scan" => "table-scan",
            p if p.starts_with("index:") => "index",
            _ => "other",
        }
    }

    /// Whether the page was found without a secondary index or a point read.
    fn scanned(&self) -> bool {
        matches!(self.kind(), "table-scan" | "partition-range")
    }
}

/// Counts a request in flight while it lives.
pub struct InFlight<'a>(&'a Metrics);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

impl Default for Ops {
    fn default() -> Self {
        Ops::new(None)
    }
}

impl Ops {
    pub fn new(access_log: Option<AccessLog>) -> Self {
        Ops {
            metrics: Metrics::new(),
            faults: Default::default(),
            access_log,
            draining: AtomicBool::new(false),
            scan_warn_rows: None,
        }
    }

    /// Warns of every query that examines more than `rows` rows without an
    /// index (`--scan-warn-rows`).
    pub fn with_scan_warn_rows(mut self, rows: Option<u64>) -> Self {
        self.scan_warn_rows = rows;
        self
    }

    /// Whether queries' filters should be kept for a scan warning.
    pub fn warns_of_scans(&self) -> bool {
        self.scan_warn_rows.is_some()
    }

    /// Whether request details only the access log uses should be gathered.
    pub fn logs_access(&self) -> bool {
        self.access_log.is_some()
    }

    /// Turns `/ready` to 503 and asks clients to close their connections after
    /// each response, so a load balancer stops sending here.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }

    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    pub fn in_flight(&self) -> InFlight<'_> {
        self.metrics.request_started();
        InFlight(&self.metrics)
    }

    /// Records an answered request in the metrics and the access log.
    pub fn finish(&self, r: &Request<'_>) {
        let elapsed = r.started.elapsed();
        self.metrics.observe(&metrics::Outcome {
            operation: r.operation,
            status: r.status,
            error: r.error,
            seconds: elapsed.as_secs_f64(),
            bytes_in: r.bytes_in,
            bytes_out: r.bytes_out,
        });
        if !r.fault.is_empty() {
            self.metrics.fault_injected(r.fault);
        }
        if let Some(q) = &r.query {
            self.metrics.query_planned(q.kind(), q.examined, r.account, r.table);
            if let Some(limit) = self.scan_warn_rows.filter(|limit| q.scanned() && q.examined > *limit) {
                tracing::warn!(
                    request_id = r.request_id,
                    account = r.account,
                    table = r.table,
                    plan = q.plan,
                    rows_examined = q.examined,
                    filter = r.filter,
                    "a query examined {} rows without an index (--scan-warn-rows {limit}); docs/indexes.md",
                    q.examined,
                );
            }
        }
        if let Some(log) = &self.access_log {
            let entry = access_log::Entry {
                time: access_log::rfc3339(SystemTime::now()),
                request_id: r.request_id,
                account: r.account,
                operation: r.operation.as_str(),
                table: r.table,
                status: r.status,
                error_code: r.error.map_or("", ErrorCode::as_str),
                latency_ms: elapsed.as_secs_f64() * 1e3,
                bytes_in: r.bytes_in,
                bytes_out: r.bytes_out,
                client: access_log::client(r.peer),
                user_agent: r.user_agent,
                credential: r.credential.as_str(),
                fault: r.fault,
                plan: r.query.map_or("", |q| q.plan),
                rows_examined: r.query.map(|q| q.examined),
            };
            if !log.log(&entry) {
                self.metrics.access_log_dropped();
            }
        }
    }

    /// Writes out what the access log holds (at shutdown).
    pub fn flush(&self) {
        if let Some(log) = &self.access_log {
            log.flush(Duration::from_secs(5));
        }
    }
}
