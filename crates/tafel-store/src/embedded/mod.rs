//! The embedded backend: one redb file and one write-ahead log in the data directory.
//!
//! Invariants:
//! - Every write runs on the single writer thread, which takes all writes queued
//!   at that moment and applies them one after another in one redb transaction.
//!   This is group commit: concurrent writers share one sync, and each sees the
//!   effects of those queued before it exactly as if they ran alone.
//! - No writer is answered, and no reader sees a change, before it is durable:
//!   each group commits non-durably, and the log thread publishes the snapshot
//!   after that commit only once the group's log record is synced; or the group
//!   commits durably itself (a checkpoint). See [`commit`] and [`wal`].
//! - Entity rows live under `table id (u64, big-endian) ++ EntityKey`; a table's
//!   id is never reused, so rows of a deleted table can never reappear under a new
//!   table of the same name.
//! - Reads use the published snapshot (redb MVCC) and never wait for the writer.
//!
//! Here: options, opening (replay included), and the `Store` methods. `schema.rs`
//! holds the redb tables and key layouts, `writer.rs` the writer thread, `scan.rs`
//! the scans; `commit.rs` the log thread, `wal.rs` the log, `page_file.rs` the
//! file redb writes through.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;

mod checkpoint;
mod commit;
mod disk;
#[cfg(test)]
mod fault_tests;
mod header_copy;
mod page_file;
mod scan;
#[cfg(test)]
mod scan_tests;
mod schema;
#[cfg(test)]
mod sim_disk;
#[cfg(test)]
mod simulation;
mod snapshot;
mod stats;
mod table_ids;
mod wal;
#[cfg(test)]
mod write_tests;
mod writer;

use arc_swap::ArcSwap;
use async_trait::async_trait;
use redb::{Database, ReadableDatabase};
use tokio::sync::oneshot;

use self::checkpoint::SinceCheckpoint;
use self::commit::{Published, Snapshot};
use self::disk::{Disk, OsDisk};
use self::header_copy::HeaderCopy;
use self::page_file::{Durable, PageFile};
use self::scan::{scan, table_id};
use self::schema::{
    be, decode_table, decode_u64, order_key, poisoned, props_key, row_key, table_key, TableValue, ENTITIES, META,
    TABLES, TABLE_ORDER, WAL_SEQ,
};
use self::stats::EmbeddedStats;
use self::table_ids::TableIds;
use self::wal::Wal;
use self::writer::{broken, replay, writer_loop, LogState};
use crate::error::{FailureKind, StoreError};
use crate::key::EntityKey;
use crate::stats::StoreMetric;
use crate::traits::{Decide, RowSink, ScanEnd, ScanRequest, Store, TableRecord};

pub struct EmbeddedOptions {
    /// Bytes of page cache redb may use.
    pub cache_size: usize,
    /// Bytes of the write-ahead log, when it is created: each half holds the
    /// records between two checkpoints. Tests make it small, for checkpoints
    /// every few writes.
    pub log_size: u64,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        EmbeddedOptions {
            cache_size: 256 << 20,
            log_size: wal::LOG_SIZE,
        }
    }
}

/// The store's file redb keeps its B-trees in.
const STORE_FILE: &str = "tafel.redb";

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

enum Job {
    CreateTable {
        account: String,
        name: String,
        reply: Reply<bool>,
    },
    DeleteTable {
        account: String,
        name: String,
        reply: Reply<bool>,
    },
    SetAcl {
        account: String,
        name: String,
        acl: Vec<u8>,
        reply: Reply<bool>,
    },
    SetProps {
        account: String,
        value: Vec<u8>,
        reply: Reply<()>,
    },
    Write {
        account: String,
        table: String,
        keys: Vec<EntityKey>,
        decide: Decide,
        reply: Reply<()>,
    },
}

pub struct EmbeddedStore {
    published: Arc<Published>,
    ids: Arc<TableIds>,
    jobs: std::sync::Mutex<Option<mpsc::Sender<Job>>>,
    writer: std::sync::Mutex<Option<thread::JoinHandle<()>>>,
    /// Set once a log write or sync failed: every write fails until a restart.
    failed: Arc<AtomicBool>,
    /// When redb's syncs are on disk, and whether the page flusher failed.
    pages: Durable,
    stats: Arc<EmbeddedStats>,
    /// Lets tests hold the page flusher back.
    #[cfg(test)]
    durable: Durable,
}

impl EmbeddedStore {
    /// Leaf pages of the entity rows as of the published snapshot.
    #[cfg(test)]
    fn entity_leaf_pages(&self) -> u64 {
        use redb::ReadableTableMetadata;
        self.published.load().entities.stats().expect("stats").leaf_pages()
    }

    /// Opens (or creates) the store in `dir`.
    pub fn open(dir: &Path, options: EmbeddedOptions) -> Result<Self, StoreError> {
        Self::open_on(&OsDisk::new(dir).map_err(be)?, options, None)
    }

