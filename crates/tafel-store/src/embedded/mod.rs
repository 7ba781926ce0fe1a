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

use std::collections::VecDeque;
use std::ops::Bound;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

mod checkpoint;
mod commit;
mod page_file;
#[cfg(test)]
mod scan_tests;
mod snapshot;
mod stats;
mod table_ids;
mod wal;
#[cfg(test)]
mod write_tests;

use arc_swap::ArcSwap;
use async_trait::async_trait;
use redb::{CursorError, Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use tokio::sync::oneshot;

use self::checkpoint::SinceCheckpoint;
use self::commit::{Checkpoint, Committed, Pending, Published, Snapshot};
use self::page_file::{Durable, PageFile};
use self::stats::EmbeddedStats;
use self::table_ids::TableIds;
use self::wal::{decode_ops, LogBuf, Op, Spare, Wal};
use crate::error::{kind_of_io, BackendError, FailureKind, StoreError};
use crate::key::{EntityKey, KeyRef};
use crate::page::PageBuilder;
use crate::stats::{RowCounts, StoreMetric};
use crate::traits::{Decide, Mutation, RowSink, ScanEnd, ScanRequest, Store, TableRecord};

/// `account 0x00 lowercase-table-name` → `id u64 LE, name len u16 LE, name, acl`.
const TABLES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("tables");
/// `account 0x00 table-name-as-created` → nothing: the listing order, which is
/// ordinal on the stored name while lookups ignore case.
const TABLE_ORDER: TableDefinition<&[u8], ()> = TableDefinition::new("table_order");
/// `table id u64 BE ++ EntityKey` → entity value.
const ENTITIES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("entities");
/// Counters and per-account settings.
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

const NEXT_TABLE_ID: &str = "next_table_id";
/// META key of the number of the last log record the state includes.
const WAL_SEQ: &str = "wal_seq";
/// Upper bound of jobs folded into one commit, so one commit's latency stays bounded.
const MAX_GROUP: usize = 512;
/// An idle writer checkpoints after this long without a write.
const IDLE_CHECKPOINT: Duration = Duration::from_secs(1);

/// Table tags in log records.
const T_TABLES: u8 = 0;
const T_ORDER: u8 = 1;
const T_ENTITIES: u8 = 2;
const T_META: u8 = 3;

pub struct EmbeddedOptions {
    /// Bytes of page cache redb may use.
    pub cache_size: usize,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        EmbeddedOptions { cache_size: 256 << 20 }
    }
}

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

fn order_key(account: &str, name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(account.len() + 1 + name.len());
    k.extend_from_slice(account.as_bytes());
    k.push(0);
    k.extend_from_slice(name.as_bytes());
    k
}

fn table_key(account: &str, name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(account.len() + 1 + name.len());
    k.extend_from_slice(account.as_bytes());
    k.push(0);
    k.extend(name.bytes().map(|b| b.to_ascii_lowercase()));
    k
}

fn props_key(account: &str) -> String {
    format!("props/{account}")
}

struct TableValue {
    id: u64,
    record: TableRecord,
}

fn encode_table(id: u64, name: &str, acl: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(10 + name.len() + acl.len());
    v.extend_from_slice(&id.to_le_bytes());
    v.extend_from_slice(&(name.len() as u16).to_le_bytes());
    v.extend_from_slice(name.as_bytes());
    v.extend_from_slice(acl);
    v
}

fn decode_table(v: &[u8]) -> Result<TableValue, StoreError> {
    let corrupt = || StoreError::failure(FailureKind::Corrupt, "corrupt table record");
    let id = u64::from_le_bytes(v.get(..8).ok_or_else(corrupt)?.try_into().map_err(|_| corrupt())?);
    let len = u16::from_le_bytes(v.get(8..10).ok_or_else(corrupt)?.try_into().map_err(|_| corrupt())?) as usize;
    let name = v.get(10..10 + len).ok_or_else(corrupt)?;
    let name = String::from_utf8(name.to_vec()).map_err(|_| corrupt())?;
    Ok(TableValue {
        id,
        record: TableRecord {
            name,
            acl: v[10 + len..].to_vec(),
        },
    })
}

