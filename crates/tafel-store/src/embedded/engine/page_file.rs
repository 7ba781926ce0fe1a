//! redb's file, with its page writes gathered, sorted, and written by a
//! thread of their own.
//!
//! redb writes a checkpoint one page at a time: thousands of 4 KiB `pwrite`s,
//! each of which makes the kernel allocate and fill one small page-cache folio,
//! and then syncs; all of it on our single writer thread, which meanwhile
//! applies no writes (under batch inserts, most of its time). A checkpoint's
//! thousands of pages fall into about a hundred contiguous runs
//! (BENCHMARKS.md, "Checkpoint pages in sorted runs against a write per page").
//!
//! So page writes are held in memory, and each `sync_data` closes an *epoch*:
//! the pages written since the last one, then a sync. A flusher thread writes
//! the epochs strictly in order, each sorted into runs (one `pwritev` each) and
//! then synced (`fdatasync`). The file therefore goes through exactly the
//! states it would have gone through had every call been carried out at once,
//! only later: after a crash it holds some prefix of them, which is what redb's
//! commit protocol already survives. What redb calls durable is durable only
//! once the flusher has synced it; [`Durable::wait`] tells, and the write-ahead
//! log is never started over before the checkpoint it relies on is (see
//! `commit.rs`). Reads see held pages over the file's bytes, oldest epoch
//! first, so redb reads back what it wrote. A file in memory needs none of
//! this (`Disk::files_in_memory`): there a write is a copy and a sync is
//! nothing, so both go straight to the file on redb's thread ([`PageFile::write_direct`]).

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, IoSlice};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;

use redb::{BackendError, StorageBackend};

use super::disk::DiskFile;
use super::header_copy::HeaderCopy;

mod flusher;
use flusher::flush_loop;

/// Bytes of page writes past which the open epoch is closed (without a sync)
/// and handed to the flusher.
const HOLD_LIMIT: usize = 32 << 20;
/// Bytes of closed epochs past which a new one waits for the flusher: bounds
/// the memory held and how far redb runs ahead of the disk.
const QUEUE_LIMIT: usize = 96 << 20;

type Pages = BTreeMap<u64, Arc<[u8]>>;

/// Page writes by offset, with the longest one's length so a lookup knows how
/// far back an overlap can start.
#[derive(Default)]
struct Run {
    pages: Pages,
    bytes: usize,
    longest: u64,
}

impl Run {
    /// The held pages that overlap `offset..end`, in offset order.
    fn overlapping(&self, offset: u64, end: u64) -> impl Iterator<Item = (&u64, &Arc<[u8]>)> {
        let from = offset.saturating_sub(self.longest.saturating_sub(1));
        self.pages
            .range(from..end)
            .filter(move |(&start, data)| start + data.len() as u64 > offset)
    }

    fn end(&self) -> u64 {
        self.pages.last_key_value().map_or(0, |(&s, d)| s + d.len() as u64)
    }

    /// Holds `page` at `offset`, in place of a held page of the same place.
    fn insert(&mut self, offset: u64, page: Arc<[u8]>) {
        self.bytes += page.len();
        self.longest = self.longest.max(page.len() as u64);
        if let Some(old) = self.pages.insert(offset, page) {
            self.bytes -= old.len();
        }
    }
}

/// A closed epoch: its pages, then a sync if it has a number.
struct Epoch {
    run: Arc<Run>,
    sync: Option<u64>,
}

#[derive(Default)]
struct State {
    /// Page writes since the last closed epoch.
    open: Run,
    /// Closed epochs not yet in the file, oldest first; the flusher writes the front.
    queue: VecDeque<Epoch>,
    queued_bytes: usize,
    /// Number of the last epoch closed by a sync, and of the last one synced.
    closed: u64,
    durable: u64,
    /// The flusher's (or a direct) write or sync failed: the file's state is
    /// unknown, and every later write and sync fails. Its kind says whether the
    /// disk is full. Set by [`State::fail`].
    failed: Option<(io::ErrorKind, String)>,
    stop: bool,
}

impl State {
    fn check(&self) -> io::Result<()> {
        match &self.failed {
            Some((kind, e)) => Err(io::Error::new(*kind, format!("page file: {e}"))),
            None => Ok(()),
        }
    }

