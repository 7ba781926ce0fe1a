//! Named savepoints of the whole store (the admin listener's snapshots): redb's
//! persistent savepoints, so saving copies nothing and a restore swaps the
//! B-trees' root back, whatever the store's size.
//!
//! Each runs on the writer thread alone, as a durable commit (a checkpoint) that
//! records `wal_seq` = the last record's number, and the log goes on past it only
//! once that commit is on disk (`Checkpoint::on_disk_first`). So a crash before
//! then replays the log onto the state before the restore (which was never
//! answered), and one after replays only records written after the restore:
//! none from before it comes back, none acknowledged after it is lost.
//!
//! Names live in META (`savepoint/<name>` → id, creation time). A restore
//! brings META back too, so it writes the names again as they were before,
//! less those redb dropped with it (saved after the restored one), and keeps
//! the table-id counter and the change feed's heads from going back (ids and
//! positions are never reused: `feed_restore.rs`).

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{SystemTime, UNIX_EPOCH};

use super::checksums::{seal, unseal};
use super::commit::{self, Checkpoint, Committed, Pending, ReadView, ToLog, Turn};
use super::engine::durable_tx::{Db, DurableTx};
use super::engine::health::Health;
use super::engine::log_state::LogState;
use super::engine::tree::{ReadTrees, Tree};
use super::feed_restore;
use super::schema::{as_backend, decode_u64, garbage, to_store_error, NEXT_TABLE_ID, WAL_SEQ};
use super::Reply;
use crate::error::{BackendError, FailureKind, StoreError};

const PREFIX: &str = "savepoint/";
/// Just past every key under [`PREFIX`] (`'0'` follows `'/'`).
const PREFIX_END: &str = "savepoint0";

/// What a savepoint job does.
pub(super) enum Op {
    Save(String),
    Restore(String),
    Delete(String),
}

impl Op {
    pub(super) fn name(&self) -> &str {
        match self {
            Op::Save(n) | Op::Restore(n) | Op::Delete(n) => n,
        }
    }
}

/// How a savepoint job ended, when the store did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    Done,
    NotFound,
    Exists,
}

/// A name's savepoint.
#[derive(Clone, Copy)]
pub(super) struct Saved {
    pub(super) id: u64,
    pub(super) created_ms: u64,
}

fn key(name: &str) -> String {
    format!("{PREFIX}{name}")
}

fn encode(s: Saved) -> Vec<u8> {
    let mut v = s.id.to_le_bytes().to_vec();
    v.extend_from_slice(&s.created_ms.to_le_bytes());
    v
}

