//! Group commit's tests: a write seen and answered only after its sync, checkpoints and the log halves they free.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::embedded::scan_tests::{copy_store_files, tempdir, until};
use crate::embedded::{EmbeddedOptions, EmbeddedStore};
use crate::key::{EntityKey, KeyRange};
use crate::test_support::ScanEntities;
use crate::traits::{write_with, Expect, Mutation, ScanRequest, Store};

const ACCOUNT: &str = "acct";

/// A store with table `t`, and the lock that keeps its groups from becoming durable.
async fn open(dir: &std::path::Path) -> (Arc<EmbeddedStore>, Arc<Mutex<()>>) {
    let hold = Arc::new(Mutex::new(()));
    let options = EmbeddedOptions {
        cache_size: 8 << 20,
        ..EmbeddedOptions::default()
    };
    let store = EmbeddedStore::open_on(
        Box::new(crate::embedded::disk::OsDisk::new(dir).expect("dir")),
        options,
        Some(hold.clone()),
    )
    .expect("open");
    store.create_table(ACCOUNT, "t").await.expect("create");
    (Arc::new(store), hold)
}

/// Jobs the writer has applied so far.
fn jobs_done(store: &EmbeddedStore) -> u64 {
    store.inner.stats.jobs_done.load(Ordering::Relaxed)
}

/// How long [`until`] waits for what these tests need.
const WAIT: Duration = Duration::from_secs(20);

/// [`put`] on a task of its own; returns once the writer has applied it.
async fn spawn_applied(
    store: &Arc<EmbeddedStore>,
    key: &EntityKey,
    value: Vec<u8>,
    only_if_absent: bool,
) -> tokio::task::JoinHandle<bool> {
    let before = jobs_done(store);
    let handle = spawn_put(store, key, value, only_if_absent);
    until("the writer applied the write", WAIT, || jobs_done(store) > before).await;
    handle
}

/// [`put`] on a task of its own.
fn spawn_put(
    store: &Arc<EmbeddedStore>,
    key: &EntityKey,
    value: Vec<u8>,
    only_if_absent: bool,
) -> tokio::task::JoinHandle<bool> {
    let (store, key) = (store.clone(), key.clone());
    tokio::spawn(async move { put(&store, &key, value, only_if_absent).await })
}

/// A write held back (by the log or the disk) stays unanswered: the writer
/// syncs on its own thread, so a write behind a held one is not even applied,
/// and only time shows it waiting.
async fn still_waiting(writing: &tokio::task::JoinHandle<bool>, why: &str) {
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!writing.is_finished(), "{why}");
}

/// Puts `value` under `key`, or, with `only_if_absent`, keeps what is there;
/// the outcome is whether the key was absent.
async fn put(store: &EmbeddedStore, key: &EntityKey, value: Vec<u8>, only_if_absent: bool) -> bool {
    write_with(
        store,
        ACCOUNT,
        "t",
        vec![key.clone()],
        Expect::Any,
        move |current: &[Option<&[u8]>]| {
            let absent = current[0].is_none();
            let mutations = if absent || !only_if_absent {
                vec![Mutation::Put(value.clone())]
            } else {
                Vec::new()
            };
            (mutations, absent)
        },
    )
    .await
    .expect("write")
}

async fn scan_values(store: &EmbeddedStore) -> Vec<Vec<u8>> {
    let request = ScanRequest {
        ranges: vec![KeyRange::all()],
        limit: 100,
        filter: None,
        deadline: None,
    };
    let page = store.scan_entities(ACCOUNT, "t", request).await.expect("scan");
    page.rows.into_iter().map(|(_, v)| v).collect()
}

// The held lock stands for a slow disk under the log.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_is_neither_visible_nor_answered_before_its_log_record_is_synced() {
    let dir = tempdir().expect("temp dir");
    let (store, hold) = open(dir.path()).await;
    let key = EntityKey::new("p", "r");
    put(&store, &key, vec![1], false).await;

    let held = hold.lock().expect("hold");
    // The writer has committed the group non-durably; the log is held.
    let writing = spawn_applied(&store, &key, vec![2], false).await;
    assert!(!writing.is_finished(), "answered before its record was synced");
    let seen = store.get_entity(ACCOUNT, "t", &key).await.expect("get");
    assert_eq!(seen, Some(vec![1]), "a read saw a change that is not durable yet");
    assert_eq!(scan_values(&store).await, [vec![1]]);

    drop(held);
    assert!(!writing.await.expect("join"), "the key existed");
    let seen = store.get_entity(ACCOUNT, "t", &key).await.expect("get");
    assert_eq!(seen, Some(vec![2]), "an answered write must be visible at once");
    store.shutdown().await.expect("shutdown");
}

