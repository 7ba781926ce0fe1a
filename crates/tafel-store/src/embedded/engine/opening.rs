//! One opening of the store: the redb database, the writer thread and its log,
//! the published snapshot. [`crate::embedded::EmbeddedStore`] holds one at a time, and
//! opens a new one when a full disk has broken the last (`reopen.rs`).

use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::thread;

use arc_swap::ArcSwap;
use redb::{Database, ReadableDatabase};
use tokio::sync::oneshot;

use super::blocks;
use super::checkpoint::SinceCheckpoint;
use super::checksums;
use super::commit::{self, Published, ReadView, ToLog};
use super::disk::Disk;
use super::header_copy::HeaderCopy;
use super::health::Health;
use super::log_state::LogState;
use super::pace::Pace;
use super::page_file::{Durable, PageFile};
use super::queue::Queue;
use super::replay::replay;
use super::schema::{
    decode_table, decode_u64, guarded, poisoned, table_key, to_store_error, TableValue, CHANGES, ENTITIES, INDEX, META,
    ROW_ENTITIES, TABLES, TABLE_ORDER, WAL_SEQ,
};
use super::tree::{ReadTrees, Tree};
use super::wal::{Found, Wal};
use super::writer::{writer_loop, Core};
use crate::embedded::feed::FeedState;
use crate::embedded::stats::EmbeddedStats;
use crate::embedded::table_ids::TableIds;
use crate::embedded::{EmbeddedOptions, Job, Reply, STORE_FILE};
use crate::error::{FailureKind, NotReady, StoreError};

pub(in crate::embedded) struct Opening {
    pub(in crate::embedded) published: Arc<Published>,
    pub(in crate::embedded) ids: Arc<TableIds>,
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    writer: Mutex<Option<thread::JoinHandle<()>>>,
    /// Whether writes fail, and why.
    health: Arc<Health>,
    /// When redb's syncs are on disk.
    pub(in crate::embedded) pages: Durable,
    /// In memory: the writes queued for a group, and what runs it, which a
    /// write's own thread takes when free (see [`Queue`]).
    inline: Option<(Arc<Queue>, Arc<Mutex<Core>>)>,
}

/// The store file's redb database, its torn header mended if need be (see
/// `header_copy.rs`), and when its syncs are on disk.
pub(in crate::embedded) fn open_db(disk: &dyn Disk, cache_size: usize) -> Result<(Database, Durable), StoreError> {
    let locks = disk.locks(STORE_FILE).map_err(to_store_error)?;
    let file = disk.open(STORE_FILE).map_err(to_store_error)?;
    let header = HeaderCopy::open(disk, &*file).map_err(to_store_error)?;
    let file = PageFile::new(file, locks, header, disk.files_in_memory()).map_err(to_store_error)?;
    let durable = file.durable();
    let db = Database::builder()
        .set_cache_size(cache_size)
        .create_with_backend(file)
        .map_err(to_store_error)?;
    // A new store's header (redb writes its magic number last) goes to disk
    // before the log or the header copy is written: a file without the magic
    // number is taken as never created only while they are untouched, and the
    // flusher could otherwise lag behind the log's first write.
    durable.wait(durable.last_requested()).map_err(to_store_error)?;
    Ok((db, durable))
}

/// What [`recover`] found.
pub(in crate::embedded) struct Recovered {
    pub(in crate::embedded) wal: Wal,
    /// What the store's values carry (see `checksums.rs`).
    pub(in crate::embedded) format: checksums::Format,
    /// Log records replayed.
    pub(in crate::embedded) replayed: usize,
    /// A damaged record replay stopped at, with intact ones after it.
    pub(in crate::embedded) damaged_record: Option<u64>,
}

