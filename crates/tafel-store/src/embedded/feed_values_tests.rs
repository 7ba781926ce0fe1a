//! The change feed keeps each new value once (docs/design/feed-values.md): a
//! change whose value is its entity's current one reads it from the entity's
//! row, and every way that row can change or go first gives the change its
//! value back. A change, once read, reads the same while it is kept.

use std::collections::HashMap;
use std::time::Duration;

use super::scan_tests::{open, runtime, tempdir, ACCOUNT};
use super::EmbeddedStore;
use crate::feed::{Change, ChangesFrom, ChangesRead, ChangesRequest, FeedSettings, Retention};
use crate::key::EntityKey;
use crate::traits::{Mutation, Store};

fn feed(store: &EmbeddedStore, on: bool) {
    let all = on.then_some(Retention {
        age: Duration::from_secs(3600),
        max_bytes: None,
    });
    store
        .set_change_feed(FeedSettings {
            all,
            ..FeedSettings::default()
        })
        .expect("feed");
}

async fn write(
    store: &EmbeddedStore,
    table: &str,
    rows: &[&str],
    m: impl Fn(usize) -> Mutation + Send + Sync + 'static,
) {
    let keys: Vec<EntityKey> = rows.iter().map(|r| EntityKey::new("p", r)).collect();
    let n = keys.len();
    store
        .write_entities(ACCOUNT, table, keys, Box::new(move |_| (0..n).map(&m).collect()))
        .await
        .expect("write");
}

/// A value of 700 bytes or more, different for each `seed`.
fn value(seed: usize) -> Vec<u8> {
    (0..700 + seed % 13).map(|i| (i * 31 + seed * 7) as u8).collect()
}

async fn changes(store: &EmbeddedStore) -> Vec<Change> {
    changes_from(store, ChangesFrom::After(0)).await
}

/// Every change from `from` on, page by page.
async fn changes_from(store: &EmbeddedStore, mut from: ChangesFrom) -> Vec<Change> {
    let mut all = Vec::new();
    loop {
        let request = ChangesRequest {
            from,
            limit: 5_000,
            table: None,
        };
        match store.read_changes(ACCOUNT, &request).await.expect("read") {
            ChangesRead::Page(p) if p.changes.is_empty() => return all,
            ChangesRead::Page(p) => {
                all.extend(p.changes);
                from = ChangesFrom::After(p.next_after);
            }
            other => panic!("not a page: {other:?}"),
        }
    }
}

/// Every change read before reads the same now (where it is still kept).
struct Seen(HashMap<u64, Change>);

impl Seen {
    async fn again(&mut self, store: &EmbeddedStore, after: &str) {
        for c in changes(store).await {
            if let Some(before) = self.0.get(&c.position) {
                assert_eq!(before, &c, "change {} after {after}", c.position);
            }
            self.0.insert(c.position, c);
        }
    }

    /// The value the last change of `row` in table `table` read.
    fn last_value(&self, table: &str, row: &str) -> Option<Vec<u8>> {
        let mut of_row: Vec<&Change> = self
            .0
            .values()
            .filter(|c| c.table == table && c.key.as_ref().is_some_and(|k| k.keys().1 == row))
            .collect();
        of_row.sort_by_key(|c| c.position);
        of_row.last().and_then(|c| c.value.clone())
    }
}

#[test]
fn a_new_value_is_stored_once_and_its_change_reads_it_from_the_row() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        feed(&store, true);
        store.create_table(ACCOUNT, "T").await.expect("create");
        let rows: Vec<String> = (0..100).map(|i| format!("r{i:03}")).collect();
        let names: Vec<&str> = rows.iter().map(String::as_str).collect();
        write(&store, "T", &names, |i| Mutation::Put(value(i))).await;
        write(&store, "T", &["single"], |_| Mutation::Put(value(500))).await;
        let read = changes(&store).await;
        assert_eq!(read.len(), 102);
        for (c, i) in read[1..101].iter().zip(0..) {
            assert_eq!(c.value.as_deref(), Some(&value(i)[..]), "change {}", c.position);
        }
        assert_eq!(read[101].value.as_deref(), Some(&value(500)[..]));
        // 101 values of ~700 bytes would fill ~20 leaves more.
        let pages = store.change_leaf_pages();
        assert!(pages <= 4, "{pages} leaf pages for 102 changes");
        store.shutdown().await.expect("shutdown");
        drop(store);
        // Read back after a restart, from the store file alone.
        let store = open(dir.path());
        feed(&store, true);
        assert_eq!(changes(&store).await, read);
        store.shutdown().await.expect("shutdown");
    });
}