fn row_key(id: u64, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + key.len());
    k.extend_from_slice(&id.to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// A redb (or other) error as a backend failure, kept as its cause. Its kind
/// comes from the `io::Error` inside: redb's errors hold it without exposing
/// it as their `source()`, so they are looked into here.
fn be<E: std::error::Error + Send + Sync + 'static>(e: E) -> StoreError {
    StoreError::Backend(backend_error(e))
}

fn backend_error<E: std::error::Error + Send + Sync + 'static>(e: E) -> BackendError {
    let kind = redb_failure(&e).unwrap_or(FailureKind::Internal);
    BackendError::caused_by(kind, "embedded store", e)
}

fn poisoned<T>(_: std::sync::PoisonError<T>) -> StoreError {
    StoreError::failure(FailureKind::Internal, "a store lock was poisoned by a panic")
}

fn redb_failure(e: &(dyn std::error::Error + 'static)) -> Option<FailureKind> {
    let storage = |s: &redb::StorageError| match s {
        redb::StorageError::Io(io) => Some(kind_of_io(io.kind())),
        redb::StorageError::Corrupted(_) => Some(FailureKind::Corrupt),
        _ => None,
    };
    if let Some(e) = e.downcast_ref::<redb::Error>() {
        return match e {
            redb::Error::Io(io) => Some(kind_of_io(io.kind())),
            redb::Error::Corrupted(_) => Some(FailureKind::Corrupt),
            _ => None,
        };
    }
    if let Some(s) = e.downcast_ref::<redb::StorageError>() {
        return storage(s);
    }
    if let Some(redb::CommitError::Storage(s)) = e.downcast_ref() {
        return storage(s);
    }
    if let Some(redb::TransactionError::Storage(s)) = e.downcast_ref() {
        return storage(s);
    }
    if let Some(redb::TableError::Storage(s)) = e.downcast_ref() {
        return storage(s);
    }
    match e.downcast_ref() {
        Some(redb::DatabaseError::Storage(s)) => storage(s),
        _ => None,
    }
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
        Self::open_held(dir, options, None)
    }

    /// [`EmbeddedStore::open`], where no group becomes durable (nor visible, nor
    /// answered) while `hold` is locked: for tests of the commit pipeline.
    fn open_held(
        dir: &Path,
        options: EmbeddedOptions,
        hold: Option<Arc<std::sync::Mutex<()>>>,
    ) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).map_err(be)?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join("tafel.redb"))
            .map_err(be)?;
        let file = PageFile::new(file).map_err(be)?;
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
        let (wal, records) = Wal::open(dir, applied).map_err(be)?;
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
        rx.await.map_err(|_| match self.failure() {
            Some(why) => StoreError::failure(FailureKind::Io, why),
            None => StoreError::failure(FailureKind::Stopped, "writer dropped a request"),
        })?
    }

    /// Why writes fail, after the log or the store file could not be written.
    fn failure(&self) -> Option<String> {
        if let Some(e) = self.pages.failure() {
            return Some(format!(
                "writing the store file failed ({e}); writes fail until a restart"
            ));
        }
        self.failed
            .load(Ordering::Acquire)
            .then(|| "the write-ahead log failed; writes fail until a restart".to_owned())
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

fn decode_u64(v: &[u8]) -> Result<u64, StoreError> {
    Ok(u64::from_le_bytes(v.try_into().map_err(be)?))
}

/// Applies the records found in the log on open and commits them durably, so
/// the log can be written from its start again; the commit also sets `wal_seq`
/// to `next`, the number the records after open count on from (see [`Wal::open`]).
fn replay(db: &Database, records: &[wal::Record], next: u64) -> Result<(), StoreError> {
    let mut txn = db.begin_write().map_err(be)?;
    txn.set_durability(Durability::Immediate).map_err(be)?;
    {
        let mut tables = Tables::open(&txn).map_err(be)?;
        for r in records {
            let ops = decode_ops(&r.payload)
                .ok_or_else(|| StoreError::failure(FailureKind::Corrupt, format!("corrupt log record {}", r.seq)))?;
            for op in &ops {
                tables.apply(op)?;
            }
        }
        tables.meta.insert(WAL_SEQ, next.to_le_bytes().as_slice()).map_err(be)?;
    }
    txn.commit().map_err(be)
}

/// The writer's account of the log, and of when redb itself last made the state
/// durable. The log thread writes the records in the order the writer numbers
/// them, so the writer knows what the log holds without waiting for it.
struct LogState {
    /// Number of the last record (or of the one the last checkpoint includes).
    last_seq: u64,
    /// Bytes a log half holds: the records since the last checkpoint must fit.
    size: u64,
    since: SinceCheckpoint,
    /// Record buffers the log thread is done with.
    spare: Arc<Spare>,
    /// When redb's syncs are on disk.
    durable: Durable,
    stats: Arc<EmbeddedStats>,
}

impl LogState {
    fn fits(&self, record: &LogBuf) -> bool {
        self.since.bytes + record.len() <= self.size
    }
}

/// The writer thread: group commit, see the module invariants.
fn writer_loop(
    db: &Database,
    mut state: LogState,
    rx: mpsc::Receiver<Job>,
    log: &mpsc::Sender<Committed>,
    failed: &AtomicBool,
) {
    loop {
        let first = match rx.recv_timeout(IDLE_CHECKPOINT) {
            Ok(job) => job,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if state.since.any() {
                    run_group(db, &mut state, log, failed, Vec::new());
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        run_group(db, &mut state, log, failed, group);
        // Now make everything durable in redb if due.
        if state.since.checkpoint_due(Instant::now()) {
            run_group(db, &mut state, log, failed, Vec::new());
        }
    }
    // Shutting down: leave nothing to replay.
    if state.since.any() {
        run_group(db, &mut state, log, failed, Vec::new());
    }
}

/// Runs one group of jobs in one transaction, commits it (non-durably, or as a
/// checkpoint) and hands it to the log thread. An empty group with pending
/// non-durable commits is a plain checkpoint.
fn run_group(
    db: &Database,
    state: &mut LogState,
    to_log: &mpsc::Sender<Committed>,
    failed: &AtomicBool,
    group: Vec<Job>,
) {
    let mut committed = Committed {
        deletes_table: group.iter().any(|j| matches!(j, Job::DeleteTable { .. })),
        pending: Vec::with_capacity(group.len()),
        ..Committed::default()
    };
    let checkpoint_alone = group.is_empty();
    let jobs = group.len() as u64;
    committed.result = (|| -> Result<(), BackendError> {
        if failed.load(Ordering::Acquire) {
            // The log is broken: change nothing more. Dropping the jobs fails them.
            return Err(BackendError::new(FailureKind::Stopped, "write-ahead log failed"));
        }
        let mut txn = db.begin_write().map_err(backend_error)?;
        let mut log = state.spare.take();
        let checkpoint;
        let unchanged;
        let mut seq = state.last_seq;
        {
            let tables = Tables::open(&txn).map_err(backend_error)?;
            let mut w = Writer { tables, log: &mut log };
            for job in group {
                committed.pending.push(w.apply(job));
            }
            let Writer { tables, .. } = w;
            // A group too big for the rest of the log commits durably itself.
            checkpoint = checkpoint_alone || !state.fits(&log);
            unchanged = log.payload_len() == 0 && !checkpoint;
            if !unchanged {
                if !checkpoint {
                    seq += 1;
                }
                let mut meta = tables.meta;
                meta.insert(WAL_SEQ, seq.to_le_bytes().as_slice())
                    .map_err(backend_error)?;
            }
        }
        if unchanged {
            // Every job failed or changed nothing: there is nothing to commit.
            return txn.abort().map_err(backend_error);
        }
        let level = if checkpoint {
            Durability::Immediate
        } else {
            Durability::None
        };
        txn.set_durability(level).map_err(backend_error)?;
        if checkpoint && state.since.any() {
            // No reader may be left on an older state: see `wait_published`.
            #[cfg(test)]
            state.stats.publication_waits.fetch_add(1, Ordering::Relaxed);
            commit::wait_published(to_log);
        }
        let started = Instant::now();
        txn.commit().map_err(backend_error)?;
        state.last_seq = seq;
        if jobs > 0 {
            state.stats.group_jobs.observe(jobs as f64);
        }
        if checkpoint {
            state.stats.checkpoint_seconds.observe_duration(started.elapsed());
            state.stats.checkpoint_log_bytes.observe(state.since.bytes as f64);
            // The writer stood still meanwhile: the writes' p99.9.
            tracing::debug!(ms = started.elapsed().as_secs_f64() * 1e3, "checkpoint committed");
            committed.checkpoint = Some(Checkpoint {
                sync: state.durable.last_requested(),
                // A group too big for the log is in no record: durable only on disk.
                on_disk_first: !checkpoint_alone || state.since.small_writes(),
            });
            state.since = SinceCheckpoint::default();
        } else {
            state.since.add(log.len(), jobs, Instant::now());
            committed.record = Some((log, seq));
        }
        state.stats.log_fill.store(state.since.bytes, Ordering::Relaxed);
        committed.snapshot = Some(Snapshot::take(db).map_err(|e| match e {
            StoreError::Backend(b) => b,
            other => BackendError::new(FailureKind::Internal, other.to_string()),
        })?);
        Ok(())
    })();
    if let Err(e) = &committed.result {
        tracing::error!(error = %e, "commit failed; failing every request of the group");
    }
    #[cfg(test)]
    state.stats.jobs_done.fetch_add(jobs, Ordering::Relaxed);
    if let Err(mpsc::SendError(c)) = to_log.send(committed) {
        c.answer(&Err(BackendError::new(FailureKind::Stopped, "the log thread stopped")));
    }
}

/// The store's redb tables, open in one write transaction.
struct Tables<'t> {
    tables: redb::Table<'t, &'static [u8], &'static [u8]>,
    order: redb::Table<'t, &'static [u8], ()>,
    entities: redb::Table<'t, &'static [u8], &'static [u8]>,
    meta: redb::Table<'t, &'static str, &'static [u8]>,
}

impl<'t> Tables<'t> {
    fn open(txn: &'t redb::WriteTransaction) -> Result<Self, redb::TableError> {
        Ok(Tables {
            tables: txn.open_table(TABLES)?,
            order: txn.open_table(TABLE_ORDER)?,
            entities: txn.open_table(ENTITIES)?,
            meta: txn.open_table(META)?,
        })
    }

    /// The byte-keyed table a log op names.
    fn by_tag(&mut self, t: u8) -> Result<&mut redb::Table<'t, &'static [u8], &'static [u8]>, StoreError> {
        match t {
            T_TABLES => Ok(&mut self.tables),
            T_ENTITIES => Ok(&mut self.entities),
            _ => Err(StoreError::failure(
                FailureKind::Corrupt,
                format!("log op on table {t}"),
            )),
        }
    }

    /// Carries out one logged change (live, or replayed from the log).
    fn apply(&mut self, op: &Op<'_>) -> Result<(), StoreError> {
        match *op {
            Op::Insert {
                table: T_ORDER, key, ..
            } => self.order.insert(key, ()).map(drop).map_err(be),
            Op::Remove { table: T_ORDER, key } => self.order.remove(key).map(drop).map_err(be),
            Op::Insert {
                table: T_META,
                key,
                value,
            } => {
                let key = std::str::from_utf8(key).map_err(be)?;
                self.meta.insert(key, value).map(drop).map_err(be)
            }
            Op::Insert { table, key, value } => self.by_tag(table)?.insert(key, value).map(drop).map_err(be),
            Op::Remove { table, key } => self.by_tag(table)?.remove(key).map(drop).map_err(be),
            Op::RemoveRange { table, lo, hi } => self.by_tag(table)?.retain_in(lo..hi, |_, _| false).map_err(be),
        }
    }
}

/// Applies jobs, logging every change it makes.
struct Writer<'t, 'l> {
    tables: Tables<'t>,
    log: &'l mut LogBuf,
}

impl Writer<'_, '_> {
    fn change(&mut self, op: Op<'_>) -> Result<(), StoreError> {
        self.tables.apply(&op)?;
        self.log.push(&op);
        Ok(())
    }

    fn apply(&mut self, job: Job) -> Pending {
        match job {
            Job::CreateTable { account, name, reply } => Pending::Bool(reply, self.create_table(&account, &name)),
            Job::DeleteTable { account, name, reply } => Pending::Bool(reply, self.delete_table(&account, &name)),
            Job::SetAcl {
                account,
                name,
                acl,
                reply,
            } => Pending::Bool(reply, self.set_acl(&account, &name, &acl)),
            Job::SetProps { account, value, reply } => {
                let r = self.change(Op::Insert {
                    table: T_META,
                    key: props_key(&account).as_bytes(),
                    value: &value,
                });
                Pending::Unit(reply, r)
            }
            Job::Write {
                account,
                table,
                keys,
                decide,
                reply,
            } => Pending::Unit(reply, self.write(&account, &table, &keys, decide)),
        }
    }

    fn table(&self, account: &str, name: &str) -> Result<Option<TableValue>, StoreError> {
        let found = self
            .tables
            .tables
            .get(table_key(account, name).as_slice())
            .map_err(be)?;
        found.map(|v| decode_table(v.value())).transpose()
    }

    fn create_table(&mut self, account: &str, name: &str) -> Result<bool, StoreError> {
        if self.table(account, name)?.is_some() {
            return Ok(false);
        }
        let id = match self.tables.meta.get(NEXT_TABLE_ID).map_err(be)? {
            Some(v) => decode_u64(v.value())?,
            None => 1,
        };
        self.change(Op::Insert {
            table: T_META,
            key: NEXT_TABLE_ID.as_bytes(),
            value: &(id + 1).to_le_bytes(),
        })?;
        self.change(Op::Insert {
            table: T_TABLES,
            key: &table_key(account, name),
            value: &encode_table(id, name, &[]),
        })?;
        self.change(Op::Insert {
            table: T_ORDER,
            key: &order_key(account, name),
            value: &[],
        })?;
        Ok(true)
    }

    fn delete_table(&mut self, account: &str, name: &str) -> Result<bool, StoreError> {
        let Some(t) = self.table(account, name)? else {
            return Ok(false);
        };
        self.change(Op::Remove {
            table: T_TABLES,
            key: &table_key(account, name),
        })?;
        self.change(Op::Remove {
            table: T_ORDER,
            key: &order_key(account, &t.record.name),
        })?;
        self.change(Op::RemoveRange {
            table: T_ENTITIES,
            lo: &t.id.to_be_bytes(),
            hi: &(t.id + 1).to_be_bytes(),
        })?;
        Ok(true)
    }

    fn set_acl(&mut self, account: &str, name: &str, acl: &[u8]) -> Result<bool, StoreError> {
        let Some(t) = self.table(account, name)? else {
            return Ok(false);
        };
        self.change(Op::Insert {
            table: T_TABLES,
            key: &table_key(account, name),
            value: &encode_table(t.id, &t.record.name, acl),
        })?;
        Ok(true)
    }

    fn write(&mut self, account: &str, table: &str, keys: &[EntityKey], decide: Decide) -> Result<(), StoreError> {
        let Some(t) = self.table(account, table)? else {
            return Err(StoreError::TableNotFound);
        };
        let full: Vec<Vec<u8>> = keys.iter().map(|k| row_key(t.id, k.as_bytes())).collect();
        let mut current: Vec<Option<Vec<u8>>> = Vec::with_capacity(keys.len());
        for k in &full {
            current.push(
                self.tables
                    .entities
                    .get(k.as_slice())
                    .map_err(be)?
                    .map(|v| v.value().to_vec()),
            );
        }
        let views: Vec<Option<&[u8]>> = current.iter().map(|c| c.as_deref()).collect();
        let mutations = catch_unwind(AssertUnwindSafe(|| decide(&views)))
            .map_err(|_| StoreError::failure(FailureKind::Internal, "write decision panicked"))?;
        if !mutations.is_empty() {
            if mutations.len() != full.len() {
                return Err(StoreError::failure(
                    FailureKind::Internal,
                    "decision does not cover every key",
                ));
            }
            // A batch's new rows go in last, as ascending runs, when its keys are
            // distinct (they are for every batch the service accepts; with a
            // repeated key the order of the changes matters, so they keep it). A
            // single-row write takes the plain path.
            let mut fresh: Vec<(&[u8], Vec<u8>)> = Vec::new();
            let runs = full.len() > 1 && distinct_keys(&full);
            for ((k, m), old) in full.iter().zip(mutations).zip(&current) {
                match m {
                    Mutation::Put(v) if runs && old.is_none() => fresh.push((k, v)),
                    Mutation::Put(v) => self.change(Op::Insert {
                        table: T_ENTITIES,
                        key: k,
                        value: &v,
                    })?,
                    Mutation::Delete => self.change(Op::Remove {
                        table: T_ENTITIES,
                        key: k,
                    })?,
                    Mutation::Keep => {}
                }
            }
            self.insert_new_rows(fresh)?;
        }
        Ok(())
    }

    /// Inserts entity rows whose keys are absent and distinct. Two or more go in
    /// through a cursor in key order: redb packs such a run into full leaves,
    /// where inserting rows one by one splits each full leaf in half: a table
    /// loaded by batches took a third more pages (cache, disk, checkpoint writes)
    /// than its rows need.
    fn insert_new_rows(&mut self, mut rows: Vec<(&[u8], Vec<u8>)>) -> Result<(), StoreError> {
        rows.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut rest = rows.as_slice();
        while rest.len() >= 2 {
            let placed = insert_run(&mut self.tables.entities, self.log, rest)?;
            rest = &rest[placed..];
            if placed == 1 {
                // New rows alternate with existing ones: a run of one costs a
                // third more than a plain insert, so the rest go in one by one.
                break;
            }
        }
        for (key, value) in rest {
            self.change(Op::Insert {
                table: T_ENTITIES,
                key,
                value,
            })?;
        }
        Ok(())
    }
}

/// Inserts `rows` (sorted, absent) through one cursor, from the first row's gap
/// up to the first row an existing one sorts before; returns how many went in.
fn insert_run(
    entities: &mut redb::Table<'_, &'static [u8], &'static [u8]>,
    log: &mut LogBuf,
    rows: &[(&[u8], Vec<u8>)],
) -> Result<usize, StoreError> {
    let Some((first, _)) = rows.first() else {
        return Ok(0);
    };
    let mut cursor = entities.lower_bound_mut(Bound::Included(*first)).map_err(be)?;
    let mut placed = 0;
    for (key, value) in rows {
        match cursor.insert_before(*key, value.as_slice()) {
            Ok(()) => {}
            // An existing row sorts before this one: the run ends here. (The
            // first row, refused at its own gap, exists after all: an error.)
            Err(CursorError::UnorderedKey) if placed > 0 => break,
            Err(e) => return Err(be(e)),
        }
        log.push(&Op::Insert {
            table: T_ENTITIES,
            key,
            value,
        });
        placed += 1;
    }
    cursor.close().map_err(be)?;
    Ok(placed)
}

/// Whether no key repeats.
fn distinct_keys(keys: &[Vec<u8>]) -> bool {
    let mut sorted: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    sorted.sort_unstable();
    sorted.windows(2).all(|w| w[0] != w[1])
}

/// Rows a scan pulls ahead of the one it offers.
const LOOKAHEAD: usize = 8;
/// Where in the lookahead a row is filtered: far enough behind its pull that the
/// first cache lines prefetched then have arrived, and far enough ahead of its
/// offer that the rest of a matching row, prefetched now, arrives before the row
/// is encoded.
const FILTER_AT: usize = LOOKAHEAD / 2;

/// Asks the CPU to start loading the first two cache lines of `bytes`.
#[inline(always)]
fn prefetch(bytes: &[u8]) {
    prefetch_lines(bytes, 2);
}

/// Asks the CPU to start loading every cache line of `bytes` past the first two.
#[inline(always)]
fn prefetch_rest(bytes: &[u8]) {
    if let Some(rest) = bytes.get(128..) {
        prefetch_lines(rest, rest.len().div_ceil(64));
    }
}

/// Prefetches up to `lines` cache lines from the start of `bytes`.
#[inline(always)]
fn prefetch_lines(bytes: &[u8], lines: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = bytes.as_ptr().cast::<i8>();
        for line in 0..lines.min(bytes.len().div_ceil(64)) {
            // SAFETY: SSE is part of x86_64's baseline, and a prefetch is only a hint:
            // it never faults and reads nothing into the program. The address stays
            // within `bytes`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(line * 64)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, lines);
}

/// The entity key of a stored row key (after its 8-byte table id).
fn entity_key(row_key: &[u8]) -> KeyRef<'_> {
    KeyRef::new(row_key.get(8..).unwrap_or_default())
}

/// The id of the table under `table_key` in `snapshot`, or `TableNotFound`;
/// `generation` was read from `ids` before the snapshot was loaded.
fn table_id(snapshot: &Snapshot, ids: &TableIds, table_key: &[u8], generation: u64) -> Result<u64, StoreError> {
    if let Some(id) = ids.get(table_key) {
        return Ok(id);
    }
    let id = match snapshot.tables.get(table_key).map_err(be)? {
        Some(v) => decode_table(v.value())?.id,
        None => return Err(StoreError::TableNotFound),
    };
    ids.remember(table_key, id, generation);
    Ok(id)
}

/// How long a scan runs before it lets the other requests of its thread run.
const SCAN_SLICE: Duration = Duration::from_millis(10);
/// Rows examined between looks at the clock.
const SLICE_CHECK_EVERY: u32 = 256;

/// One page of a scan, table lookup included, in a single snapshot. It runs on
/// the calling task, where its sink encodes each row while the row is in the CPU
/// cache, and gives way every [`SCAN_SLICE`]: a long page shares its thread with
/// other requests, yet the scans in flight never outnumber the runtime's threads
/// (more threads than cores only time-slice them and evict each other's rows
/// from the caches).
async fn scan(
    rows: &RowCounts,
    snapshot: &Snapshot,
    ids: &TableIds,
    generation: u64,
    table_key: &[u8],
    request: &ScanRequest,
    sink: &mut (dyn RowSink + '_),
) -> Result<ScanEnd, StoreError> {
    let mut slice_end = Instant::now() + SCAN_SLICE;
    let mut since_check = 0u32;
    let id = table_id(snapshot, ids, table_key, generation)?;
    let entities = &snapshot.entities;
    let mut page = PageBuilder::new(request, sink).counted(rows);
    let table_prefix = id.to_be_bytes();
    for range in &request.ranges {
        if range.is_empty() {
            continue;
        }
        let lo = row_key(id, &range.start);
        // A range open at the end stops at the table's last row, which the loop
        // sees by the id prefix: cheaper than redb comparing every key to a bound.
        let hi = range.end.as_ref().map(|e| row_key(id, e));
        let upper = hi.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut iter = entities
            .range::<&[u8]>((Bound::Included(lo.as_slice()), upper))
            .map_err(be)?;
        // Rows are offered in order, but pulled a few ahead with their first cache
        // lines prefetched, and filtered halfway (FILTER_AT) with the rest of a
        // match prefetched: a scan of a table larger than the CPU cache otherwise
        // waits on one miss per row, and on several per row it encodes.
        let mut ahead = VecDeque::with_capacity(LOOKAHEAD);
        let mut exhausted = false;
        let in_table = |k: &[u8]| k.starts_with(&table_prefix);
        loop {
            while !exhausted && ahead.len() < LOOKAHEAD {
                match iter.next() {
                    Some(Ok((k, v))) => {
                        prefetch(k.value());
                        prefetch(v.value());
                        ahead.push_back((k, v, None));
                    }
                    Some(Err(e)) => return Err(be(e)),
                    None => exhausted = true,
                }
            }
            if let Some((k, v, matched)) = ahead.get_mut(FILTER_AT) {
                if in_table(k.value()) {
                    let m = page.matches(entity_key(k.value()), v.value());
                    if m {
                        prefetch_rest(v.value());
                    }
                    *matched = Some(m);
                }
            }
            let Some((k, v, matched)) = ahead.front() else { break };
            if !in_table(k.value()) {
                break;
            }
            let key = entity_key(k.value());
            let matched = matched.unwrap_or_else(|| page.matches(key, v.value()));
            if let Some(end) = page.offer_matched(key, v.value(), matched) {
                return Ok(end);
            }
            ahead.pop_front();
            since_check += 1;
            if since_check == SLICE_CHECK_EVERY {
                since_check = 0;
                if Instant::now() >= slice_end {
                    tokio::task::yield_now().await;
                    slice_end = Instant::now() + SCAN_SLICE;
                }
            }
        }
    }
    Ok(page.finish())
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
        if let Some(why) = self.failure() {
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