    /// Records that writing the file failed: from now on every write fails.
    fn fail(&mut self, e: &io::Error) {
        tracing::error!(error = %e, "writing the store file failed; failing every write until restart");
        self.failed = Some((e.kind(), e.to_string()));
    }

    /// Whether a direct write failed and the pages of its epoch are being held
    /// (see [`PageFile::write_direct`]).
    fn holding_failed_epoch(&self) -> bool {
        self.failed.is_some() && !self.open.pages.is_empty()
    }

    /// Hands the open pages to the flusher, followed by a sync if `sync`.
    fn close_epoch(&mut self, sync: bool) {
        if self.open.pages.is_empty() && !sync {
            return;
        }
        let sync = sync.then(|| {
            self.closed += 1;
            self.closed
        });
        let run = std::mem::take(&mut self.open);
        self.queued_bytes += run.bytes;
        self.queue.push_back(Epoch {
            run: Arc::new(run),
            sync,
        });
    }

    /// The end of the furthest held page.
    fn held_end(&self) -> u64 {
        self.queue.iter().map(|e| e.run.end()).fold(self.open.end(), u64::max)
    }
}

struct Shared {
    state: Mutex<State>,
    /// The highest sync number someone waits for ([`Durable::wait`]). While it
    /// is not on disk, every epoch the flusher writes stands between the waiter
    /// and it, so the flusher sends them to the disk in one go (see [`Writeback`]).
    awaited: AtomicU64,
    /// Signalled whenever the queue, `durable` or `failed` changes.
    changed: Condvar,
    /// Whether `failed` is set, for the checks every group and every direct
    /// read make without the lock: in memory a checkpoint writes its pages
    /// under it one by one, and a serving thread's group that waited for it
    /// (the lock is not fair) stood still for the whole fold (benchmark-history §44).
    any_failure: AtomicBool,
    file: Arc<dyn DiskFile>,
    /// Bytes of pages the flusher has written, for the store's metrics.
    written: AtomicU64,
    /// Tests hold this to keep the flusher from writing.
    #[cfg(test)]
    pause: Mutex<()>,
    /// Test events: the flusher has reached `pause` with an epoch to write; a
    /// `drain` (a shortening `set_len`) is waiting. Tests wait on these instead
    /// of sleeping before they check that nothing went ahead.
    #[cfg(test)]
    at_pause: std::sync::atomic::AtomicBool,
    #[cfg(test)]
    draining: std::sync::atomic::AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change under this lock is a few field updates that leave the
        // state whole, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that writing the file failed (see [`State::fail`]).
    fn fail(&self, state: &mut State, e: &io::Error) {
        state.fail(e);
        self.any_failure.store(true, Ordering::Release);
    }

    /// Whether writing the file failed, without the lock.
    fn failed(&self) -> bool {
        self.any_failure.load(Ordering::Acquire)
    }

    fn wait<'a>(&self, guard: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed.wait(guard).unwrap_or_else(|e| e.into_inner())
    }

    /// Closes the open epoch (see [`State::close_epoch`]) and wakes the flusher.
    fn close_epoch(&self, state: &mut State, sync: bool) {
        state.close_epoch(sync);
        self.changed.notify_all();
    }

    /// Waits while closed epochs hold more than the limit.
    fn throttle<'a>(&self, mut state: MutexGuard<'a, State>) -> io::Result<MutexGuard<'a, State>> {
        while state.queued_bytes > QUEUE_LIMIT && state.failed.is_none() {
            state = self.wait(state);
        }
        state.check()?;
        Ok(state)
    }

    /// Closes the open epoch and waits until the flusher has written every epoch.
    fn drain(&self) -> io::Result<()> {
        let mut state = self.lock();
        self.close_epoch(&mut state, false);
        #[cfg(test)]
        self.draining.store(true, Ordering::Release);
        while !state.queue.is_empty() && state.failed.is_none() {
            state = self.wait(state);
        }
        state.check()
    }
}

/// Whether the ranges `pieces` together cover all of `offset..end`.
fn covers(mut pieces: Vec<(u64, u64)>, offset: u64, end: u64) -> bool {
    pieces.sort_unstable();
    let mut reached = offset;
    for (s, e) in pieces {
        if s > reached {
            break;
        }
        reached = reached.max(e);
    }
    reached >= end
}

