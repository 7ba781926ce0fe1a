//! From commit to answer: the log thread, and the snapshots readers see.
//!
//! The writer commits each group non-durably and goes on to the next group at
//! once. The log thread appends the group's record to the write-ahead log and
//! syncs; only then does it publish the snapshot the writer took right after
//! that commit, and answer the group's writers. Syncing one group's record so
//! overlaps applying the next, while no reader ever sees a change a crash could
//! still lose, and no writer is answered before its change is durable.
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
use std::sync::mpsc;
use std::sync::Arc;

use arc_swap::ArcSwap;
use redb::{Database, ReadOnlyTable, ReadTransaction, ReadableDatabase};

use super::buffer::Buffer;
use super::health::Health;
use super::log_round::LogRound;
use super::page_file::Durable;
use super::schema::{to_store_error, ENTITIES, TABLES};
use super::wal::{LogBuf, Spare, Wal};
use super::writer::MAX_GROUP;
use crate::embedded::savepoints::Outcome;
use crate::embedded::stats::EmbeddedStats;
use crate::embedded::table_ids::TableIds;
use crate::embedded::Reply;
use crate::error::{BackendError, FailureKind, StoreError};
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
    /// Told once this and every group before it are published ([`wait_published`]).
    pub(in crate::embedded) published: Option<mpsc::SyncSender<()>>,
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
            published: None,
        }
    }
}

impl Committed {
    pub(in crate::embedded) fn answer(self, result: &Result<(), BackendError>) {
        for p in self.pending {
            p.send(result);
        }
        if let Some(published) = self.published {
            // The writer waits for this; it cannot have gone.
            let _ = published.send(());
        }
    }
}

/// Blocks the writer until the log thread has published every group sent to
/// it so far, so that new readers see the state as of the writer's last commit.
/// A stopped log thread fails the request at once, which ends the wait too.
///
/// A checkpoint waits for this. One made while readers were still on an older
/// state left redb 4.5 with its oldest unprocessed non-durable commit pinned:
/// every later non-durable commit rescanned the pages freed by all those since,
/// until the next checkpoint, so each cost more than the last (BENCHMARKS.md,
/// "Merges with and without checkpoints waiting for readers"). A long
/// checkpoint gave the log time to catch up; a short one right after a commit
/// did not.
pub(in crate::embedded) fn wait_published(to_log: &ToLog) {
    let (tx, rx) = mpsc::sync_channel(1);
    let marker = Committed {
        published: Some(tx),
        ..Committed::default()
    };
    to_log.send(marker);
    let _ = rx.recv();
}

/// The log thread: see the module comment.
pub(in crate::embedded) fn log_loop(
    mut log: LogSide,
    rx: mpsc::Receiver<Committed>,
    round: &LogRound,
    hold: Option<&std::sync::Mutex<()>>,
) {
    while let Ok(first) = rx.recv() {
        round.start();
        let mut batch = vec![first];
        batch.extend(rx.try_iter().take(MAX_GROUP));
        log.handle(batch, Some(round), hold);
    }
}

/// What the log thread does with the groups the writer committed: write their
/// records, sync, publish, answer. After a failed log write or sync every later
/// group fails too (`health.rs`).
pub(in crate::embedded) struct LogSide {
    pub(in crate::embedded) wal: Wal,
    pub(in crate::embedded) shared: LogShared,
}

impl LogSide {
    /// Tests hold `hold` to keep committed groups from becoming durable.
    fn handle(&mut self, mut batch: Vec<Committed>, round: Option<&LogRound>, hold: Option<&std::sync::Mutex<()>>) {
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
            let held = hold.map(|h| h.lock().unwrap_or_else(|p| p.into_inner()));
            let written = write_all(&mut self.wal, durable, stats, &mut batch);
            drop(held);
            if let Err(e) = written {
                health.log_failed(e);
            }
        }
        // The batch is durable (or failed): a writer's group waiting for this
        // overlaps the answers below.
        if let Some(round) = round {
            round.synced();
        }
        let broken = health.log_failure();
        if broken.is_none() {
            if let Some(s) = batch.iter().rev().find_map(|c| c.snapshot.clone()) {
                published.store(s);
                feed.published.notify_waiters();
            }
            if batch.iter().any(|c| c.deletes_table) {
                ids.forget_all();
            }
        }
        for mut c in batch {
            let result = match broken {
                Some(e) => Err(e.clone()),
                None => c.result.clone(),
            };
            if let Some((record, _)) = c.record.take() {
                spare.give(record);
            }
            c.answer(&result);
        }
    }
}

