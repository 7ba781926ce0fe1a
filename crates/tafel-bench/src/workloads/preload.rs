//! `preload`: loads the data set the other workloads read, in batches.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::tally::Tally;
use super::Bench;
use crate::client::Conn;
use crate::data::{self, BATCH_SIZE};
use crate::report::Row;

impl Bench {
    /// Loads the data set with 100-entity batches. Returns its row (entities/s).
    pub async fn preload(self: &Arc<Self>) -> Row {
        let next = Arc::new(AtomicU64::new(0));
        let deadline = Instant::now() + self.cfg.preload_timeout;
        let (t, elapsed) = self
            .run(move |b, w| {
                let next = next.clone();
                async move { b.preload_worker(w, next, deadline).await }
            })
            .await;
        let mut row = self.row("preload", "entities/s", &t, elapsed);
        row.rate = crate::report::per_s(t.entities, elapsed);
        let _ = write!(row.note, "{} entities in {elapsed:.1} s, {} batches", t.entities, t.ops);
        if t.entities < self.cfg.entities {
            let _ = write!(row.note, "; INCOMPLETE ({} of {})", t.entities, self.cfg.entities);
        }
        row
    }

    async fn preload_worker(self: Arc<Self>, _w: u64, next: Arc<AtomicU64>, deadline: Instant) -> Tally {
        let mut t = self.tally();
        let mut conn = Conn::new(&self.ep);
        let batches = self.cfg.entities.div_ceil(BATCH_SIZE);
        loop {
            let b = next.fetch_add(1, Ordering::Relaxed);
            if b >= batches || Instant::now() >= deadline {
                break;
            }
            let first = b * BATCH_SIZE;
            let ids: Vec<u64> = (first..(first + BATCH_SIZE).min(self.cfg.entities)).collect();
            let pk = data::data_pk(first);
            let boundary = format!("batch_p{b:x}");
            let body = self.batch_body(&boundary, &self.data_table, &pk, &ids);
            // A failed batch is retried (a preload must be complete to be useful).
            for attempt in 0..3 {
                let t0 = Instant::now();
                match self.send_batch(&mut conn, &boundary, body.clone(), ids.len()).await {
                    Ok(()) => {
                        t.latency(t0);
                        t.ops += 1;
                        t.entities += ids.len() as u64;
                        break;
                    }
                    Err(e) => t.error(&format!("batch {b} attempt {attempt}"), e),
                }
            }
        }
        t.connects = conn.connects;
        t
    }
}
