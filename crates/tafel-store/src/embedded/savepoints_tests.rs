//! Savepoints (`savepoints.rs`): what a restore brings back, across a restart,
//! in memory, and after a power loss anywhere around a restore.

use std::collections::BTreeMap;

use super::scan_tests::tempdir;
use super::sim_disk::{Mark, SimDisk};
use super::{EmbeddedOptions, EmbeddedStore};
use crate::key::{EntityKey, KeyRange};
use crate::reset::ResetError;
use crate::test_support::ScanEntities;
use crate::traits::{Mutation, ScanRequest, Store};

const ACCOUNT: &str = "acct";

type State = BTreeMap<(String, String), Vec<u8>>;

async fn put(store: &EmbeddedStore, table: &str, row: &str, value: u8) {
    store
        .write_entities(
            ACCOUNT,
            table,
            vec![EntityKey::new("p", row)],
            Box::new(move |_: &[Option<&[u8]>]| vec![Mutation::Put(vec![value])]),
        )
        .await
        .expect("write");
}

/// Every table's rows: (table, row key) → value; a table without rows as
/// (table, "") → empty.
async fn state(store: &EmbeddedStore) -> State {
    let mut out = State::new();
    for t in store.list_tables(ACCOUNT, None, 1000).await.expect("list") {
        out.insert((t.name.clone(), String::new()), Vec::new());
        let request = ScanRequest {
            ranges: vec![KeyRange::all()],
            limit: usize::MAX,
            filter: None,
            deadline: None,
        };
        for (key, v) in store.scan_entities(ACCOUNT, &t.name, request).await.expect("scan").rows {
            out.insert(
                (t.name.clone(), String::from_utf8_lossy(key.as_bytes()).into_owned()),
                v,
            );
        }
    }
    out
}

/// Row `row`'s key in [`State`].
fn row_id(row: &str) -> String {
    String::from_utf8_lossy(EntityKey::new("p", row).as_bytes()).into_owned()
}

fn options() -> EmbeddedOptions {
    EmbeddedOptions {
        cache_size: 4 << 20,
        log_size: 256 << 10,
        ..EmbeddedOptions::default()
    }
}

async fn names(store: &EmbeddedStore) -> Vec<String> {
    let list = store.list_savepoints().await.expect("list savepoints");
    list.into_iter().map(|s| s.name).collect()
}

