//! In memory, a checkpoint that does not stop the writes: the writer thread
//! folds a snapshot of the write buffer into redb without holding the core,
//! while writes' own threads go on running groups into the buffer (`queue.rs`).
//! What those groups change meanwhile is gathered on the side as well
//! (`LogState::since_fold`, each entry shared, not copied), and once the fold is
//! committed it is all the buffer keeps: redb holds the rest. Readers see the
//! same rows throughout: redb as of the last commit under the whole buffer
//! while the fold runs, the new commit under the changes since after it.
//!
//! Folding stopped every write for the fold's length, 20–100 ms every fraction
//! of a second under merges spread over a large table (benchmark-history §41,
//! §44); now only groups that must run in redb's own transaction (batches,
//! whole tables, savepoints, a full buffer) wait for it, on the writer thread.
//!
//! Only in memory. There the log keeps nothing, so the records written during
//! the fold need no place of their own. On disk a checkpoint names the last
//! record it covers and the log goes on in its other half; a fold aside would
//! have to move the log to that half when the fold begins, and a log half is
//! written over only once the checkpoint covering it is on disk (`commit.rs`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Instant;

use redb::{Database, Durability};

use super::buffer::Buffer;
use super::checkpoint::SinceCheckpoint;
use super::commit::{BaseView, Checkpoint, Committed, ReadView, ToLog};
use super::group::Trees;
use super::health::Health;
use super::log_state::LogState;
use super::queue::Queue;
use super::schema::{as_backend, backend_error, garbage};
use super::writer::{lock, Core};
use crate::error::BackendError;

impl Core {
    /// [`set_aside`] with the core held.
    pub(super) fn set_aside(&mut self) -> bool {
        set_aside(&mut self.state, &self.to_log, &self.health)
    }
}

/// In memory, once a checkpoint is due: sets the buffer as it is aside for the
/// writer thread to fold, and the checkpoint is no longer due, so the groups
/// go on. Whoever holds the core does it (a write's thread, the writer
/// thread), then wakes the writer thread ([`Queue::wake_fold`]): left to the
/// writer thread to set aside, the writes queued meanwhile waited for its
/// whole fold. Whether it did: not on disk, nor with nothing buffered, nor
/// while a fold is under way (none is due then).
pub(super) fn set_aside(state: &mut LogState, to_log: &ToLog, health: &Health) -> bool {
    if to_log.keeps_records()
        || !state.checkpoint_due()
        || health.broken().is_some()
        || state.buffer.is_empty()
        || state.base.is_none()
    {
        return false;
    }
    state.to_fold = Some((state.buffer.clone(), state.since.bytes));
    // The log keeps nothing: the records from here on count afresh.
    state.since = SinceCheckpoint::default();
    state.stats.log_fill.store(0, Ordering::Relaxed);
    state.since_fold = Some(Buffer::default());
    true
}

/// The writer thread's checkpoint, if one is due or set aside: in memory the
/// buffer set aside is folded without the core, as the module says; otherwise
/// (on disk, or with nothing buffered) a checkpoint as any other, the core held.
pub(super) fn checkpoint_if_due(core: &Mutex<Core>, queue: &Queue) {
    let mut guard = lock(core);
    guard.set_aside();
    let Some((frozen, log_bytes)) = guard.state.to_fold.take() else {
        if guard.state.checkpoint_due() && guard.health.broken().is_none() {
            guard.run(Vec::new());
        }
        return;
    };
    let db = guard.db.clone();
    #[cfg(test)]
    let stats = guard.state.stats.clone();
    drop(guard);
    // A write that found the core held meanwhile left its group for the holder.
    queue.run(core);
    #[cfg(test)]
    {
        stats.at_fold_pause.store(true, Ordering::Release);
        while stats.hold_folds.load(Ordering::Acquire) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    let started = Instant::now();
    let folded = catch_unwind(AssertUnwindSafe(|| fold(&db, &frozen))).unwrap_or_else(|_| Err(garbage()));
    drop(frozen);
    let mut guard = lock(core);
    let Core { db, state, to_log, .. } = &mut *guard;
    let Some(since_fold) = state.since_fold.take() else {
        // A group too big for the log's rest folded everything after this fold
        // (its transaction waited for this one): nothing is left to do.
        return;
    };
    if let Err(e) = folded {
        // The buffer still holds every change; a later checkpoint folds it.
        tracing::error!(error = %e, "checkpoint failed");
        return;
    }
    let base = match BaseView::take(db) {
        Ok(base) => base,
        Err(e) => {
            // The next group runs in redb's transaction, the buffer folded first,
            // as after a savepoint.
            tracing::warn!(error = %e, "could not read the store after a checkpoint");
            state.base = None;
            return;
        }
    };
    // The buffer folded is freed once the core is let go (below): its entries,
    // tens of thousands, took milliseconds the writes waited for.
    let old_buffer = std::mem::replace(&mut state.buffer, since_fold);
    state.base = Some(base.clone());
    state.stats.checkpoint_seconds.observe_duration(started.elapsed());
    #[cfg(test)]
    state.stats.buffer_folds.fetch_add(1, Ordering::Relaxed);
    state.stats.checkpoint_log_bytes.observe(log_bytes as f64);
    state
        .stats
        .write_buffer_bytes
        .store(state.buffer.bytes() as u64, Ordering::Relaxed);
    // Readers move to the new commit: the same rows, less of them buffered.
    to_log.send(Committed {
        checkpoint: Some(Checkpoint {
            sync: state.durable.last_requested(),
            on_disk_first: true,
        }),
        snapshot: Some(ReadView::over(base, state.buffer.clone())),
        ..Committed::default()
    });
    drop(guard);
    drop(old_buffer);
}

/// Folds `frozen` into redb, committed durably (redb reuses the pages its
/// non-durable commits freed only after a durable one). No replay start is
/// recorded: a log that keeps nothing is never replayed. Nor is there a wait
/// for readers to see every commit (`commit::wait_published`): in memory each
/// commit is published as it is made.
fn fold(db: &Database, frozen: &Buffer) -> Result<(), BackendError> {
    let mut txn = db.begin_write().map_err(backend_error)?;
    let mut trees = Trees::open(&txn).map_err(as_backend)?;
    frozen.fold_into(&mut trees).map_err(as_backend)?;
    drop(trees);
    txn.set_durability(Durability::Immediate).map_err(backend_error)?;
    txn.commit().map_err(backend_error)
}
