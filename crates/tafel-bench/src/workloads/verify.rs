//! Reading back what a write workload left, after it has finished.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, StatusCode};

use super::tally::{Sample, Tally};
use super::{entity_path, Bench, UNKNOWN};
use crate::client::Conn;
use crate::data::{self, Values};
use crate::report::Row;

impl Bench {
    /// Reads back `samples` (at most 20 000) and compares them; adds to the row's counts.
    pub(super) async fn verify_samples(self: &Arc<Self>, row: &mut Row, mut samples: Vec<Sample>) {
        if !self.cfg.verify || samples.is_empty() {
            return;
        }
        samples.truncate(20_000);
        let samples = Arc::new(samples);
        let next = Arc::new(AtomicU64::new(0));
        let (t, _) = self
            .run(move |b, _w| {
                let (samples, next) = (samples.clone(), next.clone());
                async move {
                    let mut t = Tally::new();
                    let mut conn = Conn::new(&b.ep);
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                        let Some(s) = samples.get(i) else { break };
                        let table = if s.insert_table { &b.ins_table } else { &b.data_table };
                        let version = if s.insert_table { 0 } else { b.version(s.id) };
                        if version == UNKNOWN {
                            continue;
                        }
                        let rk = data::rk(s.id);
                        let path = entity_path(table, &s.pk, &rk);
                        let what = format!("read-back {}/{rk}", s.pk);
                        match b.ep.request(&Method::GET, &path, None, Bytes::new(), &[]) {
                            Ok(req) => match conn.send(req).await {
                                Ok(r) if r.status == StatusCode::OK => {
                                    let res = data::verify_body(
                                        &r.body,
                                        &s.pk,
                                        &rk,
                                        &Values::new(b.cfg.shape, s.id, version),
                                    );
                                    t.check(&what, res);
                                }
                                Ok(r) => t.check(&what, Err(r.describe())),
                                Err(e) => t.error(&what, e),
                            },
                            Err(e) => t.error(&what, e),
                        }
                    }
                    t
                }
            })
            .await;
        for m in &t.messages {
            eprintln!("  {}: {m}", row.workload);
        }
        row.errors += t.errors;
        row.verified += t.verified;
        row.mismatches += t.mismatches;
    }
}
