//! A checkpoint that does not stop the writes: a snapshot of the write buffer
//! is folded into redb without holding the core, while the groups go on into
//! the buffer. What they change meanwhile is gathered on the side as well
//! (`LogState::since_fold`, each entry shared, not copied), and once the fold is
//! committed it is all the buffer keeps: redb holds the rest. Readers see the
//! same rows throughout: redb as of the last commit under the whole buffer
//! while the fold runs, the new commit under the changes since after it.
//!
//! Folding stopped every write for the fold's length, 20–100 ms every fraction
//! of a second under merges spread over a large table in memory, ~90 ms every
//! few seconds on disk (benchmark-history §41, §44, §47); now only groups that
//! must run in redb's own transaction (batches, whole tables, savepoints, a
//! full buffer) wait for it. In memory the writer thread folds, since a
//! write's own thread runs its group there (`queue.rs`); on disk, where the
//! writer thread runs every group, a thread of its own (`writer_loop`).
//!
//! The log: when the fold is set aside it goes on in its other half at once
//! ([`Turn::SetAside`]), and the half it leaves, whose records the fold holds,
//! is written over only once the fold's commit is on disk ([`Turn::Folded`]).
//! A crash before then replays from the last checkpoint on disk through both
//! halves, as after any checkpoint whose pages were not on disk yet (`wal.rs`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Instant;

use redb::{Durability, WriteTransaction};

use super::buffer::{Buffer, FoldedTo};
use super::commit::{self, BaseView, Checkpoint, Committed, ReadView, ToLog, Turn};
use super::group::Trees;
use super::health::Health;
use super::log_state::{Aside, LogState};
use super::page_file::Durable;
use super::queue::Queue;
use super::schema::{as_backend, backend_error, garbage};
use super::writer::{lock, mark_replay_start, Core};
use crate::error::BackendError;

impl Core {
    /// [`set_aside`] with the core held.
    pub(super) fn set_aside(&mut self) -> bool {
        set_aside(&mut self.state, &self.to_log, &self.health)
    }
}

/// Once a checkpoint is due: sets the buffer as it is aside to be folded, and
/// the checkpoint is no longer due, so the groups go on. Whoever holds the
/// core does it, then the folding thread is woken (in memory
/// [`Queue::wake_fold`]): left to the writer thread to set aside, the writes
/// queued meanwhile waited for its whole fold. Whether it did: not with
/// nothing buffered, nor while a fold is under way (none is due then), nor
/// before the half of the log the last fold left is covered.
pub(super) fn set_aside(state: &mut LogState, to_log: &ToLog, health: &Health) -> bool {
    if !state.checkpoint_due()
        || state.left_half_uncovered
        || health.broken().is_some()
        || state.buffer.is_empty()
        || state.base.is_none()
    {
        return false;
    }
    state.folds += 1;
    #[cfg(test)]
    state.stats.folds_set_aside.fetch_add(1, Ordering::Relaxed);
    state.to_fold = Some(Aside {
        fold: state.folds,
        buffer: state.buffer.clone(),
        seq: state.last_seq,
        log_bytes: state.since.bytes,
        small_writes: state.since.small_writes(),
    });
    // The records from here on go to the log's other half.
    state.log_turned(true);
    state.since_fold = Some(Buffer::default());
    to_log.send(Committed {
        turn: Some(Turn::SetAside),
        ..Committed::default()
    });
    true
}

/// In memory, the writer thread's checkpoint: a fold the fold thread ended is
/// made the buffer's; then, if a checkpoint is due or set aside, the buffer set
/// aside is handed to the fold thread (`pace.rs`), or folded here without the
/// core where there is none; otherwise (nothing buffered, say) a checkpoint as
/// any other, the core held.
pub(super) fn checkpoint_if_due(core: &Mutex<Core>, queue: &Queue) {
    let mut guard = lock(core);
    let pace = guard.state.pace.clone();
    if let Some((fold, folded)) = pace.as_ref().and_then(|p| p.take_done()) {
        drop(guard);
        // A write that found the core held meanwhile left its group for the holder.
        queue.run(core);
        fold.finish(folded, core);
        guard = lock(core);
    }
    if let Some(pace) = pace.as_ref().filter(|_| guard.state.fold_lags()) {
        // Writes go on meanwhile; the fold ends here.
        drop(guard);
        pace.take_over();
        return;
    }
    guard.set_aside();
    let Some((fold, txn)) = Fold::begin(&mut guard) else {
        if guard.state.checkpoint_due() && guard.health.broken().is_none() {
            guard.run(Vec::new());
        }
        return;
    };
    drop(guard);
    // A write that found the core held meanwhile left its group for the holder.
    queue.run(core);
    match (txn, pace) {
        (Ok(txn), Some(pace)) => {
            if let Err(folding) = pace.fold(Box::new(fold.folding(txn))) {
                let (fold, folded) = pace.fold_here(folding);
                fold.finish(folded, core);
            }
        }
        (txn, _) => fold.run(txn, core),
    }
}

