//! The tables' counters of the embedded store: exact after every kind of write,
//! after a crash (replayed from the log), after a table is deleted and made
//! again, and checked by `tafel check`.

use super::scan_tests::{copy_store_files, open, runtime, tempdir, ACCOUNT};
use super::{check, EmbeddedStore};
use crate::key::{EntityKey, KeyRange};
use crate::test_support::ScanEntities;
use crate::traits::{write_with, Expect, Mutation, ScanRequest, Store, TableStats};

/// Writes `ops` (row key, new value or `None` to delete) to table "t" in one write.
async fn write(store: &EmbeddedStore, ops: &[(&str, &str, Option<usize>)]) {
    let keys: Vec<EntityKey> = ops.iter().map(|(p, r, _)| EntityKey::new(p, r)).collect();
    let sizes: Vec<Option<usize>> = ops.iter().map(|o| o.2).collect();
    write_with(store, ACCOUNT, "t", keys, Expect::Any, move |_: &[Option<&[u8]>]| {
        let m = sizes
            .iter()
            .map(|s| s.map_or(Mutation::Delete, |n| Mutation::Put(vec![7; n])))
            .collect();
        (m, ())
    })
    .await
    .expect("write");
}

/// What the counters should say: the rows as a scan finds them.
async fn truth(store: &EmbeddedStore) -> TableStats {
    let req = ScanRequest {
        ranges: vec![KeyRange::all()],
        limit: 1_000_000,
        filter: None,
        deadline: None,
    };
    let rows = store.scan_entities(ACCOUNT, "t", req).await.expect("scan").rows;
    let mut partitions: Vec<String> = rows.iter().map(|(k, _)| k.keys().0).collect();
    partitions.dedup();
    TableStats {
        entities: rows.len() as u64,
        bytes: rows.iter().map(|(k, v)| (k.as_bytes().len() + v.len()) as u64).sum(),
        partitions: Some(partitions.len() as u64),
    }
}

async fn assert_exact(store: &EmbeddedStore) {
    let want = truth(store).await;
    assert_eq!(
        store.table_stats(ACCOUNT, "t").await.expect("stats"),
        Some(want.clone())
    );
    assert_eq!(store.count_entities(ACCOUNT, "t").await.expect("count"), want.entities);
}

#[allow(clippy::await_holding_lock)]
#[test]
fn counters_follow_every_write_and_survive_a_crash() {
    let dir = tempdir().expect("temp dir");
    let crashed = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        store.create_table(ACCOUNT, "t").await.expect("create");
        assert_exact(&store).await;
        // Inserts one by one and as a batch (new rows go in as a run).
        write(&store, &[("a", "1", Some(10))]).await;
        let batch: Vec<(String, Option<usize>)> = (0..50).map(|i| (format!("r{i:02}"), Some(20 + i))).collect();
        let ops: Vec<(&str, &str, Option<usize>)> = batch.iter().map(|(r, n)| ("b", r.as_str(), *n)).collect();
        write(&store, &ops).await;
        assert_exact(&store).await;
        // Replaces that change the size, deletes of present and absent rows, in one write.
        write(
            &store,
            &[
                ("a", "1", Some(300)),
                ("b", "r00", None),
                ("b", "zz", None),
                ("c", "1", Some(5)),
            ],
        )
        .await;
        assert_exact(&store).await;
        // A repeated key in one write counts once, as its last mutation left it.
        write(
            &store,
            &[
                ("d", "1", Some(5)),
                ("d", "1", Some(9)),
                ("d", "2", Some(1)),
                ("d", "2", None),
            ],
        )
        .await;
        assert_exact(&store).await;
        assert_eq!(store.count_entities(ACCOUNT, "t").await.expect("count"), 52);

        // A crash before the next checkpoint: the counters come back from the log with the rows.
        store
            .opening_now()
            .pages
            .wait(store.opening_now().pages.last_requested())
            .expect("durable");
        let pages = store.opening_now().pages.clone();
        let paused = pages.pause();
        write(&store, &[("e", "1", Some(40)), ("a", "1", None)]).await;
        let before = truth(&store).await;
        copy_store_files(dir.path(), crashed.path());
        drop(paused);
        store.shutdown().await.expect("shutdown");

        let store = open(crashed.path());
        assert_eq!(truth(&store).await, before);
        assert_exact(&store).await;
        // Deleted and made again: nothing counted from before.
        assert!(store.delete_table(ACCOUNT, "t").await.expect("delete"));
        assert!(matches!(
            store.count_entities(ACCOUNT, "t").await,
            Err(crate::StoreError::TableNotFound)
        ));
        assert_eq!(store.table_stats(ACCOUNT, "t").await.expect("stats"), None);
        store.create_table(ACCOUNT, "t").await.expect("create");
        assert_exact(&store).await;
        assert_eq!(store.count_entities(ACCOUNT, "t").await.expect("count"), 0);
        write(&store, &[("x", "1", Some(3))]).await;
        assert_exact(&store).await;
        let sizes = store.table_sizes().await.expect("sizes");
        assert_eq!(sizes.len(), 1);
        assert_eq!(
            (sizes[0].entities, sizes[0].bytes),
            (1, 3 + 3),
            "key x\\01 and three bytes"
        );
        store.shutdown().await.expect("shutdown");
        drop(store);

        let report = check(crashed.path(), &mut |_| {}).expect("check");
        assert!(report.damage.is_empty(), "{:?}", report.damage);
    });
}

