//! The writer thread: group commit (see the module invariants in `mod.rs`). What
//! each job does in the group transaction (`group.rs`) is `apply.rs`'s; the log's replay on
//! open, `replay.rs`'s.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use redb::{Database, Durability};

use super::buffer::Buffer;
use super::checksums::seal;
use super::commit::{BaseView, Checkpoint, Committed, Pending, ReadView, ToLog, Turn};
use super::fold_aside;
use super::group::{GroupTx, Mode, Trees};
use super::health::Health;
use super::log_state::LogState;
use super::queue::Queue;
use super::schema::*;
use super::tree::Tree;
use super::wal::LogBuf;
use crate::embedded::apply::Writer;
use crate::embedded::index::IndexDefs;
use crate::embedded::{savepoints, Job};
use crate::error::{kind_of_io, BackendError, FailureKind};

/// Upper bound of jobs folded into one commit, so one commit's latency stays bounded.
pub(in crate::embedded) const MAX_GROUP: usize = 512;
/// An idle writer checkpoints after this long without a write.
pub(in crate::embedded) const IDLE_CHECKPOINT: Duration = Duration::from_secs(1);
/// How often the change feed's retention drops what it no longer keeps.
const TRIM_EVERY: Duration = Duration::from_secs(1);

/// What runs groups of writes: the redb database, the writer's account of the
/// log, and where committed groups go. The writer thread holds it while it
/// runs a group; in memory a write's own thread may too (see [`Queue`]).
pub(super) struct Core {
    /// Shared with a fold aside, which commits to it without the core.
    pub(super) db: Arc<Database>,
    pub(super) state: LogState,
    pub(super) to_log: ToLog,
    pub(super) health: Arc<Health>,
}

/// Locks `core`; a panic while it was held left it whole (each group runs
/// under `catch_unwind`, and a failed one changes nothing).
pub(super) fn lock(core: &Mutex<Core>) -> MutexGuard<'_, Core> {
    core.lock().unwrap_or_else(|p| p.into_inner())
}

impl Core {
    /// Runs one group (an empty one is a checkpoint): see [`run_group`].
    pub(super) fn run(&mut self, group: Vec<Job>) {
        run_group(&self.db, &mut self.state, &self.to_log, &self.health, group);
    }

    /// Runs `jobs` in groups of at most [`MAX_GROUP`], each followed by a
    /// checkpoint if one is due ([`checkpoint_due`]), each savepoint alone
    /// after the jobs before it. With no jobs, a checkpoint if one is due.
    pub(super) fn run_jobs(&mut self, jobs: Vec<Job>, building: bool) {
        let Core {
            db,
            state,
            to_log,
            health,
        } = self;
        let ran_none = jobs.is_empty();
        let mut group = Vec::new();
        let mut jobs = jobs.into_iter().peekable();
        while jobs.peek().is_some() {
            let mut alone = None;
            for job in jobs.by_ref() {
                match job {
                    Job::Savepoint { op, reply } => {
                        alone = Some((op, reply));
                        break;
                    }
                    job => group.push(job),
                }
                if group.len() >= MAX_GROUP - usize::from(building) {
                    break;
                }
            }
            if building && !group.is_empty() {
                group.push(build_step(state));
            }
            if !group.is_empty() {
                run_group(db, state, to_log, health, std::mem::take(&mut group));
                // Now make everything durable in redb if due.
                checkpoint_due(db, state, to_log, health);
            }
            if let Some((op, reply)) = alone {
                // A savepoint is redb's: what is buffered goes into redb first.
                if !state.buffer.is_empty() {
                    run_group(db, state, to_log, health, Vec::new());
                }
                savepoints::run(db, state, to_log, health, op, reply);
                // A restore moved redb's state: buffered groups read the new one.
                state.base = BaseView::take(db)
                    .inspect_err(|e| tracing::warn!(error = %e, "could not read the store after a savepoint"))
                    .ok();
            }
        }
        // With no jobs, a checkpoint that fell due (each group above checked for one).
        if ran_none {
            checkpoint_due(db, state, to_log, health);
        }
    }
}

