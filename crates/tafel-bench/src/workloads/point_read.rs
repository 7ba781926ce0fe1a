//! `point-read` and `point-query`: one entity of the data set by its keys, read
//! directly or as a query on both keys.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::Value;

use super::tally::Tally;
use super::{entity_path, Bench, UNKNOWN};
use crate::client::{encode_query, Conn};
use crate::data::{self, Rng, Values};
use crate::report::Row;

impl Bench {
    /// Runs `point-read`, or `point-query` when `name` says so.
    pub(super) async fn point_read(self: &Arc<Self>, name: &str) -> Row {
        let as_query = name == "point-query";
        let (t, el) = self.run(move |b, w| b.point_read_worker(w, as_query, false)).await;
        let mut row = self.row(name, "ops/s", &t, el);
        row.rate = crate::report::per_s(t.ops, el);
        row
    }

    /// A point read, by key (`as_query` false) or as the query `PartitionKey eq … and
    /// RowKey eq …`, which the planner must make cost the same. With merges running
    /// alongside (`merging`), only entities no merge worker owns are verified.
    pub(super) async fn point_read_worker(self: Arc<Self>, w: u64, as_query: bool, merging: bool) -> Tally {
        let mut t = self.tally();
        let mut conn = Conn::new(&self.ep);
        let (deadline, max) = (self.deadline(), self.per_worker_ops());
        let mut rng = Rng::new(self.cfg.seed ^ (w << 20) ^ 0x2EAD);
        while Instant::now() < deadline && t.ops + t.errors < max {
            let id = rng.below(self.cfg.entities);
            let (pk, rk) = (data::data_pk(id), data::rk(id));
            let path = if as_query {
                let filter = format!("PartitionKey eq '{pk}' and RowKey eq '{rk}'");
                format!("/{}()?$filter={}", self.data_table, encode_query(&filter))
            } else {
                entity_path(&self.data_table, &pk, &rk)
            };
            let req = match self.ep.request(&Method::GET, &path, None, Bytes::new(), &[]) {
                Ok(r) => r,
                Err(e) => {
                    t.error("point-read", e);
                    break;
                }
            };
            let t0 = Instant::now();
            match conn.send(req).await {
                Ok(r) if r.status == StatusCode::OK => {
                    t.latency(t0);
                    t.ops += 1;
                    t.entities += 1;
                    // Verify one read in 16 in full (keys, every value, every type).
                    let version = self.version(id);
                    let stable = !merging || !self.merged_while_reading(id);
                    if self.cfg.verify && t.ops % 16 == 1 && version != UNKNOWN && stable {
                        let res = if as_query {
                            // Exactly one entity, and the right one.
                            match serde_json::from_slice::<Value>(&r.body) {
                                Ok(v) => match v["value"].as_array().map(Vec::as_slice) {
                                    Some([one]) => match one.as_object() {
                                        Some(obj) => data::verify_entity(
                                            obj,
                                            &pk,
                                            &rk,
                                            &Values::new(self.cfg.shape, id, version),
                                        ),
                                        None => Err("query result is not an object".into()),
                                    },
                                    _ => Err("point query did not return exactly one entity".into()),
                                },
                                Err(e) => Err(format!("invalid JSON: {e}")),
                            }
                        } else {
                            data::verify_body(&r.body, &pk, &rk, &Values::new(self.cfg.shape, id, version))
                        };
                        t.check(&format!("point-read {pk}/{rk}"), res);
                    }
                }
                Ok(r) => t.error(&format!("point-read {pk}/{rk}"), r.describe()),
                Err(e) => t.error("point-read", e),
            }
        }
        t.connects = conn.connects;
        t
    }
}
