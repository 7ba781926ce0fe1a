//! The writer's cache of index definitions (`index.rs`): every change of a
//! table's definitions reaches the writes after it, in the same process.

use super::scan_tests::tempdir;
use super::{EmbeddedOptions, EmbeddedStore};
use crate::key::EntityKey;
use crate::traits::{IndexEncoder, Mutation, Store};

const ACCOUNT: &str = "acct";

fn options() -> EmbeddedOptions {
    EmbeddedOptions {
        cache_size: 4 << 20,
        log_size: 256 << 10,
        ..EmbeddedOptions::default()
    }
}

/// A value's property `x` (the raw value) or `z` (its bits flipped).
fn property(value: &[u8], property: &str) -> Option<Vec<u8>> {
    match property {
        "x" => Some(value.to_vec()),
        "z" => Some(value.iter().map(|b| !b).collect()),
        _ => None,
    }
}

/// Opens the store in `dir` with an encoder that gives every value the
/// properties `x` and `z`.
fn open(dir: &std::path::Path) -> EmbeddedStore {
    let store = EmbeddedStore::open(dir, options()).expect("open");
    store.set_index_encoder(IndexEncoder::new(property, |value: &[u8]| {
        ["x", "z"]
            .iter()
            .filter_map(|p| Some((p.to_string(), property(value, p)?)))
            .collect()
    }));
    store
}

async fn put(store: &EmbeddedStore, row: &str, value: u8) {
    store
        .write_entities(
            ACCOUNT,
            "t",
            vec![EntityKey::new("p", row)],
            Box::new(move |_: &[Option<&[u8]>]| vec![Mutation::Put(vec![value])]),
        )
        .await
        .expect("write");
}

/// Index entries of table `t`, over all its indexes, once they are built
/// (a table with entities builds them online, `index_build.rs`).
async fn entries(store: &EmbeddedStore) -> u64 {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let list = store.list_indexes(ACCOUNT, "t").await.expect("list indexes");
        if list.iter().all(|i| i.ready) {
            return list.iter().map(|i| i.entries).sum();
        }
        assert!(std::time::Instant::now() < until, "the build did not end");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_write_after_an_index_is_created_gets_its_entry_though_the_table_was_written_before() {
    let dir = tempdir().expect("temp dir");
    let store = open(dir.path());
    store.create_table(ACCOUNT, "t").await.expect("create");
    // The writer learns that `t` has no index.
    put(&store, "a", 1).await;
    assert!(store.create_index(ACCOUNT, "t", "x").await.expect("create index"));
    assert_eq!(entries(&store).await, 1);
    put(&store, "b", 2).await;
    put(&store, "a", 3).await;
    assert_eq!(entries(&store).await, 2);
    store.shutdown().await.expect("shutdown");
}

/// After a reopen (an empty cache) row `b` gets another value: an entry a
/// stale cache wrote for a dropped index is then left behind, and counted once
/// the index is created again.
async fn rewrite_after_reopen_and_index(dir: &std::path::Path) -> u64 {
    let store = open(dir);
    put(&store, "b", 9).await;
    assert!(store.create_index(ACCOUNT, "t", "x").await.expect("create index"));
    let n = entries(&store).await;
    store.shutdown().await.expect("shutdown");
    n
}

#[tokio::test]
async fn a_write_after_an_index_is_dropped_writes_no_entry_for_it() {
    let dir = tempdir().expect("temp dir");
    let store = open(dir.path());
    store.create_table(ACCOUNT, "t").await.expect("create");
    assert!(store.create_index(ACCOUNT, "t", "x").await.expect("create index"));
    put(&store, "a", 1).await;
    assert!(store.drop_index(ACCOUNT, "t", "x").await.expect("drop index"));
    put(&store, "b", 2).await;
    store.shutdown().await.expect("shutdown");
    drop(store);
    assert_eq!(rewrite_after_reopen_and_index(dir.path()).await, 2);
}

#[tokio::test]
async fn a_write_after_a_savepoint_restore_follows_the_restored_definitions() {
    let dir = tempdir().expect("temp dir");
    let store = open(dir.path());
    store.create_table(ACCOUNT, "t").await.expect("create");
    store.save_savepoint("before").await.expect("save");
    assert!(store.create_index(ACCOUNT, "t", "x").await.expect("create index"));
    put(&store, "a", 1).await;
    assert_eq!(entries(&store).await, 1);
    store.restore_savepoint("before").await.expect("restore");
    assert!(store.list_indexes(ACCOUNT, "t").await.expect("list").is_empty());
    put(&store, "b", 2).await;
    store.shutdown().await.expect("shutdown");
    drop(store);
    assert_eq!(rewrite_after_reopen_and_index(dir.path()).await, 1);
}

/// The cache is keyed by table id and trusts that ids are never reused: a new
/// table under the old name must not inherit the old one's cached definitions.
#[tokio::test]
async fn a_table_made_again_under_its_name_starts_without_the_old_ones_indexes() {
    let dir = tempdir().expect("temp dir");
    let store = open(dir.path());
    store.create_table(ACCOUNT, "t").await.expect("create");
    assert!(store.create_index(ACCOUNT, "t", "x").await.expect("create index"));
    put(&store, "a", 1).await;
    assert!(store.delete_table(ACCOUNT, "t").await.expect("delete"));
    store.create_table(ACCOUNT, "t").await.expect("create again");
    assert!(store.list_indexes(ACCOUNT, "t").await.expect("list").is_empty());
    put(&store, "b", 2).await;
    store.shutdown().await.expect("shutdown");
    drop(store);
    assert_eq!(rewrite_after_reopen_and_index(dir.path()).await, 1);
}

/// Writes rows `r000000`… with value `i % 3` each, a thousand to a commit.
async fn put_many(store: &EmbeddedStore, n: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let keys: Vec<EntityKey> = chunk.iter().map(|i| EntityKey::new("p", &format!("r{i:06}"))).collect();
        let values: Vec<u8> = chunk.iter().map(|i| (i % 3) as u8).collect();
        store
            .write_entities(
                ACCOUNT,
                "t",
                keys,
                Box::new(move |_: &[Option<&[u8]>]| values.iter().map(|v| Mutation::Put(vec![*v])).collect()),
            )
            .await
            .expect("write");
    }
}