/// A checkpoint, if one is due: in memory set aside, for the writer thread to
/// fold once it lets the core go while writes go on (`fold_aside.rs`).
fn checkpoint_due(db: &Database, state: &mut LogState, to_log: &ToLog, health: &Health) {
    if state.checkpoint_due() && !fold_aside::set_aside(state, to_log, health) {
        run_group(db, state, to_log, health, Vec::new());
    }
}

/// On disk, the thread that folds a checkpoint set aside (`fold_aside.rs`):
/// the writer thread runs every group there.
struct Folder {
    wake: mpsc::SyncSender<()>,
    thread: thread::JoinHandle<()>,
}

impl Folder {
    /// The thread, or none if it could not be started: the writer thread then
    /// folds, and the writes wait for it as they did before folds were set aside.
    fn start(core: &Arc<Mutex<Core>>) -> Option<Folder> {
        let (wake, woken) = mpsc::sync_channel::<()>(1);
        let core = core.clone();
        let thread = thread::Builder::new()
            .name("tafel-fold".into())
            .spawn(move || {
                while woken.recv().is_ok() {
                    fold_aside::fold_set_aside(&core);
                }
            })
            .inspect_err(|e| tracing::warn!(error = %e, "no thread to fold checkpoints on"))
            .ok()?;
        Some(Folder { wake, thread })
    }

    /// Folds what was set aside, then ends.
    fn stop(self) {
        drop(self.wake);
        if self.thread.join().is_err() {
            tracing::error!("the fold thread panicked");
        }
    }
}

