//! The writer's account of the log and of the write buffer (`LogState`), and
//! the rules it decides by: when a checkpoint is due, and which groups run in
//! redb's own transaction rather than in the buffer (`writer.rs` runs them).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use redb::{Database, WriteTransaction};

use super::buffer::Buffer;
use super::checkpoint::SinceCheckpoint;
use super::commit::{BaseView, ReadView};
use super::pace::Pace;
use super::page_file::Durable;
use super::wal::{LogBuf, Spare};
use crate::embedded::feed::FeedState;
use crate::embedded::index::IndexDefs;
use crate::embedded::stats::EmbeddedStats;
use crate::embedded::Job;
use crate::error::StoreError;

/// The writer's account of the log, and of when redb itself last made the state
/// durable. The records are written in the order the writer numbers them, so
/// the writer knows what the log holds without reading it.
pub(in crate::embedded) struct LogState {
    /// Number of the last record (or of the one the last checkpoint includes).
    pub(in crate::embedded) last_seq: u64,
    /// Bytes a log half holds: the records since the last checkpoint must fit.
    pub(in crate::embedded) size: u64,
    pub(in crate::embedded) since: SinceCheckpoint,
    /// Record buffers the log is done with.
    pub(in crate::embedded) spare: Arc<Spare>,
    /// When redb's syncs are on disk.
    pub(in crate::embedded) durable: Durable,
    pub(in crate::embedded) stats: Arc<EmbeddedStats>,
    /// The change feed's settings (and when its retention last ran).
    pub(in crate::embedded) feed: Arc<FeedState>,
    /// Tables' indexed properties (`index.rs`); only a committed group's reads stay.
    pub(in crate::embedded) index_defs: IndexDefs,
    /// redb as of its last commit, which buffered groups read under the buffer;
    /// `None` when it could not be taken (after a savepoint), and the next group
    /// then runs direct.
    pub(in crate::embedded) base: Option<Arc<BaseView>>,
    /// The changes since redb's last commit (`buffer.rs`).
    pub(in crate::embedded) buffer: Buffer,
    /// Bytes the buffer may hold before it is folded; 0 runs every group direct.
    pub(in crate::embedded) buffer_limit: usize,
    /// A checkpoint folded aside (`fold_aside.rs`), until the thread that
    /// folds it takes it.
    pub(in crate::embedded) to_fold: Option<Aside>,
    /// From then until the fold is in redb: the changes the groups made
    /// meanwhile, which are all the buffer keeps after it.
    pub(in crate::embedded) since_fold: Option<Buffer>,
    /// The log left a half when a fold was set aside, and no commit has been
    /// said to cover that half's records since: nothing is set aside again
    /// until one has (a checkpoint run in place, after a failed fold).
    pub(in crate::embedded) left_half_uncovered: bool,
    /// Folds set aside so far: a fold that finds another set aside after it
    /// leaves the buffer to that one.
    pub(in crate::embedded) folds: u64,
    /// In memory, the thread that folds a checkpoint set aside at a lower
    /// priority (`pace.rs`).
    pub(in crate::embedded) pace: Option<Arc<Pace>>,
}

/// A checkpoint set aside: the buffer as it was when it fell due, and the log
/// it covers.
pub(in crate::embedded) struct Aside {
    /// Its number in `LogState::folds`.
    pub(in crate::embedded) fold: u64,
    pub(in crate::embedded) buffer: Buffer,
    /// The last record it covers, and the log's bytes up to it since the last
    /// checkpoint.
    pub(in crate::embedded) seq: u64,
    pub(in crate::embedded) log_bytes: u64,
    /// Whether those were small writes (see `Checkpoint::on_disk_first`).
    pub(in crate::embedded) small_writes: bool,
}

impl LogState {
    /// The log goes on in its other half: the records from here on count
    /// afresh. The half it leaves is uncovered when a fold was set aside to
    /// cover it; a checkpoint covers every record so far, those of a half a
    /// fold left too.
    pub(in crate::embedded) fn log_turned(&mut self, left_half_uncovered: bool) {
        self.since = SinceCheckpoint::default();
        self.stats.log_fill.store(0, Ordering::Relaxed);
        self.left_half_uncovered = left_half_uncovered;
    }

