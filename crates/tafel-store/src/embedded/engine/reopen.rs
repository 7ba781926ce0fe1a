//! Writes resume by themselves after a full disk. redb refuses every write
//! after one failed, so the store cannot simply try again: once the disk has
//! room, the broken opening is closed and the store opened afresh, which
//! replays the log (every acknowledged write is in it or in the store file)
//! and takes writes again. Until then reads go on from the broken opening;
//! only while the new one opens (milliseconds) do requests get ServerBusy.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

use super::opening::Opening;
use crate::embedded::Inner;

/// Free bytes the disk must have before the store is opened again: room for
/// the log's replay and a checkpoint or two, so the reopened store does not
/// fill the disk again at once.
pub(in crate::embedded) const ROOM: u64 = 32 << 20;
/// How often the disk's free space is looked at.
const POLL: Duration = Duration::from_millis(250);
/// How long requests still holding the broken opening are waited for.
const DRAIN: Duration = Duration::from_secs(10);

/// Starts the reopen thread, unless one is at work.
pub(in crate::embedded) fn start(inner: &Arc<Inner>) {
    if inner.reopening.swap(true, Ordering::AcqRel) {
        return;
    }
    tracing::warn!(
        free_needed_mb = ROOM >> 20,
        "the disk is full: writes fail; they resume by themselves once there is room"
    );
    // A weak hold: a store dropped meanwhile ends the thread.
    let weak = Arc::downgrade(inner);
    let spawned = thread::Builder::new().name("tafel-reopen".into()).spawn(move || {
        reopen_when_room(&weak);
        if let Some(inner) = weak.upgrade() {
            inner.reopening.store(false, Ordering::Release);
        }
    });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "could not start the reopen thread; writes fail until a restart");
        inner.reopening.store(false, Ordering::Release);
    }
}

fn reopen_when_room(weak: &Weak<Inner>) {
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if inner.stopped.load(Ordering::Acquire) {
            return;
        }
        match inner.disk.free_bytes() {
            Ok(free) if free >= ROOM => {}
            Ok(_) => {
                thread::sleep(POLL);
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not tell the disk's free space");
                thread::sleep(POLL * 4);
                continue;
            }
        }
        if let Some(old) = inner.opening.swap(None) {
            // Its page flusher failed: it writes nothing more.
            let written = old.pages.bytes_written();
            inner.written_before.fetch_add(written, Ordering::Relaxed);
            close(old);
        }
        match Opening::open(&*inner.disk, &inner.options, inner.stats.clone(), &inner.feed, None) {
            Ok(opening) => {
                let opening = Arc::new(opening);
                if inner.stopped.load(Ordering::Acquire) {
                    // Shut down meanwhile: leave nothing running.
                    close(opening);
                    return;
                }
                inner.opening.store(Some(opening));
                tracing::info!("the store was opened again; writes resume");
                return;
            }
            Err(e) => {
                // The store stays closed (requests get ServerBusy) until an open succeeds.
                tracing::error!(error = %e, "opening the store again failed; trying again");
                thread::sleep(POLL * 4);
            }
        }
    }
}

/// Stops `opening`'s writer and waits, for a while, for the requests still
/// holding it: its redb file is closed, and its lock let go, with the last.
fn close(opening: Arc<Opening>) {
    match opening.stop() {
        Ok(Some(writer)) => {
            if writer.join().is_err() {
                tracing::error!("the writer thread panicked");
            }
        }
        Ok(None) => {}
        Err(e) => tracing::error!(error = %e, "stopping the writer failed"),
    }
    let deadline = Instant::now() + DRAIN;
    while Arc::strong_count(&opening) > 1 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
}
