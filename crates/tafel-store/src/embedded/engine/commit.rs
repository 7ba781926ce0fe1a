//! From commit to answer: the group's record synced, and the snapshots readers see.
//!
//! The writer commits each group non-durably, then, on its own thread, appends
//! the group's record to the write-ahead log, syncs, publishes the snapshot it
//! took right after that commit, and answers the group's writers; the writes
//! that come meanwhile wait in its channel and go as the next group, whose
//! record the next sync takes. So no reader ever sees a change a crash could
//! still lose, and no writer is answered before its change is durable.
//!
//! A log thread that synced one group's record while the writer applied the
//! next used to do this. On two cores the overlap cost more than it gave: each
//! group woke the writer and the log thread in turn. Syncing on the writer's
//! thread cut durable inserts' server CPU by 15%, merges' by 17–20%, and ran
//! them at 1.04–1.11× the rate, with a lower p99 (benchmark-history §57).
//!
//! A checkpoint (a durable redb commit) needs no record, but its pages reach the
//! disk later, through the page flusher (`page_file.rs`), and the records after
//! it go to the log's other half. A half is written over only once the
//! checkpoint covering its records is on disk ([`Durable::wait`]). Whether the
//! log goes on while the checkpoint is being written is the writer's call
//! ([`Checkpoint::on_disk_first`]).
//!
//! Everything leaves in commit order: a group that failed, or changed nothing,
//! is answered only after every group before it is durable, since what it saw
//! (and so its answer) may depend on them.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use redb::{Database, ReadOnlyTable, ReadTransaction, ReadableDatabase};

use super::buffer::Buffer;
use super::health::Health;
use super::page_file::Durable;
use super::schema::{to_store_error, ENTITIES, TABLES};
use super::wal::{LogBuf, Spare, Wal};
use crate::embedded::savepoints::Outcome;
use crate::embedded::stats::EmbeddedStats;
use crate::embedded::table_ids::TableIds;
use crate::embedded::Reply;
use crate::error::{BackendError, StoreError};
use crate::undelete::UndeleteError;

/// redb's state as of one commit, with the two tables every read needs already
/// open, so a point read opens nothing.
pub(in crate::embedded) struct BaseView {
    pub(in crate::embedded) txn: ReadTransaction,
    pub(in crate::embedded) tables: ReadOnlyTable<&'static [u8], &'static [u8]>,
    pub(in crate::embedded) entities: ReadOnlyTable<&'static [u8], &'static [u8]>,
}

impl BaseView {
    /// redb's state as of its latest commit.
    pub(in crate::embedded) fn take(db: &Database) -> Result<Arc<BaseView>, StoreError> {
        let txn = db.begin_read().map_err(to_store_error)?;
        let tables = txn.open_table(TABLES).map_err(to_store_error)?;
        let entities = txn.open_table(ENTITIES).map_err(to_store_error)?;
        Ok(Arc::new(BaseView { txn, tables, entities }))
    }
}

/// A read-only view of the store as of one group: redb as of its last commit,
/// and the write buffer's changes since, as of that group (`buffer.rs`).
pub(in crate::embedded) struct ReadView {
    pub(in crate::embedded) base: Arc<BaseView>,
    pub(in crate::embedded) buffer: Buffer,
}

impl ReadView {
    /// The store as of redb's latest commit, with nothing buffered: at opening,
    /// and for `tafel check` (replay writes into redb itself).
    pub(in crate::embedded) fn take(db: &Database) -> Result<Arc<ReadView>, StoreError> {
        Ok(Self::over(BaseView::take(db)?, Buffer::default()))
    }

    /// `buffer` over `base`.
    pub(in crate::embedded) fn over(base: Arc<BaseView>, buffer: Buffer) -> Arc<ReadView> {
        Arc::new(ReadView { base, buffer })
    }
}

#[cfg(test)]
impl ReadView {
    /// Leaf pages of the entity rows.
    pub(in crate::embedded) fn entity_leaf_pages(&self) -> u64 {
        use redb::ReadableTableMetadata;
        self.base.entities.stats().map_or(0, |s| s.leaf_pages())
    }

    /// Leaf pages of the change feed's rows.
    pub(in crate::embedded) fn change_leaf_pages(&self) -> u64 {
        use redb::ReadableTableMetadata;
        let changes = self.base.txn.open_table(super::schema::CHANGES);
        changes.ok().and_then(|t| t.stats().ok()).map_or(0, |s| s.leaf_pages())
    }
}

/// What readers read: the newest snapshot all of whose changes are durable.
pub(in crate::embedded) type Published = ArcSwap<ReadView>;