/// Sets (or, with `None`, removes) table `id`'s counter record in the store in
/// `dir`, which no server has open, as a store from before counters, or a
/// damaged one, would have it.
fn set_counter(dir: &std::path::Path, id: u64, value: Option<(u64, u64)>) {
    use super::checksums::seal;
    use super::counts::count_key;
    use super::disk::OsDisk;
    use super::engine::durable_tx::DurableTx;
    use super::engine::tree::Tree;
    let disk = OsDisk::new(dir).expect("disk");
    let (db, _) = super::opening::open_db(&disk, 1 << 20).expect("open");
    let txn = DurableTx::begin(&db).expect("txn");
    {
        let mut trees = txn.trees().expect("trees");
        let key = count_key(id);
        match value {
            None => trees.remove_unlogged(Tree::Meta, key.as_bytes()).expect("remove"),
            Some((e, b)) => {
                let mut v = e.to_le_bytes().to_vec();
                v.extend_from_slice(&b.to_le_bytes());
                trees
                    .insert_unlogged(Tree::Meta, key.as_bytes(), &seal(key.as_bytes(), &v))
                    .expect("insert")
            }
        }
    }
    txn.commit().expect("commit");
}

#[test]
fn a_table_without_counters_is_counted_at_open_and_a_wrong_counter_is_damage() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        store.create_table(ACCOUNT, "t").await.expect("create");
        write(
            &store,
            &[("a", "1", Some(10)), ("a", "2", Some(20)), ("b", "1", Some(30))],
        )
        .await;
        let want = truth(&store).await;
        store.shutdown().await.expect("shutdown");
        drop(store);

        // The first table's id is 1. Without its counter (a store from before them):
        // a warning for tafel check, counted again when a server opens the store.
        set_counter(dir.path(), 1, None);
        let report = check(dir.path(), &mut |_| {}).expect("check");
        assert!(report.damage.is_empty(), "{:?}", report.damage);
        assert!(
            report.warnings.iter().any(|w| w.problem.contains("has no counter")),
            "{report:?}"
        );
        let store = open(dir.path());
        assert_eq!(
            store.table_stats(ACCOUNT, "t").await.expect("stats"),
            Some(want.clone())
        );
        store.shutdown().await.expect("shutdown");
        drop(store);
        assert!(check(dir.path(), &mut |_| {}).expect("check").warnings.is_empty());

        // A counter that disagrees with the rows is damage, named.
        set_counter(dir.path(), 1, Some((want.entities + 1, want.bytes)));
        let report = check(dir.path(), &mut |_| {}).expect("check");
        assert_eq!(report.damage.len(), 1, "{:?}", report.damage);
        assert!(report.damage[0].place.contains("acct/t"), "{:?}", report.damage);
        assert!(
            report.damage[0].problem.contains("its counter says 4 entities"),
            "{:?}",
            report.damage
        );
    });
}
