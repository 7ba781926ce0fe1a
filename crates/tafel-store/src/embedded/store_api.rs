//! The `Store` methods of the embedded backend: a write becomes a [`Job`] for
//! the writer (`submit`), a read goes to the published snapshot, guarded so that
//! damage redb meets is reported, not a panic on the request's task.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use async_trait::async_trait;

use super::checksums::unseal;
use super::engine::entity_seal;
use super::engine::tree::{ReadTrees, Tree};
use super::jobs::Job;
use super::scan::{scan, table_id};
use super::schema::{guarded, props_key, row_key, table_key, to_store_error};
use super::{counts, feed, index, records, savepoints, snapshot, tables, EmbeddedStore};
use crate::error::{FailureKind, NotReady, StoreError};
use crate::key::EntityKey;
use crate::reset::{ResetError, SavepointInfo};
use crate::stats::StoreMetric;
use crate::traits::{
    Decide, IndexEncoder, IndexError, IndexInfo, IndexScanRequest, RowSink, ScanEnd, ScanRequest, Store, TableRecord,
    TableSize, TableStats,
};

#[async_trait]
impl Store for EmbeddedStore {
    async fn create_table(&self, account: &str, name: &str) -> Result<bool, StoreError> {
        let (account, name) = (account.to_owned(), name.to_owned());
        self.submit(|reply| Job::CreateTable { account, name, reply }).await
    }

    async fn delete_table(&self, account: &str, name: &str) -> Result<bool, StoreError> {
        let (account, name) = (account.to_owned(), name.to_owned());
        let feed_from = match self.kept_deleted() {
            // Kept restorable, the rows stay: the changes still find them.
            Some(_) => 0,
            None => self.materialize_ahead(&account, Some(&name)).await?,
        };
        self.submit(|reply| Job::DeleteTable {
            account,
            name,
            feed_from,
            reply,
        })
        .await
    }

    async fn get_table(&self, account: &str, name: &str) -> Result<Option<TableRecord>, StoreError> {
        Ok(self.read_table(account, name)?.map(|t| t.record))
    }

    async fn set_table_acl(&self, account: &str, name: &str, acl: Vec<u8>) -> Result<bool, StoreError> {
        let (account, name) = (account.to_owned(), name.to_owned());
        self.submit(|reply| Job::SetAcl {
            account,
            name,
            acl,
            reply,
        })
        .await
    }

    async fn list_tables(
        &self,
        account: &str,
        from: Option<&str>,
        limit: usize,
    ) -> Result<Vec<TableRecord>, StoreError> {
        let view = self.opening()?.view();
        guarded(|| tables::list(&*view, account, from, limit))
    }

    async fn get_entity(&self, account: &str, table: &str, key: &EntityKey) -> Result<Option<Vec<u8>>, StoreError> {
        let opening = self.opening()?;
        let (generation, snapshot) = opening.id_view();
        guarded(|| {
            let id = table_id(&snapshot, &opening.ids, &table_key(account, table), generation)?;
            let key = row_key(id, key.as_bytes());
            let found = snapshot.get(Tree::Entities, &key)?;
            found
                .map(|v| entity_seal::unseal(&key, v.bytes()).map(<[u8]>::to_vec))
                .transpose()
        })
    }

