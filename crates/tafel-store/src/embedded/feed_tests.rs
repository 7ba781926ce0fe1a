//! The embedded store's change feed: every committed write recorded once, in
//! order, with its op and value; a refused write not at all; the feed replayed
//! from the log with the data after a crash; retention by age and by size.

use std::time::Duration;

use super::scan_tests::{copy_store_files, open, runtime, tempdir, ACCOUNT};
use super::EmbeddedStore;
use crate::feed::{ChangeOp, ChangesFrom, ChangesPage, ChangesRead, ChangesRequest, FeedSettings, Retention};
use crate::key::EntityKey;
use crate::traits::{Mutation, Store};

fn feed_on(store: &EmbeddedStore, age: Duration, max_bytes: Option<u64>) {
    let settings = FeedSettings {
        all: Some(Retention { age, max_bytes }),
        ..FeedSettings::default()
    };
    store.set_change_feed(settings).expect("feed on");
}

/// Turns the feed on and creates table "T", its first change.
async fn recording(store: &EmbeddedStore, age: Duration, max_bytes: Option<u64>) {
    feed_on(store, age, max_bytes);
    store.create_table(ACCOUNT, "T").await.expect("create");
}

async fn write(store: &EmbeddedStore, rows: &[&str], m: impl Fn(usize) -> Mutation + Send + Sync + 'static) {
    let keys: Vec<EntityKey> = rows.iter().map(|r| EntityKey::new("p", r)).collect();
    let n = keys.len();
    store
        .write_entities(ACCOUNT, "T", keys, Box::new(move |_| (0..n).map(&m).collect()))
        .await
        .expect("write");
}

async fn page(store: &EmbeddedStore, from: ChangesFrom) -> ChangesRead {
    let request = ChangesRequest {
        from,
        limit: 1000,
        table: None,
    };
    store.read_changes(ACCOUNT, &request).await.expect("read")
}

async fn all(store: &EmbeddedStore) -> ChangesPage {
    match page(store, ChangesFrom::After(0)).await {
        ChangesRead::Page(p) => p,
        other => panic!("not a page: {other:?}"),
    }
}

/// (position, txn, op, row key, value) of a change.
type Summary = (u64, u64, ChangeOp, Option<String>, Option<Vec<u8>>);

fn summary(p: &ChangesPage) -> Vec<Summary> {
    p.changes
        .iter()
        .map(|c| {
            (
                c.position,
                c.txn,
                c.op,
                c.key.as_ref().map(|k| k.keys().1),
                c.value.clone(),
            )
        })
        .collect()
}

#[test]
fn every_write_is_recorded_once_in_order_and_a_batch_shares_its_txn() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        assert!(matches!(
            page(&store, ChangesFrom::Oldest).await,
            ChangesRead::NotEnabled
        ));
        recording(&store, Duration::from_secs(3600), None).await;
        write(&store, &["a"], |_| Mutation::Put(b"1".to_vec())).await;
        write(&store, &["a"], |_| Mutation::Put(b"2".to_vec())).await;
        write(&store, &["a"], |_| Mutation::Merge(b"3".to_vec())).await;
        write(&store, &["b"], |_| Mutation::Merge(b"4".to_vec())).await;
        // A refusal (no mutations) and a Keep record nothing.
        store
            .write_entities(ACCOUNT, "T", vec![EntityKey::new("p", "a")], Box::new(|_| Vec::new()))
            .await
            .expect("refused write");
        write(&store, &["a"], |_| Mutation::Keep).await;
        write(&store, &["a", "c", "d"], |i| match i {
            0 => Mutation::Delete,
            _ => Mutation::Put(vec![b'5' + i as u8]),
        })
        .await;
        store.delete_table(ACCOUNT, "t").await.expect("delete");
        let p = all(&store).await;
        let s = |r: &str| Some(r.to_owned());
        let v = |b: &[u8]| Some(b.to_vec());
        assert_eq!(
            summary(&p),
            vec![
                (1, 1, ChangeOp::CreateTable, None, None),
                (2, 2, ChangeOp::Insert, s("a"), v(b"1")),
                (3, 3, ChangeOp::Replace, s("a"), v(b"2")),
                (4, 4, ChangeOp::Merge, s("a"), v(b"3")),
                (5, 5, ChangeOp::Insert, s("b"), v(b"4")),
                (6, 6, ChangeOp::Delete, s("a"), None),
                (7, 6, ChangeOp::Insert, s("c"), v(b"6")),
                (8, 6, ChangeOp::Insert, s("d"), v(b"7")),
                (9, 9, ChangeOp::DeleteTable, None, None),
            ]
        );
        assert!(p.changes.iter().all(|c| c.table == "T"));
        assert_eq!((p.head, p.next_after), (9, 9));
        // Paging, the table filter, latest, and a position past the head.
        let request = ChangesRequest {
            from: ChangesFrom::After(3),
            limit: 2,
            table: Some("t".into()),
        };
        let ChangesRead::Page(two) = store.read_changes(ACCOUNT, &request).await.expect("read") else {
            panic!("not a page")
        };
        assert_eq!(two.changes.iter().map(|c| c.position).collect::<Vec<_>>(), [4, 5]);
        assert_eq!(two.next_after, 5);
        let ChangesRead::Page(latest) = page(&store, ChangesFrom::Latest).await else {
            panic!("not a page")
        };
        assert!(latest.changes.is_empty() && latest.next_after == 9);
        assert!(matches!(
            page(&store, ChangesFrom::After(10)).await,
            ChangesRead::Rewound { head: 9 }
        ));
        store.shutdown().await.expect("shutdown");
        drop(store);
        // Positions go on after a reopen, never reused.
        let store = open(dir.path());
        recording(&store, Duration::from_secs(3600), None).await;
        assert_eq!(all(&store).await.head, 10);
        store.shutdown().await.expect("shutdown");
    });
}