/// Where the writer hands its committed groups.
pub(in crate::embedded) enum ToLog {
    /// The log thread, which syncs one group's record while the writer applies
    /// the next; the writer gathers its groups by the thread's round.
    Thread(mpsc::Sender<Committed>, Arc<LogRound>),
    /// Whoever ran the group (the writer, or in memory a write's own thread,
    /// `queue.rs`), right after each commit, when the log is a sink (in
    /// memory): there is no sync to overlap, and the hand-off to another thread
    /// (a futex wake-up each group, and the log thread's own switches) was a
    /// tenth of the server's CPU per insert (benchmark-history §23).
    Inline(std::sync::Mutex<LogSide>),
}

impl ToLog {
    /// Whether records are kept, to be replayed after a crash.
    pub(in crate::embedded) fn keeps_records(&self) -> bool {
        matches!(self, ToLog::Thread(..))
    }

    /// The log thread, for another thread than the core's holder to hand
    /// groups (or markers) on; none when the log is the core holder's own.
    pub(in crate::embedded) fn share(&self) -> Option<ToLog> {
        match self {
            ToLog::Thread(tx, round) => Some(ToLog::Thread(tx.clone(), round.clone())),
            ToLog::Inline(_) => None,
        }
    }

    /// The log thread's round, for the writer to wait for its turn in.
    pub(in crate::embedded) fn round(&self) -> Option<Arc<LogRound>> {
        match self {
            ToLog::Thread(_, round) => Some(round.clone()),
            ToLog::Inline(_) => None,
        }
    }

    /// Hands `c` on; a stopped log thread fails it.
    pub(in crate::embedded) fn send(&self, c: Committed) {
        match self {
            ToLog::Thread(tx, _) => {
                if let Err(mpsc::SendError(c)) = tx.send(c) {
                    c.answer(&Err(BackendError::new(FailureKind::Stopped, "the log thread stopped")));
                }
            }
            // Only the holder of the writer's core locks it: never contended,
            // never poisoned by anything but a panic there, after which what
            // it holds is whole.
            ToLog::Inline(log) => log
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .handle(vec![c], None, None),
        }
    }
}

/// What the log thread shares with the store and the writer.
pub(in crate::embedded) struct LogShared {
    pub(in crate::embedded) published: Arc<Published>,
    pub(in crate::embedded) ids: Arc<TableIds>,
    pub(in crate::embedded) health: Arc<Health>,
    pub(in crate::embedded) spare: Arc<Spare>,
    pub(in crate::embedded) durable: Durable,
    pub(in crate::embedded) stats: Arc<EmbeddedStats>,
    pub(in crate::embedded) feed: Arc<crate::embedded::feed::FeedState>,
}