// The held lock stands for a slow disk under the log.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_changed_nothing_waits_for_the_writes_it_saw() {
    let dir = tempdir().expect("temp dir");
    let (store, hold) = open(dir.path()).await;
    let key = EntityKey::new("p", "r");

    let held = hold.lock().expect("hold");
    let first = spawn_applied(&store, &key, vec![7], true).await;
    // Finds the first write's row, so it changes nothing; its answer ("the
    // key existed") rests on the first being durable.
    let second = spawn_put(&store, &key, vec![8], true);
    still_waiting(&second, "answered before the write it saw was durable").await;
    assert!(!first.is_finished());

    drop(held);
    assert!(first.await.expect("join"), "the first insert found the key absent");
    assert!(!second.await.expect("join"), "the second saw the first's row");
    let seen = store.get_entity(ACCOUNT, "t", &key).await.expect("get");
    assert_eq!(seen, Some(vec![7]));
    store.shutdown().await.expect("shutdown");
}

/// Checkpoints the writer has committed (their pages maybe not yet on disk).
/// Counted, not read off redb's sync requests: redb also syncs as its file grows.
fn checkpoints(store: &EmbeddedStore) -> u64 {
    store.inner.stats.checkpoint_seconds.snapshot().count
}

/// Waits until the writer has committed a checkpoint after the `after`th (an
/// idle writer checkpoints after IDLE_CHECKPOINT); returns how many there are.
async fn next_checkpoint(store: &EmbeddedStore, after: u64) -> u64 {
    until("a checkpoint", WAIT, || checkpoints(store) > after).await;
    checkpoints(store)
}

/// A value whose record makes its write a large one (see `SMALL_WRITE`).
fn large(byte: u8) -> Vec<u8> {
    vec![byte; 64 << 10]
}

// The held lock keeps the last commit from being published.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_waits_until_readers_see_every_commit_before_it() {
    let dir = tempdir().expect("temp dir");
    let (store, hold) = open(dir.path()).await;
    let (x, y) = (EntityKey::new("p", "x"), EntityKey::new("p", "y"));
    put(&store, &x, vec![1], false).await;
    let before = next_checkpoint(&store, checkpoints(&store)).await;

    let held = hold.lock().expect("hold");
    let writing = spawn_applied(&store, &y, vec![2], false).await;
    // Idle past IDLE_CHECKPOINT, the writer would checkpoint `y`, but not
    // before readers see it.
    tokio::time::sleep(super::super::writer::IDLE_CHECKPOINT * 3 / 2).await;
    assert_eq!(
        checkpoints(&store),
        before,
        "checkpointed while readers still saw the state before the last commit"
    );
    assert_eq!(scan_values(&store).await, [vec![1]]);

    drop(held);
    assert!(writing.await.expect("join"));
    next_checkpoint(&store, before).await;
    assert_eq!(scan_values(&store).await, [vec![1], vec![2]]);
    store.shutdown().await.expect("shutdown");
}

// The paused flusher stands for a slow disk under a checkpoint.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_small_writes_the_log_waits_for_the_checkpoint_to_be_on_disk() {
    let dir = tempdir().expect("temp dir");
    let (store, _hold) = open(dir.path()).await;
    let (x, y) = (EntityKey::new("p", "x"), EntityKey::new("p", "y"));
    put(&store, &x, vec![1], false).await;

    let pages = store.opening_now().pages.clone();
    let paused = pages.pause();
    next_checkpoint(&store, checkpoints(&store)).await;
    let writing = spawn_put(&store, &y, vec![2], false);
    still_waiting(&writing, "answered while the checkpoint was not on disk").await;

    drop(paused);
    assert!(writing.await.expect("join"));
    assert_eq!(scan_values(&store).await, [vec![1], vec![2]]);
    store.shutdown().await.expect("shutdown");
}