/// Copies the part of `data` (written at `start`) that falls in `out` (read at `offset`).
fn overlay(out: &mut [u8], offset: u64, start: u64, data: &[u8]) {
    let end = offset + out.len() as u64;
    let from = start.max(offset);
    let to = (start + data.len() as u64).min(end);
    if from < to {
        let (a, b) = ((from - offset) as usize, (to - offset) as usize);
        let (c, d) = ((from - start) as usize, (to - start) as usize);
        out[a..b].copy_from_slice(&data[c..d]);
    }
}

/// A [`StorageBackend`] over a [`DiskFile`], with page writes and syncs carried
/// out by the flusher as described above, and redb's locks left to `locks`.
/// A *direct* one has no flusher: each write goes to the file at once, each
/// sync is durable when it returns (`Disk::files_in_memory`, a file in memory).
pub(in crate::embedded) struct PageFile {
    file: Arc<dyn DiskFile>,
    locks: Box<dyn StorageBackend>,
    shared: Arc<Shared>,
    flusher: Mutex<Option<thread::JoinHandle<()>>>,
    direct: bool,
}

/// Tells when what redb synced is on disk.
#[derive(Clone)]
pub(in crate::embedded) struct Durable(Arc<Shared>);

impl Durable {
    /// The number of the last sync redb asked for.
    pub(in crate::embedded) fn last_requested(&self) -> u64 {
        self.0.lock().closed
    }

    /// Bytes of pages written to the file so far.
    pub(in crate::embedded) fn bytes_written(&self) -> u64 {
        self.0.written.load(Ordering::Relaxed)
    }

    /// Why the flusher stopped writing, if it failed.
    pub(in crate::embedded) fn failure(&self) -> Option<(io::ErrorKind, String)> {
        match self.0.failed() {
            true => self.0.lock().failed.clone(),
            false => None,
        }
    }

    /// Holds the flusher back while the guard lives.
    #[cfg(test)]
    pub(in crate::embedded) fn pause(&self) -> MutexGuard<'_, ()> {
        self.0.pause.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until sync number `n` is done; an error if the flusher failed first.
    pub(in crate::embedded) fn wait(&self, n: u64) -> io::Result<()> {
        let mut state = self.0.lock();
        if state.durable < n {
            self.0.awaited.fetch_max(n, Ordering::AcqRel);
        }
        while state.durable < n && state.failed.is_none() {
            state = self.0.wait(state);
        }
        if state.durable >= n {
            return Ok(());
        }
        state.check()
    }
}

impl std::fmt::Debug for PageFile {
    // Summed up: redb may print its backend, and the pages can be megabytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("PageFile")
            .field("open_bytes", &state.open.bytes)
            .field("queued_bytes", &state.queued_bytes)
            .field("durable", &state.durable)
            .finish()
    }
}

impl PageFile {
    pub(in crate::embedded) fn new(
        file: Arc<dyn DiskFile>,
        locks: Box<dyn StorageBackend>,
        header: HeaderCopy,
        direct: bool,
    ) -> io::Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            awaited: AtomicU64::new(0),
            changed: Condvar::new(),
            any_failure: AtomicBool::new(false),
            file: file.clone(),
            written: AtomicU64::new(0),
            #[cfg(test)]
            pause: Mutex::new(()),
            #[cfg(test)]
            at_pause: Default::default(),
            #[cfg(test)]
            draining: Default::default(),
        });
        // A direct file has no torn header to mend: it lives and goes with the process.
        let flusher = match direct {
            true => None,
            false => {
                let shared = shared.clone();
                Some(
                    thread::Builder::new()
                        .name("tafel-flush".into())
                        .spawn(move || flush_loop(&shared, header))?,
                )
            }
        };
        Ok(PageFile {
            file,
            locks,
            shared,
            flusher: Mutex::new(flusher),
            direct,
        })
    }

    pub(in crate::embedded) fn durable(&self) -> Durable {
        Durable(self.shared.clone())
    }

    /// A direct write. One that fails is handled as the flusher's failure is:
    /// the pages of the epoch it was in are held (reads see them) and its sync
    /// closes it without making it durable, so the commit completes in redb and
    /// [`Durable::wait`] says why it is not durable; every later write and sync
    /// fails. Failing that write itself would have redb fail every later read.
    fn write_direct(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut state = self.shared.lock();
        if state.holding_failed_epoch() {
            state.open.insert(offset, Arc::from(data));
            return Ok(());
        }
        state.check()?;
        match self.file.pwritev(&mut [IoSlice::new(data)], offset) {
            Ok(()) => {
                self.shared.written.fetch_add(data.len() as u64, Ordering::Relaxed);
            }
            Err(e) => {
                self.shared.fail(&mut state, &e);
                state.open.insert(offset, Arc::from(data));
            }
        }
        Ok(())
    }

    /// A direct sync: durable when it returns (see [`Self::write_direct`]).
    fn sync_direct(&self) -> io::Result<()> {
        let mut state = self.shared.lock();
        if state.holding_failed_epoch() {
            self.shared.close_epoch(&mut state, true);
            return Ok(());
        }
        state.check()?;
        self.file.sync_data()?;
        state.closed += 1;
        state.durable = state.closed;
        Ok(())
    }

    /// Writes what is held, then stops the flusher.
    fn finish(&self) -> io::Result<()> {
        let drained = self.shared.drain();
        self.shared.lock().stop = true;
        self.shared.changed.notify_all();
        let handle = self.flusher.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            if h.join().is_err() {
                tracing::error!("the page flusher panicked");
            }
        }
        drained
    }
}

