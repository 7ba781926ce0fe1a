//! The writer thread: group commit (see the module invariants in `mod.rs`), the
//! write transaction's helpers, and the replay of the log on open.

use std::ops::Bound;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redb::{CursorError, Database, Durability, ReadableTable};

use super::checkpoint::SinceCheckpoint;
use super::checksums::{seal, seal_in_place, unseal};
use super::commit::{self, Checkpoint, Committed, Pending, ReadView};
use super::page_file::Durable;
use super::schema::*;
use super::stats::EmbeddedStats;
use super::wal::{self, decode_ops, LogBuf, Op, Spare};
use super::{savepoints, Job};
use crate::error::{kind_of_io, BackendError, FailureKind, StoreError};
use crate::key::EntityKey;
use crate::traits::{Decide, Mutation};

/// Upper bound of jobs folded into one commit, so one commit's latency stays bounded.
pub(super) const MAX_GROUP: usize = 512;
/// An idle writer checkpoints after this long without a write.
pub(super) const IDLE_CHECKPOINT: Duration = Duration::from_secs(1);

/// Applies the records found in the log on open and commits them durably, so
/// the log can be written from its start again; the commit also sets `wal_seq`
/// to `next`, the number the records after open count on from (see [`Wal::open`]).
/// `sealed`: whether the store's values carry checksums (the records hold the
/// values as stored, so they do too).
pub(super) fn replay(db: &Database, records: &[wal::Record], next: u64, sealed: bool) -> Result<(), StoreError> {
    let mut txn = db.begin_write().map_err(to_store_error)?;
    txn.set_durability(Durability::Immediate).map_err(to_store_error)?;
    {
        let mut tables = Tables::open(&txn).map_err(to_store_error)?;
        for r in records {
            let ops = decode_ops(&r.payload)
                .ok_or_else(|| StoreError::failure(FailureKind::Corrupt, format!("corrupt log record {}", r.seq)))?;
            for op in &ops {
                tables.apply(op)?;
            }
        }
        let next = match sealed {
            true => seal(WAL_SEQ.as_bytes(), &next.to_le_bytes()),
            false => next.to_le_bytes().to_vec(),
        };
        tables.meta.insert(WAL_SEQ, next.as_slice()).map_err(to_store_error)?;
    }
    txn.commit().map_err(to_store_error)
}

/// The writer's account of the log, and of when redb itself last made the state
/// durable. The log thread writes the records in the order the writer numbers
/// them, so the writer knows what the log holds without waiting for it.
pub(super) struct LogState {
    /// Number of the last record (or of the one the last checkpoint includes).
    pub(super) last_seq: u64,
    /// Bytes a log half holds: the records since the last checkpoint must fit.
    pub(super) size: u64,
    pub(super) since: SinceCheckpoint,
    /// Record buffers the log thread is done with.
    pub(super) spare: Arc<Spare>,
    /// When redb's syncs are on disk.
    pub(super) durable: Durable,
    pub(super) stats: Arc<EmbeddedStats>,
}

impl LogState {
    fn fits(&self, record: &LogBuf) -> bool {
        self.since.bytes + record.len() <= self.size
    }
}

/// Why every write fails, once the store file or the log could not be written
/// (the store file's failure first: its kind says whether the disk is full).
/// Until a restart, except after a full disk: then until the store reopens
/// itself (`reopen.rs`).
pub(super) fn broken(durable: &Durable, failed: &AtomicBool) -> Option<(FailureKind, String)> {
    if let Some((kind, e)) = durable.failure() {
        let kind = kind_of_io(kind);
        let until = match kind {
            FailureKind::DiskFull => "writes fail until space is freed",
            _ => "writes fail until a restart",
        };
        return Some((kind, format!("writing the store file failed ({e}); {until}")));
    }
    failed.load(Ordering::Acquire).then(|| {
        (
            FailureKind::Io,
            "the write-ahead log failed; writes fail until a restart".to_owned(),
        )
    })
}