/// On disk, the fold thread's: folds what was set aside, if it still is.
pub(super) fn fold_set_aside(core: &Mutex<Core>) {
    let begun = Fold::begin(&mut lock(core));
    if let Some((fold, txn)) = begun {
        fold.run(txn, core);
    }
}

/// A fold set aside, taken to be folded without the core.
pub(super) struct Fold {
    aside: Aside,
    durable: Durable,
    to_log: Option<ToLog>,
    replay_start: Option<u64>,
    started: Instant,
    #[cfg(test)]
    pub(super) stats: std::sync::Arc<crate::embedded::stats::EmbeddedStats>,
}

/// A fold under way: its transaction, and how far it got.
pub(super) struct Folding {
    pub(super) fold: Fold,
    txn: WriteTransaction,
    from: FoldedTo,
}

/// What a step of a fold came to.
pub(super) enum Step {
    /// Stopped when asked to: the rest, to go on with.
    Stopped(Box<Folding>),
    /// Committed, or failed.
    Ended(Box<Fold>, Result<(), BackendError>),
}

impl Fold {
    /// Takes what was set aside, if it still is (a group run in redb's own
    /// transaction since folded everything first), and begins its transaction.
    fn begin(core: &mut Core) -> Option<(Fold, Result<WriteTransaction, BackendError>)> {
        let aside = core.state.to_fold.take()?;
        // Begun with the core held, so a group that runs in redb's own
        // transaction after this (and folds the whole buffer into it) waits
        // for the fold's commit: begun first, it would be overwritten with
        // the older values the fold holds.
        let txn = core.state.begin_write(&core.db).map_err(backend_error);
        let fold = Fold {
            durable: core.state.durable.clone(),
            // Other threads hand the log nothing in memory: there each commit
            // is published as it is made.
            to_log: core.to_log.share(),
            replay_start: core.to_log.keeps_records().then_some(aside.seq),
            aside,
            started: Instant::now(),
            #[cfg(test)]
            stats: core.state.stats.clone(),
        };
        Some((fold, txn))
    }

    /// To be folded in `txn`, from its start.
    fn folding(self, txn: WriteTransaction) -> Folding {
        Folding {
            fold: self,
            txn,
            from: FoldedTo::default(),
        }
    }

    /// Folds here, without the core, then [finishes](Fold::finish).
    fn run(self, txn: Result<WriteTransaction, BackendError>, core: &Mutex<Core>) {
        match txn {
            Ok(txn) => self.folding(txn).run(core),
            Err(e) => self.finish(Err(e), core),
        }
    }

