//! `read-while-merging`: point reads of the data set with merges into it running
//! alongside, half the workers each. It shows what writes cost the reads that
//! share a server with them (a write's group may run on the thread that serves a
//! read): the row's rate and latency are the reads', the merges' are in its note.

use std::fmt::Write as _;
use std::sync::Arc;

use super::Bench;
use crate::report::{per_s, Row};

/// Whether worker `w` of `read-while-merging` merges (the odd ones) or reads.
fn merges(w: u64) -> bool {
    w % 2 == 1
}

impl Bench {
    /// Whether merges of `read-while-merging` may change entity `id`: each
    /// merging worker merges into the ids it owns (`id ≡ w mod concurrency`).
    pub(super) fn merged_while_reading(&self, id: u64) -> bool {
        merges(id % self.cfg.concurrency as u64)
    }

    /// Runs `read-while-merging`.
    pub(super) async fn read_while_merging(self: &Arc<Self>, name: &str) -> Row {
        let (tallies, el) = self
            .run_each(|b, w| async move {
                match merges(w) {
                    false => b.point_read_worker(w, false, true).await,
                    true => b.merge_worker(w).await,
                }
            })
            .await;
        let (mut reads, mut merging) = (self.tally(), self.tally());
        for (w, t) in tallies {
            match merges(w) {
                false => reads.merge(t),
                true => merging.merge(t),
            }
        }
        let mut row = self.row(name, "reads/s", &reads, el);
        row.rate = per_s(reads.ops, el);
        let merged = self.row(name, "ops/s", &merging, el);
        let _ = write!(
            row.note,
            "merges alongside: {:.0}/s, p99 {:.2} ms, max {:.1} ms, {} errors; ",
            per_s(merging.ops, el),
            merged.p99_ms,
            merged.max_ms,
            merging.errors
        );
        row.errors += merging.errors;
        self.verify_samples(&mut row, merging.samples).await;
        row
    }
}
