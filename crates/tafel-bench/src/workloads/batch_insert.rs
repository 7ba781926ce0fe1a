//! `batch-insert`: `$batch` changesets of 100 inserts, each into a partition of
//! its own.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use super::tally::{Sample, Tally};
use super::Bench;
use crate::client::Conn;
use crate::data::{self, BATCH_SIZE};
use crate::report::Row;

impl Bench {
    /// Runs `batch-insert` and reads a sample of what it wrote back.
    pub(super) async fn batch_insert(self: &Arc<Self>, name: &str) -> Row {
        let (t, el) = self.run(|b, w| b.batch_insert_worker(w)).await;
        let mut row = self.row(name, "entities/s", &t, el);
        row.rate = crate::report::per_s(t.entities, el);
        let _ = write!(
            row.note,
            "{:.1} batches/s of {BATCH_SIZE} (latency per batch)",
            crate::report::per_s(t.ops, el)
        );
        self.verify_samples(&mut row, t.samples).await;
        row
    }

    async fn batch_insert_worker(self: Arc<Self>, w: u64) -> Tally {
        let mut t = self.tally();
        let mut conn = Conn::new(&self.ep);
        let (deadline, max) = (self.deadline(), self.per_worker_ops());
        let mut b = 0;
        while Instant::now() < deadline && b < max {
            let pk = data::batch_pk(w, b);
            let ids: Vec<u64> = (0..BATCH_SIZE).map(|i| data::batch_id(w, b, i)).collect();
            let boundary = format!("batch_{w:x}x{b:x}");
            let body = self.batch_body(&boundary, &self.ins_table, &pk, &ids);
            let t0 = Instant::now();
            match self.send_batch(&mut conn, &boundary, body, ids.len()).await {
                Ok(()) => {
                    t.latency(t0);
                    t.ops += 1;
                    t.entities += BATCH_SIZE;
                    if self.cfg.verify {
                        // One entity of each batch: 1% of the written entities.
                        let id = ids[(b % BATCH_SIZE) as usize];
                        t.samples.push(Sample {
                            insert_table: true,
                            pk,
                            id,
                        });
                    }
                }
                Err(e) => t.error("batch-insert", e),
            }
            b += 1;
        }
        t.connects = conn.connects;
        t
    }
}
