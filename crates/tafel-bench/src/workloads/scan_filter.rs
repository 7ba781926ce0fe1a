//! `scan-filter`: a filter on a property alone, so a scan of the whole data set,
//! page by page.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use super::tally::Tally;
use super::Bench;
use crate::client::{encode_query, Conn};
use crate::data;
use crate::report::Row;

impl Bench {
    /// Runs `scan-filter`.
    pub(super) async fn scan_filter(self: &Arc<Self>, name: &str) -> Row {
        let (t, el) = self.run(|b, w| b.scan_worker(w)).await;
        let mut row = self.row(name, "entities/s", &t, el);
        row.rate = crate::report::per_s(t.entities, el);
        let scan = if t.scan_hist.is_empty() {
            "no full scan completed".to_string()
        } else {
            format!(
                "{} full scans, p50 {:.2} s each",
                t.scans,
                t.scan_hist.value_at_quantile(0.5) as f64 / 1e6
            )
        };
        let _ = write!(
            row.note,
            "scanned (latency per page); {:.0} matched/s; {scan}; filter {}",
            crate::report::per_s(t.matched, el),
            self.cfg.shape.scan_filter()
        );
        row
    }

    async fn scan_worker(self: Arc<Self>, w: u64) -> Tally {
        let mut t = self.tally();
        let mut conn = Conn::new(&self.ep);
        let (deadline, max) = (self.deadline(), self.per_worker_ops());
        let filter = self.cfg.shape.scan_filter();
        let base = format!("/{}()?$filter={}", self.data_table, encode_query(&filter));
        let expected = data::scan_expected(self.cfg.shape, self.cfg.entities);
        let mut first = true;
        while Instant::now() < deadline && t.ops + t.errors < max {
            // Worker 0 checks every entity of its first scan in full.
            let full_check = self.cfg.verify && w == 0 && first;
            first = false;
            let (mut matched, mut progress, mut pages) = (0u64, 0u64, 0u64);
            let mut checks = Vec::new();
            let hist = &mut t.hist;
            let t0 = Instant::now();
            let res = self
                .query_all(&mut conn, &base, Some(deadline), |r, page_t0| {
                    let us = page_t0.elapsed().as_micros().max(1) as u64;
                    let _ = hist.record(us.min(hist.high()));
                    pages += 1;
                    matched += data::count_entities(&r.body);
                    if let Some(id) = data::last_row_id(&r.body) {
                        progress = progress.max(id + 1);
                    }
                    if full_check {
                        checks.extend(self.verify_page(&r.body));
                    }
                })
                .await;
            t.ops += pages;
            t.matched += matched;
            match res {
                Ok(true) => {
                    let us = t0.elapsed().as_micros().max(1) as u64;
                    let _ = t.scan_hist.record(us.min(t.scan_hist.high()));
                    t.scans += 1;
                    t.entities += self.cfg.entities;
                    if self.cfg.verify {
                        let res = if matched == expected {
                            Ok(())
                        } else {
                            Err(format!("{matched} entities matched, expected {expected}"))
                        };
                        t.check("scan-filter full scan", res);
                    }
                }
                // Stopped at the deadline: count what was scanned so far.
                Ok(false) => t.entities += progress.min(self.cfg.entities),
                Err(e) => {
                    t.entities += progress.min(self.cfg.entities);
                    t.error("scan-filter", e);
                }
            }
            for c in checks {
                t.check("scan-filter", c);
            }
        }
        t.connects = conn.connects;
        t
    }
}