#[test]
fn every_way_an_entity_changes_or_goes_leaves_its_earlier_changes_their_values() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        feed(&store, true);
        let mut seen = Seen(HashMap::new());
        store.create_table(ACCOUNT, "T").await.expect("create");
        write(&store, "T", &["a", "b", "c", "d", "e", "f"], |i| {
            Mutation::Put(value(i))
        })
        .await;
        seen.again(&store, "a batch of new rows").await;
        assert_eq!(seen.last_value("T", "c"), Some(value(2)));
        write(&store, "T", &["a"], |_| Mutation::Put(value(10))).await;
        write(&store, "T", &["b"], |_| Mutation::Merge(value(11))).await;
        write(&store, "T", &["c"], |_| Mutation::Delete).await;
        write(&store, "T", &["d"], |_| Mutation::Expire).await;
        write(&store, "T", &["f"], |_| Mutation::Keep).await;
        seen.again(&store, "single writes").await;
        assert_eq!(seen.last_value("T", "a"), Some(value(10)));
        // A key twice in one job: each change keeps its own value.
        write(&store, "T", &["e", "e", "g"], |i| Mutation::Put(value(20 + i))).await;
        seen.again(&store, "a batch naming a key twice").await;
        assert_eq!(seen.last_value("T", "e"), Some(value(21)));
        write(&store, "T", &["a", "b", "g", "h"], |i| Mutation::Put(value(30 + i))).await;
        seen.again(&store, "a batch of existing and new rows").await;
        // Written with the feed off, and read once it is on again.
        feed(&store, false);
        write(&store, "T", &["a", "h"], |i| Mutation::Put(value(40 + i))).await;
        write(&store, "T", &["g"], |_| Mutation::Delete).await;
        feed(&store, true);
        seen.again(&store, "writes with the feed off").await;
        assert_eq!(seen.last_value("T", "h"), Some(value(33)), "the last change recorded");
        store.save_savepoint("s").await.expect("save");
        write(&store, "T", &["a", "b"], |i| Mutation::Put(value(50 + i))).await;
        seen.again(&store, "writes after a savepoint").await;
        store.restore_savepoint("s").await.expect("restore");
        seen.again(&store, "a restore").await;
        write(&store, "T", &["a", "b", "x"], |i| Mutation::Put(value(60 + i))).await;
        seen.again(&store, "writes after a restore").await;
        store.truncate_table(ACCOUNT, "T").await.expect("truncate");
        seen.again(&store, "a truncate").await;
        write(&store, "T", &["a", "b"], |i| Mutation::Put(value(70 + i))).await;
        assert!(store.delete_table(ACCOUNT, "T").await.expect("delete"));
        seen.again(&store, "a table deleted").await;
        // Kept restorable, then purged with the account's tables.
        store
            .set_table_soft_delete(Some(Duration::from_secs(3600)))
            .expect("keep");
        store.create_table(ACCOUNT, "T").await.expect("create");
        write(&store, "T", &["a", "b"], |i| Mutation::Put(value(80 + i))).await;
        store.create_table(ACCOUNT, "U").await.expect("create");
        write(&store, "U", &["a"], |_| Mutation::Put(value(90))).await;
        assert!(store.delete_table(ACCOUNT, "T").await.expect("delete"));
        seen.again(&store, "a table kept restorable").await;
        assert_eq!(seen.last_value("T", "b"), Some(value(81)));
        store.clear_account(ACCOUNT).await.expect("clear");
        seen.again(&store, "the account cleared").await;
        assert_eq!(seen.last_value("U", "a"), Some(value(90)));
        store.shutdown().await.expect("shutdown");
        drop(store);
        let store = open(dir.path());
        feed(&store, true);
        seen.again(&store, "a restart").await;
        store.shutdown().await.expect("shutdown");
        drop(store);
        let report = super::check(dir.path(), &mut |_| {}).expect("check");
        assert!(report.damage.is_empty(), "{:?}", report.damage);
    });
}

#[test]
fn retention_by_size_counts_a_value_the_row_holds() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        store
            .set_change_feed(FeedSettings {
                all: Some(Retention {
                    age: Duration::from_secs(3600),
                    max_bytes: Some(20_000),
                }),
                ..FeedSettings::default()
            })
            .expect("feed");
        store.create_table(ACCOUNT, "T").await.expect("create");
        let rows: Vec<String> = (0..100).map(|i| format!("r{i:03}")).collect();
        let names: Vec<&str> = rows.iter().map(String::as_str).collect();
        write(&store, "T", &names, |i| Mutation::Put(value(i))).await;
        // Retention runs every second; ~25 of ~780 bytes stay under 20 000.
        let mut kept = usize::MAX;
        for _ in 0..100 {
            kept = changes_from(&store, ChangesFrom::Oldest).await.len();
            if kept < 100 {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!((20..=28).contains(&kept), "{kept} changes kept");
        store.shutdown().await.expect("shutdown");
    });
}

/// More values than one bounded step gives back (`feed.rs`, `STEP`): a table's
/// delete and truncate take several steps ahead of the job that drops the rows,
/// and every change keeps its value.
#[test]
fn a_large_table_gives_its_changes_their_values_in_steps_before_it_goes() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        feed(&store, true);
        let mut seen = Seen(HashMap::new());
        for (table, op) in [("T", "truncate"), ("U", "delete")] {
            store.create_table(ACCOUNT, table).await.expect("create");
            for b in 0..80 {
                let rows: Vec<String> = (0..100).map(|i| format!("r{b:02}{i:03}")).collect();
                let names: Vec<&str> = rows.iter().map(String::as_str).collect();
                write(&store, table, &names, move |i| Mutation::Put(value(b * 100 + i))).await;
            }
            seen.again(&store, "the inserts").await;
            match op {
                "truncate" => assert_eq!(
                    store.truncate_table(ACCOUNT, table).await.expect("truncate"),
                    Some(8000)
                ),
                _ => assert!(store.delete_table(ACCOUNT, table).await.expect("delete")),
            }
            seen.again(&store, op).await;
            assert_eq!(seen.last_value(table, "r79099"), Some(value(7999)), "after the {op}");
        }
        assert_eq!(seen.0.len(), 2 + 2 * 8000 + 2);
        store.shutdown().await.expect("shutdown");
    });
}