/// A reply waiting for its group to be durable.
pub(in crate::embedded) enum Pending {
    Bool(Reply<bool>, Result<bool, StoreError>),
    Unit(Reply<()>, Result<(), StoreError>),
    Count(Reply<u64>, Result<u64, StoreError>),
    MaybeCount(Reply<Option<u64>>, Result<Option<u64>, StoreError>),
    Savepoint(Reply<Outcome>, Result<Outcome, StoreError>),
    /// A restored table's name (`deleted.rs`).
    Name(
        Reply<Result<String, UndeleteError>>,
        Result<Result<String, UndeleteError>, StoreError>,
    ),
}

impl Pending {
    fn send(self, commit: &Result<(), BackendError>) {
        // A dropped receiver means the client went away; nothing to do.
        match (self, commit) {
            (Pending::Bool(tx, r), Ok(())) => drop(tx.send(r)),
            (Pending::Unit(tx, r), Ok(())) => drop(tx.send(r)),
            (Pending::Bool(tx, _), Err(e)) => drop(tx.send(Err(e.clone().into()))),
            (Pending::Unit(tx, _), Err(e)) => drop(tx.send(Err(e.clone().into()))),
            (Pending::Count(tx, r), Ok(())) => drop(tx.send(r)),
            (Pending::Count(tx, _), Err(e)) => drop(tx.send(Err(e.clone().into()))),
            (Pending::MaybeCount(tx, r), Ok(())) => drop(tx.send(r)),
            (Pending::MaybeCount(tx, _), Err(e)) => drop(tx.send(Err(e.clone().into()))),
            (Pending::Savepoint(tx, r), Ok(())) => drop(tx.send(r)),
            (Pending::Savepoint(tx, _), Err(e)) => drop(tx.send(Err(e.clone().into()))),
            (Pending::Name(tx, r), Ok(())) => drop(tx.send(r)),
            (Pending::Name(tx, _), Err(e)) => drop(tx.send(Err(e.clone().into()))),
        }
    }
}

/// One group, committed or not, on its way to its writers.
pub(in crate::embedded) struct Committed {
    /// The group's log record and its number, for a non-durable commit.
    pub(in crate::embedded) record: Option<(LogBuf, u64)>,
    /// The log goes on in its other half: a checkpoint, or a fold set aside.
    pub(in crate::embedded) turn: Option<Turn>,
    /// Taken right after the commit; `None` when nothing was committed.
    pub(in crate::embedded) snapshot: Option<Arc<ReadView>>,
    /// Table ids read before this commit may be wrong after it.
    pub(in crate::embedded) deletes_table: bool,
    pub(in crate::embedded) pending: Vec<Pending>,
    /// How the commit went.
    pub(in crate::embedded) result: Result<(), BackendError>,
}

/// Where the log goes on after a group's record: in its other half from a
/// checkpoint on, since the checkpoint holds every record before it.
pub(in crate::embedded) enum Turn {
    /// The group committed durably, and holds every record so far.
    Checkpoint(Checkpoint),
    /// A fold of the buffer as it is was set aside (`fold_aside.rs`): the log
    /// goes on in its other half at once, and the half it leaves is covered
    /// once the fold commits, while the writes go on.
    SetAside,
    /// The fold set aside last is committed.
    Folded(Checkpoint),
}

/// A durable commit whose pages are on their way to disk.
pub(in crate::embedded) struct Checkpoint {
    /// The number of redb's sync of it: the log half the records before it
    /// fill is written over only once that sync is on disk.
    pub(in crate::embedded) sync: u64,
    /// The log waits for it to be on disk before going on. While the flusher
    /// writes tens of megabytes, the log's syncs share the disk with it and take
    /// several times as long: under small writes that slows far more of them
    /// than the wait stalls (those in flight), under batches the other way round
    /// (BENCHMARKS.md, "Checkpoints every 48 MiB against 16 under small writes and batches").
    pub(in crate::embedded) on_disk_first: bool,
}

impl Default for Committed {
    /// Nothing committed, nothing to answer.
    fn default() -> Self {
        Committed {
            record: None,
            turn: None,
            snapshot: None,
            deletes_table: false,
            pending: Vec::new(),
            result: Ok(()),
        }
    }
}

impl Committed {
    pub(in crate::embedded) fn answer(self, result: &Result<(), BackendError>) {
        for p in self.pending {
            p.send(result);
        }
    }
}

/// Blocks until every group handed to the log so far is published, so that
/// new readers see the state as of the last commit handed on.
///
/// A checkpoint waits for this. One made while readers were still on an older
/// state left redb 4.5 with its oldest unprocessed non-durable commit pinned:
/// every later non-durable commit rescanned the pages freed by all those since,
/// until the next checkpoint, so each cost more than the last (BENCHMARKS.md,
/// "Merges with and without checkpoints waiting for readers"). The writer hands
/// its groups on under the log's lock and publishes before letting it go, so
/// taking the lock is the wait: it matters to a fold committed aside, without
/// the core, while the writer syncs a group.
pub(in crate::embedded) fn wait_published(to_log: &ToLog) {
    drop(to_log.lock());
}

