//! `insert`: single-entity inserts into the insert table, each under a key of its own.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{Method, StatusCode};

use super::tally::{Sample, Tally};
use super::Bench;
use crate::client::{Conn, JSON};
use crate::data::{self, Values};
use crate::report::Row;

impl Bench {
    /// Runs `insert` and reads a sample of what it wrote back.
    pub(super) async fn insert(self: &Arc<Self>, name: &str) -> Row {
        let (t, el) = self.run(|b, w| b.insert_worker(w)).await;
        let mut row = self.row(name, "ops/s", &t, el);
        row.rate = crate::report::per_s(t.ops, el);
        self.verify_samples(&mut row, t.samples).await;
        row
    }

    async fn insert_worker(self: Arc<Self>, w: u64) -> Tally {
        let mut t = self.tally();
        let mut conn = Conn::new(&self.ep);
        let (deadline, max) = (self.deadline(), self.per_worker_ops());
        let path = format!("/{}", self.ins_table);
        let mut seq = 0;
        while Instant::now() < deadline && seq < max {
            let id = data::insert_id(w, seq);
            let pk = data::insert_pk(w, seq);
            let body = Values::new(self.cfg.shape, id, 0).entity_json(&pk, &data::rk(id));
            let req = match self.ep.request(
                &Method::POST,
                &path,
                Some(JSON),
                Bytes::from(body),
                &[("Prefer", "return-no-content")],
            ) {
                Ok(r) => r,
                Err(e) => {
                    t.error("insert", e);
                    break;
                }
            };
            let t0 = Instant::now();
            match conn.send(req).await {
                Ok(r) if r.status == StatusCode::NO_CONTENT || r.status == StatusCode::CREATED => {
                    t.latency(t0);
                    t.ops += 1;
                    t.entities += 1;
                    if self.cfg.verify && seq % 100 == 0 {
                        t.samples.push(Sample {
                            insert_table: true,
                            pk,
                            id,
                        });
                    }
                }
                Ok(r) => t.error("insert", r.describe()),
                Err(e) => t.error("insert", e),
            }
            seq += 1;
        }
        t.connects = conn.connects;
        t
    }
}
