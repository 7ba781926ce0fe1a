//! `merge-upsert`: merges into entities of the data set, each worker on its own
//! share of them, recording each entity's version for the reads that check it.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::StatusCode;

use super::tally::{Sample, Tally};
use super::{entity_path, Bench, UNKNOWN};
use crate::client::{Conn, JSON};
use crate::data::{self, Rng, Values};
use crate::report::Row;

impl Bench {
    /// Runs `merge-upsert` and reads a sample of what it wrote back.
    pub(super) async fn merge_upsert(self: &Arc<Self>, name: &str) -> Row {
        let (t, el) = self.run(|b, w| b.merge_worker(w)).await;
        let mut row = self.row(name, "ops/s", &t, el);
        row.rate = crate::report::per_s(t.ops, el);
        let _ = write!(row.note, "verb {}", self.cfg.merge_verb);
        self.verify_samples(&mut row, t.samples).await;
        row
    }

    pub(super) async fn merge_worker(self: Arc<Self>, w: u64) -> Tally {
        let mut t = self.tally();
        let mut conn = Conn::new(&self.ep);
        let (deadline, max) = (self.deadline(), self.per_worker_ops());
        let c = self.cfg.concurrency as u64;
        // Worker w owns the ids ≡ w (mod concurrency): no two merges of one entity overlap,
        // so the version recorded after a success is the stored one.
        let owned = self.cfg.entities.saturating_sub(w).div_ceil(c);
        if owned == 0 {
            return t;
        }
        let mut rng = Rng::new(self.cfg.seed ^ (w << 20) ^ 0x3E26E);
        while Instant::now() < deadline && t.ops + t.errors < max {
            let id = w + rng.below(owned) * c;
            let Some(slot) = self.versions.get(id as usize) else {
                break;
            };
            let cur = slot.load(Ordering::Relaxed);
            let next = if cur == UNKNOWN || cur >= i32::MAX as u32 {
                1
            } else {
                cur + 1
            };
            let (pk, rk) = (data::data_pk(id), data::rk(id));
            let body = Values::new(self.cfg.shape, id, next).merge_json(&pk, &rk);
            let path = entity_path(&self.data_table, &pk, &rk);
            let req = match self
                .ep
                .request(&self.cfg.merge_verb, &path, Some(JSON), Bytes::from(body), &[])
            {
                Ok(r) => r,
                Err(e) => {
                    t.error("merge", e);
                    break;
                }
            };
            let t0 = Instant::now();
            match conn.send(req).await {
                Ok(r) if r.status == StatusCode::NO_CONTENT => {
                    t.latency(t0);
                    t.ops += 1;
                    t.entities += 1;
                    slot.store(next, Ordering::Relaxed);
                    if self.cfg.verify && t.ops % 16 == 1 {
                        t.samples.push(Sample {
                            insert_table: false,
                            pk,
                            id,
                        });
                    }
                }
                Ok(r) => {
                    slot.store(UNKNOWN, Ordering::Relaxed);
                    t.error(&format!("merge {pk}/{rk}"), r.describe());
                }
                Err(e) => {
                    slot.store(UNKNOWN, Ordering::Relaxed);
                    t.error("merge", e);
                }
            }
        }
        t.connects = conn.connects;
        t
    }
}