/// The writer thread: group commit, see the module invariants.
pub(super) fn writer_loop(
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
                // After a failed log or store-file write every commit fails until a
                // restart: an idle checkpoint would only fail (and log it) each second.
                if state.since.any() && broken(&state.durable, failed).is_none() {
                    run_group(db, &mut state, log, failed, Vec::new());
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        // A savepoint job ends the group and runs alone, after it.
        let mut group = Vec::new();
        let mut alone = None;
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match job {
                Job::Savepoint { op, reply } => alone = Some((op, reply)),
                job => group.push(job),
            }
            if alone.is_none() && group.len() < MAX_GROUP {
                next = rx.try_recv().ok();
            }
        }
        if !group.is_empty() {
            run_group(db, &mut state, log, failed, group);
            // Now make everything durable in redb if due.
            if state.since.checkpoint_due(Instant::now()) {
                run_group(db, &mut state, log, failed, Vec::new());
            }
        }
        if let Some((op, reply)) = alone {
            savepoints::run(db, &mut state, log, failed, op, reply);
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
        deletes_table: group
            .iter()
            .any(|j| matches!(j, Job::DeleteTable { .. } | Job::ClearAccount { .. })),
        pending: Vec::with_capacity(group.len()),
        ..Committed::default()
    };
    let checkpoint_alone = group.is_empty();
    let jobs = group.len() as u64;
    // A panic in redb (a damaged page, see `schema::guarded`) fails the group;
    // its transaction, dropped unfinished, changes nothing.
    let run = AssertUnwindSafe(|| -> Result<(), BackendError> {
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
                let stored = seal(WAL_SEQ.as_bytes(), &seq.to_le_bytes());
                meta.insert(WAL_SEQ, stored.as_slice()).map_err(backend_error)?;
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
        committed.snapshot = Some(ReadView::take(db).map_err(|e| match e {
            StoreError::Backend(b) => b,
            other => BackendError::new(FailureKind::Internal, other.to_string()),
        })?);
        Ok(())
    });
    committed.result = catch_unwind(run).unwrap_or_else(|_| Err(garbage()));
    if let Err(e) = &mut committed.result {
        // After the store file could not be written, redb only says "Previous I/O
        // error"; the flusher knows what it was (a full disk, say).
        if let Some((kind, why)) = state.durable.failure() {
            *e = BackendError::caused_by(kind_of_io(kind), "the store file", std::io::Error::new(kind, why));
        }
        tracing::error!(error = %e, "commit failed; failing every request of the group");
    }
    #[cfg(test)]
    state.stats.jobs_done.fetch_add(jobs, Ordering::Relaxed);
    if let Err(mpsc::SendError(c)) = to_log.send(committed) {
        c.answer(&Err(BackendError::new(FailureKind::Stopped, "the log thread stopped")));
    }
}