    /// [`EmbeddedStore::open`] on `disk`, where no group becomes durable (nor
    /// visible, nor answered) while `hold` is locked (for tests of the commit
    /// pipeline).
    fn open_on(
        disk: &dyn Disk,
        options: EmbeddedOptions,
        hold: Option<Arc<std::sync::Mutex<()>>>,
    ) -> Result<Self, StoreError> {
        let locks = disk.locks(STORE_FILE).map_err(be)?;
        let file = disk.open(STORE_FILE).map_err(be)?;
        let header = HeaderCopy::open(disk, &*file).map_err(be)?;
        let file = PageFile::new(file, locks, header).map_err(be)?;
        let durable = file.durable();
        let pages = durable.clone();
        #[cfg(test)]
        let test_durable = durable.clone();
        let db = Database::builder()
            .set_cache_size(options.cache_size)
            .create_with_backend(file)
            .map_err(be)?;
        // Create the tables up front so readers never see them missing.
        let txn = db.begin_write().map_err(be)?;
        {
            txn.open_table(TABLES).map_err(be)?;
            txn.open_table(TABLE_ORDER).map_err(be)?;
            txn.open_table(ENTITIES).map_err(be)?;
            txn.open_table(META).map_err(be)?;
        }
        txn.commit().map_err(be)?;
        let applied = {
            let txn = db.begin_read().map_err(be)?;
            let meta = txn.open_table(META).map_err(be)?;
            let seq = meta.get(WAL_SEQ).map_err(be)?;
            seq.map(|v| decode_u64(v.value())).transpose()?.unwrap_or(0)
        };
        let (wal, records) = Wal::open(disk, applied, options.log_size).map_err(be)?;
        if !records.is_empty() {
            tracing::info!(records = records.len(), "replaying the write-ahead log");
        }
        replay(&db, &records, wal.last_seq)?;
        // The log starts over in its first half: what replay (and the commits
        // above) made durable must be on disk before a record overwrites the old.
        durable.wait(durable.last_requested()).map_err(be)?;
        let published = Arc::new(ArcSwap::new(Snapshot::take(&db)?));
        let ids = Arc::new(TableIds::default());
        let (tx, rx) = mpsc::channel();
        let (log_tx, log_rx) = mpsc::channel();
        let failed = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(EmbeddedStats::default());
        stats.log_capacity.store(wal.half(), Ordering::Relaxed);
        let state = LogState {
            last_seq: wal.last_seq,
            size: wal.half(),
            since: SinceCheckpoint::default(),
            spare: Arc::default(),
            durable: durable.clone(),
            stats: stats.clone(),
        };
        let log = {
            let shared = commit::LogShared {
                published: published.clone(),
                ids: ids.clone(),
                failed: failed.clone(),
                spare: state.spare.clone(),
                durable,
                stats: stats.clone(),
            };
            thread::Builder::new()
                .name("tafel-log".into())
                .spawn(move || commit::log_loop(wal, log_rx, &shared, hold.as_deref()))
                .map_err(be)?
        };
        let writer_failed = failed.clone();
        let writer = thread::Builder::new()
            .name("tafel-writer".into())
            .spawn(move || {
                writer_loop(&db, state, rx, &log_tx, &writer_failed);
                // The log thread answers what is left, then ends with the channel.
                drop(log_tx);
                if log.join().is_err() {
                    tracing::error!("the log thread panicked");
                }
            })
            .map_err(be)?;
        Ok(EmbeddedStore {
            published,
            ids,
            jobs: std::sync::Mutex::new(Some(tx)),
            writer: std::sync::Mutex::new(Some(writer)),
            failed,
            pages,
            stats,
            #[cfg(test)]
            durable: test_durable,
        })
    }

    async fn submit<T>(&self, make: impl FnOnce(Reply<T>) -> Job) -> Result<T, StoreError> {
        let (reply, rx) = oneshot::channel();
        {
            let guard = self.jobs.lock().map_err(poisoned)?;
            let sender = guard
                .as_ref()
                .ok_or_else(|| StoreError::failure(FailureKind::Stopped, "store is shut down"))?;
            sender
                .send(make(reply))
                .map_err(|_| StoreError::failure(FailureKind::Stopped, "writer stopped"))?;
        }
        // A dropped request: the writer stopped taking writes after a failure; say which.
        rx.await.map_err(|_| match broken(&self.pages, &self.failed) {
            Some((kind, why)) => StoreError::failure(kind, why),
            None => StoreError::failure(FailureKind::Stopped, "writer dropped a request"),
        })?
    }

    /// The newest durable state.
    fn view(&self) -> Arc<Snapshot> {
        self.published.load_full()
    }

    /// The table-id generation, then the snapshot, in that order (see
    /// `TableIds`), for reads that look a table's id up.
    fn id_view(&self) -> (u64, Arc<Snapshot>) {
        let generation = self.ids.generation();
        (generation, self.view())
    }

