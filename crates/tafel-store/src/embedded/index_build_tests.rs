//! Online index builds (`index_build.rs`): steps interleaved with writes end
//! with the entries a whole build gives; a drop stops a build; a reopen
//! resumes one from its cursor; `tafel check` checks one up to its cursor. The
//! tests hold the writer's steps (`FeedState::build_steps`) to place writes
//! before, behind and ahead of the cursor.

use std::time::{Duration, Instant};

use super::engine::tree::{ReadTrees, Tree};
use super::index::verify;
use super::index_build::{CLOCK_EVERY, STEP_ROWS};
use super::scan_tests::tempdir;
use super::{check_with, EmbeddedOptions, EmbeddedStore};
use crate::key::EntityKey;
use crate::traits::{IndexEncoder, IndexInfo, Mutation, Store};

const ACCOUNT: &str = "acct";

fn options() -> EmbeddedOptions {
    EmbeddedOptions {
        cache_size: 16 << 20,
        log_size: 4 << 20,
        ..EmbeddedOptions::default()
    }
}

/// A value's property `x` is the raw value, unless it starts with 0 (no `x`);
/// its `y` is its last byte, if it has two or more.
fn property(value: &[u8], property: &str) -> Option<Vec<u8>> {
    match property {
        "x" => value.first().is_some_and(|&b| b != 0).then(|| value.to_vec()),
        "y" => (value.len() >= 2).then(|| value[value.len() - 1..].to_vec()),
        _ => None,
    }
}

fn encoder() -> IndexEncoder {
    IndexEncoder::new(property, |value: &[u8]| {
        ["x", "y"]
            .iter()
            .filter_map(|p| Some((p.to_string(), property(value, p)?)))
            .collect()
    })
}

fn open(dir: &std::path::Path) -> EmbeddedStore {
    let store = EmbeddedStore::open(dir, options()).expect("open");
    store.set_index_encoder(encoder());
    store
}

fn key(i: usize) -> EntityKey {
    EntityKey::new("p", &format!("r{i:06}"))
}

/// A value of entity `i`: every seventh has no `x`.
fn value(i: usize, salt: u8) -> Vec<u8> {
    match i % 7 {
        0 => vec![0],
        _ => vec![1 + (i % 200) as u8, salt, (i >> 8) as u8, i as u8],
    }
}

/// Writes `change` to each of `keys` in one job.
async fn write(store: &EmbeddedStore, keys: Vec<EntityKey>, change: Vec<Mutation>) {
    store
        .write_entities(ACCOUNT, "t", keys, Box::new(move |_: &[Option<&[u8]>]| change.clone()))
        .await
        .expect("write");
}

async fn put(store: &EmbeddedStore, i: usize, salt: u8) {
    write(store, vec![key(i)], vec![Mutation::Put(value(i, salt))]).await;
}

/// Table `t` with entities `0..n`.
async fn fill(store: &EmbeddedStore, n: usize) {
    store.create_table(ACCOUNT, "t").await.expect("create");
    for start in (0..n).step_by(1000) {
        let range = start..(start + 1000).min(n);
        let keys = range.clone().map(key).collect();
        write(store, keys, range.map(|i| Mutation::Put(value(i, 0))).collect()).await;
    }
}

/// Lets `steps` more build steps run (`None`: any).
fn allow(store: &EmbeddedStore, steps: Option<u64>) {
    *store.inner.feed.build_steps.lock().expect("lock") = steps;
}

/// The table's first index (the only one, in most tests).
async fn index(store: &EmbeddedStore) -> IndexInfo {
    let list = store.list_indexes(ACCOUNT, "t").await.expect("list");
    list.into_iter().next().expect("an index")
}

/// Table `t`'s index against its entities, as `tafel check` compares them: the
/// entries read, and how many differ.
fn compared(store: &EmbeddedStore) -> (u64, usize) {
    let opening = store.opening_now();
    let id = opening.read_table(ACCOUNT, "t").expect("read").expect("table").id;
    let (entries, mismatches) = verify(&opening.view(), id, &encoder()).expect("verify");
    (entries, mismatches.len())
}

