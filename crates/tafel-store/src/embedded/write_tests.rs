//! Writes of the embedded store: new rows of one write go in as an ascending run,
//! which must land every row exactly where single inserts would, and survive a
//! replay of the log.

use super::scan_tests::{copy_store_files, open, runtime, tempdir, ACCOUNT};
use super::EmbeddedStore;
use crate::key::{EntityKey, KeyRange};
use crate::test_support::ScanEntities;
use crate::traits::{write_with, Expect, Mutation, ScanRequest, Store};

/// The value row `i` gets in write `round`: `len` bytes, each distinct per row and round.
fn value(i: usize, round: u8, len: usize) -> Vec<u8> {
    let mut v = vec![round; len];
    v[..4].copy_from_slice(&(i as u32).to_le_bytes());
    v
}

/// Puts rows `pk`/`r{i:04}` for every `i` in `rows` in one write; returns, per row,
/// whether it existed before.
async fn put(store: &EmbeddedStore, rows: &[usize], round: u8, len: usize) -> Vec<bool> {
    let keys: Vec<EntityKey> = rows.iter().map(|i| EntityKey::new("p", &format!("r{i:04}"))).collect();
    let ids = rows.to_vec();
    write_with(
        store,
        ACCOUNT,
        "t",
        keys,
        Expect::Any,
        move |current: &[Option<&[u8]>]| {
            let mutations = ids.iter().map(|&i| Mutation::Put(value(i, round, len))).collect();
            (mutations, current.iter().map(Option::is_some).collect::<Vec<bool>>())
        },
    )
    .await
    .expect("write")
}

/// Every row of table "t": (row key index, value).
async fn rows(store: &EmbeddedStore) -> Vec<(usize, Vec<u8>)> {
    let req = ScanRequest {
        ranges: vec![KeyRange::all()],
        limit: 100_000,
        filter: None,
        deadline: None,
    };
    let page = store.scan_entities(ACCOUNT, "t", req).await.expect("scan");
    assert!(page.next.is_none());
    page.rows
        .into_iter()
        .map(|(k, v)| (k.keys().1[1..].parse().expect("row key"), v))
        .collect()
}

#[test]
fn batches_of_new_rows_fill_their_leaves() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        store.create_table(ACCOUNT, "t").await.expect("create");
        // 1000 rows of ~800 bytes in batches of 100 as a bulk load sends them,
        // ahead of a row already there (the table's end takes appends well
        // either way). In redb leaves of their own, one by one, each full leaf
        // split in half and the rows took 333 leaves; packed 201. In entity
        // blocks (`engine/blocks.rs`, ~40 such rows to a 32 KiB block) full
        // ones take 25–26; blocks split in half would take ~50.
        put(&store, &[9999], 1, 780).await;
        for b in 0..10 {
            let ids: Vec<usize> = (b * 100..(b + 1) * 100).collect();
            assert!(put(&store, &ids, 1, 780).await.iter().all(|e| !e));
        }
        let leaves = store.entity_leaf_pages();
        assert!(leaves <= 28, "{leaves} leaf pages for 1001 rows");
        let got = rows(&store).await;
        let want: Vec<(usize, Vec<u8>)> = (0..1000).chain([9999]).map(|i| (i, value(i, 1, 780))).collect();
        assert_eq!(got, want);
        store.shutdown().await.expect("shutdown");
    });
}