    fn read_table(&self, account: &str, name: &str) -> Result<Option<TableValue>, StoreError> {
        let snapshot = self.view();
        let found = snapshot.tables.get(table_key(account, name).as_slice()).map_err(be)?;
        found.map(|v| decode_table(v.value())).transpose()
    }
}

#[async_trait]
impl Store for EmbeddedStore {
    async fn create_table(&self, account: &str, name: &str) -> Result<bool, StoreError> {
        let (account, name) = (account.to_owned(), name.to_owned());
        self.submit(|reply| Job::CreateTable { account, name, reply }).await
    }

    async fn delete_table(&self, account: &str, name: &str) -> Result<bool, StoreError> {
        let (account, name) = (account.to_owned(), name.to_owned());
        self.submit(|reply| Job::DeleteTable { account, name, reply }).await
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
        let snapshot = self.view();
        let order = snapshot.txn.open_table(TABLE_ORDER).map_err(be)?;
        let tables = &snapshot.tables;
        let lo = order_key(account, from.unwrap_or(""));
        let mut hi = account.as_bytes().to_vec();
        hi.push(1);
        let prefix = account.len() + 1;
        let mut out = Vec::new();
        for item in order.range::<&[u8]>(lo.as_slice()..hi.as_slice()).map_err(be)? {
            if out.len() >= limit {
                break;
            }
            let (k, _) = item.map_err(be)?;
            let name = std::str::from_utf8(k.value().get(prefix..).unwrap_or_default()).map_err(be)?;
            if let Some(v) = tables.get(table_key(account, name).as_slice()).map_err(be)? {
                out.push(decode_table(v.value())?.record);
            }
        }
        Ok(out)
    }

    async fn get_entity(&self, account: &str, table: &str, key: &EntityKey) -> Result<Option<Vec<u8>>, StoreError> {
        let (generation, snapshot) = self.id_view();
        let id = table_id(&snapshot, &self.ids, &table_key(account, table), generation)?;
        let found = snapshot
            .entities
            .get(row_key(id, key.as_bytes()).as_slice())
            .map_err(be)?;
        Ok(found.map(|v| v.value().to_vec()))
    }

    async fn scan_into(
        &self,
        account: &str,
        table: &str,
        request: ScanRequest,
        sink: &mut (dyn RowSink + '_),
    ) -> Result<ScanEnd, StoreError> {
        let key = table_key(account, table);
        let (generation, snapshot) = self.id_view();
        scan(&self.stats.rows, &snapshot, &self.ids, generation, &key, &request, sink).await
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
        Ok(Box::new(snapshot::EmbeddedSnapshot::new(self.view())))
    }

    async fn get_service_properties(&self, account: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let meta = self.view().txn.open_table(META).map_err(be)?;
        Ok(meta
            .get(props_key(account).as_str())
            .map_err(be)?
            .map(|v| v.value().to_vec()))
    }

    async fn set_service_properties(&self, account: &str, value: Vec<u8>) -> Result<(), StoreError> {
        let account = account.to_owned();
        self.submit(|reply| Job::SetProps { account, value, reply }).await
    }

    async fn ready(&self) -> Result<(), String> {
        if self.jobs.lock().map_err(|e| e.to_string())?.is_none() {
            return Err("the store is shut down".into());
        }
        if let Some((_, why)) = broken(&self.pages, &self.failed) {
            return Err(why);
        }
        let writer_gone = self
            .writer
            .lock()
            .map_err(|e| e.to_string())?
            .as_ref()
            .is_none_or(|w| w.is_finished());
        if writer_gone {
            return Err("the writer thread stopped".into());
        }
        Ok(())
    }

    fn metrics(&self) -> Vec<StoreMetric> {
        self.stats.metrics(self.pages.bytes_written())
    }

    async fn count_tables(&self, account: &str) -> Result<u64, StoreError> {
        let snapshot = self.view();
        let order = snapshot.txn.open_table(TABLE_ORDER).map_err(be)?;
        let lo = order_key(account, "");
        let mut hi = account.as_bytes().to_vec();
        hi.push(1);
        let mut n = 0;
        for item in order.range::<&[u8]>(lo.as_slice()..hi.as_slice()).map_err(be)? {
            item.map_err(be)?;
            n += 1;
        }
        Ok(n)
    }

    async fn shutdown(&self) -> Result<(), StoreError> {
        // Dropping the sender lets the writer finish the queued jobs and exit.
        self.jobs.lock().map_err(poisoned)?.take();
        let handle = self.writer.lock().map_err(poisoned)?.take();
        if let Some(h) = handle {
            tokio::task::spawn_blocking(move || h.join())
                .await
                .map_err(be)?
                .map_err(|_| StoreError::failure(FailureKind::Internal, "writer panicked"))?;
        }
        Ok(())
    }
}