/// One page of rows whose `x` is in `ranges`, from `from`, with at most 100
/// candidates gathered: the rows' indices and where the next page starts.
async fn index_page(
    store: &EmbeddedStore,
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
    from: Option<EntityKey>,
) -> Option<(Vec<usize>, Option<EntityKey>)> {
    let request = crate::traits::IndexScanRequest {
        ranges: vec![("x".into(), ranges)],
        from,
        limit: 1000,
        // Every other row: a page examines more candidates than it answers.
        filter: std::sync::Arc::new(|key: crate::key::KeyRef<'_>, _: &[u8]| {
            key.keys_cow().1.ends_with(['0', '2', '4', '6', '8'])
        }),
        max_candidates: 100,
        deadline: None,
    };
    let mut rows: Vec<(EntityKey, Vec<u8>)> = Vec::new();
    let end = store
        .index_scan_into(ACCOUNT, "t", request, &mut rows)
        .await
        .expect("index scan")?;
    let rows = rows
        .iter()
        .map(|(k, _)| k.keys().1[1..].parse().expect("row index"))
        .collect();
    Some((rows, end.next))
}

/// A value many entities share is read from its index in key order as far as
/// the page goes (issue #59: past 50,000 candidates the scan answered `eq` too).
#[tokio::test]
async fn an_eq_on_a_value_thousands_share_pages_from_the_index_in_key_order() {
    let dir = tempdir().expect("temp dir");
    let store = open(dir.path());
    store.create_table(ACCOUNT, "t").await.expect("create");
    assert!(store.create_index(ACCOUNT, "t", "x").await.expect("create index"));
    put_many(&store, 9000).await;
    assert_eq!(entries(&store).await, 9000);
    let want =
        |values: &[usize]| -> Vec<usize> { (0..9000).filter(|i| values.contains(&(i % 3)) && i % 2 == 0).collect() };
    for (ranges, values) in [
        (vec![(vec![1], vec![2])], vec![1]),
        (vec![(vec![0], vec![1]), (vec![2], vec![3])], vec![0, 2]),
    ] {
        let (mut got, mut from) = (Vec::new(), None);
        loop {
            let (rows, next) = index_page(&store, ranges.clone(), from)
                .await
                .expect("answered from the index");
            assert!(rows.len() <= 1000);
            got.extend(rows);
            match next {
                Some(n) => from = Some(n),
                None => break,
            }
        }
        assert_eq!(got, want(&values), "values {values:?}");
    }
    // A range over several values gathers its candidates: more than 100 is the scan's.
    assert!(index_page(&store, vec![(vec![0], vec![2])], None).await.is_none());
    store.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_write_on_a_table_indexed_by_every_property_moves_each_propertys_entry() {
    let dir = tempdir().expect("temp dir");
    let store = open(dir.path());
    store.create_table(ACCOUNT, "t").await.expect("create");
    put(&store, "a", 1).await;
    assert!(store.create_index(ACCOUNT, "t", "*").await.expect("create index"));
    // `a`'s x and z, then `b`'s; an update moves both of `a`'s.
    assert_eq!(entries(&store).await, 2);
    put(&store, "b", 2).await;
    put(&store, "a", 3).await;
    assert_eq!(entries(&store).await, 4);
    // An index on x as well: its entries are the same ones, not written twice.
    assert!(store.create_index(ACCOUNT, "t", "x").await.expect("create index"));
    assert_eq!(entries(&store).await, 4);
    store.shutdown().await.expect("shutdown");
    drop(store);
    // Reopened (an empty cache), a write still moves both entries.
    let store = open(dir.path());
    put(&store, "a", 4).await;
    assert_eq!(entries(&store).await, 4);
    store.shutdown().await.expect("shutdown");
}