// The paused flusher stands for a slow disk under a checkpoint.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_half_is_not_written_over_before_the_checkpoint_covering_it_is_on_disk() {
    let dir = tempdir().expect("temp dir");
    let (store, _hold) = open(dir.path()).await;
    let (x, y, z) = (
        EntityKey::new("p", "x"),
        EntityKey::new("p", "y"),
        EntityKey::new("p", "z"),
    );
    put(&store, &x, large(1), false).await;

    let pages = store.opening_now().pages.clone();
    let paused = pages.pause();
    let first = next_checkpoint(&store, checkpoints(&store)).await;
    // After a large write, `y`'s record goes on in the other half at once.
    let writing = spawn_put(&store, &y, large(2), false);
    let answered = tokio::time::timeout(Duration::from_secs(30), writing).await;
    assert!(answered
        .expect("a write waited for a checkpoint's pages")
        .expect("join"));
    next_checkpoint(&store, first).await;
    // `z`'s record would go over `x`'s, the only durable copy of `x` while
    // the first checkpoint is not on disk: it must wait.
    let writing = spawn_put(&store, &z, large(3), false);
    still_waiting(&writing, "answered while the first half's checkpoint was not on disk").await;

    drop(paused);
    assert!(writing.await.expect("join"));
    assert_eq!(scan_values(&store).await, [large(1), large(2), large(3)]);
    store.shutdown().await.expect("shutdown");
}

// The paused flusher stands for a crash before a checkpoint reached disk.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_answered_across_a_checkpoint_not_on_disk_are_replayed_from_both_halves() {
    let (dir, crashed) = (tempdir().expect("temp dir"), tempdir().expect("temp dir"));
    let (store, _hold) = open(dir.path()).await;
    let (x, y) = (EntityKey::new("p", "x"), EntityKey::new("p", "y"));
    let pages = store.opening_now().pages.clone();
    let paused = pages.pause();
    put(&store, &x, large(1), false).await;
    next_checkpoint(&store, checkpoints(&store)).await;
    tokio::time::timeout(Duration::from_secs(10), put(&store, &y, large(2), false))
        .await
        .expect("a large write waited for a checkpoint's pages");
    // The files as a crash would leave them: redb's as of before `x`, the
    // log with `x`'s record in one half and `y`'s in the other.
    copy_store_files(dir.path(), crashed.path());
    drop(paused);
    store.shutdown().await.expect("shutdown");

    let (store, _hold) = open(crashed.path()).await;
    assert_eq!(scan_values(&store).await, [large(1), large(2)]);
    store.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answered_writes_are_read_back_under_concurrent_writers() {
    let dir = tempdir().expect("temp dir");
    let (store, _hold) = open(dir.path()).await;
    let tasks: Vec<_> = (0..16u8)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..50u8 {
                    let key = EntityKey::new(&format!("p{w}"), &format!("r{i}"));
                    put(&store, &key, vec![i], false).await;
                    let seen = store.get_entity(ACCOUNT, "t", &key).await.expect("get");
                    assert_eq!(seen, Some(vec![i]), "writer {w} lost its own write {i}");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("writer task");
    }
    assert_eq!(scan_values(&store).await.len(), 100, "a page of 100 of the 800 rows");
    store.shutdown().await.expect("shutdown");
}

// The held lock stands for a slow disk under the log.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_of_many_single_writes_stays_buffered() {
    let dir = tempdir().expect("temp dir");
    let (store, hold) = open(dir.path()).await;
    put(&store, &EntityKey::new("p", "first"), vec![0], false).await;

    let held = hold.lock().expect("hold");
    let first = spawn_applied(&store, &EntityKey::new("p", "held"), vec![1], false).await;
    // 100 writers, more than a batch's rows that send a group direct, queue
    // behind the held sync and go as one group once it is let go.
    let queued: Vec<_> = (0..100)
        .map(|i| spawn_put(&store, &EntityKey::new(&format!("q{i}"), "r"), vec![2], false))
        .collect();
    still_waiting(&queued[99], "answered while the log was held").await;
    let folds = store.inner.stats.buffer_folds.load(Ordering::Relaxed);
    drop(held);
    assert!(first.await.expect("held write"));
    for q in queued {
        assert!(q.await.expect("queued write"), "a queued write found its key taken");
    }
    assert_eq!(
        store.inner.stats.buffer_folds.load(Ordering::Relaxed),
        folds,
        "single writes in flight folded the buffer into redb"
    );
    let seen = store
        .get_entity(ACCOUNT, "t", &EntityKey::new("q99", "r"))
        .await
        .expect("get");
    assert_eq!(seen, Some(vec![2]));
    store.shutdown().await.expect("shutdown");
}
