//! `partition-query`: a filter on one partition of the data set and a property,
//! followed to its last page.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use super::tally::Tally;
use super::Bench;
use crate::client::{encode_query, Conn};
use crate::data::{self, Rng};
use crate::report::Row;

impl Bench {
    /// Runs `partition-query`.
    pub(super) async fn partition_query(self: &Arc<Self>, name: &str) -> Row {
        let (t, el) = self.run(|b, w| b.partition_query_worker(w)).await;
        let mut row = self.row(name, "queries/s", &t, el);
        row.rate = crate::report::per_s(t.ops, el);
        let _ = write!(
            row.note,
            "{:.0} entities/s returned; filter PartitionKey eq 'p…' and Int32Prop gt {}",
            crate::report::per_s(t.entities, el),
            data::PARTITION_PREDICATE_MIN
        );
        row
    }

    async fn partition_query_worker(self: Arc<Self>, w: u64) -> Tally {
        let mut t = self.tally();
        let mut conn = Conn::new(&self.ep);
        let (deadline, max) = (self.deadline(), self.per_worker_ops());
        let mut rng = Rng::new(self.cfg.seed ^ (w << 20) ^ 0x9A27);
        while Instant::now() < deadline && t.ops + t.errors < max {
            let p = rng.below(self.partitions());
            let filter = format!(
                "PartitionKey eq '{}' and Int32Prop gt {}",
                data::partition_pk(p),
                data::PARTITION_PREDICATE_MIN
            );
            let base = format!("/{}()?$filter={}", self.data_table, encode_query(&filter));
            let full_check = self.cfg.verify && t.ops.is_multiple_of(8);
            let mut matched = 0;
            let mut checks = Vec::new();
            let t0 = Instant::now();
            let res = self
                .query_all(&mut conn, &base, None, |r, _| {
                    matched += data::count_entities(&r.body);
                    if full_check {
                        checks.extend(self.verify_page(&r.body));
                    }
                })
                .await;
            match res {
                Ok(_) => {
                    t.latency(t0);
                    t.ops += 1;
                    t.entities += matched;
                    t.matched += matched;
                    if self.cfg.verify {
                        let want = data::partition_expected(p, self.cfg.entities);
                        let res = if matched == want {
                            Ok(())
                        } else {
                            Err(format!("{matched} entities, expected {want}"))
                        };
                        t.check(&format!("partition-query p{p}"), res);
                    }
                    for c in checks {
                        t.check(&format!("partition-query p{p}"), c);
                    }
                }
                Err(e) => t.error(&format!("partition-query p{p}"), e),
            }
        }
        t.connects = conn.connects;
        t
    }
}