/// The writer thread: group commit, see the module invariants.
pub(super) fn writer_loop(core: &Arc<Mutex<Core>>, rx: mpsc::Receiver<Job>, queue: Option<&Queue>) {
    let mut trimmed = Instant::now();
    let folder = if queue.is_none() { Folder::start(core) } else { None };
    loop {
        if let Some(queue) = queue {
            if let Some(jobs) = queue.take_due() {
                lock(core).run_jobs(jobs, false);
            }
            // Writes go on meanwhile: nothing is left to this thread now.
            fold_aside::checkpoint_if_due(core, queue);
            queue.run(core);
        }
        let mut guard = lock(core);
        if queue.is_none() && guard.state.to_fold.is_some() {
            match &folder {
                // Woken already if the channel is full.
                Some(folder) => drop(folder.wake.try_send(())),
                None => {
                    drop(guard);
                    fold_aside::fold_set_aside(core);
                    continue;
                }
            }
        }
        let Core {
            db,
            state,
            to_log: log,
            health,
        } = &mut *guard;
        // The feed's retention runs on this thread, as a job of its own, each second.
        if trimmed.elapsed() >= TRIM_EVERY && state.feed.settings.load().any() && health.broken().is_none() {
            trimmed = Instant::now();
            let (reply, _) = tokio::sync::oneshot::channel();
            let now_ns = crate::feed::now_ns();
            run_group(db, state, log, health, vec![Job::TrimChanges { now_ns, reply }]);
        }
        // So does the removal of deleted tables kept past their time (`deleted.rs`).
        let now_ns = crate::feed::now_ns();
        let next = &state.feed.next_sweep_ns;
        if now_ns >= next.load(std::sync::atomic::Ordering::Acquire) && health.broken().is_none() {
            // When unknown (0: at opening, after a savepoint's restore), a read finds
            // out, so a store keeping nothing runs no group for it. A failed look or
            // sweep waits a second; a sweep sets when the next is due.
            let due = state
                .view(db)
                .and_then(|view| crate::embedded::deleted::next_due(&*view))
                .unwrap_or(Some(now_ns + 1_000_000_000));
            next.store(
                due.unwrap_or(u64::MAX).max(now_ns + 1),
                std::sync::atomic::Ordering::Release,
            );
            if due.is_some_and(|t| t <= now_ns) {
                next.store(now_ns + 1_000_000_000, std::sync::atomic::Ordering::Release);
                let (reply, _) = tokio::sync::oneshot::channel();
                run_group(db, state, log, health, vec![Job::SweepDeleted { now_ns, reply }]);
            }
        }
        // An online index build steps between groups, and in each group
        // (`index_build.rs`): writes wait for one step at most.
        if step_due(state, health) {
            if let Ok(first) = rx.try_recv() {
                let jobs = std::iter::once(first)
                    .chain(rx.try_iter().take(MAX_GROUP - 2))
                    .collect();
                guard.run_jobs(jobs, true);
            } else {
                let step = build_step(state);
                guard.run_jobs(vec![step], false);
            }
            continue;
        }
        let last_seq = state.last_seq;
        drop(guard);
        let received = match queue {
            None => rx.recv_timeout(IDLE_CHECKPOINT).map(|job| vec![job]),
            // In memory writes come through the queue (run at the loop's top);
            // the channel only closes.
            Some(queue) => {
                queue.run(core);
                // Stopping closes the channel, then wakes this thread.
                let stopped = || matches!(rx.try_recv(), Err(mpsc::TryRecvError::Disconnected));
                let woken = stopped() || queue.wait(IDLE_CHECKPOINT);
                match stopped() {
                    true => Err(mpsc::RecvTimeoutError::Disconnected),
                    false if woken => Ok(Vec::new()),
                    false => Err(mpsc::RecvTimeoutError::Timeout),
                }
            }
        };
        let first = match received {
            // In memory, woken: the jobs left to this thread and a checkpoint
            // if due, at the loop's top.
            Ok(jobs) if jobs.is_empty() => continue,
            Ok(jobs) => jobs,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let mut core = lock(core);
                // In memory, groups run by writes' threads meanwhile mean not idle.
                let idle = core.state.last_seq == last_seq;
                // After a failed log or store-file write every commit fails until a
                // restart: an idle checkpoint would only fail (and log it) each second.
                if idle && core.state.since.any() && core.health.broken().is_none() {
                    core.run(Vec::new());
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let mut guard = lock(core);
        // A build due by now (a wait for an encoder ended) joins the group.
        let building = step_due(&guard.state, &guard.health);
        let mut jobs = first;
        jobs.extend(rx.try_iter().take(MAX_GROUP - 1 - usize::from(building)));
        guard.run_jobs(jobs, building);
    }
    // Shutting down: leave nothing to replay.
    if let Some(queue) = queue {
        lock(core).run_jobs(queue.close(), false);
    }
    if let Some(folder) = folder {
        folder.stop();
    }
    let mut core = lock(core);
    if core.state.since.any() || !core.state.buffer.is_empty() {
        core.run(Vec::new());
    }
    if let Some(pace) = core.state.pace.take() {
        pace.stop();
    }
}

/// Whether an online index build's step is due (and taken).
fn step_due(state: &LogState, health: &Health) -> bool {
    state.index_defs.build.due(Instant::now())
        && health.broken().is_none()
        && crate::embedded::index_build::take_step(&state.feed)
}

/// A step of an online index build, which no one waits for.
fn build_step(state: &LogState) -> Job {
    let (reply, _) = tokio::sync::oneshot::channel();
    let time = crate::embedded::index_build::step_time(&state.feed);
    Job::BuildIndex { time, reply }
}

/// Runs one group of jobs, and hands it to the log: in the write buffer
/// (`buffer.rs`), or, when it [folds first](LogState::folds_first), in one redb
/// transaction with the buffer folded in, committed non-durably or as a
/// checkpoint. An empty group is a plain checkpoint.
fn run_group(db: &Database, state: &mut LogState, to_log: &ToLog, health: &Health, group: Vec<Job>) {
    let mut committed = Committed {
        deletes_table: group.iter().any(|j| {
            matches!(
                j,
                Job::DeleteTable { .. } | Job::ClearAccount { .. } | Job::RestoreTable { .. }
            )
        }),
        pending: Vec::with_capacity(group.len()),
        ..Committed::default()
    };
    let checkpoint_alone = group.is_empty();
    let direct = state.folds_first(&group);
    #[cfg(test)]
    if direct {
        count_off_the_writer(state);
        if !state.buffer.is_empty() {
            state.stats.buffer_folds.fetch_add(1, Ordering::Relaxed);
        }
    }
    // Jobs asked for: an index build's step is the writer's own.
    let jobs = group.iter().filter(|j| !matches!(j, Job::BuildIndex { .. })).count() as u64;
    // What the buffer held before the group: a failed group changes nothing.
    let before = (state.buffer.clone(), state.since_fold.clone());
    // A panic in redb (a damaged page, see `schema::guarded`) fails the group;
    // its transaction, dropped unfinished, changes nothing.
    let run = AssertUnwindSafe(|| -> Result<(), BackendError> {
        if health.log_failure().is_some() {
            // The log is broken: change nothing more. Dropping the jobs fails them.
            return Err(BackendError::new(FailureKind::Stopped, "write-ahead log failed"));
        }
        if state.durable.failure().is_some() {
            // The store file could not be written: every write fails (`health.rs`),
            // a buffered one too, which redb would not be asked about. The error
            // is the file's, below.
            return Err(BackendError::new(FailureKind::Io, "the store file failed"));
        }
        let mut log = state.spare.take();
        // Put back only once the group's changes are committed (or it made none).
        let mut defs = std::mem::take(&mut state.index_defs);
        let (applied, group) = match direct {
            true => (None, group),
            false => (
                Some(apply_buffered(
                    state,
                    &mut log,
                    group,
                    &mut committed.pending,
                    &mut defs,
                )?),
                Vec::new(),
            ),
        };
        // A checkpoint's time counts its fold: the writer stands still for both.
        let started = Instant::now();
        let (txn, checkpoint, seq) = match applied {
            // Every job failed or changed nothing: there is nothing to commit.
            Some(Applied::Unchanged) => {
                state.index_defs = defs;
                return Ok(());
            }
            Some(Applied::Buffered { seq }) => {
                state.index_defs = defs;
                let base = state.base.clone().ok_or_else(garbage)?;
                let snapshot = ReadView::over(base, state.buffer.clone());
                return account_commit(state, &mut committed, log, seq, jobs, false, false, started, snapshot);
            }
            // Too big for the rest of the log: the buffer, this group in it, goes
            // into redb durably now.
            Some(Applied::Checkpoint { seq }) => {
                #[cfg(test)]
                count_off_the_writer(state);
                let mut txn = state.begin_write(db).map_err(backend_error)?;
                let mut trees = Trees::open(&txn).map_err(as_backend)?;
                state.buffer.fold_into(&mut trees).map_err(as_backend)?;
                replay_start_if_kept(&mut trees, to_log, seq)?;
                drop(trees);
                txn.set_durability(Durability::Immediate).map_err(backend_error)?;
                (txn, true, seq)
            }
            None => {
                let txn = state.begin_write(db).map_err(backend_error)?;
                let mut trees = Trees::open(&txn).map_err(as_backend)?;
                state.buffer.fold_into(&mut trees).map_err(as_backend)?;
                let (checkpoint, unchanged, seq) = apply_jobs(
                    trees,
                    state,
                    to_log,
                    &mut log,
                    group,
                    &mut committed.pending,
                    checkpoint_alone,
                    &mut defs,
                )?;
                if unchanged {
                    // The buffer stays as it was, folded into nothing.
                    state.index_defs = defs;
                    return txn.abort().map_err(backend_error);
                }
                let mut txn = txn;
                let level = if checkpoint {
                    Durability::Immediate
                } else {
                    Durability::None
                };
                txn.set_durability(level).map_err(backend_error)?;
                (txn, checkpoint, seq)
            }
        };
        // No reader is left on an older state (see `wait_published`): the
        // core's holder hands its groups to the log itself and publishes each
        // before going on.
        txn.commit().map_err(backend_error)?;
        state.index_defs = defs;
        // redb now holds what the buffer did (a fold aside's share too).
        state.buffer = Buffer::default();
        state.to_fold = None;
        state.since_fold = None;
        state.base = None;
        let base = BaseView::take(db).map_err(as_backend)?;
        state.base = Some(base.clone());
        let snapshot = ReadView::over(base, Buffer::default());
        account_commit(
            state,
            &mut committed,
            log,
            seq,
            jobs,
            checkpoint,
            checkpoint_alone,
            started,
            snapshot,
        )
    });
    committed.result = catch_unwind(run).unwrap_or_else(|_| Err(garbage()));
    if let Err(e) = &mut committed.result {
        // Nothing of the group stays buffered (redb's transaction, dropped, kept nothing either).
        (state.buffer, state.since_fold) = before;
        // After the store file could not be written, redb only says "Previous I/O
        // error"; the flusher knows what it was (a full disk, say).
        if let Some((kind, why)) = state.durable.failure() {
            *e = BackendError::caused_by(kind_of_io(kind), "the store file", std::io::Error::new(kind, why));
        }
        tracing::error!(error = %e, "commit failed; failing every request of the group");
    }
    #[cfg(test)]
    state.stats.jobs_done.fetch_add(jobs, Ordering::Relaxed);
    to_log.send(committed);
}

/// Counts a redb transaction run on this thread if it is not the writer's
/// (tests: in memory, a write's thread must leave those to it).
#[cfg(test)]
fn count_off_the_writer(state: &LogState) {
    if std::thread::current().name() != Some("tafel-writer") {
        state.stats.direct_off_the_writer.fetch_add(1, Ordering::Relaxed);
    }
}

/// How a buffered group went.
enum Applied {
    /// Every job failed or changed nothing.
    Unchanged,
    /// In the buffer, to be logged as record `seq`.
    Buffered { seq: u64 },
    /// In the buffer, but too big for the rest of the log: it goes to redb
    /// durably, and `seq` is the last record it covers.
    Checkpoint { seq: u64 },
}

/// Applies the group's jobs to the write buffer, their changes logged in `log`.
fn apply_buffered(
    state: &mut LogState,
    log: &mut LogBuf,
    group: Vec<Job>,
    pending: &mut Vec<Pending>,
    defs: &mut IndexDefs,
) -> Result<Applied, BackendError> {
    let base = state.base.clone().ok_or_else(garbage)?;
    let mut buffer = std::mem::take(&mut state.buffer);
    let mut since_fold = state.since_fold.take();
    let mode = Mode::Buffered {
        base: &base,
        buffer: &mut buffer,
        also: since_fold.as_mut(),
    };
    let result = apply_jobs_in(mode, state, log, group, pending, defs).map(drop);
    state.buffer = buffer;
    state.since_fold = since_fold;
    result?;
    if log.payload_len() == 0 {
        return Ok(Applied::Unchanged);
    }
    Ok(match state.fits(log) {
        true => Applied::Buffered {
            seq: state.last_seq + 1,
        },
        false => Applied::Checkpoint { seq: state.last_seq },
    })
}

/// Runs each job of `group` in `mode`, each job's outcome pushed to `pending`.
fn apply_jobs_in<'t>(
    mode: Mode<'t>,
    state: &LogState,
    log: &mut LogBuf,
    group: Vec<Job>,
    pending: &mut Vec<Pending>,
    index_defs: &mut IndexDefs,
) -> Result<Mode<'t>, BackendError> {
    let feed = state.feed.settings.load();
    let encoder = state.feed.index_encoder.load();
    let mut w = Writer {
        tx: GroupTx::new(mode, log),
        feed: &feed,
        counts: Default::default(),
        index_encoder: encoder.as_deref(),
        index_defs,
        keep_ns: state.feed.soft_delete_ns.load(std::sync::atomic::Ordering::Acquire),
        next_sweep: &state.feed.next_sweep_ns,
    };
    for job in group {
        pending.push(w.apply(job));
    }
    w.finish().map_err(as_backend)?;
    Ok(w.tx.into_mode())
}

