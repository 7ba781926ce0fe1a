//! Table ids remembered for reads, so a point read or scan searches only the
//! entity table. Finding the id in `TABLES` is a B-tree search of its own: about
//! as much as the entity lookup itself.
//!
//! Only table deletion makes an id wrong (ids are never reused, and a creation
//! adds a name no entry holds). The writer forgets every id when it
//! publishes the snapshot of a group that deletes a table, before answering it.
//! A reader remembers an id only if no such forgetting happened since before it
//! loaded its snapshot: it reads the generation first, and remembers under the
//! lock the writer forgets under.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

/// Entries kept at most; past this the map starts over (a store with this many
/// tables in use pays the `TABLES` lookup again, nothing more).
const MAX_ENTRIES: usize = 100_000;

#[derive(Default)]
pub(super) struct TableIds {
    /// Bumped (under `ids`' write lock) each time the writer forgets.
    generation: AtomicU64,
    /// `table_key` → id.
    ids: RwLock<HashMap<Vec<u8>, u64>>,
}

impl TableIds {
    /// Read before a reader loads its snapshot; pass to [`TableIds::remember`].
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub(super) fn get(&self, table_key: &[u8]) -> Option<u64> {
        self.ids.read().ok()?.get(table_key).copied()
    }

    /// Remembers `id`, read from a snapshot begun after `generation` was read,
    /// unless the writer has forgotten since.
    pub(super) fn remember(&self, table_key: &[u8], id: u64, generation: u64) {
        let Ok(mut ids) = self.ids.write() else { return };
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        if ids.len() >= MAX_ENTRIES {
            ids.clear();
        }
        ids.insert(table_key.to_vec(), id);
    }

    /// Called by the writer when it publishes a snapshot that may lack
    /// tables, before answering the groups that deleted them.
    pub(super) fn forget_all(&self) {
        // A poisoned lock still guards a consistent map: only insert/clear run under it.
        let mut ids = self.ids.write().unwrap_or_else(|p| p.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        ids.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::TableIds;
    use crate::embedded::scan_tests::tempdir;
    use crate::embedded::{EmbeddedOptions, EmbeddedStore};
    use crate::error::StoreError;
    use crate::key::{EntityKey, KeyRange};
    use crate::test_support::ScanEntities;
    use crate::traits::{Mutation, ScanRequest, Store};

    async fn put(store: &EmbeddedStore, table: &str, key: &EntityKey, value: u8) {
        store
            .write_entities(
                "acct",
                table,
                vec![key.clone()],
                Box::new(move |_: &[Option<&[u8]>]| vec![Mutation::Put(vec![value])]),
            )
            .await
            .expect("write");
    }

    async fn scan_values(store: &EmbeddedStore, table: &str) -> Result<Vec<Vec<u8>>, StoreError> {
        let request = ScanRequest {
            ranges: vec![KeyRange::all()],
            limit: 100,
            filter: None,
            deadline: None,
        };
        let page = store.scan_entities("acct", table, request).await?;
        Ok(page.rows.into_iter().map(|(_, v)| v).collect())
    }

    #[test]
    fn reads_after_a_table_is_deleted_and_created_again_never_use_the_old_id() {
        let dir = tempdir().expect("temp dir");
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        rt.block_on(async {
            let store = EmbeddedStore::open(
                dir.path(),
                EmbeddedOptions {
                    cache_size: 8 << 20,
                    ..EmbeddedOptions::default()
                },
            )
            .expect("open");
            let key = EntityKey::new("p", "r");
            assert!(store.create_table("acct", "t").await.expect("create"));
            put(&store, "t", &key, 1).await;
            // Both read paths remember the id now.
            assert_eq!(store.get_entity("acct", "t", &key).await.expect("get"), Some(vec![1]));
            assert_eq!(scan_values(&store, "t").await.expect("scan"), vec![vec![1]]);

            assert!(store.delete_table("acct", "t").await.expect("delete"));
            assert!(matches!(
                store.get_entity("acct", "t", &key).await,
                Err(StoreError::TableNotFound)
            ));
            assert!(matches!(scan_values(&store, "t").await, Err(StoreError::TableNotFound)));

            // The same name (case-insensitively) is a new, empty table.
            assert!(store.create_table("acct", "T").await.expect("create again"));
            assert_eq!(store.get_entity("acct", "t", &key).await.expect("get"), None);
            put(&store, "T", &key, 2).await;
            assert_eq!(store.get_entity("acct", "t", &key).await.expect("get"), Some(vec![2]));
            assert_eq!(scan_values(&store, "t").await.expect("scan"), vec![vec![2]]);
            store.shutdown().await.expect("shutdown");
        });
    }

    #[test]
    fn an_id_read_before_the_writer_forgot_is_not_remembered() {
        let ids = TableIds::default();
        let before = ids.generation();
        ids.forget_all();
        ids.remember(b"acct\0t", 7, before);
        assert_eq!(ids.get(b"acct\0t"), None);
        ids.remember(b"acct\0t", 8, ids.generation());
        assert_eq!(ids.get(b"acct\0t"), Some(8));
        ids.forget_all();
        assert_eq!(ids.get(b"acct\0t"), None);
    }
}
