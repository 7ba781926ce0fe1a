//! The page flusher's side of `page_file.rs`: the thread that writes each
//! closed epoch's pages in sorted runs and syncs, pacing the disk as it goes.

use std::io::{self, IoSlice};
use std::sync::atomic::Ordering;

use super::{HeaderCopy, Pages, Shared};
use crate::embedded::disk::DiskFile;

/// Most buffers one `pwritev` takes (Linux's `IOV_MAX`).
const MAX_IOV: usize = 1024;

/// The flusher thread: writes the front epoch, syncs if it ends in a sync,
/// drops it; stops on a failure (leaving the epoch visible to reads) or when
/// told to and nothing is left.
pub(super) fn flush_loop(shared: &Shared, mut header: HeaderCopy) {
    loop {
        let (run, sync, durable) = {
            let mut state = shared.lock();
            loop {
                if state.failed.is_none() {
                    if let Some(front) = state.queue.front() {
                        break (front.run.clone(), front.sync, state.durable);
                    }
                }
                if state.stop {
                    return;
                }
                state = shared.wait(state);
            }
        };
        #[cfg(test)]
        shared.at_pause.store(true, Ordering::Release);
        #[cfg(test)]
        let _paused = shared.pause.lock().unwrap_or_else(|e| e.into_inner());
        let hurry = || shared.awaited.load(Ordering::Acquire) > durable;
        let result = write_epoch(&*shared.file, &mut header, &run.pages, sync.is_some(), hurry);
        let mut state = shared.lock();
        match result {
            Ok(()) => {
                state.queue.pop_front();
                state.queued_bytes -= run.bytes;
                shared.written.fetch_add(run.bytes as u64, Ordering::Relaxed);
                if let Some(n) = sync {
                    state.durable = n;
                }
            }
            Err(e) => shared.fail(&mut state, &e),
        }
        shared.changed.notify_all();
    }
}

/// Writes an epoch's `pages`, then syncs if `sync`; a header among them goes
/// after its last synced state went to the copy (see `header_copy.rs`).
fn write_epoch(
    file: &dyn DiskFile,
    header: &mut HeaderCopy,
    pages: &Pages,
    sync: bool,
    hurry: impl Fn() -> bool,
) -> io::Result<()> {
    let new_header = pages.get(&0);
    if let Some(h) = new_header {
        header.before_writing(h.len())?;
    }
    write_runs(file, pages, hurry)?;
    if let Some(h) = new_header {
        header.wrote(h);
    }
    if sync {
        file.sync_data()?;
        header.synced();
    }
    Ok(())
}

/// Writes `pages` to `file`, one `pwritev` per run of adjacent pages, starting
/// the disk on each [`WRITEBACK_CHUNK`] as it goes unless in a `hurry` (see
/// [`Writeback`]).
fn write_runs(file: &dyn DiskFile, pages: &Pages, hurry: impl Fn() -> bool) -> io::Result<()> {
    let mut writeback = Writeback {
        hurry: &hurry,
        from: 0,
        to: 0,
        bytes: 0,
    };
    let mut run: Vec<IoSlice<'_>> = Vec::with_capacity(MAX_IOV);
    let mut run_start = 0;
    let mut run_end = 0;
    for (&start, data) in pages {
        if run.len() == MAX_IOV || (!run.is_empty() && start != run_end) {
            file.pwritev(&mut run, run_start)?;
            writeback.wrote(file, run_start, run_end)?;
            run.clear();
        }
        if run.is_empty() {
            run_start = start;
        }
        run.push(IoSlice::new(data));
        run_end = start + data.len() as u64;
    }
    if !run.is_empty() {
        file.pwritev(&mut run, run_start)?;
        writeback.wrote(file, run_start, run_end)?;
    }
    writeback.flush(file)
}

/// Bytes of page writes the flusher sends to the disk at a time.
const WRITEBACK_CHUNK: u64 = 1 << 20;

/// Sends written pages to the disk a chunk at a time, waiting for each, so the
/// disk's queue never holds more than a chunk of them. Left to `fdatasync`, a
/// checkpoint's tens of megabytes went to the disk at once, and the log's small
/// `fdatasync`s queued behind all of it; in chunks they wait for one chunk at
/// most, and the pages reach the disk no later. Durability still comes from the
/// epoch's `fdatasync`. But when the log waits for the sync, no log `fdatasync`
/// competes, and waiting for each chunk made a checkpoint of small writes take
/// markedly longer, so then the pages go to the disk all at once
/// (BENCHMARKS.md, "Checkpoint writeback in chunks against all at once").
struct Writeback<'a> {
    hurry: &'a dyn Fn() -> bool,
    /// The byte range written since the last chunk was sent, and how many
    /// bytes of it were written.
    from: u64,
    to: u64,
    bytes: u64,
}

impl Writeback<'_> {
    /// After `start..end` was written (runs come in offset order).
    fn wrote(&mut self, file: &dyn DiskFile, start: u64, end: u64) -> io::Result<()> {
        if self.bytes == 0 {
            self.from = start;
        }
        self.to = end;
        self.bytes += end - start;
        if self.bytes >= WRITEBACK_CHUNK {
            self.flush(file)?;
        }
        Ok(())
    }

    fn flush(&mut self, file: &dyn DiskFile) -> io::Result<()> {
        if self.bytes > 0 && !(self.hurry)() {
            file.write_back(self.from, self.to - self.from)?;
        }
        self.bytes = 0;
        Ok(())
    }
}