    /// Once the fold is committed (or failed): the changes since become the buffer.
    pub(super) fn finish(self, folded: Result<(), BackendError>, core: &Mutex<Core>) {
        let Fold {
            aside,
            durable,
            started,
            #[cfg(test)]
            stats,
            ..
        } = self;
        let checkpoint = Checkpoint {
            sync: durable.last_requested(),
            on_disk_first: aside.small_writes,
        };
        drop(aside.buffer);
        // Tests hold a fold here, committed but not yet the buffer's.
        #[cfg(test)]
        {
            stats.at_fold_pause.store(true, Ordering::Release);
            while stats.hold_folds.load(Ordering::Acquire) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        let mut guard = lock(core);
        let Core { db, state, to_log, .. } = &mut *guard;
        // A checkpoint run in place since (its transaction waited for the
        // fold's) folded everything, and covered the log's half; another fold
        // may have been set aside after it.
        if state.folds != aside.fold {
            return;
        }
        if let Err(e) = folded {
            // The buffer still holds every change; the next checkpoint, run in
            // place (nothing is set aside while the half the log left is
            // uncovered), folds it.
            tracing::error!(error = %e, "checkpoint failed");
            state.since_fold = None;
            return;
        }
        // The fold holds every record of the half the log left.
        let mut committed = Committed {
            turn: std::mem::take(&mut state.left_half_uncovered).then_some(Turn::Folded(checkpoint)),
            ..Committed::default()
        };
        // Freed once the core is let go (below): its entries, tens of
        // thousands, took milliseconds the writes waited for.
        let mut old_buffer = None;
        // None when a group run in redb's own transaction after the fold folded
        // everything since.
        if let Some(since_fold) = state.since_fold.take() {
            match BaseView::take(db) {
                Ok(base) => {
                    old_buffer = Some(std::mem::replace(&mut state.buffer, since_fold));
                    state.base = Some(base.clone());
                    state.stats.checkpoint_seconds.observe_duration(started.elapsed());
                    #[cfg(test)]
                    state.stats.buffer_folds.fetch_add(1, Ordering::Relaxed);
                    state.stats.checkpoint_log_bytes.observe(aside.log_bytes as f64);
                    state
                        .stats
                        .write_buffer_bytes
                        .store(state.buffer.bytes() as u64, Ordering::Relaxed);
                    // Readers move to the new commit: the same rows, less of them buffered.
                    committed.snapshot = Some(ReadView::over(base, state.buffer.clone()));
                }
                Err(e) => {
                    // The next group runs in redb's transaction, the buffer
                    // folded first, as after a savepoint.
                    tracing::warn!(error = %e, "could not read the store after a checkpoint");
                    state.base = None;
                }
            }
        }
        if committed.turn.is_some() || committed.snapshot.is_some() {
            to_log.send(committed);
        }
        drop(guard);
        drop(old_buffer);
    }
}

impl Folding {
    /// Folds all of it here, then [finishes](Fold::finish).
    pub(super) fn run(self, core: &Mutex<Core>) {
        let (fold, folded) = self.finish_here();
        fold.finish(folded, core);
    }

    /// Folds the rest here, and commits.
    pub(super) fn finish_here(self) -> (Box<Fold>, Result<(), BackendError>) {
        let mut folding = self;
        loop {
            match folding.step(|| false) {
                Step::Stopped(rest) => folding = *rest,
                Step::Ended(fold, folded) => return (fold, folded),
            }
        }
    }

    /// Folds on until `stop` says so (asked before each change), or to the end
    /// and the commit: durable, since redb reuses the pages its non-durable
    /// commits freed only after a durable one. On disk the commit first waits
    /// for readers to see every commit before it (`commit::wait_published`).
    pub(super) fn step(self, stop: impl Fn() -> bool) -> Step {
        let Folding { fold, txn, from } = self;
        let stepped = catch_unwind(AssertUnwindSafe(|| {
            let mut trees = Trees::open(&txn).map_err(as_backend)?;
            fold.aside
                .buffer
                .fold_some_into(&mut trees, from, stop)
                .map_err(as_backend)
        }))
        .unwrap_or_else(|_| Err(garbage()));
        match stepped {
            Ok(Some(from)) => Step::Stopped(Box::new(Folding { fold, txn, from })),
            Ok(None) => {
                let committed = catch_unwind(AssertUnwindSafe(|| {
                    commit(txn, fold.replay_start, fold.to_log.as_ref())
                }))
                .unwrap_or_else(|_| Err(garbage()));
                Step::Ended(Box::new(fold), committed)
            }
            Err(e) => Step::Ended(Box::new(fold), Err(e)),
        }
    }
}

/// Commits a fold's transaction durably, the replay to start after record
/// `replay_start` if the log keeps its records.
fn commit(mut txn: WriteTransaction, replay_start: Option<u64>, to_log: Option<&ToLog>) -> Result<(), BackendError> {
    if let Some(seq) = replay_start {
        mark_replay_start(&mut Trees::open(&txn).map_err(as_backend)?, seq)?;
    }
    txn.set_durability(Durability::Immediate).map_err(backend_error)?;
    if let Some(to_log) = to_log {
        commit::wait_published(to_log);
    }
    txn.commit().map_err(backend_error)
}