/// The savepoint names in `trees` and their savepoints.
pub(super) fn names(trees: &impl ReadTrees) -> Result<BTreeMap<String, Saved>, StoreError> {
    let mut out = BTreeMap::new();
    for item in trees.range_of(Tree::Meta, PREFIX.as_bytes(), PREFIX_END.as_bytes())? {
        let (k, v) = item?;
        let v = unseal(k.bytes(), v.bytes())?;
        let corrupt = || StoreError::failure(FailureKind::Corrupt, "corrupt savepoint record");
        let id = u64::from_le_bytes(v.get(..8).ok_or_else(corrupt)?.try_into().map_err(to_store_error)?);
        let created_ms = u64::from_le_bytes(v.get(8..16).ok_or_else(corrupt)?.try_into().map_err(to_store_error)?);
        let name = k.bytes().get(PREFIX.len()..).unwrap_or_default();
        let name = String::from_utf8(name.to_vec()).map_err(|_| corrupt())?;
        out.insert(name, Saved { id, created_ms });
    }
    Ok(out)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Runs one savepoint job on the writer thread (see the module comment) and
/// hands its commit to the log, which answers once it is on disk.
pub(super) fn run(db: &Db, state: &mut LogState, to_log: &ToLog, health: &Health, op: Op, reply: Reply<Outcome>) {
    // A restore may bring back other index definitions.
    state.index_defs.clear();
    let mut committed = Committed {
        // A restore may take tables away: remembered ids go.
        deletes_table: matches!(op, Op::Restore(_)),
        ..Committed::default()
    };
    if matches!(op, Op::Restore(_)) {
        // It may bring back deleted tables kept past their time: the next sweep looks.
        state.feed.next_sweep_ns.store(0, std::sync::atomic::Ordering::Release);
    }
    let run = AssertUnwindSafe(|| -> Result<Outcome, BackendError> {
        if health.log_failure().is_some() {
            return Err(BackendError::new(FailureKind::Stopped, "write-ahead log failed"));
        }
        let mut before = Before::read(db)?;
        let found = before.names.get(op.name()).copied();
        match (&op, found) {
            (Op::Save(_), Some(_)) => return Ok(Outcome::Exists),
            (Op::Restore(_) | Op::Delete(_), None) => return Ok(Outcome::NotFound),
            _ => {}
        }
        let mut txn = DurableTx::begin_for(state, db).map_err(as_backend)?;
        let names = apply(&mut txn, &op, found, std::mem::take(&mut before.names))?;
        rewrite_meta(&mut txn, &names, &op, &before, state.last_seq)?;
        if state.since.any() {
            commit::wait_published(to_log);
        }
        txn.commit().map_err(as_backend)?;
        state.log_turned(false);
        committed.turn = Some(Turn::Checkpoint(Checkpoint {
            sync: state.durable.last_requested(),
            // No record after it before it is on disk: see the module comment.
            on_disk_first: true,
        }));
        committed.snapshot = Some(ReadView::take(db).map_err(store_error)?);
        Ok(Outcome::Done)
    });
    let (result, commit) = match catch_unwind(run).unwrap_or_else(|_| Err(garbage())) {
        Ok(outcome) => (Ok(outcome), Ok(())),
        Err(e) => {
            tracing::error!(error = %e, "savepoint job failed");
            (Err(StoreError::Backend(e.clone())), Err(e))
        }
    };
    committed.pending.push(Pending::Savepoint(reply, result));
    committed.result = commit;
    to_log.send(committed);
}

/// What a savepoint job keeps from the store as it was before it.
struct Before {
    names: BTreeMap<String, Saved>,
    next_table_id: u64,
    /// The change feed's heads (`feed_restore.rs`).
    feed_heads: BTreeMap<String, (u64, u64)>,
}

impl Before {
    fn read(db: &Db) -> Result<Before, BackendError> {
        let view = ReadView::take(db).map_err(store_error)?;
        let next_table_id = match view.get(Tree::Meta, NEXT_TABLE_ID.as_bytes()).map_err(store_error)? {
            Some(v) => decode_u64(NEXT_TABLE_ID, v.bytes()).map_err(store_error)?,
            None => 1,
        };
        Ok(Before {
            names: names(&*view).map_err(store_error)?,
            next_table_id,
            feed_heads: feed_restore::heads(&*view).map_err(store_error)?,
        })
    }
}

/// Saves, restores or deletes the savepoint (`found` is the name's, if any);
/// the names as they are after it.
fn apply(
    txn: &mut DurableTx,
    op: &Op,
    found: Option<Saved>,
    mut names: BTreeMap<String, Saved>,
) -> Result<BTreeMap<String, Saved>, BackendError> {
    match (op, found) {
        (Op::Save(name), _) => {
            let id = txn.save_point().map_err(as_backend)?;
            let created_ms = now_ms();
            names.insert(name.clone(), Saved { id, created_ms });
        }
        (Op::Restore(_), Some(saved)) => {
            txn.restore_point(saved.id).map_err(as_backend)?;
            // redb deleted those saved after it.
            names.retain(|_, s| s.id <= saved.id);
        }
        (Op::Delete(name), Some(saved)) => {
            txn.delete_point(saved.id).map_err(as_backend)?;
            names.remove(name);
        }
        _ => {
            return Err(BackendError::new(
                FailureKind::Internal,
                "savepoint job without its savepoint",
            ))
        }
    }
    Ok(names)
}

/// Writes META as it must be after the job, whatever state a restore brought
/// back: the savepoint names, the feed's heads and the table-id counter never
/// going back, and the last log record this state holds.
fn rewrite_meta(
    txn: &mut DurableTx,
    names: &BTreeMap<String, Saved>,
    op: &Op,
    before: &Before,
    last_seq: u64,
) -> Result<(), BackendError> {
    let mut trees = txn.trees().map_err(store_error)?;
    let stale: Vec<String> = self::names(&trees).map_err(store_error)?.into_keys().collect();
    for name in stale {
        trees
            .remove_unlogged(Tree::Meta, key(&name).as_bytes())
            .map_err(store_error)?;
    }
    for (name, saved) in names {
        let k = key(name);
        trees
            .insert_unlogged(Tree::Meta, k.as_bytes(), &seal(k.as_bytes(), &encode(*saved)))
            .map_err(store_error)?;
    }
    if matches!(op, Op::Restore(_)) {
        feed_restore::carry_across_restore(&mut trees, &before.feed_heads).map_err(store_error)?;
    }
    let next = seal(NEXT_TABLE_ID.as_bytes(), &before.next_table_id.to_le_bytes());
    trees
        .insert_unlogged(Tree::Meta, NEXT_TABLE_ID.as_bytes(), &next)
        .map_err(store_error)?;
    // Every record so far is in this state (or, after a restore, undone by it).
    let seq = seal(WAL_SEQ.as_bytes(), &last_seq.to_le_bytes());
    trees
        .insert_unlogged(Tree::Meta, WAL_SEQ.as_bytes(), &seq)
        .map_err(store_error)?;
    Ok(())
}

fn store_error(e: StoreError) -> BackendError {
    match e {
        StoreError::Backend(b) => b,
        other => BackendError::new(FailureKind::Internal, other.to_string()),
    }
}