impl Drop for PageFile {
    fn drop(&mut self) {
        // redb calls close(); this covers a backend redb never took.
        let _ = self.finish();
    }
}

impl StorageBackend for PageFile {
    fn len(&self) -> Result<u64, io::Error> {
        let end = self.shared.lock().held_end();
        Ok(self.file.len()?.max(end))
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        if self.direct && !self.shared.failed() {
            return self.file.pread(out, offset);
        }
        let end = offset + out.len() as u64;
        // Take what is held for this range first, oldest epoch first: an
        // epoch the flusher writes meanwhile puts these same bytes in the file.
        let held: Vec<(u64, Arc<[u8]>)> = {
            let state = self.shared.lock();
            let runs = state.queue.iter().map(|e| &*e.run).chain([&state.open]);
            runs.flat_map(|r| r.overlapping(offset, end).map(|(&s, d)| (s, d.clone())))
                .collect()
        };
        // A range one held page covers needs nothing from the file; one that
        // goes past the file's end is fine if held pages cover all of it.
        let spans = || held.iter().map(|(s, d)| (*s, *s + d.len() as u64));
        if !spans().any(|(s, e)| s <= offset && e >= end) {
            match self.file.pread(out, offset) {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && covers(spans().collect(), offset, end) => {}
                other => other?,
            }
        }
        for (start, data) in &held {
            overlay(out, offset, *start, data);
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        // A shorter file comes after every write and sync asked for before,
        // as it would had each been carried out at once: redb cuts the file
        // right after a commit's sync, and the commit before it may use pages
        // past the new end until that sync is on disk (a power loss in
        // between, with the cut already on disk, left a store that did not
        // open). A longer one need not wait.
        if len < self.len()? {
            self.shared.drain()?;
        }
        self.file.set_len(len)
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        if self.direct {
            return self.sync_direct();
        }
        let mut state = self.shared.lock();
        state.check()?;
        self.shared.close_epoch(&mut state, true);
        self.shared.throttle(state).map(drop)
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        if self.direct {
            return self.write_direct(offset, data);
        }
        let end = offset + data.len() as u64;
        let mut state = self.shared.lock();
        state.check()?;
        // A page rewritten at the same place and size replaces the held one;
        // after any other overlap (rare), the held pages go first.
        let clash = state
            .open
            .overlapping(offset, end)
            .any(|(&s, d)| s != offset || d.len() != data.len());
        if clash {
            self.shared.close_epoch(&mut state, false);
        }
        state.open.insert(offset, Arc::from(data));
        if state.open.bytes >= HOLD_LIMIT {
            self.shared.close_epoch(&mut state, false);
            self.shared.throttle(state).map(drop)?;
        }
        Ok(())
    }

    fn close(&self) -> Result<(), io::Error> {
        let finished = self.finish();
        self.locks.close()?;
        finished
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.locks.try_lock_range(start, end)
    }

    fn try_lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.locks.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.locks.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.locks.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.locks.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.locks.query_lock_range(start, end)
    }
}

#[cfg(test)]
#[path = "page_file_tests.rs"]
mod tests;