/// Writes the batch's records in order, going on in the log's other half at
/// each checkpoint, with one sync for them all.
fn write_all(wal: &mut Wal, durable: &Durable, stats: &EmbeddedStats, batch: &mut [Committed]) -> std::io::Result<()> {
    let mut wrote = false;
    for c in batch.iter_mut() {
        if let Some((record, seq)) = &mut c.record {
            wal.write(record, *seq)?;
            stats.log_bytes.fetch_add(record.len(), Ordering::Relaxed);
            wrote = true;
        }
        // Until the checkpoint covering the other half is on disk, that half's
        // records are the only copy of their writes.
        let wait = match c.turn {
            None => continue,
            Some(Turn::Checkpoint(Checkpoint { sync, on_disk_first })) => {
                let other = wal.next_half(sync);
                if on_disk_first {
                    sync
                } else {
                    other
                }
            }
            Some(Turn::SetAside) => wal.leave_half()?,
            Some(Turn::Folded(Checkpoint { sync, on_disk_first })) => {
                wal.covered(sync);
                if !on_disk_first {
                    continue;
                }
                sync
            }
        };
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
mod tests {
    use std::sync::atomic::Ordering;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use crate::embedded::scan_tests::{copy_store_files, tempdir, until};
    use crate::embedded::{EmbeddedOptions, EmbeddedStore};
    use crate::key::{EntityKey, KeyRange};
    use crate::test_support::ScanEntities;
    use crate::traits::{write_with, Expect, Mutation, ScanRequest, Store};

    const ACCOUNT: &str = "acct";

    /// A store with table `t`, and the lock that holds its log thread back.
    async fn open(dir: &std::path::Path) -> (Arc<EmbeddedStore>, Arc<Mutex<()>>) {
        let hold = Arc::new(Mutex::new(()));
        let options = EmbeddedOptions {
            cache_size: 8 << 20,
            ..EmbeddedOptions::default()
        };
        let store = EmbeddedStore::open_on(
            Box::new(crate::embedded::disk::OsDisk::new(dir).expect("dir")),
            options,
            Some(hold.clone()),
        )
        .expect("open");
        store.create_table(ACCOUNT, "t").await.expect("create");
        (Arc::new(store), hold)
    }

    /// Jobs the writer has applied so far.
    fn jobs_done(store: &EmbeddedStore) -> u64 {
        store.inner.stats.jobs_done.load(Ordering::Relaxed)
    }

    /// How long [`until`] waits for what these tests need.
    const WAIT: Duration = Duration::from_secs(20);

    /// [`put`] on a task of its own; returns once the writer has applied it.
    async fn spawn_applied(
        store: &Arc<EmbeddedStore>,
        key: &EntityKey,
        value: Vec<u8>,
        only_if_absent: bool,
    ) -> tokio::task::JoinHandle<bool> {
        let before = jobs_done(store);
        let handle = spawn_put(store, key, value, only_if_absent);
        until("the writer applied the write", WAIT, || jobs_done(store) > before).await;
        handle
    }

    /// [`put`] on a task of its own.
    fn spawn_put(
        store: &Arc<EmbeddedStore>,
        key: &EntityKey,
        value: Vec<u8>,
        only_if_absent: bool,
    ) -> tokio::task::JoinHandle<bool> {
        let (store, key) = (store.clone(), key.clone());
        tokio::spawn(async move { put(&store, &key, value, only_if_absent).await })
    }

    /// Puts `value` under `key`, or, with `only_if_absent`, keeps what is there;
    /// the outcome is whether the key was absent.
    async fn put(store: &EmbeddedStore, key: &EntityKey, value: Vec<u8>, only_if_absent: bool) -> bool {
        write_with(
            store,
            ACCOUNT,
            "t",
            vec![key.clone()],
            Expect::Any,
            move |current: &[Option<&[u8]>]| {
                let absent = current[0].is_none();
                let mutations = if absent || !only_if_absent {
                    vec![Mutation::Put(value.clone())]
                } else {
                    Vec::new()
                };
                (mutations, absent)
            },
        )
        .await
        .expect("write")
    }

    async fn scan_values(store: &EmbeddedStore) -> Vec<Vec<u8>> {
        let request = ScanRequest {
            ranges: vec![KeyRange::all()],
            limit: 100,
            filter: None,
            deadline: None,
        };
        let page = store.scan_entities(ACCOUNT, "t", request).await.expect("scan");
        page.rows.into_iter().map(|(_, v)| v).collect()
    }

    // The held lock stands for a slow disk: only the log thread waits on it.
    #[allow(clippy::await_holding_lock)]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_is_neither_visible_nor_answered_before_its_log_record_is_synced() {
        let dir = tempdir().expect("temp dir");
        let (store, hold) = open(dir.path()).await;
        let key = EntityKey::new("p", "r");
        put(&store, &key, vec![1], false).await;

        let held = hold.lock().expect("hold");
        // The writer has committed the group non-durably; the log is held.
        let writing = spawn_applied(&store, &key, vec![2], false).await;
        assert!(!writing.is_finished(), "answered before its record was synced");
        let seen = store.get_entity(ACCOUNT, "t", &key).await.expect("get");
        assert_eq!(seen, Some(vec![1]), "a read saw a change that is not durable yet");
        assert_eq!(scan_values(&store).await, [vec![1]]);

        drop(held);
        assert!(!writing.await.expect("join"), "the key existed");
        let seen = store.get_entity(ACCOUNT, "t", &key).await.expect("get");
        assert_eq!(seen, Some(vec![2]), "an answered write must be visible at once");
        store.shutdown().await.expect("shutdown");
    }

    // The held lock stands for a slow disk: only the log thread waits on it.
    #[allow(clippy::await_holding_lock)]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_that_changed_nothing_waits_for_the_writes_it_saw() {
        let dir = tempdir().expect("temp dir");
        let (store, hold) = open(dir.path()).await;
        let key = EntityKey::new("p", "r");

        let held = hold.lock().expect("hold");
        let first = spawn_applied(&store, &key, vec![7], true).await;
        // Sees the first write's (not yet durable) row, so it changes nothing;
        // its answer ("the key existed") rests on the first being durable.
        let second = spawn_applied(&store, &key, vec![8], true).await;
        assert!(!first.is_finished() && !second.is_finished());

        drop(held);
        assert!(first.await.expect("join"), "the first insert found the key absent");
        assert!(!second.await.expect("join"), "the second saw the first's row");
        let seen = store.get_entity(ACCOUNT, "t", &key).await.expect("get");
        assert_eq!(seen, Some(vec![7]));
        store.shutdown().await.expect("shutdown");
    }

    /// Checkpoints the writer has committed (their pages maybe not yet on disk).
    /// Counted, not read off redb's sync requests: redb also syncs as its file grows.
    fn checkpoints(store: &EmbeddedStore) -> u64 {
        store.inner.stats.checkpoint_seconds.snapshot().count
    }

    /// Waits until the writer has committed a checkpoint after the `after`th (an
    /// idle writer checkpoints after IDLE_CHECKPOINT); returns how many there are.
    async fn next_checkpoint(store: &EmbeddedStore, after: u64) -> u64 {
        until("a checkpoint", WAIT, || checkpoints(store) > after).await;
        checkpoints(store)
    }

    /// A value whose record makes its write a large one (see `SMALL_WRITE`).
    fn large(byte: u8) -> Vec<u8> {
        vec![byte; 64 << 10]
    }

    // The held lock keeps the log thread from publishing the last commit.
    #[allow(clippy::await_holding_lock)]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_checkpoint_waits_until_readers_see_every_commit_before_it() {
        let dir = tempdir().expect("temp dir");
        let (store, hold) = open(dir.path()).await;
        let (x, y) = (EntityKey::new("p", "x"), EntityKey::new("p", "y"));
        put(&store, &x, vec![1], false).await;
        let before = next_checkpoint(&store, checkpoints(&store)).await;

        let held = hold.lock().expect("hold");
        let waits = store.inner.stats.publication_waits.load(Ordering::Relaxed);
        let writing = spawn_applied(&store, &y, vec![2], false).await;
        // Idle, the writer comes to checkpoint `y` and must wait for the log to publish it.
        until("the checkpoint waits for publication", WAIT, || {
            store.inner.stats.publication_waits.load(Ordering::Relaxed) > waits
        })
        .await;
        assert_eq!(
            checkpoints(&store),
            before,
            "checkpointed while readers still saw the state before the last commit"
        );

        drop(held);
        assert!(writing.await.expect("join"));
        next_checkpoint(&store, before).await;
        assert_eq!(scan_values(&store).await, [vec![1], vec![2]]);
        store.shutdown().await.expect("shutdown");
    }

    // The paused flusher stands for a slow disk under a checkpoint.
    #[allow(clippy::await_holding_lock)]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn after_small_writes_the_log_waits_for_the_checkpoint_to_be_on_disk() {
        let dir = tempdir().expect("temp dir");
        let (store, _hold) = open(dir.path()).await;
        let (x, y) = (EntityKey::new("p", "x"), EntityKey::new("p", "y"));
        put(&store, &x, vec![1], false).await;

        let pages = store.opening_now().pages.clone();
        let paused = pages.pause();
        next_checkpoint(&store, checkpoints(&store)).await;
        let writing = spawn_applied(&store, &y, vec![2], false).await;
        assert!(!writing.is_finished(), "answered while the checkpoint was not on disk");

        drop(paused);
        assert!(writing.await.expect("join"));
        assert_eq!(scan_values(&store).await, [vec![1], vec![2]]);
        store.shutdown().await.expect("shutdown");
    }

    // The paused flusher stands for a slow disk under a checkpoint.
    #[allow(clippy::await_holding_lock)]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_log_half_is_not_written_over_before_the_checkpoint_covering_it_is_on_disk() {
        let dir = tempdir().expect("temp dir");
        let (store, _hold) = open(dir.path()).await;
        let (x, y, z) = (
            EntityKey::new("p", "x"),
            EntityKey::new("p", "y"),
            EntityKey::new("p", "z"),
        );
        put(&store, &x, large(1), false).await;

        let pages = store.opening_now().pages.clone();
        let paused = pages.pause();
        let first = next_checkpoint(&store, checkpoints(&store)).await;
        // After a large write, `y`'s record goes on in the other half at once.
        let writing = spawn_put(&store, &y, large(2), false);
        let answered = tokio::time::timeout(Duration::from_secs(30), writing).await;
        assert!(answered
            .expect("a write waited for a checkpoint's pages")
            .expect("join"));
        next_checkpoint(&store, first).await;
        // `z`'s record would go over `x`'s, the only durable copy of `x` while
        // the first checkpoint is not on disk: it must wait.
        let writing = spawn_applied(&store, &z, large(3), false).await;
        assert!(
            !writing.is_finished(),
            "answered while the first half's checkpoint was not on disk"
        );

        drop(paused);
        assert!(writing.await.expect("join"));
        assert_eq!(scan_values(&store).await, [large(1), large(2), large(3)]);
        store.shutdown().await.expect("shutdown");
    }

    // The paused flusher stands for a crash before a checkpoint reached disk.
    #[allow(clippy::await_holding_lock)]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_answered_across_a_checkpoint_not_on_disk_are_replayed_from_both_halves() {
        let (dir, crashed) = (tempdir().expect("temp dir"), tempdir().expect("temp dir"));
        let (store, _hold) = open(dir.path()).await;
        let (x, y) = (EntityKey::new("p", "x"), EntityKey::new("p", "y"));
        let pages = store.opening_now().pages.clone();
        let paused = pages.pause();
        put(&store, &x, large(1), false).await;
        next_checkpoint(&store, checkpoints(&store)).await;
        tokio::time::timeout(Duration::from_secs(10), put(&store, &y, large(2), false))
            .await
            .expect("a large write waited for a checkpoint's pages");
        // The files as a crash would leave them: redb's as of before `x`, the
        // log with `x`'s record in one half and `y`'s in the other.
        copy_store_files(dir.path(), crashed.path());
        drop(paused);
        store.shutdown().await.expect("shutdown");

        let (store, _hold) = open(crashed.path()).await;
        assert_eq!(scan_values(&store).await, [large(1), large(2)]);
        store.shutdown().await.expect("shutdown");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answered_writes_are_read_back_under_concurrent_writers() {
        let dir = tempdir().expect("temp dir");
        let (store, _hold) = open(dir.path()).await;
        let tasks: Vec<_> = (0..16u8)
            .map(|w| {
                let store = store.clone();
                tokio::spawn(async move {
                    for i in 0..50u8 {
                        let key = EntityKey::new(&format!("p{w}"), &format!("r{i}"));
                        put(&store, &key, vec![i], false).await;
                        let seen = store.get_entity(ACCOUNT, "t", &key).await.expect("get");
                        assert_eq!(seen, Some(vec![i]), "writer {w} lost its own write {i}");
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("writer task");
        }
        assert_eq!(scan_values(&store).await.len(), 100, "a page of 100 of the 800 rows");
        store.shutdown().await.expect("shutdown");
    }
}