    /// Begins redb's write transaction: the writer's every one begins here. A
    /// fold under way holds redb's one-writer lock, so it is finished first
    /// ([`Pace::hurry`]), not waited for on a thread that may be starved.
    pub(super) fn begin_write(&self, db: &Database) -> Result<WriteTransaction, redb::TransactionError> {
        if let Some(pace) = &self.pace {
            pace.hurry();
        }
        db.begin_write()
    }

    /// Whether the fold under way at the fold thread's pace should go on at the
    /// writer thread's instead: the log's half is half full again since it was
    /// set aside. Starved by a busy machine, it would otherwise still run when
    /// the half fills, and every write would wait for the rest of it
    /// (benchmark-history §49).
    pub(super) fn fold_lags(&self) -> bool {
        self.since_fold.is_some()
            && self.since.bytes > self.size / 2
            && self.pace.as_ref().is_some_and(|p| p.at_its_pace())
    }

    pub(super) fn fits(&self, record: &LogBuf) -> bool {
        self.since.bytes + record.written_len() <= self.size
    }

    /// Whether the buffer is due to be folded: past its bound, the writes wait
    /// for the fold (back-pressure), they never fail.
    pub(super) fn buffer_full(&self) -> bool {
        self.buffer_limit > 0 && self.buffer.bytes() >= self.buffer_limit
    }

    /// Whether a checkpoint is due after a group: by the log's account of the
    /// writes since the last one, because the buffer is full, or because the
    /// log's half is nearly full. The last is what comes first in memory, where
    /// the log is small: without it the group whose record no longer fit ran the
    /// checkpoint itself, on a write's own thread (`queue.rs`), and stalled the
    /// reads there for the whole fold.
    /// None is due while a fold aside runs: it is the checkpoint.
    pub(super) fn checkpoint_due(&self) -> bool {
        self.since_fold.is_none()
            && (self.since.checkpoint_due(Instant::now(), self.size) || self.buffer_full() || self.log_nearly_full())
    }

    /// Less than an eighth of the log's half left: more than any group of small
    /// writes fills, so a checkpoint is run before a record no longer fits.
    pub(super) fn log_nearly_full(&self) -> bool {
        self.since.bytes.saturating_add(self.size / 8) > self.size
    }

    /// What the writer's own reads see: everything it applied.
    pub(super) fn view(&self, db: &Database) -> Result<Arc<ReadView>, StoreError> {
        let base = match &self.base {
            Some(base) => base.clone(),
            None => BaseView::take(db)?,
        };
        Ok(ReadView::over(base, self.buffer.clone()))
    }

    /// Whether `group` folds the buffer into a redb transaction and runs in it:
    /// a checkpoint does, a group of batches writing 64 entities or more
    /// (whose sorted new rows redb packs into full leaves through a cursor, at
    /// a third of what buffering them and folding them later costs,
    /// `BENCHMARKS.md`), and a group that removes
    /// whole tables' rows (spelt out key by key in the buffer, they would be a
    /// removal per row). And while a fold aside runs (`fold_aside.rs`), any
    /// group once the log's half is nearly full again: it waits for the fold on
    /// the writer thread, where a group whose record no longer fit would fold
    /// everything itself on a write's thread.
    pub(super) fn folds_first(&self, group: &[Job]) -> bool {
        /// Entities written by a group's batches from which it runs direct.
        const DIRECT_KEYS: usize = 64;
        // Single-entity writes never count: scattered over the tree, each would
        // copy a leaf of its own in redb's commit, the cost the buffer is there
        // to spare. Counted with them, 64 writes in flight or more sent every
        // group direct, the buffer folded by each: at 128 in flight inserts ran
        // at 0.70× the rate of 64, with a p99.9 of 117 ms (benchmark-history §58).
        let keys: usize = group
            .iter()
            .map(|j| match j {
                Job::Write { keys, .. } if keys.len() > 1 => keys.len(),
                _ => 0,
            })
            .sum();
        group.is_empty()
            || self.buffer_limit == 0
            || self.base.is_none()
            || self.buffer_full()
            || (self.since_fold.is_some() && self.log_nearly_full())
            || keys >= DIRECT_KEYS
            || group.iter().any(|j| {
                matches!(
                    j,
                    Job::DeleteTable { .. }
                        | Job::Truncate { .. }
                        | Job::ClearAccount { .. }
                        | Job::SweepDeleted { .. }
                        | Job::DropIndex { .. }
                        | Job::RestoreTable { .. }
                )
            })
    }
}
