//! In memory, a checkpoint's fold (`fold_aside.rs`) on a thread of its own at a
//! lower priority, which hands the rest of it to whoever must wait for it.
//!
//! Run beside the writes at their priority, the fold's tens of milliseconds of
//! CPU delayed the serving threads at every wake-up on two busy cores: single
//! writes' p99 past 2 ms (benchmark-history §44). At nice 10 the scheduler gives
//! the fold all of an idle core and a tenth of a busy one, which took that p99
//! back to ~2 ms; but whatever had to wait for the fold (a batch, a full buffer,
//! the log's half filling again, a savepoint) then waited on a starved thread
//! beside CPU-bound neighbours (§45: merges' p99.9 12 → 62 ms). A thread cannot
//! raise its priority again without a privilege, so the work moves instead: the
//! fold goes change by change, and a thread about to begin a redb write
//! transaction, which would wait for the fold's, first [hurries](Pace::hurry) it.
//! The fold thread stops at the next change and the hurried thread finishes the
//! fold, and commits it, at its own priority. The fold's end (its changes since
//! becoming the buffer) stays the writer thread's, which holds the core for it.
//! While the machine is busy (`busy.rs`), the writer thread folds instead.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use super::busy::{CpuClock, Spells, Stint};
use super::fold_aside::{Fold, Folding, Step};
use super::queue::Queue;
use crate::error::BackendError;

/// The fold thread, and the fold it works on.
pub(in crate::embedded) struct Pace {
    state: Mutex<State>,
    changed: Condvar,
    /// Someone waits for the fold under way: stop at the next change.
    hurry: AtomicBool,
    /// A fold is handed over and has not ended.
    under_way: AtomicBool,
    /// Wakes the writer thread to make an ended fold the buffer's.
    queue: Arc<Queue>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The fold thread's CPU clock, once it runs.
    clock: OnceLock<CpuClock>,
}

#[derive(Default)]
struct State {
    slot: Slot,
    stopping: bool,
    /// When the machine is busy, the writer thread folds (`busy.rs`).
    spells: Spells,
    /// The fold thread's time since it was handed the fold under way.
    handed: Option<Stint>,
}

#[derive(Default)]
enum Slot {
    #[default]
    Idle,
    /// To go on with: from its start, or where the fold thread stopped.
    Ready(Box<Folding>),
    /// Under way, on the fold thread or a hurried one.
    Folding,
    /// Committed or failed, for the writer thread to [finish](Fold::finish).
    Ended(Box<Fold>, Result<(), BackendError>),
}

/// The fold thread's nice value: the scheduler gives it about a tenth of what
/// a normal thread gets of a busy core, all of an idle one.
const FOLD_NICE: libc::c_int = 10;

impl Pace {
    /// Starts the fold thread; none if it could not be started (the writer
    /// thread then folds, the writes going on beside it).
    pub(super) fn start(queue: Arc<Queue>) -> Option<Arc<Pace>> {
        let pace = Arc::new(Pace {
            state: Mutex::default(),
            changed: Condvar::new(),
            hurry: AtomicBool::new(false),
            under_way: AtomicBool::new(false),
            queue,
            thread: Mutex::default(),
            clock: OnceLock::new(),
        });
        let on_thread = pace.clone();
        let thread = thread::Builder::new()
            .name("tafel-fold".into())
            .spawn(move || {
                lower_priority();
                if let Some(clock) = CpuClock::of_this_thread() {
                    let _ = on_thread.clock.set(clock);
                }
                on_thread.fold_loop();
            })
            .inspect_err(|e| tracing::warn!(error = %e, "no thread to fold checkpoints on"))
            .ok()?;
        *lock(&pace.thread) = Some(thread);
        Some(pace)
    }

    /// Hands `folding` to the fold thread; gives it back (for the writer
    /// thread to [fold itself](Pace::fold_here)) if another fold has not ended
    /// yet, or if the machine is busy.
    pub(super) fn fold(&self, folding: Box<Folding>) -> Result<(), Box<Folding>> {
        let mut state = lock(&self.state);
        if !matches!(state.slot, Slot::Idle) || state.stopping || state.spells.busy(Instant::now()) {
            return Err(folding);
        }
        self.hurry.store(false, Ordering::Relaxed);
        self.under_way.store(true, Ordering::Relaxed);
        state.handed = self.clock.get().and_then(|c| c.stint());
        state.slot = Slot::Ready(folding);
        self.changed.notify_all();
        Ok(())
    }

    /// A fold that ended, committed or not, to be [finished](Fold::finish).
    pub(super) fn take_done(&self) -> Option<(Fold, Result<(), BackendError>)> {
        let mut state = lock(&self.state);
        match std::mem::take(&mut state.slot) {
            Slot::Ended(fold, folded) => Some((*fold, folded)),
            other => {
                state.slot = other;
                None
            }
        }
    }