// The paused flusher stands for a crash before the next checkpoint reaches disk.
#[allow(clippy::await_holding_lock)]
#[test]
fn the_feed_replays_with_the_data_after_a_crash() {
    let dir = tempdir().expect("temp dir");
    let crashed = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        recording(&store, Duration::from_secs(3600), None).await;
        write(&store, &["a", "b"], |i| Mutation::Put(vec![i as u8])).await;
        let pages = store.opening_now().pages.clone();
        pages.wait(pages.last_requested()).expect("durable");
        let paused = pages.pause();
        // These live only in the log.
        for r in ["c", "d", "e"] {
            write(&store, &[r], |_| Mutation::Put(b"x".to_vec())).await;
        }
        write(&store, &["a"], |_| Mutation::Delete).await;
        let before = summary(&all(&store).await);
        assert_eq!(before.len(), 7);
        copy_store_files(dir.path(), crashed.path());
        drop(paused);
        store.shutdown().await.expect("shutdown");

        let store = open(crashed.path());
        feed_on(&store, Duration::from_secs(3600), None);
        assert_eq!(summary(&all(&store).await), before, "replayed from the log");
        write(&store, &["f"], |_| Mutation::Put(b"y".to_vec())).await;
        assert_eq!(all(&store).await.head, 8);
        store.shutdown().await.expect("shutdown");
    });
}

async fn entity(store: &EmbeddedStore, row: &str) -> Option<Vec<u8>> {
    store
        .get_entity(ACCOUNT, "T", &EntityKey::new("p", row))
        .await
        .expect("read")
}

/// A value of `len` bytes, different for each `seed`.
fn value_of(seed: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + seed * 7) as u8).collect()
}

// The paused flusher stands for a crash before the next checkpoint reaches disk.
#[allow(clippy::await_holding_lock)]
#[test]
fn a_change_logs_its_entity_value_once_and_replays_whole_after_a_crash() {
    let dir = tempdir().expect("temp dir");
    let crashed = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        recording(&store, Duration::from_secs(3600), None).await;
        write(&store, &["a", "b"], |i| Mutation::Put(value_of(i, 300))).await;
        let pages = store.opening_now().pages.clone();
        pages.wait(pages.last_requested()).expect("durable");
        let paused = pages.pause();
        let logged = || store.inner.stats.log_bytes.load(std::sync::atomic::Ordering::Relaxed);
        let start = logged();
        // In the log only: a batch of new rows (inserted as a run), a replace
        // and a merge of existing ones, a delete, and a new row on its own.
        let batch: Vec<String> = (0..20).map(|i| format!("n{i:02}")).collect();
        let names: Vec<&str> = batch.iter().map(String::as_str).collect();
        write(&store, &names, |i| Mutation::Put(value_of(10 + i, 500))).await;
        write(&store, &["a"], |_| Mutation::Put(value_of(40, 800))).await;
        write(&store, &["b"], |_| Mutation::Merge(value_of(41, 900))).await;
        write(&store, &["n03"], |_| Mutation::Delete).await;
        write(&store, &["z"], |_| Mutation::Put(value_of(42, 1000))).await;
        let values = 20 * 500 + 800 + 900 + 1000;
        let log = logged() - start;
        // Logged twice (the row and its change) it would be over 2 × values.
        assert!(log < values + values / 2, "{log} bytes of log for {values} of values");
        let before = summary(&all(&store).await);
        assert_eq!(before.len(), 3 + 20 + 4);
        let mut stored = Vec::new();
        for r in ["a", "b", "n00", "n19", "z"] {
            stored.push(entity(&store, r).await);
        }
        copy_store_files(dir.path(), crashed.path());
        drop(paused);
        store.shutdown().await.expect("shutdown");

        let store = open(crashed.path());
        feed_on(&store, Duration::from_secs(3600), None);
        let after = summary(&all(&store).await);
        assert_eq!(after, before, "replayed from the log");
        assert_eq!(after[5].4.as_deref(), Some(&value_of(12, 500)[..]));
        for (r, value) in ["a", "b", "n00", "n19", "z"].into_iter().zip(stored) {
            assert_eq!(entity(&store, r).await, value, "row {r}");
        }
        store.shutdown().await.expect("shutdown");
    });
}