// The paused flusher stands for a crash before the next checkpoint reaches disk.
#[allow(clippy::await_holding_lock)]
#[test]
fn new_rows_between_existing_rows_all_land_and_replay() {
    let dir = tempdir().expect("temp dir");
    let crashed = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        store.create_table(ACCOUNT, "t").await.expect("create");
        // Every tenth row, and every even one from 100 on.
        let existing = |i: usize| i.is_multiple_of(10) || (i >= 100 && i.is_multiple_of(2));
        let old: Vec<usize> = (0..200).filter(|&i| existing(i)).collect();
        put(&store, &old, 1, 300).await;
        // From here on the redb file stays as it is on disk: what the next write
        // changed lives only in the log, as after a crash before a checkpoint.
        store
            .opening_now()
            .pages
            .wait(store.opening_now().pages.last_requested())
            .expect("durable");
        let pages = store.opening_now().pages.clone();
        let paused = pages.pause();
        // The new rows, sent in descending order: below 100 they go in as runs of
        // nine between existing rows, from 100 on they alternate with existing
        // ones. The same write updates every twentieth row.
        let mut mixed: Vec<usize> = (0..200).filter(|&i| !existing(i)).rev().collect();
        mixed.extend((0..200).step_by(20));
        let existed = put(&store, &mixed, 2, 300).await;
        assert!(existed.iter().zip(&mixed).all(|(e, &i)| *e == existing(i)));
        let want: Vec<(usize, Vec<u8>)> = (0..200)
            .map(|i| (i, value(i, if !existing(i) || i % 20 == 0 { 2 } else { 1 }, 300)))
            .collect();
        assert_eq!(rows(&store).await, want);
        copy_store_files(dir.path(), crashed.path());
        drop(paused);
        store.shutdown().await.expect("shutdown");

        let store = open(crashed.path());
        assert_eq!(rows(&store).await, want, "replayed from the log");
        store.shutdown().await.expect("shutdown");
    });
}

#[test]
fn single_writes_are_read_from_the_buffer_and_folded_in_runs_that_fill_their_leaves() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        store.create_table(ACCOUNT, "t").await.expect("create");
        // Rows after the others, in a write big enough to go to the store file
        // itself: the table's end takes appends well either way, the rows
        // folded in before these are the ones a fold one by one would split.
        let after: Vec<usize> = (2000..2064).collect();
        put(&store, &after, 1, 780).await;
        assert_eq!(store.buffered_bytes(), 0);
        // 1000 rows of ~800 bytes, in writes of 50 (too few to commit to the
        // store file themselves, `writer::folds_first`) in a scattered order, as
        // concurrent clients send them: they stay in the write buffer until the
        // fold, which writes them in key order.
        let scattered: Vec<usize> = (0..1000).map(|i| (i * 7) % 1000).collect();
        for ids in scattered.chunks(50) {
            assert!(put(&store, ids, 1, 780).await.iter().all(|e| !e));
        }
        // Some updated, some deleted, all still buffered.
        let updated: Vec<usize> = (0..1000).step_by(10).collect();
        for ids in updated.chunks(50) {
            assert!(put(&store, ids, 2, 780).await.iter().all(|e| *e));
        }
        let deleted: Vec<EntityKey> = (5..1000)
            .step_by(50)
            .map(|i| EntityKey::new("p", &format!("r{i:04}")))
            .collect();
        let n = deleted.len();
        write_with(
            &store,
            ACCOUNT,
            "t",
            deleted,
            Expect::Any,
            move |_: &[Option<&[u8]>]| (vec![Mutation::Delete; n], ()),
        )
        .await
        .expect("delete");
        assert!(store.buffered_bytes() > 1000 * 780, "the writes were not buffered");
        let want: Vec<(usize, Vec<u8>)> = (0..1000)
            .filter(|i| i % 50 != 5)
            .map(|i| (i, value(i, if i % 10 == 0 { 2 } else { 1 }, 780)))
            .chain(after.iter().map(|&i| (i, value(i, 1, 780))))
            .collect();
        assert_eq!(rows(&store).await, want, "read merged from the buffer");
        store.shutdown().await.expect("shutdown");
        drop(store);

        let store = open(dir.path());
        assert_eq!(store.buffered_bytes(), 0);
        assert_eq!(rows(&store).await, want, "folded into the store file");
        // Five rows to a 4 KiB page. One by one, each full leaf would split in
        // half: the 1044 rows took 340 leaves; in runs, 210. In 32 KiB entity
        // blocks, full ones take ~26, halves ~50.
        let leaves = store.entity_leaf_pages();
        assert!(leaves <= 29, "{leaves} leaf pages for 1044 rows");
        store.shutdown().await.expect("shutdown");
    });
}
