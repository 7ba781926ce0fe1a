//! `read-while-merging`: point reads of the data set with merges into it running
//! alongside, half the workers each. It shows what writes cost the reads that
//! share a server with them (a write's group may run on the thread that serves a
//! read): the row's rate and latency are the reads', the merges' are in its note.

use std::fmt::Write as _;
use std::sync::Arc;

use super::tally::Tally;
use super::Bench;
use crate::report::{per_s, Row};

impl Bench {
    /// Whether merges of `read-while-merging` may change entity `id`: the odd
    /// workers merge, each into the ids it owns (`id ≡ w mod concurrency`).
    pub(super) fn merged_while_reading(&self, id: u64) -> bool {
        (id % self.cfg.concurrency as u64) % 2 == 1
    }

    /// Runs `read-while-merging`.
    pub(super) async fn read_while_merging(self: &Arc<Self>, name: &str) -> Row {
        let (tallies, el) = self
            .run_each(|b, w| async move {
                match w % 2 {
                    0 => b.point_read_worker(w, false, true).await,
                    _ => b.merge_worker(w).await,
                }
            })
            .await;
        let (mut reads, mut merges) = (Tally::new(), Tally::new());
        for (w, t) in tallies {
            match w % 2 {
                0 => reads.merge(t),
                _ => merges.merge(t),
            }
        }
        let mut row = self.row(name, "reads/s", &reads, el);
        row.rate = per_s(reads.ops, el);
        let merged = self.row(name, "ops/s", &merges, el);
        let _ = write!(
            row.note,
            "merges alongside: {:.0}/s, p99 {:.2} ms, max {:.1} ms, {} errors; ",
            per_s(merges.ops, el),
            merged.p99_ms,
            merged.max_ms,
            merges.errors
        );
        row.errors += merges.errors;
        self.verify_samples(&mut row, merges.samples).await;
        row
    }
}