/// Reads until retention has dropped something (it runs every second).
async fn until_trimmed(store: &EmbeddedStore) -> ChangesRead {
    for _ in 0..100 {
        let read = page(store, ChangesFrom::After(0)).await;
        if matches!(read, ChangesRead::Expired { .. }) {
            return read;
        }
        // The writer runs retention on its own thread: this one may block.
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("retention dropped nothing in 10 s")
}

#[test]
fn retention_drops_changes_past_their_age() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        recording(&store, Duration::from_secs(1), None).await;
        write(&store, &["a"], |_| Mutation::Put(b"1".to_vec())).await;
        // Everything went: the oldest kept is past the head.
        assert!(matches!(
            until_trimmed(&store).await,
            ChangesRead::Expired { oldest: 3 }
        ));
        let ChangesRead::Page(p) = page(&store, ChangesFrom::Latest).await else {
            panic!("not a page")
        };
        assert_eq!((p.head, p.changes.len()), (2, 0));
        // Reading from the head goes on.
        write(&store, &["b"], |_| Mutation::Put(b"2".to_vec())).await;
        let ChangesRead::Page(p) = page(&store, ChangesFrom::After(2)).await else {
            panic!("not a page")
        };
        assert_eq!(p.changes.len(), 1);
        store.shutdown().await.expect("shutdown");
    });
}

#[test]
fn retention_keeps_each_account_under_its_size() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        recording(&store, Duration::from_secs(3600), Some(2000)).await;
        for i in 0..20 {
            write(&store, &[&format!("r{i}")], |_| Mutation::Put(vec![7; 200])).await;
        }
        let ChangesRead::Expired { oldest } = until_trimmed(&store).await else {
            panic!("not expired")
        };
        // About 2000 bytes of ~240-byte changes: the newest eight or so stay.
        assert!((10..=17).contains(&oldest), "oldest kept {oldest}");
        let ChangesRead::Page(p) = page(&store, ChangesFrom::Oldest).await else {
            panic!("not a page")
        };
        assert_eq!(p.changes.first().map(|c| c.position), Some(oldest));
        assert_eq!(p.changes.last().map(|c| c.position), Some(21));
        store.shutdown().await.expect("shutdown");
    });
}

async fn after(store: &EmbeddedStore, p: u64) -> ChangesRead {
    page(store, ChangesFrom::After(p)).await
}

fn positions(read: ChangesRead) -> (Vec<u64>, u64) {
    match read {
        ChangesRead::Page(p) => (p.changes.iter().map(|c| c.position).collect(), p.head),
        other => panic!("not a page: {other:?}"),
    }
}

// The paused flusher stands for a crash before the next checkpoint reaches disk.
#[allow(clippy::await_holding_lock)]
#[test]
fn a_restore_never_reuses_a_feed_position() {
    let dir = tempdir().expect("temp dir");
    let crashed = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        recording(&store, Duration::from_secs(3600), None).await;
        write(&store, &["a", "b"], |i| Mutation::Put(vec![i as u8])).await;
        store.save_savepoint("s").await.expect("save");
        for r in ["c", "d", "e"] {
            write(&store, &[r], |_| Mutation::Put(b"x".to_vec())).await;
        }
        // A reader has read up to 5; the restore undoes 4..=6.
        store.restore_savepoint("s").await.expect("restore");
        assert!(matches!(after(&store, 5).await, ChangesRead::Undone { restored: 3 }));
        assert!(matches!(after(&store, 6).await, ChangesRead::Undone { restored: 3 }));
        // The head shown is the restored one until the next write (see below).
        assert_eq!(
            positions(after(&store, 2).await),
            (vec![3], 3),
            "behind the restored head: as before"
        );
        assert_eq!(positions(after(&store, 3).await), (vec![], 3));
        // New changes take positions past every one given out before the restore.
        let pages = store.opening_now().pages.clone();
        pages.wait(pages.last_requested()).expect("durable");
        let paused = pages.pause();
        write(&store, &["x", "y"], |_| Mutation::Put(b"y".to_vec())).await;
        assert!(
            matches!(after(&store, 5).await, ChangesRead::Undone { restored: 3 }),
            "not 7 and 8"
        );
        assert_eq!(positions(after(&store, 3).await), (vec![7, 8], 8));
        assert_eq!(positions(after(&store, 8).await), (vec![], 8));
        // A crash: the restore is on disk, the writes after it only in the log.
        copy_store_files(dir.path(), crashed.path());
        drop(paused);
        store.shutdown().await.expect("shutdown");

        let store = open(crashed.path());
        feed_on(&store, Duration::from_secs(3600), None);
        assert!(matches!(after(&store, 5).await, ChangesRead::Undone { restored: 3 }));
        assert_eq!(positions(after(&store, 3).await), (vec![7, 8], 8));
        // Restoring the same snapshot again undoes 4..=8 as one range.
        store.restore_savepoint("s").await.expect("restore");
        assert!(matches!(after(&store, 8).await, ChangesRead::Undone { restored: 3 }));
        write(&store, &["z"], |_| Mutation::Put(b"z".to_vec())).await;
        assert_eq!(positions(after(&store, 3).await), (vec![9], 9));
        store.shutdown().await.expect("shutdown");
    });
}

