//! On disk a checkpoint is folded aside on a thread of its own
//! (`engine/fold_aside.rs`): the log goes on in its other half and the writes
//! go on into the buffer while the fold runs. The writer thread used to fold
//! holding the core, and every write waited for the whole fold (~90 ms every
//! few seconds under merges spread over a large table, benchmark-history §47).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::inline_writes_tests::all_rows;
use super::scan_tests::{copy_store_files, tempdir, until};
use super::{EmbeddedOptions, EmbeddedStore};
use crate::key::EntityKey;
use crate::traits::{Mutation, Store};

const ACCOUNT: &str = "acct";
const WAIT: Duration = Duration::from_secs(30);

/// A log whose half (1 MiB) is nearly full after ~420 of [`put`]'s rows: a
/// checkpoint falls due, and is set aside, every few hundred writes. The
/// buffer's bound is far above it.
async fn open(dir: &Path) -> Arc<EmbeddedStore> {
    let options = EmbeddedOptions {
        cache_size: 8 << 20,
        log_size: 2 << 20,
        write_buffer: 64 << 20,
    };
    let store = Arc::new(EmbeddedStore::open(dir, options).expect("open"));
    if store.get_table(ACCOUNT, "t").await.expect("get table").is_none() {
        store.create_table(ACCOUNT, "t").await.expect("create");
    }
    store
}

fn key(pk: &str, i: u32) -> EntityKey {
    EntityKey::new(pk, &format!("{i:05}"))
}

async fn put(store: &EmbeddedStore, key: EntityKey, byte: u8) {
    store
        .write_entities(
            ACCOUNT,
            "t",
            vec![key],
            Box::new(move |_: &[Option<&[u8]>]| vec![Mutation::Put(vec![byte; 2000])]),
        )
        .await
        .expect("write");
}

/// The rows `expected` holds, and no other, by a scan and by point reads.
async fn assert_rows(store: &EmbeddedStore, expected: &[(EntityKey, u8)], what: &str) {
    let want: Vec<(EntityKey, Vec<u8>)> = expected.iter().map(|(k, b)| (k.clone(), vec![*b; 2000])).collect();
    let mut want_sorted = want.clone();
    want_sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let got = all_rows(store).await;
    let missing = want_sorted.iter().filter(|w| !got.contains(w)).count();
    assert_eq!(
        got.len(),
        want_sorted.len(),
        "{what}: rows (of those expected, {missing} missing)"
    );
    assert!(got == want_sorted, "{what}: {missing} rows missing or changed");
    for (k, v) in want.iter().step_by(37) {
        let seen = store.get_entity(ACCOUNT, "t", k).await.expect("get");
        assert_eq!(seen.as_ref(), Some(v), "{what}: a point read of {k:?}");
    }
}

/// The latest value written to each key, in order of first writing.
#[derive(Default)]
struct Written(Vec<(EntityKey, u8)>);

impl Written {
    async fn put(&mut self, store: &EmbeddedStore, key: EntityKey, byte: u8) {
        put(store, key.clone(), byte).await;
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(row) => row.1 = byte,
            None => self.0.push((key, byte)),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_on_disk_go_on_while_a_checkpoint_is_folded_aside_and_survive_a_crash_during_it() {
    let (dir, crashed) = (tempdir().expect("temp dir"), tempdir().expect("temp dir"));
    let store = open(dir.path()).await;
    let stats = store.inner.stats.clone();
    let mut written = Written::default();
    hold_a_fold(&store, &mut written, "before").await;
    let folds = stats.buffer_folds.load(Ordering::Relaxed);
    // New rows and rows the fold holds, in the log's other half: answered.
    let during = async {
        for i in 0..150 {
            written.put(&store, key("during", i), 2).await;
            written.put(&store, key("before", i), 3).await;
        }
    };
    tokio::time::timeout(WAIT, during)
        .await
        .expect("writes waited for the fold");
    assert_eq!(
        stats.buffer_folds.load(Ordering::Relaxed),
        folds,
        "the held fold became the buffer's, or the buffer was folded in place"
    );
    assert_rows(&store, &written.0, "while the fold is held").await;
    // A crash now: the records the fold covers in one half of the log, those
    // since in the other, the fold's commit on disk or not.
    copy_store_files(dir.path(), crashed.path());

    let_go(store, folds, &written).await;
    reopened_holds(crashed.path(), &written, "after the crash").await;
}

/// A fold held after its commit, a checkpoint run in place meanwhile (for a
/// savepoint), and a second fold set aside after it: the first fold, let go,
/// took the second's changes-since for its own and made them the buffer,
/// dropping every change the second had set aside until a later commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fold_that_ends_after_a_later_one_was_set_aside_leaves_the_buffer_to_it() {
    let dir = tempdir().expect("temp dir");
    let store = open(dir.path()).await;
    let stats = store.inner.stats.clone();
    let mut written = Written::default();
    hold_a_fold(&store, &mut written, "first").await;
    for i in 0..20 {
        written.put(&store, key("between", i), 2).await;
    }
    // A savepoint folds the buffer into redb in place first.
    store.save_savepoint("s").await.expect("save");
    let set_aside = stats.folds_set_aside.load(Ordering::Relaxed);
    let mut i = 0;
    while stats.folds_set_aside.load(Ordering::Relaxed) == set_aside {
        assert!(i < 5_000, "no second fold was set aside");
        written.put(&store, key("second", i), 3).await;
        i += 1;
    }
    for i in 0..20 {
        written.put(&store, key("after", i), 4).await;
    }
    let folds = stats.buffer_folds.load(Ordering::Relaxed);
    let_go(store, folds, &written).await;
    reopened_holds(dir.path(), &written, "after a restart").await;
}

/// Writes rows of partition `pk` (byte 1) until a fold is set aside,
/// committed, and held before it becomes the buffer's.
async fn hold_a_fold(store: &EmbeddedStore, written: &mut Written, pk: &str) {
    let stats = &store.inner.stats;
    stats.hold_folds.store(true, Ordering::Release);
    let mut i = 0;
    while !stats.at_fold_pause.load(Ordering::Acquire) {
        assert!(i < 5_000, "no fold was set aside");
        written.put(store, key(pk, i), 1).await;
        i += 1;
    }
}

/// Lets the held fold go; once a fold after the `folds`th has become the
/// buffer's, the store holds `written`. Then shuts it down.
async fn let_go(store: Arc<EmbeddedStore>, folds: u64, written: &Written) {
    let stats = store.inner.stats.clone();
    stats.hold_folds.store(false, Ordering::Release);
    until("a fold became the buffer's", WAIT, || {
        stats.buffer_folds.load(Ordering::Relaxed) > folds
    })
    .await;
    assert_rows(&store, &written.0, "after the fold").await;
    store.shutdown().await.expect("shutdown");
}

/// The store in `dir`, opened, holds `written`.
async fn reopened_holds(dir: &Path, written: &Written, what: &str) {
    let store = open(dir).await;
    assert_rows(&store, &written.0, what).await;
    store.shutdown().await.expect("shutdown");
}
