//! PageFile: held pages, sorted runs, reads that overlay what is held.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::*;
use crate::embedded::disk::{Disk, OsDisk};
use crate::embedded::scan_tests::{tempdir, TempDir};

fn open(dir: &TempDir) -> (PageFile, File) {
    let disk = OsDisk::new(dir.path()).expect("dir");
    let file = disk.open("f").expect("open");
    let peek = File::open(dir.path().join("f")).expect("open again");
    let header = HeaderCopy::open(&disk, &*file).expect("header");
    let f = PageFile::new(file, disk.locks("f").expect("locks"), header, false).expect("backend");
    (f, peek)
}

/// `sync_data`, then the wait for the flusher that makes it true.
fn sync(f: &PageFile) {
    f.sync_data().expect("sync");
    let durable = f.durable();
    durable.wait(durable.last_requested()).expect("synced");
}

/// Waits (up to 30 s) until `event` holds: the point where a wrong
/// implementation would already have gone ahead.
fn until(what: &str, event: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !event() {
        assert!(std::time::Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

fn page(byte: u8, len: usize) -> Vec<u8> {
    vec![byte; len]
}

fn file_bytes(peek: &File, offset: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0; len];
    peek.read_exact_at(&mut out, offset).expect("read the file");
    out
}

#[test]
fn held_writes_read_back_and_reach_the_file_at_sync() {
    let dir = tempdir().expect("temp dir");
    let (f, peek) = open(&dir);
    f.set_len(8 * 4096).expect("set_len");
    // Out of order, two runs: pages 1..=3 and page 6.
    for (i, b) in [(3u64, 3u8), (1, 1), (6, 6), (2, 2)] {
        f.write(i * 4096, &page(b, 4096)).expect("write");
    }
    assert_eq!(
        file_bytes(&peek, 4096, 4096),
        page(0, 4096),
        "held, not yet in the file"
    );
    let mut out = vec![0xff; 3 * 4096];
    f.read(4096, &mut out).expect("read");
    assert_eq!(out, [page(1, 4096), page(2, 4096), page(3, 4096)].concat());
    // A read across held and unwritten pages mixes the two.
    let mut out = vec![0xff; 2 * 4096];
    f.read(5 * 4096, &mut out).expect("read");
    assert_eq!(out, [page(0, 4096), page(6, 4096)].concat());

    sync(&f);
    let all = file_bytes(&peek, 0, 8 * 4096);
    let want = [0u8, 1, 2, 3, 0, 0, 6, 0]
        .iter()
        .flat_map(|&b| page(b, 4096))
        .collect::<Vec<_>>();
    assert_eq!(all, want);
    assert!(f.shared.lock().queue.is_empty());
}

#[test]
fn a_sync_is_durable_only_once_the_flusher_has_written_and_synced_it() {
    let dir = tempdir().expect("temp dir");
    let (f, peek) = open(&dir);
    f.set_len(4096).expect("set_len");
    let paused = f.shared.pause.lock().expect("pause");
    f.write(0, &page(5, 4096)).expect("write");
    f.sync_data().expect("sync returns without waiting for the disk");
    let durable = f.durable();
    let n = durable.last_requested();
    until("the flusher reached the pause", || {
        f.shared.at_pause.load(Ordering::Acquire)
    });
    assert!(f.shared.lock().durable < n, "durable while the flusher was held");
    assert_eq!(file_bytes(&peek, 0, 4096), page(0, 4096));
    let mut out = vec![0; 4096];
    f.read(0, &mut out).expect("read");
    assert_eq!(out, page(5, 4096), "reads see the queued page");
    let waiter = std::thread::spawn(move || durable.wait(n));
    until("the waiter waits", || f.shared.awaited.load(Ordering::Acquire) >= n);
    assert!(!waiter.is_finished(), "wait returned before the sync");
    drop(paused);
    waiter.join().expect("waiter").expect("synced");
    assert_eq!(file_bytes(&peek, 0, 4096), page(5, 4096));
}

#[test]
fn a_shorter_length_waits_for_the_syncs_asked_for_before_it() {
    let dir = tempdir().expect("temp dir");
    let (f, _peek) = open(&dir);
    f.set_len(4 * 4096).expect("set_len");
    let durable = f.durable();
    let paused = durable.pause();
    f.write(0, &page(7, 4096)).expect("write");
    f.sync_data().expect("sync");
    let n = durable.last_requested();
    let shared = f.shared.clone();
    let cut = std::thread::spawn(move || {
        f.set_len(2 * 4096).expect("set_len");
        f
    });
    until("the cut waits for the flusher", || {
        shared.draining.load(Ordering::Acquire)
    });
    assert!(
        !cut.is_finished(),
        "the file was cut before the sync before it was on disk"
    );
    drop(paused);
    let f = cut.join().expect("cut");
    assert!(f.shared.lock().durable >= n);
    assert_eq!(f.len().expect("len"), 2 * 4096);
}

#[test]
fn a_rewrite_of_a_held_page_replaces_it() {
    let dir = tempdir().expect("temp dir");
    let (f, peek) = open(&dir);
    f.set_len(4096).expect("set_len");
    f.write(0, &page(1, 4096)).expect("write");
    f.write(0, &page(2, 4096)).expect("rewrite");
    assert_eq!(f.shared.lock().open.bytes, 4096);
    sync(&f);
    assert_eq!(file_bytes(&peek, 0, 4096), page(2, 4096));
}

#[test]
fn an_overlapping_write_of_another_size_lands_after_the_held_one() {
    let dir = tempdir().expect("temp dir");
    let (f, peek) = open(&dir);
    f.set_len(4 * 4096).expect("set_len");
    // A 16 KiB page, then a 4 KiB page inside it (a freed page reused at
    // another order): the later write must win where they overlap.
    f.write(0, &page(1, 4 * 4096)).expect("write");
    f.write(4096, &page(2, 4096)).expect("write inside");
    let mut out = vec![0; 4 * 4096];
    f.read(0, &mut out).expect("read");
    let want = [page(1, 4096), page(2, 4096), page(1, 2 * 4096)].concat();
    assert_eq!(out, want);
    sync(&f);
    assert_eq!(file_bytes(&peek, 0, 4 * 4096), want);

    // The other way round: the small page first, then the large one over
    // it, which sorts before it but was written after.
    f.write(4096, &page(3, 4096)).expect("write");
    f.write(0, &page(4, 4 * 4096)).expect("write over");
    let mut out = vec![0; 4 * 4096];
    f.read(0, &mut out).expect("read");
    assert_eq!(out, page(4, 4 * 4096));
    sync(&f);
    assert_eq!(file_bytes(&peek, 0, 4 * 4096), page(4, 4 * 4096));
}

#[test]
fn held_pages_past_a_shorter_length_do_not_grow_the_file_back() {
    let dir = tempdir().expect("temp dir");
    let (f, peek) = open(&dir);
    f.set_len(4 * 4096).expect("set_len");
    f.write(3 * 4096, &page(9, 4096)).expect("write");
    f.set_len(2 * 4096).expect("shrink");
    sync(&f);
    assert_eq!(f.len().expect("len"), 2 * 4096);
    assert_eq!(peek.metadata().expect("metadata").len(), 2 * 4096);
}

#[test]
fn a_read_past_the_files_end_is_served_from_held_pages() {
    let dir = tempdir().expect("temp dir");
    let (f, _peek) = open(&dir);
    f.write(0, &page(4, 4096)).expect("write");
    f.write(4096, &page(5, 4096)).expect("write");
    assert_eq!(f.len().expect("len"), 2 * 4096);
    let mut out = vec![0; 2 * 4096];
    f.read(0, &mut out).expect("read spanning two held pages");
    assert_eq!(out, [page(4, 4096), page(5, 4096)].concat());
    let mut out = vec![0; 3 * 4096];
    assert!(f.read(0, &mut out).is_err(), "a read past everything still fails");
}

#[test]
fn too_many_held_bytes_go_to_the_file_without_a_sync() {
    let dir = tempdir().expect("temp dir");
    let (f, peek) = open(&dir);
    let pages = (HOLD_LIMIT / 4096) as u64;
    f.set_len(pages * 4096).expect("set_len");
    for i in 0..pages {
        f.write(i * 4096, &page(7, 4096)).expect("write");
    }
    assert!(f.shared.lock().open.pages.is_empty(), "the limit closed the epoch");
    f.shared.drain().expect("drain");
    assert_eq!(file_bytes(&peek, (pages - 1) * 4096, 4096), page(7, 4096));
}

#[test]
fn a_redb_database_over_it_reopens_with_its_data() {
    const T: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("t");
    let dir = tempdir().expect("temp dir");
    let value = page(3, 3000);
    for round in 0..2u64 {
        let (f, _peek) = open(&dir);
        let db = redb::Database::builder().create_with_backend(f).expect("db");
        let txn = db.begin_write().expect("write");
        {
            let mut t = txn.open_table(T).expect("table");
            for i in 0..2000 {
                t.insert(round * 10_000 + i, value.as_slice()).expect("insert");
            }
        }
        txn.commit().expect("commit");
        drop(db);
    }
    let (f, _peek) = open(&dir);
    let db = redb::Database::builder().create_with_backend(f).expect("db");
    let txn = redb::ReadableDatabase::begin_read(&db).expect("read");
    let t = txn.open_table(T).expect("table");
    assert_eq!(redb::ReadableTableMetadata::len(&t).expect("len"), 4000);
    for k in [0, 1999, 10_000, 11_999] {
        assert_eq!(t.get(k).expect("get").expect("present").value(), value.as_slice());
    }
}

/// The in-memory store's file (`Disk::files_in_memory`): no flusher, and a
/// full file fails like a flusher's failed write, not redb's next read.
fn open_direct(cap_pages: u64) -> PageFile {
    let disk = crate::embedded::scratch_disk::ScratchDisk::memory(cap_pages * 4096);
    let file = disk.open("f").expect("open");
    let header = HeaderCopy::open(&disk, &*file).expect("header");
    PageFile::new(file, disk.locks("f").expect("locks"), header, true).expect("backend")
}

#[test]
fn direct_writes_reach_the_file_at_once_and_syncs_are_durable_on_return() {
    let f = open_direct(64);
    f.write(0, &page(1, 4096)).expect("write");
    f.write(8192, &page(2, 4096)).expect("write");
    assert_eq!(f.shared.lock().open.bytes, 0, "nothing held");
    assert_eq!(f.durable().bytes_written(), 8192);
    let mut out = vec![0; 12288];
    f.read(0, &mut out).expect("read");
    assert_eq!((out[0], out[4096], out[8192]), (1, 0, 2));
    // A page rewritten whole is overwritten in place; all zeros, it is dropped.
    f.write(0, &page(7, 4096)).expect("rewrite");
    f.write(8192, &page(0, 4096)).expect("zero");
    f.read(0, &mut out).expect("read");
    assert_eq!((out[0], out[4095], out[8192]), (7, 7, 0));
    f.sync_data().expect("sync");
    let durable = f.durable();
    assert_eq!(durable.last_requested(), 1);
    durable.wait(1).expect("durable on return");
}

#[test]
fn a_direct_write_past_the_cap_fails_its_epoch_then_every_write_and_reads_go_on() {
    let f = open_direct(2);
    f.write(0, &page(1, 4096)).expect("write");
    f.write(4096, &page(2, 4096)).expect("write");
    // The third page does not fit: held, and the rest of its epoch with it.
    f.write(8192, &page(3, 4096)).expect("held, as the flusher would");
    f.write(12288, &page(4, 4096)).expect("held");
    // redb reads a page at a time.
    let read = |at: u64| {
        let mut out = vec![0; 4096];
        f.read(at, &mut out).expect("reads still work");
        out[0]
    };
    assert_eq!((read(0), read(4096), read(8192), read(12288)), (1, 2, 3, 4));
    f.sync_data().expect("the epoch closes");
    let durable = f.durable();
    let err = durable.wait(durable.last_requested()).expect_err("not durable");
    assert_eq!(err.kind(), io::ErrorKind::StorageFull, "{err}");
    assert_eq!(durable.failure().map(|(k, _)| k), Some(io::ErrorKind::StorageFull));
    assert!(f.write(16384, &page(5, 4096)).is_err(), "later writes fail");
    assert!(f.sync_data().is_err(), "later syncs fail");
    assert_eq!((read(4096), read(8192)), (2, 3));
}