/// Brings `db` up to date with the log: creates the tables if new, replays
/// the log's records and commits them durably.
pub(in crate::embedded) fn recover(db: &Database, disk: &dyn Disk, log_size: u64) -> Result<Recovered, StoreError> {
    // Create the tables up front so readers never see them missing.
    let txn = db.begin_write().map_err(to_store_error)?;
    {
        txn.open_table(TABLES).map_err(to_store_error)?;
        txn.open_table(TABLE_ORDER).map_err(to_store_error)?;
        txn.open_table(ENTITIES).map_err(to_store_error)?;
        txn.open_table(META).map_err(to_store_error)?;
        txn.open_table(CHANGES).map_err(to_store_error)?;
        txn.open_table(INDEX).map_err(to_store_error)?;
    }
    // A store from before entity blocks has its rows moved into them before
    // the log, whose records change rows, replays over them.
    if let Some(rows) = blocks::convert(&txn, ROW_ENTITIES, ENTITIES)? {
        // A saved state from before would bring the old layout back.
        let saved: Vec<u64> = txn.list_persistent_savepoints().map_err(to_store_error)?.collect();
        for id in &saved {
            txn.delete_persistent_savepoint(*id).map_err(to_store_error)?;
        }
        tracing::info!(
            rows,
            savepoints_dropped = saved.len(),
            "moved the entity rows of a store from an older Tafel into blocks"
        );
    }
    let format = checksums::prepare(&txn)?;
    let sealed = format.sealed();
    txn.commit().map_err(to_store_error)?;
    let applied = {
        let txn = db.begin_read().map_err(to_store_error)?;
        let meta = txn.open_table(META).map_err(to_store_error)?;
        let seq = meta.get(WAL_SEQ).map_err(to_store_error)?;
        match seq {
            Some(v) if sealed => decode_u64(WAL_SEQ, v.value())?,
            Some(v) => u64::from_le_bytes(v.value().try_into().map_err(to_store_error)?),
            None => 0,
        }
    };
    let (wal, found) = Wal::open(disk, applied, log_size).map_err(to_store_error)?;
    let Found {
        records,
        damaged,
        newer,
    } = found;
    if let Some(seq) = newer {
        return Err(StoreError::failure(
            FailureKind::Corrupt,
            format!(
                "the store file holds an older state than its write-ahead log (which goes on \
                 to record {seq}, past the {} the file has): the newest state's pages are \
                 damaged and acknowledged writes would be lost, so the store is not opened; \
                 `tafel check` says more, a backup restores it",
                records.last().map_or(applied, |r| r.seq)
            ),
        ));
    }
    if !records.is_empty() {
        tracing::info!(records = records.len(), "replaying the write-ahead log");
    }
    if let Some(seq) = damaged {
        tracing::warn!(
            record = seq,
            "a write-ahead log record failed its checksum while the next is intact: \
             replay stops before it; unless the power went while both were being \
             written, acknowledged writes are lost (restore them from a backup)"
        );
    }
    replay(db, &records, wal.last_seq, sealed)?;
    Ok(Recovered {
        wal,
        format,
        replayed: records.len(),
        damaged_record: damaged,
    })
}

/// Gives every table without counters (a store from before them) its counters,
/// counted, in a durable commit of their own before the writer starts.
fn fill_counts(db: &Database) -> Result<(), StoreError> {
    let mut txn = db.begin_write().map_err(to_store_error)?;
    txn.set_durability(redb::Durability::Immediate)
        .map_err(to_store_error)?;
    let filled = {
        let mut trees = super::group::Trees::open(&txn)?;
        crate::embedded::counts::fill_missing(&mut trees)?
    };
    if filled == 0 {
        return txn.abort().map_err(to_store_error);
    }
    txn.commit().map_err(to_store_error)?;
    tracing::info!(
        tables = filled,
        "counted the entities of tables from before table counters"
    );
    Ok(())
}

impl Opening {
    /// Opens (or creates) the store on `disk`; no group becomes durable (nor
    /// visible, nor answered) while `hold` is locked (for tests of the commit
    /// pipeline).
    pub(in crate::embedded) fn open(
        disk: &dyn Disk,
        options: &EmbeddedOptions,
        stats: Arc<EmbeddedStats>,
        feed: &Arc<FeedState>,
        hold: Option<Arc<Mutex<()>>>,
    ) -> Result<Self, StoreError> {
        let (db, durable, wal) = guarded(|| {
            let (db, durable) = open_db(disk, options.cache_size)?;
            let Recovered { wal, format, .. } = recover(&db, disk, options.log_size)?;
            match format {
                checksums::Format::Unsealed => checksums::migrate(&db)?,
                checksums::Format::V1 => checksums::upgrade(&db)?,
                checksums::Format::V2 => {}
            }
            fill_counts(&db)?;
            Ok((db, durable, wal))
        })?;
        let pages = durable.clone();
        // The log starts over in its first half: what replay (and the commits
        // above) made durable must be on disk before a record overwrites the old.
        durable.wait(durable.last_requested()).map_err(to_store_error)?;
        let published = Arc::new(ArcSwap::new(ReadView::take(&db)?));
        let ids = Arc::new(TableIds::default());
        let (tx, rx) = mpsc::channel();
        let health = Arc::new(Health::new(durable.clone()));
        stats.log_capacity.store(wal.half(), Ordering::Relaxed);
        let mut state = LogState {
            last_seq: wal.last_seq,
            size: wal.half(),
            since: SinceCheckpoint::default(),
            spare: Arc::default(),
            durable: durable.clone(),
            stats: stats.clone(),
            feed: feed.clone(),
            index_defs: Default::default(),
            base: Some(published.load().base.clone()),
            buffer: Default::default(),
            buffer_limit: options.write_buffer,
            to_fold: None,
            since_fold: None,
            left_half_uncovered: false,
            folds: 0,
            pace: None,
        };
        // A log that keeps nothing is a sink: the groups' writes are run by
        // their own threads where they can (`queue.rs`).
        let keeps_nothing = disk.files_in_memory() && hold.is_none();
        let log = commit::LogSide {
            wal,
            shared: commit::LogShared {
                published: published.clone(),
                ids: ids.clone(),
                health: health.clone(),
                spare: state.spare.clone(),
                durable,
                stats: stats.clone(),
                feed: feed.clone(),
            },
            hold,
        };
        let to_log = ToLog::new(log, !keeps_nothing);
        let queue = keeps_nothing.then(|| Arc::new(Queue::default()));
        state.pace = queue.clone().and_then(Pace::start);
        let pace = state.pace.clone();
        let core = Arc::new(Mutex::new(Core {
            db: Arc::new(db),
            state,
            to_log,
            health: health.clone(),
        }));
        let inline = queue.clone().map(|q| (q, core.clone()));
        let writer = thread::Builder::new()
            .name("tafel-writer".into())
            .spawn(move || {
                writer_loop(&core, rx, queue.as_deref());
            })
            .map_err(|e| {
                // The fold thread holds its own `Pace`: without this it would
                // stay parked for the process's life.
                if let Some(pace) = &pace {
                    pace.stop();
                }
                to_store_error(e)
            })?;
        Ok(Opening {
            published,
            ids,
            jobs: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            health,
            pages,
            inline,
        })
    }