    async fn scan_into(
        &self,
        account: &str,
        table: &str,
        request: ScanRequest,
        sink: &mut (dyn RowSink + '_),
    ) -> Result<ScanEnd, StoreError> {
        let key = table_key(account, table);
        let opening = self.opening()?;
        let verify = !self.inner.disk.files_in_memory();
        scan(&opening, &self.inner.stats.rows, &key, &request, verify, sink).await
    }

    async fn write_entities(
        &self,
        account: &str,
        table: &str,
        keys: Vec<EntityKey>,
        decide: Decide,
    ) -> Result<(), StoreError> {
        let (account, table) = (account.to_owned(), table.to_owned());
        self.submit(|reply| Job::Write {
            account,
            table,
            keys,
            decide,
            reply,
        })
        .await
    }

    async fn snapshot(&self) -> Result<Box<dyn crate::Snapshot>, StoreError> {
        Ok(Box::new(snapshot::EmbeddedSnapshot::new(self.opening()?.view())))
    }

    async fn get_service_properties(&self, account: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let view = self.opening()?.view();
        guarded(|| {
            let key = props_key(account);
            let found = view.get(Tree::Meta, key.as_bytes())?;
            found
                .map(|v| unseal(key.as_bytes(), v.bytes()).map(<[u8]>::to_vec))
                .transpose()
        })
    }

    async fn set_service_properties(&self, account: &str, value: Vec<u8>) -> Result<(), StoreError> {
        let account = account.to_owned();
        self.submit(|reply| Job::SetProps { account, value, reply }).await
    }

    async fn truncate_table(&self, account: &str, table: &str) -> Result<Option<u64>, StoreError> {
        let (account, table) = (account.to_owned(), table.to_owned());
        let feed_from = self.materialize_ahead(&account, Some(&table)).await?;
        self.submit(|reply| Job::Truncate {
            account,
            table,
            feed_from,
            reply,
        })
        .await
    }

    async fn put_record(&self, kind: &str, id: &str, value: Vec<u8>) -> Result<(), StoreError> {
        let key = records::key(kind, id);
        self.submit(|reply| Job::SetRecord {
            key,
            value: Some(value),
            reply,
        })
        .await
    }

    async fn get_record(&self, kind: &str, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        records::get(&self.opening()?.view(), kind, id)
    }

    async fn list_records(&self, kind: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        records::list(&self.opening()?.view(), kind)
    }

    async fn delete_record(&self, kind: &str, id: &str) -> Result<(), StoreError> {
        let key = records::key(kind, id);
        self.submit(|reply| Job::SetRecord {
            key,
            value: None,
            reply,
        })
        .await
    }

    async fn ready(&self) -> Result<(), NotReady> {
        self.opening()?.ready()
    }

    fn metrics(&self) -> Vec<StoreMetric> {
        let now = self
            .inner
            .opening
            .load()
            .as_ref()
            .map_or(0, |e| e.pages.bytes_written());
        let before = self.inner.written_before.load(Ordering::Relaxed);
        self.inner.stats.metrics(before + now)
    }

    async fn count_entities(&self, account: &str, table: &str) -> Result<u64, StoreError> {
        let opening = self.opening()?;
        let (generation, snapshot) = opening.id_view();
        guarded(|| {
            let id = table_id(&snapshot, &opening.ids, &table_key(account, table), generation)?;
            match counts::read(&*snapshot, id)? {
                Some((entities, _)) => Ok(entities),
                None => Ok(counts::recount(&*snapshot, id)?.0),
            }
        })
    }

    async fn table_stats(&self, account: &str, table: &str) -> Result<Option<TableStats>, StoreError> {
        let opening = self.opening()?;
        let (generation, snapshot) = opening.id_view();
        guarded(|| {
            let id = match table_id(&snapshot, &opening.ids, &table_key(account, table), generation) {
                Ok(id) => id,
                Err(StoreError::TableNotFound) => return Ok(None),
                Err(e) => return Err(e),
            };
            counts::stats(&*snapshot, id).map(Some)
        })
    }

    async fn table_sizes(&self) -> Result<Vec<TableSize>, StoreError> {
        let view = self.opening()?.view();
        guarded(|| tables::sizes(&*view))
    }

    fn set_table_soft_delete(&self, keep: Option<std::time::Duration>) -> Result<(), crate::UndeleteError> {
        self.keep_deleted(keep);
        Ok(())
    }

    fn table_soft_delete(&self) -> Option<std::time::Duration> {
        self.kept_deleted()
    }

    async fn deleted_tables(&self, account: &str) -> Result<Vec<crate::DeletedTable>, crate::UndeleteError> {
        self.list_deleted(account)
    }

    async fn restore_table(&self, account: &str, id: u64, name: Option<&str>) -> Result<String, crate::UndeleteError> {
        self.restore_deleted(account, id, name).await
    }

    async fn count_tables(&self, account: &str) -> Result<u64, StoreError> {
        let view = self.opening()?.view();
        // Guarded as every read is: redb can panic on a damaged page, which is
        // damage to report, not a reason to take the request's task down.
        guarded(|| tables::count(&*view, account))
    }

    async fn save_savepoint(&self, name: &str) -> Result<(), ResetError> {
        self.savepoint(savepoints::Op::Save(name.to_owned())).await
    }

    async fn restore_savepoint(&self, name: &str) -> Result<(), ResetError> {
        self.savepoint(savepoints::Op::Restore(name.to_owned())).await
    }

    async fn delete_savepoint(&self, name: &str) -> Result<(), ResetError> {
        self.savepoint(savepoints::Op::Delete(name.to_owned())).await
    }

    async fn list_savepoints(&self) -> Result<Vec<SavepointInfo>, ResetError> {
        let view = self.opening()?.view();
        let names = guarded(|| savepoints::names(&*view))?;
        let mut list: Vec<_> = names
            .into_iter()
            .map(|(name, s)| {
                (
                    s.id,
                    SavepointInfo {
                        name,
                        created_ms: s.created_ms,
                    },
                )
            })
            .collect();
        list.sort_by_key(|(id, _)| *id);
        Ok(list.into_iter().map(|(_, info)| info).collect())
    }

    async fn clear_account(&self, account: &str) -> Result<u64, ResetError> {
        let account = account.to_owned();
        self.materialize_ahead(&account, None).await?;
        Ok(self.submit(|reply| Job::ClearAccount { account, reply }).await?)
    }

    fn set_index_encoder(&self, encoder: IndexEncoder) {
        self.inner.feed.index_encoder.store(Some(Arc::new(encoder)));
    }

    async fn create_index(&self, account: &str, table: &str, property: &str) -> Result<bool, IndexError> {
        let (account, table, property) = (account.to_owned(), table.to_owned(), property.to_owned());
        Ok(self
            .submit(|reply| Job::CreateIndex {
                account,
                table,
                property,
                reply,
            })
            .await?)
    }

    async fn drop_index(&self, account: &str, table: &str, property: &str) -> Result<bool, IndexError> {
        let (account, table, property) = (account.to_owned(), table.to_owned(), property.to_owned());
        Ok(self
            .submit(|reply| Job::DropIndex {
                account,
                table,
                property,
                reply,
            })
            .await?)
    }

    async fn list_indexes(&self, account: &str, table: &str) -> Result<Vec<IndexInfo>, IndexError> {
        let opening = self.opening()?;
        let (generation, snapshot) = opening.id_view();
        Ok(guarded(|| {
            let id = table_id(&snapshot, &opening.ids, &table_key(account, table), generation)?;
            index::list(&snapshot, id)
        })?)
    }

    async fn ready_indexes(&self, account: &str, table: &str) -> Result<Vec<String>, StoreError> {
        let opening = self.opening()?;
        let (generation, snapshot) = opening.id_view();
        guarded(|| {
            let id = table_id(&snapshot, &opening.ids, &table_key(account, table), generation)?;
            index::ready(&snapshot, id)
        })
    }

    async fn index_scan_into(
        &self,
        account: &str,
        table: &str,
        request: IndexScanRequest,
        sink: &mut (dyn RowSink + '_),
    ) -> Result<Option<ScanEnd>, StoreError> {
        let opening = self.opening()?;
        let (generation, snapshot) = opening.id_view();
        guarded(|| {
            let id = table_id(&snapshot, &opening.ids, &table_key(account, table), generation)?;
            index::scan(&snapshot, id, &request, sink)
        })
    }

    fn set_change_feed(&self, settings: crate::feed::FeedSettings) -> Result<(), StoreError> {
        self.inner.feed.settings.store(Arc::new(settings));
        Ok(())
    }

    async fn read_changes(
        &self,
        account: &str,
        request: &crate::feed::ChangesRequest,
    ) -> Result<crate::feed::ChangesRead, StoreError> {
        if self.inner.feed.settings.load().for_account(account).is_none() {
            return Ok(crate::feed::ChangesRead::NotEnabled);
        }
        let view = self.opening()?.view();
        guarded(|| feed::read(&view, account, request))
    }

    async fn wait_for_changes(&self, account: &str, head: u64, until: std::time::Instant) {
        let Ok(opening) = self.opening() else {
            return;
        };
        feed::wait(&self.inner.feed, || opening.view(), account, head, until).await;
    }

    async fn shutdown(&self) -> Result<(), StoreError> {
        self.inner.stopped.store(true, Ordering::Release);
        let Some(opening) = self.inner.opening.load_full() else {
            return Ok(());
        };
        if let Some(h) = opening.stop()? {
            tokio::task::spawn_blocking(move || h.join())
                .await
                .map_err(to_store_error)?
                .map_err(|_| StoreError::failure(FailureKind::Internal, "writer panicked"))?;
        }
        Ok(())
    }
}