    /// Before a redb write transaction begins on this thread: one begun now
    /// would wait for the fold under way, so the fold is finished here, or, if
    /// another thread finishes it, waited for. Returns once it is committed
    /// (or failed); at once with none under way.
    pub(super) fn hurry(&self) {
        let mut state = lock(&self.state);
        loop {
            match std::mem::take(&mut state.slot) {
                Slot::Ready(folding) => {
                    state.slot = Slot::Folding;
                    drop(state);
                    let (fold, folded) = folding.finish_here();
                    #[cfg(test)]
                    fold.stats.folds_hurried.fetch_add(1, Ordering::Relaxed);
                    self.ended(fold, folded);
                    return;
                }
                Slot::Folding => {
                    state.slot = Slot::Folding;
                    self.hurry.store(true, Ordering::Relaxed);
                    state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
                }
                idle_or_ended => {
                    state.slot = idle_or_ended;
                    return;
                }
            }
        }
    }

    /// Whether a fold is under way at the fold thread's pace: no one has
    /// hurried it yet.
    pub(super) fn at_its_pace(&self) -> bool {
        self.under_way.load(Ordering::Relaxed) && !self.hurry.load(Ordering::Relaxed)
    }

    /// The fold under way lags behind the log: [`Pace::hurry`], and if the
    /// fold thread was starved, the next folds are the writer thread's for a
    /// while (`busy.rs`).
    pub(super) fn take_over(&self) {
        let mut state = lock(&self.state);
        let share = state.handed.and_then(Stint::share);
        state.spells.lagged(share, Instant::now());
        drop(state);
        self.hurry();
    }

    /// Folds `folding`, which [`Pace::fold`] gave back, here on the writer
    /// thread; notes what share of a core the thread had for it.
    pub(super) fn fold_here(&self, folding: Box<Folding>) -> (Box<Fold>, Result<(), BackendError>) {
        let stint = CpuClock::this_thread().stint();
        let done = folding.finish_here();
        if let Some(share) = stint.and_then(Stint::share) {
            lock(&self.state).spells.writer_folded(share);
        }
        done
    }

    /// Leaves nothing under way, and ends the fold thread.
    pub(super) fn stop(&self) {
        self.hurry();
        lock(&self.state).stopping = true;
        self.changed.notify_all();
        if let Some(thread) = lock(&self.thread).take() {
            if thread.join().is_err() {
                tracing::error!("the fold thread panicked");
            }
        }
    }

    fn fold_loop(&self) {
        let mut state = lock(&self.state);
        while !state.stopping {
            // Not a fold it stopped for someone waiting: that one is theirs.
            if !matches!(state.slot, Slot::Ready(_)) || self.hurry.load(Ordering::Relaxed) {
                state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            let Slot::Ready(folding) = std::mem::replace(&mut state.slot, Slot::Folding) else {
                continue;
            };
            drop(state);
            #[cfg(test)]
            folding.fold.stats.hold_paced_fold(&self.hurry);
            match folding.step(|| self.hurry.load(Ordering::Relaxed)) {
                Step::Stopped(rest) => {
                    state = lock(&self.state);
                    state.slot = Slot::Ready(rest);
                    self.changed.notify_all();
                }
                Step::Ended(fold, folded) => {
                    self.ended(fold, folded);
                    state = lock(&self.state);
                    state.spells.kept_up();
                }
            }
        }
    }

    /// The fold ended: those waiting go on, and the writer thread is woken to
    /// finish it.
    fn ended(&self, fold: Box<Fold>, folded: Result<(), BackendError>) {
        lock(&self.state).slot = Slot::Ended(fold, folded);
        self.under_way.store(false, Ordering::Relaxed);
        self.changed.notify_all();
        self.queue.wake_fold();
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// This thread's nice value to [`FOLD_NICE`]. Best effort: a thread left at
/// its priority folds just the same.
fn lower_priority() {
    // SAFETY: gettid and setpriority take plain integers and touch no memory of ours.
    unsafe {
        let tid = libc::gettid();
        let _ = libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, FOLD_NICE);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_fold_thread_runs_below_the_serving_threads_priority() {
        // SAFETY: plain integers in, no memory of ours touched.
        let nice_of_this = || unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        let here = nice_of_this();
        let there = std::thread::spawn(move || {
            super::lower_priority();
            nice_of_this()
        })
        .join()
        .unwrap();
        assert_eq!(there, here.max(super::FOLD_NICE));
        assert_eq!(nice_of_this(), here, "only the fold's own thread is lowered");
    }
}
