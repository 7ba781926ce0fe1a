//! What `/metrics` reads at scrape time, beside the request metrics tafel-http
//! keeps: readiness, drain state, build info, each account's table count, and the
//! store's own metrics (which know nothing of Prometheus) as Prometheus families.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, NoLabelSet};
use prometheus_client::metrics::MetricType;
use tafel_store::{MetricValue, StoreMetric};

/// What a scrape reads from the store and the process.
#[derive(Debug)]
pub struct Scrape {
    pub ready: bool,
    pub draining: bool,
    pub backend: &'static str,
    /// When the process started, in seconds since the Unix epoch.
    pub start_time: f64,
    pub store: Vec<StoreMetric>,
    /// Tables per account (accounts whose count could not be read are left out).
    pub tables: Vec<(String, u64)>,
    /// The largest tables' counters (at most `table_stats::TOP_TABLES`).
    pub table_sizes: Vec<tafel_store::TableSize>,
    /// Entities the expiry sweep removed (`tafel_expired_entities_total`).
    pub expired: u64,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TableLabels {
    account: String,
    table: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AccountLabels {
    account: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InfoLabels {
    version: &'static str,
    backend: &'static str,
}

/// Help text without a final period: the encoder adds one.
fn help(h: &str) -> &str {
    h.trim_end_matches('.')
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.encode_node(&mut encoder)?;
        self.encode_tables(&mut encoder)?;
        self.encode_store(&mut encoder)
    }
}

impl Scrape {
    /// The node's own state: ready, draining, start time, build.
    fn encode_node(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let gauge = |encoder: &mut DescriptorEncoder, name: &str, text: &str, v: i64| {
            encoder
                .encode_descriptor(name, text, None, MetricType::Gauge)?
                .encode_gauge(&v)
        };
        gauge(
            encoder,
            "tafel_ready",
            "1 while the node is ready to serve (GET /ready answers 200)",
            i64::from(self.ready),
        )?;
        gauge(
            encoder,
            "tafel_draining",
            "1 once shutdown began: the node answers /ready with 503 while in-flight requests finish",
            i64::from(self.draining),
        )?;
        encoder
            .encode_descriptor(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                None,
                MetricType::Gauge,
            )?
            .encode_gauge(&self.start_time)?;
        let info = InfoLabels {
            version: env!("CARGO_PKG_VERSION"),
            backend: self.backend,
        };
        encoder
            .encode_descriptor(
                "tafel_build_info",
                "The server's version and backend",
                None,
                MetricType::Gauge,
            )?
            .encode_family(&info)?
            .encode_gauge(&1i64)?;
        Ok(())
    }

    /// Tables per account and the largest tables' sizes.
    fn encode_tables(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        {
            let mut tables = encoder.encode_descriptor(
                "tafel_account_tables",
                "Tables each account has",
                None,
                MetricType::Gauge,
            )?;
            for (account, n) in &self.tables {
                let labels = AccountLabels {
                    account: account.clone(),
                };
                tables
                    .encode_family(&labels)?
                    .encode_gauge(&i64::try_from(*n).unwrap_or(i64::MAX))?;
            }
        }
        type Size = fn(&tafel_store::TableSize) -> u64;
        let sizes: [(&str, &str, Size); 2] = [
            (
                "tafel_table_entities",
                "Entities in each of the largest tables by bytes (at most 20 tables)",
                |t| t.entities,
            ),
            (
                "tafel_table_bytes",
                "Bytes of keys and values stored in each of the largest tables (at most 20 tables)",
                |t| t.bytes,
            ),
        ];
        for (name, text, value) in sizes {
            let mut family = encoder.encode_descriptor(name, text, None, MetricType::Gauge)?;
            for t in &self.table_sizes {
                let labels = TableLabels {
                    account: t.account.clone(),
                    table: t.table.clone(),
                };
                family
                    .encode_family(&labels)?
                    .encode_gauge(&i64::try_from(value(t)).unwrap_or(i64::MAX))?;
            }
        }
        Ok(())
    }

    /// Expiry's removals and the store's own metrics.
    fn encode_store(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        encoder
            .encode_descriptor(
                "tafel_expired_entities",
                "Entities removed by expiry (TTL) since the node started",
                None,
                MetricType::Counter,
            )?
            .encode_counter::<NoLabelSet, _, u64>(&self.expired, None)?;
        for m in &self.store {
            let name = format!("tafel_store_{}", m.name);
            match &m.value {
                MetricValue::Counter(v) => encoder
                    .encode_descriptor(&name, help(m.help), None, MetricType::Counter)?
                    .encode_counter::<NoLabelSet, _, u64>(v, None)?,
                MetricValue::Gauge(v) => encoder
                    .encode_descriptor(&name, help(m.help), None, MetricType::Gauge)?
                    .encode_gauge(v)?,
                MetricValue::Histogram(h) => encoder
                    .encode_descriptor(&name, help(m.help), None, MetricType::Histogram)?
                    .encode_histogram::<NoLabelSet>(h.sum, h.count, &h.buckets, None)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tafel_http::ops::metrics::{Metrics, Outcome};
    use tafel_protocol::Operation;
    use tafel_service::ErrorCode;

    fn scrape() -> Scrape {
        Scrape {
            ready: true,
            draining: false,
            backend: "embedded",
            expired: 12,
            start_time: 1_700_000_000.5,
            store: vec![StoreMetric {
                name: "log_sync_seconds",
                help: "Syncs.",
                value: MetricValue::Histogram(tafel_store::HistogramSnapshot {
                    buckets: vec![(0.001, 2), (f64::INFINITY, 1)],
                    sum: 0.5,
                    count: 3,
                }),
            }],
            tables: vec![("acct".into(), 4)],
            table_sizes: vec![tafel_store::TableSize {
                account: "acct".into(),
                table: "orders".into(),
                entities: 7,
                bytes: 700,
            }],
        }
    }

    #[test]
    fn requests_are_counted_by_operation_class_and_code() {
        let m = Metrics::new();
        let ok = Outcome {
            operation: Operation::InsertEntity,
            status: 201,
            error: None,
            seconds: 0.002,
            bytes_in: 100,
            bytes_out: 300,
        };
        m.observe(&ok);
        m.observe(&ok);
        m.observe(&Outcome {
            status: 409,
            error: Some(ErrorCode::EntityAlreadyExists),
            ..ok
        });
        let text = m.render(Box::new(scrape())).unwrap();
        for line in [
            r#"tafel_requests_total{operation="InsertEntity",status_class="2xx",error_code=""} 2"#,
            r#"tafel_requests_total{operation="InsertEntity",status_class="4xx",error_code="EntityAlreadyExists"} 1"#,
            r#"tafel_request_duration_seconds_count{operation="InsertEntity"} 3"#,
            r#"tafel_request_duration_seconds_bucket{operation="InsertEntity",le="0.0025"} 3"#,
            r#"tafel_request_body_bytes_total{operation="InsertEntity"} 300"#,
            r#"tafel_account_tables{account="acct"} 4"#,
            r#"tafel_table_entities{account="acct",table="orders"} 7"#,
            r#"tafel_table_bytes{account="acct",table="orders"} 700"#,
            r#"tafel_store_log_sync_seconds_bucket{le="+Inf"} 3"#,
            "tafel_ready 1",
            "tafel_expired_entities_total 12",
            "process_start_time_seconds 1700000000.5",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from\n{text}");
        }
    }
}