#[tokio::test]
async fn a_restore_brings_back_the_saved_state_and_later_writes_survive_a_restart() {
    let dir = tempdir().expect("temp dir");
    let store = EmbeddedStore::open(dir.path(), options()).expect("open");
    store.create_table(ACCOUNT, "t").await.expect("create");
    put(&store, "t", "a", 1).await;
    store.set_table_acl(ACCOUNT, "t", b"acl1".to_vec()).await.expect("acl");
    store
        .set_service_properties(ACCOUNT, b"props1".to_vec())
        .await
        .expect("props");
    store.save_savepoint("base").await.expect("save");
    let saved = state(&store).await;
    assert!(matches!(store.save_savepoint("base").await, Err(ResetError::Exists(_))));

    put(&store, "t", "a", 2).await;
    put(&store, "t", "b", 3).await;
    store.create_table(ACCOUNT, "u").await.expect("create u");
    store.set_table_acl(ACCOUNT, "t", b"acl2".to_vec()).await.expect("acl");
    store
        .set_service_properties(ACCOUNT, b"props2".to_vec())
        .await
        .expect("props");
    store.save_savepoint("later").await.expect("save later");
    assert_eq!(names(&store).await, ["base", "later"]);
    assert_ne!(state(&store).await, saved);

    store.restore_savepoint("base").await.expect("restore");
    assert_eq!(state(&store).await, saved);
    let t = store.get_table(ACCOUNT, "t").await.expect("get").expect("t");
    assert_eq!(t.acl, b"acl1");
    let props = store.get_service_properties(ACCOUNT).await.expect("props");
    assert_eq!(props.as_deref(), Some(&b"props1"[..]));
    // Saved after the restored one: on another timeline, gone.
    assert_eq!(names(&store).await, ["base"]);
    assert!(matches!(
        store.restore_savepoint("later").await,
        Err(ResetError::NotFound(_))
    ));

    // Writes after the restore, and a table made again under an old name.
    put(&store, "t", "c", 4).await;
    store.create_table(ACCOUNT, "u").await.expect("create u again");
    put(&store, "u", "x", 5).await;
    let after = state(&store).await;
    store.shutdown().await.expect("shutdown");
    drop(store);

    let store = EmbeddedStore::open(dir.path(), options()).expect("reopen");
    assert_eq!(state(&store).await, after);
    assert_eq!(names(&store).await, ["base"]);
    store.restore_savepoint("base").await.expect("restore after a restart");
    assert_eq!(state(&store).await, saved);
    store.delete_savepoint("base").await.expect("delete");
    assert!(names(&store).await.is_empty());
    assert!(matches!(
        store.delete_savepoint("base").await,
        Err(ResetError::NotFound(_))
    ));
    store.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn an_in_memory_store_restores_too() {
    let store = EmbeddedStore::open_in_memory(64 << 20, 4 << 20, 4 << 20).expect("open");
    store.create_table(ACCOUNT, "t").await.expect("create");
    put(&store, "t", "a", 1).await;
    store.save_savepoint("s").await.expect("save");
    let saved = state(&store).await;
    for round in 0..3u8 {
        put(&store, "t", "a", 10 + round).await;
        store.delete_table(ACCOUNT, "t").await.expect("delete");
        store.restore_savepoint("s").await.expect("restore");
        assert_eq!(state(&store).await, saved, "round {round}");
    }
    store.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn clearing_an_account_leaves_the_others() {
    let store = EmbeddedStore::open_in_memory(64 << 20, 4 << 20, 4 << 20).expect("open");
    for account in [ACCOUNT, "other"] {
        store.create_table(account, "t").await.expect("create");
        store
            .set_service_properties(account, b"p".to_vec())
            .await
            .expect("props");
    }
    put(&store, "t", "a", 1).await;
    assert_eq!(store.clear_account(ACCOUNT).await.expect("clear"), 1);
    assert!(state(&store).await.is_empty());
    assert_eq!(store.get_service_properties(ACCOUNT).await.expect("props"), None);
    assert!(matches!(
        store.get_entity(ACCOUNT, "t", &EntityKey::new("p", "a")).await,
        Err(crate::StoreError::TableNotFound)
    ));
    assert_eq!(store.count_tables("other").await.expect("count"), 1);
    assert!(store.get_service_properties("other").await.expect("props").is_some());
    store.shutdown().await.expect("shutdown");
}

/// A power loss at every point of a run around a restore: the store opens
/// either before the restore (with every write acknowledged before it) or
/// after it (with every write acknowledged after it), never a mix.
#[tokio::test]
async fn a_power_loss_around_a_restore_loses_no_acknowledged_write_and_revives_nothing() {
    let disk = SimDisk::default();
    let store = EmbeddedStore::open_on(Box::new(disk.clone()), options(), None).expect("open");
    store.create_table(ACCOUNT, "t").await.expect("create");
    put(&store, "t", "a", 1).await;
    store.save_savepoint("s").await.expect("save");
    let saved = state(&store).await;
    put(&store, "t", "a", 2).await;
    put(&store, "t", "b", 2).await;
    let before_restore = state(&store).await;
    // Power losses from here on (everything before was acknowledged).
    let from = disk.trace_len();
    disk.mark(Mark::Sent(0));
    store.restore_savepoint("s").await.expect("restore");
    disk.mark(Mark::Acked(0));
    let mut expected = saved.clone();
    for (n, row) in ["c", "d", "e"].into_iter().enumerate() {
        disk.mark(Mark::Sent(n + 1));
        put(&store, "t", row, 3).await;
        disk.mark(Mark::Acked(n + 1));
        expected.insert(("t".into(), row_id(row)), vec![3]);
    }
    drop(store);

    let mut rng = fastrand::Rng::with_seed(44);
    let len = disk.trace_len();
    let mut after_restore = 0;
    for cut in from..=len {
        let marks = disk.marks(cut);
        let acked = |n: usize| marks.contains(&Mark::Acked(n));
        let image = disk.power_loss(cut, &mut rng);
        let reopened = EmbeddedStore::open_on(Box::new(SimDisk::with(image)), options(), None)
            .unwrap_or_else(|e| panic!("cut {cut}: the store did not open: {e}"));
        let found = state(&reopened).await;
        if !marks.contains(&Mark::Sent(0)) {
            // Before the restore was asked for: the last acknowledged state.
            assert_eq!(found, before_restore, "cut {cut}");
        } else if found == before_restore {
            assert!(!acked(0), "cut {cut}: an acknowledged restore was lost");
        } else {
            // The restored state with a prefix of the later writes, at least
            // those acknowledged.
            let later: Vec<_> = found.keys().filter(|k| !saved.contains_key(*k)).cloned().collect();
            for (k, v) in &saved {
                assert_eq!(found.get(k), Some(v), "cut {cut}: {k:?} of the saved state");
            }
            for k in &later {
                assert_eq!(
                    expected.get(k),
                    found.get(k),
                    "cut {cut}: {k:?} is from before the restore"
                );
            }
            for (n, row) in ["c", "d", "e"].into_iter().enumerate() {
                let k = ("t".to_owned(), row_id(row));
                if acked(n + 1) {
                    assert!(found.contains_key(&k), "cut {cut}: acknowledged write {row} lost");
                }
            }
        }
        assert_eq!(names(&reopened).await, ["s"], "cut {cut}");
        after_restore += usize::from(found != before_restore);
        reopened.shutdown().await.expect("shutdown");
    }
    // The power losses struck on both sides of the restore.
    assert!(
        after_restore > 0 && after_restore < len - from,
        "{after_restore} of {}",
        len - from
    );
}

/// Clearing an account is logged like any write: replayed after a crash (its
/// removal of the service properties too), not lost.
#[tokio::test]
async fn a_cleared_account_stays_cleared_after_a_crash() {
    let disk = SimDisk::default();
    let store = EmbeddedStore::open_on(Box::new(disk.clone()), options(), None).expect("open");
    store.create_table(ACCOUNT, "t").await.expect("create");
    put(&store, "t", "a", 1).await;
    store
        .set_service_properties(ACCOUNT, b"p".to_vec())
        .await
        .expect("props");
    store
        .set_service_properties("other", b"q".to_vec())
        .await
        .expect("props");
    assert_eq!(store.clear_account(ACCOUNT).await.expect("clear"), 1);
    // The files as a power loss now leaves them: the clear only in the log.
    let image = disk.synced(disk.trace_len());
    drop(store);
    let store = EmbeddedStore::open_on(Box::new(SimDisk::with(image)), options(), None).expect("reopen");
    assert!(state(&store).await.is_empty());
    assert_eq!(store.get_service_properties(ACCOUNT).await.expect("props"), None);
    let other = store.get_service_properties("other").await.expect("props");
    assert_eq!(other.as_deref(), Some(&b"q"[..]));
    store.shutdown().await.expect("shutdown");
}