/// The store's redb tables, open in one write transaction.
pub(super) struct Tables<'t> {
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
            } => self.order.insert(key, ()).map(drop).map_err(to_store_error),
            Op::Remove { table: T_ORDER, key } => self.order.remove(key).map(drop).map_err(to_store_error),
            Op::Remove { table: T_META, key } => {
                let key = std::str::from_utf8(key).map_err(to_store_error)?;
                self.meta.remove(key).map(drop).map_err(to_store_error)
            }
            Op::Insert {
                table: T_META,
                key,
                value,
            } => {
                let key = std::str::from_utf8(key).map_err(to_store_error)?;
                self.meta.insert(key, value).map(drop).map_err(to_store_error)
            }
            Op::Insert { table, key, value } => {
                self.by_tag(table)?.insert(key, value).map(drop).map_err(to_store_error)
            }
            Op::Remove { table, key } => self.by_tag(table)?.remove(key).map(drop).map_err(to_store_error),
            Op::RemoveRange { table, lo, hi } => self
                .by_tag(table)?
                .retain_in(lo..hi, |_, _| false)
                .map_err(to_store_error),
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
                let key = props_key(&account);
                let r = self.change(Op::Insert {
                    table: T_META,
                    key: key.as_bytes(),
                    value: &seal(key.as_bytes(), &value),
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
            Job::ClearAccount { account, reply } => Pending::Count(reply, self.clear_account(&account)),
            // The writer loop runs these alone; one here is a bug.
            Job::Savepoint { reply, .. } => Pending::Savepoint(
                reply,
                Err(StoreError::failure(FailureKind::Internal, "a savepoint job in a group")),
            ),
        }
    }

    fn table(&self, account: &str, name: &str) -> Result<Option<TableValue>, StoreError> {
        let key = table_key(account, name);
        let found = self.tables.tables.get(key.as_slice()).map_err(to_store_error)?;
        found.map(|v| decode_table(&key, v.value())).transpose()
    }

    fn create_table(&mut self, account: &str, name: &str) -> Result<bool, StoreError> {
        if self.table(account, name)?.is_some() {
            return Ok(false);
        }
        let id = match self.tables.meta.get(NEXT_TABLE_ID).map_err(to_store_error)? {
            Some(v) => decode_u64(NEXT_TABLE_ID, v.value())?,
            None => 1,
        };
        self.change(Op::Insert {
            table: T_META,
            key: NEXT_TABLE_ID.as_bytes(),
            value: &seal(NEXT_TABLE_ID.as_bytes(), &(id + 1).to_le_bytes()),
        })?;
        let key = table_key(account, name);
        self.change(Op::Insert {
            table: T_TABLES,
            key: &key,
            value: &seal(&key, &encode_table(id, name, &[])),
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

    /// Deletes every table of `account` and its service properties; returns
    /// how many tables there were.
    fn clear_account(&mut self, account: &str) -> Result<u64, StoreError> {
        let lo = order_key(account, "");
        let mut hi = account.as_bytes().to_vec();
        hi.push(1);
        let mut names = Vec::new();
        for item in self
            .tables
            .order
            .range::<&[u8]>(lo.as_slice()..hi.as_slice())
            .map_err(to_store_error)?
        {
            let (k, _) = item.map_err(to_store_error)?;
            let name = k.value().get(lo.len()..).unwrap_or_default();
            names.push(String::from_utf8(name.to_vec()).map_err(to_store_error)?);
        }
        for name in &names {
            self.delete_table(account, name)?;
        }
        let props = props_key(account);
        if self.tables.meta.get(props.as_str()).map_err(to_store_error)?.is_some() {
            self.change(Op::Remove {
                table: T_META,
                key: props.as_bytes(),
            })?;
        }
        Ok(names.len() as u64)
    }

    fn set_acl(&mut self, account: &str, name: &str, acl: &[u8]) -> Result<bool, StoreError> {
        let Some(t) = self.table(account, name)? else {
            return Ok(false);
        };
        let key = table_key(account, name);
        self.change(Op::Insert {
            table: T_TABLES,
            key: &key,
            value: &seal(&key, &encode_table(t.id, &t.record.name, acl)),
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
            // A damaged row fails the write: nothing is built on what it holds.
            let found = self.tables.entities.get(k.as_slice()).map_err(to_store_error)?;
            current.push(found.map(|v| unseal(k, v.value()).map(<[u8]>::to_vec)).transpose()?);
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
                    Mutation::Put(mut v) => {
                        seal_in_place(k, &mut v);
                        if runs && old.is_none() {
                            fresh.push((k, v));
                            continue;
                        }
                        self.change(Op::Insert {
                            table: T_ENTITIES,
                            key: k,
                            value: &v,
                        })?
                    }
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
    let mut cursor = entities
        .lower_bound_mut(Bound::Included(*first))
        .map_err(to_store_error)?;
    let mut placed = 0;
    for (key, value) in rows {
        match cursor.insert_before(*key, value.as_slice()) {
            Ok(()) => {}
            // An existing row sorts before this one: the run ends here. (The
            // first row, refused at its own gap, exists after all: an error.)
            Err(CursorError::UnorderedKey) if placed > 0 => break,
            Err(e) => return Err(to_store_error(e)),
        }
        log.push(&Op::Insert {
            table: T_ENTITIES,
            key,
            value,
        });
        placed += 1;
    }
    cursor.close().map_err(to_store_error)?;
    Ok(placed)
}

/// Whether no key repeats.
fn distinct_keys(keys: &[Vec<u8>]) -> bool {
    let mut sorted: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    sorted.sort_unstable();
    sorted.windows(2).all(|w| w[0] != w[1])
}