/// Replay starts after record `seq`, if the log keeps its records. One that
/// keeps nothing is never replayed: there it would be a page of the meta table
/// copied, and its root updated, in every commit for nothing.
fn replay_start_if_kept(trees: &mut Trees<'_>, to_log: &ToLog, seq: u64) -> Result<(), BackendError> {
    if to_log.keeps_records() {
        mark_replay_start(trees, seq)?;
    }
    Ok(())
}

/// Replay starts after record `seq`.
pub(super) fn mark_replay_start(trees: &mut Trees<'_>, seq: u64) -> Result<(), BackendError> {
    let stored = seal(WAL_SEQ.as_bytes(), &seq.to_le_bytes());
    trees
        .insert_unlogged(Tree::Meta, WAL_SEQ.as_bytes(), &stored)
        .map_err(as_backend)
}

/// Applies the group's jobs in redb's transaction, their changes logged in `log`;
/// then whether the group commits as a checkpoint, whether it changed nothing,
/// and the number its log record takes.
#[allow(clippy::too_many_arguments)]
fn apply_jobs(
    trees: Trees<'_>,
    state: &LogState,
    to_log: &ToLog,
    log: &mut LogBuf,
    group: Vec<Job>,
    pending: &mut Vec<Pending>,
    checkpoint_alone: bool,
    index_defs: &mut IndexDefs,
) -> Result<(bool, bool, u64), BackendError> {
    let mut seq = state.last_seq;
    let Mode::Direct(mut trees) = apply_jobs_in(Mode::Direct(trees), state, log, group, pending, index_defs)? else {
        return Err(garbage());
    };
    // A group too big for the rest of the log commits durably itself.
    let checkpoint = checkpoint_alone || !state.fits(log);
    let unchanged = log.payload_len() == 0 && !checkpoint;
    if !unchanged {
        if !checkpoint {
            seq += 1;
        }
        replay_start_if_kept(&mut trees, to_log, seq)?;
    }
    Ok((checkpoint, unchanged, seq))
}