/// What becomes of committed groups: their records written and synced, then
/// published and answered. After a failed log write or sync every later group
/// fails too (`health.rs`).
pub(in crate::embedded) struct LogSide {
    pub(in crate::embedded) wal: Wal,
    pub(in crate::embedded) shared: LogShared,
    /// Tests hold it to keep committed groups from becoming durable.
    pub(in crate::embedded) hold: Option<Arc<Mutex<()>>>,
}

impl LogSide {
    fn handle(&mut self, mut c: Committed) {
        let LogShared {
            published,
            ids,
            health,
            spare,
            durable,
            stats,
            feed,
        } = &self.shared;
        if health.log_failure().is_none() {
            let held = self.hold.as_ref().map(|h| h.lock().unwrap_or_else(|p| p.into_inner()));
            let written = write(&mut self.wal, durable, stats, &mut c);
            drop(held);
            if let Err(e) = written {
                health.log_failed(e);
            }
        }
        let result = match health.log_failure() {
            Some(e) => Err(e.clone()),
            None => {
                if let Some(s) = c.snapshot.clone() {
                    published.store(s);
                    feed.published.notify_waiters();
                }
                if c.deletes_table {
                    ids.forget_all();
                }
                c.result.clone()
            }
        };
        if let Some((record, _)) = c.record.take() {
            spare.give(record);
        }
        c.answer(&result);
    }
}

/// Where a committed group goes, right after its commit, on the thread that
/// committed it (the writer, a fold, or in memory a write's own thread,
/// `queue.rs`).
pub(in crate::embedded) struct ToLog {
    log: Arc<Mutex<LogSide>>,
    /// Records are kept, to be replayed after a crash: on disk. In memory the
    /// log is a sink and its sync nothing.
    keeps_records: bool,
}

impl ToLog {
    pub(in crate::embedded) fn new(log: LogSide, keeps_records: bool) -> ToLog {
        ToLog {
            log: Arc::new(Mutex::new(log)),
            keeps_records,
        }
    }

    /// Whether records are kept, to be replayed after a crash.
    pub(in crate::embedded) fn keeps_records(&self) -> bool {
        self.keeps_records
    }

    /// The log, for a fold committed without the core to wait on
    /// ([`wait_published`]); none in memory, where each commit is published
    /// as it is made by the core's holder.
    pub(in crate::embedded) fn share(&self) -> Option<ToLog> {
        self.keeps_records.then(|| ToLog {
            log: self.log.clone(),
            keeps_records: true,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogSide> {
        // Handed groups only by the core's holder, and a fold waiting: never
        // poisoned but by a panic there, after which what it holds is whole.
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes `c` durable, publishes it and answers it.
    pub(in crate::embedded) fn send(&self, c: Committed) {
        self.lock().handle(c);
    }
}

/// What the log shares with the store and the writer.
pub(in crate::embedded) struct LogShared {
    pub(in crate::embedded) published: Arc<Published>,
    pub(in crate::embedded) ids: Arc<TableIds>,
    pub(in crate::embedded) health: Arc<Health>,
    pub(in crate::embedded) spare: Arc<Spare>,
    pub(in crate::embedded) durable: Durable,
    pub(in crate::embedded) stats: Arc<EmbeddedStats>,
    pub(in crate::embedded) feed: Arc<crate::embedded::feed::FeedState>,
}

/// Writes the group's record, going on in the log's other half at a
/// checkpoint, and syncs.
fn write(wal: &mut Wal, durable: &Durable, stats: &EmbeddedStats, c: &mut Committed) -> std::io::Result<()> {
    let mut wrote = false;
    if let Some((record, seq)) = &mut c.record {
        wal.write(record, *seq)?;
        stats.log_bytes.fetch_add(record.len(), Ordering::Relaxed);
        wrote = true;
    }
    // Until the checkpoint covering the other half is on disk, that half's
    // records are the only copy of their writes.
    let wait = match c.turn {
        None => None,
        Some(Turn::Checkpoint(Checkpoint { sync, on_disk_first })) => {
            let other = wal.next_half(sync);
            Some(if on_disk_first { sync } else { other })
        }
        Some(Turn::SetAside) => Some(wal.leave_half()?),
        Some(Turn::Folded(Checkpoint { sync, on_disk_first })) => {
            wal.covered(sync);
            on_disk_first.then_some(sync)
        }
    };
    if let Some(wait) = wait {
        let started = std::time::Instant::now();
        durable.wait(wait)?;
        tracing::debug!(
            ms = started.elapsed().as_secs_f64() * 1e3,
            "checkpoint: waited for the disk"
        );
    }
    if wrote {
        let started = std::time::Instant::now();
        wal.sync()?;
        stats.log_sync.observe_duration(started.elapsed());
    }
    Ok(())
}

#[cfg(test)]
#[path = "commit_tests.rs"]
mod tests;