/// Right after a restore the head was the end of the range the restore undid:
/// a reader starting there (`after=latest`, or the head noted to start a copy)
/// was told at its next read that it had read undone changes, and a long poll
/// from there failed as soon as anything was written.
#[test]
fn a_reader_starting_at_the_head_right_after_a_restore_is_not_told_it_read_undone_changes() {
    let dir = tempdir().expect("temp dir");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = open(dir.path());
        recording(&store, Duration::from_secs(3600), None).await;
        store.save_savepoint("s").await.expect("save");
        write(&store, &["a", "b"], |i| Mutation::Put(vec![i as u8])).await;
        store.restore_savepoint("s").await.expect("restore");
        let ChangesRead::Page(latest) = page(&store, ChangesFrom::Latest).await else {
            panic!("not a page")
        };
        assert_eq!((latest.next_after, latest.head), (1, 1), "the restored head");
        // Nothing new: a wait from the head shown waits.
        let started = std::time::Instant::now();
        let until = started + Duration::from_millis(300);
        store.wait_for_changes(ACCOUNT, latest.head, until).await;
        assert!(started.elapsed() >= Duration::from_millis(250), "woke with nothing new");
        write(&store, &["c"], |_| Mutation::Put(b"c".to_vec())).await;
        assert_eq!(positions(after(&store, latest.next_after).await), (vec![4], 4));
        // A reader that read the undone changes is still told.
        assert!(matches!(after(&store, 3).await, ChangesRead::Undone { restored: 1 }));
        store.shutdown().await.expect("shutdown");
    });
}

/// A batch's changes go past the account's head in order, and so do single
/// writes' changes when the write buffer is folded. Recorded one by one between
/// two accounts' changes, each full leaf split in half: the feed took half again
/// the pages its rows need.
#[test]
fn recorded_changes_fill_their_leaves_from_batches_and_from_the_write_buffer() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        recording(&store, Duration::from_secs(3600), None).await;
        // Another account's changes sort after this one's.
        store.create_table("zzaccount", "T").await.expect("create");
        // 1000 changes of ~830 bytes, four to a 4 KiB page, in batches of 100.
        for b in 0..10 {
            let rows: Vec<String> = (b * 100..(b + 1) * 100).map(|i| format!("{i:05}")).collect();
            let rows: Vec<&str> = rows.iter().map(String::as_str).collect();
            write(&store, &rows, |i| Mutation::Put(vec![b'v'; 760 + i % 7])).await;
        }
        let batched = store.change_leaf_pages();
        assert!(batched <= 265, "{batched} leaf pages for 1002 changes from batches");
        // 400 more from single writes, buffered, then folded at the shutdown.
        for i in 0..400 {
            let row = format!("s{i:05}");
            write(&store, &[row.as_str()], |_| Mutation::Put(vec![b'w'; 760])).await;
        }
        let before: Vec<Summary> = summary(&all(&store).await);
        store.shutdown().await.expect("shutdown");
        drop(store);
        let store = open(dir.path());
        feed_on(&store, Duration::from_secs(3600), None);
        let folded = store.change_leaf_pages() - batched;
        assert!(
            folded <= 110,
            "{folded} leaf pages for 400 changes folded from the buffer"
        );
        assert_eq!(summary(&all(&store).await), before);
        assert_eq!(before.len(), 1000, "a page of the first 1000");
        store.shutdown().await.expect("shutdown");
    });
}