/// After the group's commit: the writer's state, statistics and what the log
/// thread is handed (the record, or the checkpoint's sync), and the new view.
#[allow(clippy::too_many_arguments)]
fn account_commit(
    state: &mut LogState,
    committed: &mut Committed,
    log: LogBuf,
    seq: u64,
    jobs: u64,
    checkpoint: bool,
    checkpoint_alone: bool,
    started: Instant,
    snapshot: Arc<ReadView>,
) -> Result<(), BackendError> {
    state.last_seq = seq;
    if jobs > 0 {
        state.stats.group_jobs.observe(jobs as f64);
    }
    if checkpoint {
        state.stats.checkpoint_seconds.observe_duration(started.elapsed());
        state.stats.checkpoint_log_bytes.observe(state.since.bytes as f64);
        // The writer stood still meanwhile: the writes' p99.9.
        tracing::debug!(ms = started.elapsed().as_secs_f64() * 1e3, "checkpoint committed");
        committed.turn = Some(Turn::Checkpoint(Checkpoint {
            sync: state.durable.last_requested(),
            // A group too big for the log is in no record: durable only on disk.
            on_disk_first: !checkpoint_alone || state.since.small_writes(),
        }));
        state.log_turned(false);
    } else {
        // Counted in full, repeated values too: what the checkpoint will write
        // grows with those, and a record never takes more of the log than that.
        state.since.add(log.written_len(), jobs, Instant::now());
        committed.record = Some((log, seq));
    }
    state.stats.log_fill.store(state.since.bytes, Ordering::Relaxed);
    state
        .stats
        .write_buffer_bytes
        .store(state.buffer.bytes() as u64, Ordering::Relaxed);
    committed.snapshot = Some(snapshot);
    Ok(())
}