async fn wait_ready(store: &EmbeddedStore) -> IndexInfo {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let i = index(store).await;
        if i.ready {
            return i;
        }
        assert!(Instant::now() < until, "the build did not end: {:?}", i.progress);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Lets one build step run, in the group of a write of entity `i` (a write
/// the step finds already made).
async fn step_with(store: &EmbeddedStore, i: usize, salt: u8) {
    allow(store, Some(1));
    put(store, i, salt).await;
}

#[tokio::test]
async fn a_build_in_steps_with_writes_ahead_of_and_behind_its_cursor_ends_as_a_whole_build() {
    build_in_steps_with_writes("x").await;
}

#[tokio::test]
async fn a_build_of_every_property_in_steps_with_writes_ends_as_a_whole_build() {
    build_in_steps_with_writes("*").await;
}

async fn build_in_steps_with_writes(property: &str) {
    let dir = tempdir().expect("temp dir");
    let store = open(dir.path());
    let n = 5 * STEP_ROWS + 123;
    fill(&store, n).await;
    allow(&store, Some(0));
    assert!(store.create_index(ACCOUNT, "t", property).await.expect("create index"));
    let first = index(&store).await;
    assert!(!first.ready);
    assert_eq!(first.progress.map(|p| (p.done, p.total)), Some((0, n as u64)));
    let mut fresh = n;
    let mut steps = 0;
    loop {
        let i = index(&store).await;
        if i.ready {
            break;
        }
        assert!(store.ready_indexes(ACCOUNT, "t").await.expect("ready").is_empty());
        let done = i.progress.expect("progress while building").done as usize;
        // Up to the cursor, less the entities deleted behind it.
        assert!(
            done <= steps * STEP_ROWS && done + 2 * steps >= steps * STEP_ROWS,
            "{done} after {steps} steps"
        );
        // Behind the cursor: an update, a delete, an update that drops `x`.
        if done > 10 {
            put(&store, done / 2, 9).await;
            write(&store, vec![key(done / 3)], vec![Mutation::Delete]).await;
            write(&store, vec![key(done - 1)], vec![Mutation::Put(vec![0])]).await;
        }
        // Ahead of it: the same, and a new entity at the table's end.
        if done + 3000 < n {
            put(&store, done + 1000, 9).await;
            write(&store, vec![key(done + 2000)], vec![Mutation::Delete]).await;
            write(&store, vec![key(done + 3000)], vec![Mutation::Put(vec![0])]).await;
        }
        put(&store, fresh, 1).await;
        fresh += 1;
        // The step's group writes the entity just after the cursor first.
        step_with(&store, done + 1, 5).await;
        steps += 1;
    }
    assert!(steps > n / STEP_ROWS, "{steps} steps");
    allow(&store, None);
    assert_eq!(store.ready_indexes(ACCOUNT, "t").await.expect("ready"), vec![property]);
    let (entries, differ) = compared(&store);
    assert_eq!(differ, 0, "entries differ from a whole build's");
    assert_eq!(index(&store).await.entries, entries);
    // The same entries as a build of the table as it is now.
    assert!(store.drop_index(ACCOUNT, "t", property).await.expect("drop"));
    assert!(store.create_index(ACCOUNT, "t", property).await.expect("create again"));
    assert_eq!(wait_ready(&store).await.entries, entries);
    store.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_build_step_out_of_time_stops_at_its_next_clock_reading_and_the_build_still_ends() {
    let dir = tempdir().expect("temp dir");
    let store = open(dir.path());
    let n = 2 * STEP_ROWS;
    fill(&store, n).await;
    // No time at all: each step reads until its first look at the clock.
    *store.inner.feed.build_step_time.lock().expect("lock") = Some(Duration::ZERO);
    allow(&store, Some(0));
    assert!(store.create_index(ACCOUNT, "t", "x").await.expect("create index"));
    step_with(&store, n + 1, 1).await;
    assert_eq!(index(&store).await.progress.map(|p| p.done), Some(CLOCK_EVERY as u64));
    step_with(&store, n + 2, 1).await;
    assert_eq!(
        index(&store).await.progress.map(|p| p.done),
        Some(2 * CLOCK_EVERY as u64)
    );
    allow(&store, None);
    let started = Instant::now();
    while !index(&store).await.ready {
        assert!(started.elapsed() < Duration::from_secs(60), "the build did not end");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(compared(&store).1, 0, "entries differ from a whole build's");
    store.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_dropped_index_stops_its_build_and_leaves_no_entry() {
    let dir = tempdir().expect("temp dir");
    let store = open(dir.path());
    fill(&store, 3 * STEP_ROWS).await;
    allow(&store, Some(0));
    assert!(store.create_index(ACCOUNT, "t", "x").await.expect("create index"));
    step_with(&store, 10, 1).await;
    assert_eq!(index(&store).await.progress.map(|p| p.done), Some(STEP_ROWS as u64));
    assert!(store.drop_index(ACCOUNT, "t", "x").await.expect("drop"));
    allow(&store, None);
    put(&store, 20, 1).await;
    put(&store, 2 * STEP_ROWS, 1).await;
    assert!(store.list_indexes(ACCOUNT, "t").await.expect("list").is_empty());
    let view = store.opening_now().view();
    let mut rows = 0;
    for item in view
        .range(Tree::Index, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
        .expect("range")
    {
        item.expect("row");
        rows += 1;
    }
    assert_eq!(rows, 0, "index entries left behind");
    // Deleting the table stops a build too.
    assert!(store.create_index(ACCOUNT, "t", "x").await.expect("create again"));
    assert!(store.delete_table(ACCOUNT, "t").await.expect("delete table"));
    store.create_table(ACCOUNT, "t").await.expect("create table");
    put(&store, 1, 1).await;
    assert!(store.list_indexes(ACCOUNT, "t").await.expect("list").is_empty());
    store.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_reopened_store_resumes_a_build_from_its_cursor() {
    let dir = tempdir().expect("temp dir");
    let n = 3 * STEP_ROWS + 5;
    {
        let store = open(dir.path());
        fill(&store, n).await;
        allow(&store, Some(0));
        assert!(store.create_index(ACCOUNT, "t", "x").await.expect("create index"));
        step_with(&store, 3, 1).await;
        store.shutdown().await.expect("shutdown");
    }
    // Without the service's encoder the build cannot step: it waits for it.
    let store = EmbeddedStore::open(dir.path(), options()).expect("reopen");
    let i = index(&store).await;
    assert!(!i.ready);
    assert_eq!(
        i.progress.map(|p| (p.done, p.total)),
        Some((STEP_ROWS as u64, n as u64))
    );
    store.set_index_encoder(encoder());
    let i = wait_ready(&store).await;
    assert_eq!(compared(&store), (i.entries, 0));
    store.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn check_takes_a_building_index_as_whole_up_to_its_cursor_only() {
    let dir = tempdir().expect("temp dir");
    {
        let store = open(dir.path());
        fill(&store, 4 * STEP_ROWS).await;
        allow(&store, Some(0));
        assert!(store.create_index(ACCOUNT, "t", "x").await.expect("create index"));
        step_with(&store, 3, 1).await;
        // Past the cursor: an entry a write made, and many not made yet.
        put(&store, 3 * STEP_ROWS + 1, 2).await;
        assert!(!index(&store).await.ready);
        store.shutdown().await.expect("shutdown");
    }
    let report = check_with(dir.path(), Some(&encoder()), &mut |_| {}).expect("check");
    assert!(report.damage.is_empty(), "{:?}", report.damage);
    // The first step's entities with `x`, and the one written past the cursor.
    let built = (0..STEP_ROWS).filter(|i| i % 7 != 0).count() as u64;
    assert_eq!(report.index_entries, built + 1);
}

#[tokio::test]
async fn a_restored_savepoint_with_a_building_index_builds_it_again() {
    let dir = tempdir().expect("temp dir");
    let store = open(dir.path());
    fill(&store, 2 * STEP_ROWS + 1).await;
    allow(&store, Some(0));
    assert!(store.create_index(ACCOUNT, "t", "x").await.expect("create index"));
    store.save_savepoint("building").await.expect("save");
    allow(&store, None);
    put(&store, 1, 3).await;
    let built = wait_ready(&store).await.entries;
    store.restore_savepoint("building").await.expect("restore");
    // Back to building from the start (the savepoint's cursor), then ready again.
    let i = wait_ready(&store).await;
    assert_eq!(i.entries, built);
    assert_eq!(compared(&store), (built, 0));
    store.shutdown().await.expect("shutdown");
}

/// Every index of table `t`, once all are ready.
async fn all_ready(store: &EmbeddedStore) -> Vec<(String, u64)> {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let list = store.list_indexes(ACCOUNT, "t").await.expect("list");
        if list.iter().all(|i| i.ready) {
            return list.into_iter().map(|i| (i.property, i.entries)).collect();
        }
        assert!(Instant::now() < until, "the builds did not end");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn every_property_and_a_declared_index_share_entries_and_a_drop_keeps_the_others() {
    let dir = tempdir().expect("temp dir");
    let store = open(dir.path());
    let n = 2 * STEP_ROWS + 5;
    fill(&store, n).await;
    let xs = (0..n).filter(|i| i % 7 != 0).count() as u64;
    let ys = xs;
    assert!(store.create_index(ACCOUNT, "t", "x").await.expect("create x"));
    assert!(store.create_index(ACCOUNT, "t", "*").await.expect("create *"));
    // `*` lists the entries of the properties without an index of their own.
    let both = vec![("*".to_owned(), ys), ("x".to_owned(), xs)];
    assert_eq!(all_ready(&store).await, both);
    assert_eq!(compared(&store), (xs + ys, 0));
    assert_eq!(store.ready_indexes(ACCOUNT, "t").await.expect("ready"), vec!["*", "x"]);
    // Dropping x while `*` stays keeps x's entries: they are `*`'s too.
    assert!(store.drop_index(ACCOUNT, "t", "x").await.expect("drop x"));
    assert_eq!(all_ready(&store).await, vec![("*".to_owned(), xs + ys)]);
    assert_eq!(compared(&store), (xs + ys, 0));
    // Dropping `*` removes the entries of every property but the declared ones.
    assert!(store.create_index(ACCOUNT, "t", "x").await.expect("create x again"));
    assert_eq!(all_ready(&store).await, both);
    put(&store, 1, 7).await;
    assert!(store.drop_index(ACCOUNT, "t", "*").await.expect("drop *"));
    assert_eq!(all_ready(&store).await, vec![("x".to_owned(), xs)]);
    assert_eq!(compared(&store), (xs, 0));
    assert!(store.drop_index(ACCOUNT, "t", "x").await.expect("drop x"));
    assert_eq!(compared(&store), (0, 0));
    store.shutdown().await.expect("shutdown");
}