    pub(in crate::embedded) async fn submit<T>(&self, make: impl FnOnce(Reply<T>) -> Job) -> Result<T, StoreError> {
        let (reply, rx) = oneshot::channel();
        if let Some((queue, core)) = &self.inline {
            // With no log sync to wait for, nothing else gathers writes into
            // groups: run as each is parsed, every group would hold one. Queued
            // after the thread's other ready requests have run, they go
            // together (benchmark-history §41).
            tokio::task::yield_now().await;
            let stopped = || StoreError::failure(FailureKind::Stopped, "store is shut down");
            if self.jobs.lock().map_err(poisoned)?.is_none() {
                return Err(stopped());
            }
            queue.push(make(reply)).map_err(|_| stopped())?;
            queue.run(core);
        } else {
            let guard = self.jobs.lock().map_err(poisoned)?;
            let sender = guard
                .as_ref()
                .ok_or_else(|| StoreError::failure(FailureKind::Stopped, "store is shut down"))?;
            sender
                .send(make(reply))
                .map_err(|_| StoreError::failure(FailureKind::Stopped, "writer stopped"))?;
        }
        // A dropped request: the writer stopped taking writes after a failure; say which.
        rx.await.map_err(|_| match self.health.broken() {
            Some((kind, why)) => StoreError::failure(kind, why),
            None => StoreError::failure(FailureKind::Stopped, "writer dropped a request"),
        })?
    }

    /// The newest durable state.
    pub(in crate::embedded) fn view(&self) -> Arc<ReadView> {
        self.published.load_full()
    }

    /// The table-id generation, then the snapshot, in that order (see
    /// `TableIds`), for reads that look a table's id up.
    pub(in crate::embedded) fn id_view(&self) -> (u64, Arc<ReadView>) {
        let generation = self.ids.generation();
        (generation, self.view())
    }

    pub(in crate::embedded) fn read_table(&self, account: &str, name: &str) -> Result<Option<TableValue>, StoreError> {
        let snapshot = self.view();
        let key = table_key(account, name);
        let found = snapshot.get(Tree::Tables, key.as_slice())?;
        found.map(|v| decode_table(&key, v.bytes())).transpose()
    }

    #[cfg(test)]
    pub(in crate::embedded) fn health(&self) -> &Health {
        &self.health
    }

    /// Why writes fail, if they do.
    pub(in crate::embedded) fn broken(&self) -> Option<(FailureKind, String)> {
        self.health.broken()
    }

    pub(in crate::embedded) fn ready(&self) -> Result<(), NotReady> {
        if self.jobs.lock().map_err(poisoned)?.is_none() {
            return Err(NotReady::ShutDown);
        }
        if let Some((kind, reason)) = self.broken() {
            return Err(NotReady::Failing { kind, reason });
        }
        let writer_gone = self
            .writer
            .lock()
            .map_err(poisoned)?
            .as_ref()
            .is_none_or(|w| w.is_finished());
        if writer_gone {
            return Err(NotReady::WriterStopped);
        }
        Ok(())
    }

    /// Takes no more writes, and waits for the writer to finish the queued
    /// ones (and its last checkpoint) and end.
    pub(in crate::embedded) fn stop(&self) -> Result<Option<thread::JoinHandle<()>>, StoreError> {
        // Dropping the sender lets the writer finish the queued jobs and exit.
        self.jobs.lock().map_err(poisoned)?.take();
        if let Some((queue, _)) = &self.inline {
            queue.wake_writer();
        }
        Ok(self.writer.lock().map_err(poisoned)?.take())
    }
}

/// redb's own check of every page of the store on `disk` (`tafel check`): a
/// failed one ends redb's use of the database, so it runs on one of its own.
pub(in crate::embedded) fn verify_pages(disk: &dyn Disk) -> Result<bool, String> {
    let (mut db, _) = open_db(disk, 64 << 20).map_err(|e| e.to_string())?;
    db.check_integrity().map_err(|e| e.to_string())
}
