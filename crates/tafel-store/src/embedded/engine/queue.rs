//! In memory, the writes waiting for a group, and who runs them: the thread
//! that queued one, when the writer's [`Core`] is free (see [`Queue`]).

use std::sync::{Condvar, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use super::writer::{Core, MAX_GROUP};
use crate::embedded::Job;

/// In memory, the writes waiting for a group. A thread that queues one runs
/// the queued writes itself when no one holds the core: with no log to sync
/// there is nothing for a writer thread to overlap, and handing each group to
/// it and back cost a futex wake and wait, a reply's wake-up per write and the
/// switches between the threads (benchmark-history §42). What may take long
/// stays the writer thread's: a checkpoint (the buffer's fold), a group that
/// runs in redb's transaction (batches, whole tables), a savepoint. A write's
/// thread leaves those queued and wakes the writer thread for them, so that
/// reads on that thread never wait for a fold.
#[derive(Default)]
pub(super) struct Queue {
    jobs: Mutex<Queued>,
    wake: Condvar,
}

#[derive(Default)]
struct Queued {
    jobs: Vec<Job>,
    /// The writer thread has something to do: a checkpoint, or queued jobs a
    /// write's thread left to it; or the store is stopping.
    writer_due: bool,
    /// In memory, a checkpoint was set aside for the writer thread to fold
    /// (`fold_aside.rs`); the writes go on meanwhile.
    fold_due: bool,
    /// The writer thread has taken its last jobs: no more are queued.
    closed: bool,
}

/// Turns at the queue a write's thread takes before it leaves the rest to the
/// writer thread, so that a serving thread does not run other threads' writes
/// for long while its own connections wait.
const TURNS: usize = 4;

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Queued> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `job`; gives it back once the writer thread has taken its last.
    pub(super) fn push(&self, job: Job) -> Result<(), Job> {
        let mut queued = self.lock();
        if queued.closed {
            return Err(job);
        }
        queued.jobs.push(job);
        Ok(())
    }

    /// Wakes the writer thread (to stop: it finds the job channel closed).
    pub(super) fn wake_writer(&self) {
        self.lock().writer_due = true;
        self.wake.notify_one();
    }

    /// Wakes the writer thread to fold what was set aside; the queue runs on.
    pub(super) fn wake_fold(&self) {
        self.lock().fold_due = true;
        self.wake.notify_one();
    }

    /// Sets a due checkpoint aside (`fold_aside.rs`) and wakes the writer
    /// thread to fold it; whether it did.
    fn set_aside(&self, core: &mut Core) -> bool {
        let set = core.set_aside();
        if set {
            self.wake_fold();
        }
        set
    }

    /// Runs what is queued while the core is free and nothing needs the writer
    /// thread. Whoever holds the core calls this after letting it go, so a
    /// write queued meanwhile is never left behind.
    pub(super) fn run(&self, core: &Mutex<Core>) {
        for _ in 0..TURNS {
            if self.lock().jobs.is_empty() {
                return;
            }
            let mut core = match core.try_lock() {
                Ok(c) => c,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => return,
            };
            let jobs = {
                let mut queued = self.lock();
                if queued.writer_due {
                    // Left to the writer thread, which runs them after it.
                    return;
                }
                std::mem::take(&mut queued.jobs)
            };
            let mut groups = chunks(jobs);
            while let Some(group) = groups.next() {
                // A due checkpoint is folded aside, so it need not stop the queue.
                self.set_aside(&mut core);
                let savepoint = group.iter().any(|j| matches!(j, Job::Savepoint { .. }));
                if savepoint || core.state.checkpoint_due() || core.state.folds_first(&group) {
                    // The writer thread's, in order before what was queued since.
                    let mut queued = self.lock();
                    let since = std::mem::replace(&mut queued.jobs, group);
                    queued.jobs.extend(groups.flatten());
                    queued.jobs.extend(since);
                    queued.writer_due = true;
                    self.wake.notify_one();
                    return;
                }
                core.run(group);
            }
            if !self.set_aside(&mut core) && core.state.checkpoint_due() {
                self.wake_writer();
            }
            if core.state.fold_lags() {
                // The writer thread takes the fold over (`pace.rs`).
                self.wake_fold();
            }
        }
        if !self.lock().jobs.is_empty() {
            self.wake_writer();
        }
    }

    /// The writer thread's wait for something to do, `timeout` at most;
    /// whether it was woken for something.
    pub(super) fn wait(&self, timeout: Duration) -> bool {
        let queued = self.lock();
        if queued.writer_due || queued.fold_due {
            return true;
        }
        let (queued, _) = self
            .wake
            .wait_timeout(queued, timeout)
            .unwrap_or_else(|p| p.into_inner());
        queued.writer_due || queued.fold_due
    }

    /// What a write's thread left to the writer thread, if it did. A fold set
    /// aside is the writer thread's next (`fold_aside::checkpoint_if_due`).
    pub(super) fn take_due(&self) -> Option<Vec<Job>> {
        let mut queued = self.lock();
        queued.fold_due = false;
        std::mem::take(&mut queued.writer_due).then(|| std::mem::take(&mut queued.jobs))
    }

    /// Everything queued, for the writer thread's last turn; nothing is queued after it.
    pub(super) fn close(&self) -> Vec<Job> {
        let mut queued = self.lock();
        queued.closed = true;
        std::mem::take(&mut queued.jobs)
    }
}

/// `jobs` in groups of [`MAX_GROUP`] at most.
fn chunks(jobs: Vec<Job>) -> impl Iterator<Item = Vec<Job>> {
    let mut jobs = jobs.into_iter().peekable();
    std::iter::from_fn(move || {
        jobs.peek()?;
        Some(jobs.by_ref().take(MAX_GROUP).collect())
    })
}
