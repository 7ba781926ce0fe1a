//! The power-loss simulation's model and workload (`simulation.rs` runs and
//! checks them): what the store must hold ([`State`]), the ops a seed draws and
//! what each does to the state and records in the change feed, and reading a
//! store's state back.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::EmbeddedStore;
use crate::feed::ChangeOp;
use crate::key::{EntityKey, KeyRange};
use crate::reset::ResetError;
use crate::test_support::ScanEntities;
use crate::traits::{IndexEncoder, Mutation, ScanRequest, Store};

pub(super) const ACCOUNT: &str = "sim";
const TABLES: [&str; 3] = ["t0", "t1", "t2"];

/// What the store holds: tables and their ACL bytes, the tables with an index
/// on [`INDEXED`], rows by (table, key), and the savepoints by number (`s<n>`).
#[derive(Clone, Default, PartialEq, Debug)]
pub(super) struct State {
    pub(super) tables: BTreeMap<String, Vec<u8>>,
    pub(super) indexed: BTreeSet<String>,
    pub(super) rows: BTreeMap<(String, EntityKey), Arc<[u8]>>,
    pub(super) savepoints: BTreeSet<u32>,
}

/// A change as the feed records it, less what the store assigns (position,
/// txn, time): op, table, key, value.
pub(super) type Recorded = (ChangeOp, String, Option<EntityKey>, Option<Vec<u8>>);

/// The one property the simulation indexes: a row's first two bytes (rows of
/// one byte have none), so puts and merges move entries and deletes drop them.
const INDEXED: &str = "x";

pub(super) fn encoder() -> IndexEncoder {
    let x = |value: &[u8]| value.get(..2).map(<[u8]>::to_vec);
    IndexEncoder::new(
        move |value: &[u8], property: &str| (property == INDEXED).then(|| x(value)).flatten(),
        move |value: &[u8]| x(value).map(|v| (INDEXED.to_owned(), v)).into_iter().collect(),
    )
}

/// What one write does to one row, given the row's current value.
#[derive(Clone)]
pub(super) enum Change {
    /// Insert or replace.
    Put(Arc<[u8]>),
    /// Insert only if absent.
    Insert(Arc<[u8]>),
    /// Insert-or-merge: the new value depends on the old.
    Merge(u64),
    Delete,
}

impl Change {
    fn decide(&self, current: Option<&[u8]>) -> Mutation {
        match (self, current) {
            (Change::Put(v), _) | (Change::Insert(v), None) => Mutation::Put(v.to_vec()),
            (Change::Insert(_), Some(_)) | (Change::Delete, None) => Mutation::Keep,
            (Change::Merge(salt), old) => {
                let mut v = salt.to_le_bytes().to_vec();
                v.extend_from_slice(&old.unwrap_or_default()[..old.map_or(0, |o| o.len().min(300))]);
                Mutation::Put(v)
            }
            (Change::Delete, Some(_)) => Mutation::Delete,
        }
    }
}

#[derive(Clone)]
pub(super) enum Op {
    CreateTable(&'static str),
    DeleteTable(&'static str),
    /// The table emptied (its changes' values stay in the feed).
    Truncate(&'static str),
    CreateIndex(&'static str),
    DropIndex(&'static str),
    SetAcl(&'static str, Arc<[u8]>),
    /// One atomic write of rows of one partition (a batch if more than one).
    Write {
        table: &'static str,
        rows: Vec<(EntityKey, Change)>,
    },
    /// Savepoint `s<n>` saved, with the state it holds.
    Save(u32),
    /// Savepoint `s<n>` restored: the state it holds.
    Restore(u32, Arc<State>),
    DropSavepoint(u32),
}

impl Op {
    pub(super) fn apply(&self, state: &mut State) {
        match self {
            Op::CreateTable(t) => {
                state.tables.insert((*t).to_owned(), Vec::new());
            }
            Op::DeleteTable(t) => {
                state.tables.remove(*t);
                state.indexed.remove(*t);
                state.rows.retain(|(table, _), _| table != t);
            }
            Op::Truncate(t) => {
                state.rows.retain(|(table, _), _| table != t);
            }
            Op::CreateIndex(t) => {
                state.indexed.insert((*t).to_owned());
            }
            Op::DropIndex(t) => {
                state.indexed.remove(*t);
            }
            Op::SetAcl(t, acl) => {
                if let Some(a) = state.tables.get_mut(*t) {
                    *a = acl.to_vec();
                }
            }
            Op::Write { table, rows } => {
                for (key, change) in rows {
                    let at = ((*table).to_owned(), key.clone());
                    match change.decide(state.rows.get(&at).map(|v| &v[..])) {
                        Mutation::Put(v) | Mutation::Merge(v) => {
                            state.rows.insert(at, v.into());
                        }
                        Mutation::Delete | Mutation::Expire => {
                            state.rows.remove(&at);
                        }
                        Mutation::Keep => {}
                    }
                }
            }
            Op::Save(n) => {
                state.savepoints.insert(*n);
            }
            Op::Restore(n, to) => {
                // The savepoints saved after it go with the restore (redb's).
                let kept = state.savepoints.range(..=n).copied().collect();
                *state = (**to).clone();
                state.savepoints = kept;
            }
            Op::DropSavepoint(n) => {
                state.savepoints.remove(n);
            }
        }
    }

    /// What the op records in the feed, run on `before` (the ops of a wave
    /// touch distinct rows, so each records the same whatever ran beside it).
    pub(super) fn recorded(&self, before: &State) -> Vec<Recorded> {
        let table = |op, t: &str| vec![(op, t.to_owned(), None, None)];
        match self {
            Op::CreateTable(t) => table(ChangeOp::CreateTable, t),
            Op::DeleteTable(t) => table(ChangeOp::DeleteTable, t),
            Op::Truncate(t) => table(ChangeOp::TruncateTable, t),
            Op::Write { table, rows } => rows
                .iter()
                .filter_map(|(key, change)| {
                    let current = before.rows.get(&((*table).to_owned(), key.clone()));
                    let m = change.decide(current.map(|v| &v[..]));
                    let (op, value) = ChangeOp::of(&m, current.is_some())?;
                    Some((op, (*table).to_owned(), Some(key.clone()), value.map(<[u8]>::to_vec)))
                })
                .collect(),
            Op::CreateIndex(_) | Op::DropIndex(_) | Op::SetAcl(..) => Vec::new(),
            Op::Save(_) | Op::Restore(..) | Op::DropSavepoint(_) => Vec::new(),
        }
    }

    pub(super) async fn run(&self, store: &EmbeddedStore) -> Result<(), crate::StoreError> {
        match self {
            Op::CreateTable(t) => store.create_table(ACCOUNT, t).await.map(drop),
            Op::DeleteTable(t) => store.delete_table(ACCOUNT, t).await.map(drop),
            Op::Truncate(t) => store.truncate_table(ACCOUNT, t).await.map(drop),
            Op::CreateIndex(t) => store
                .create_index(ACCOUNT, t, INDEXED)
                .await
                .map(drop)
                .map_err(index_error),
            Op::DropIndex(t) => store
                .drop_index(ACCOUNT, t, INDEXED)
                .await
                .map(drop)
                .map_err(index_error),
            Op::SetAcl(t, acl) => store.set_table_acl(ACCOUNT, t, acl.to_vec()).await.map(drop),
            Op::Write { table, rows } => {
                let keys = rows.iter().map(|(k, _)| k.clone()).collect();
                let changes: Vec<Change> = rows.iter().map(|(_, c)| c.clone()).collect();
                let decide =
                    move |current: &[Option<&[u8]>]| changes.iter().zip(current).map(|(c, v)| c.decide(*v)).collect();
                store.write_entities(ACCOUNT, table, keys, Box::new(decide)).await
            }
            Op::Save(n) => store.save_savepoint(&format!("s{n}")).await.map_err(reset_error),
            Op::Restore(n, _) => store.restore_savepoint(&format!("s{n}")).await.map_err(reset_error),
            Op::DropSavepoint(n) => store.delete_savepoint(&format!("s{n}")).await.map_err(reset_error),
        }
    }
}

fn value(rng: &mut fastrand::Rng) -> Arc<[u8]> {
    let len = if rng.u8(..) < 20 {
        rng.usize(2000..16000)
    } else {
        rng.usize(1..300)
    };
    let mut v = vec![0; len];
    rng.fill(&mut v);
    v.into()
}

/// The states the savepoints saved, by number; the next number.
#[derive(Default)]
pub(super) struct Saved {
    pub(super) states: BTreeMap<u32, Arc<State>>,
    next: u32,
}

/// The next wave's ops, drawn from `rng` given the state they start from.
/// Table and savepoint ops run alone; index and ACL changes beside writes.
pub(super) fn draw_wave(rng: &mut fastrand::Rng, state: &State, saved: &mut Saved) -> Vec<Op> {
    let table = |rng: &mut fastrand::Rng| TABLES[rng.usize(..TABLES.len())];
    if state.tables.is_empty() || rng.u8(..100) < 4 {
        let t = table(rng);
        return vec![if state.tables.contains_key(t) {
            match rng.bool() {
                true => Op::DeleteTable(t),
                false => Op::Truncate(t),
            }
        } else {
            Op::CreateTable(t)
        }];
    }
    if rng.u8(..100) < 4 {
        let existing: Vec<u32> = state.savepoints.iter().copied().collect();
        let pick = (!existing.is_empty()).then(|| existing[rng.usize(..existing.len())]);
        return vec![match (rng.u8(..10), pick) {
            (0..=4, Some(n)) => Op::Restore(n, saved.states[&n].clone()),
            (5, Some(n)) => Op::DropSavepoint(n),
            _ => {
                saved.next += 1;
                saved.states.insert(saved.next, Arc::new(state.clone()));
                Op::Save(saved.next)
            }
        }];
    }
    let live: Vec<&'static str> = TABLES.into_iter().filter(|t| state.tables.contains_key(*t)).collect();
    let mut partitions = BTreeSet::new();
    let mut ops = Vec::new();
    // An index declared or dropped beside the wave's writes, which it races.
    if rng.u8(..100) < 6 {
        let t = live[rng.usize(..live.len())];
        ops.push(if state.indexed.contains(t) {
            Op::DropIndex(t)
        } else {
            Op::CreateIndex(t)
        });
    }
    // And an ACL set, which rewrites the table's record.
    if rng.u8(..100) < 8 {
        let mut acl = vec![0; rng.usize(..200)];
        rng.fill(&mut acl);
        ops.push(Op::SetAcl(live[rng.usize(..live.len())], acl.into()));
    }
    for _ in 0..rng.usize(1..=4) {
        let (table, pk) = (live[rng.usize(..live.len())], rng.usize(..8));
        if !partitions.insert((table, pk)) {
            continue;
        }
        let n = if rng.bool() { 1 } else { rng.usize(2..=40) };
        let row_keys: BTreeSet<usize> = (0..n).map(|_| rng.usize(..150)).collect();
        let rows = row_keys
            .into_iter()
            .map(|rk| {
                let key = EntityKey::new(&format!("p{pk}"), &format!("r{rk:03}"));
                let change = match rng.u8(..10) {
                    0..=3 => Change::Put(value(rng)),
                    4..=5 => Change::Insert(value(rng)),
                    6..=7 => Change::Merge(rng.u64(..)),
                    _ => Change::Delete,
                };
                (key, change)
            })
            .collect();
        ops.push(Op::Write { table, rows });
    }
    ops
}

pub(super) fn index_error(e: crate::IndexError) -> crate::StoreError {
    match e {
        crate::IndexError::Store(e) => e,
        other => crate::StoreError::failure(crate::error::FailureKind::Internal, other.to_string()),
    }
}

fn reset_error(e: ResetError) -> crate::StoreError {
    match e {
        ResetError::Store(e) => e,
        other => crate::StoreError::failure(crate::error::FailureKind::Internal, other.to_string()),
    }
}

pub(super) async fn read_state(store: &EmbeddedStore) -> Result<State, crate::StoreError> {
    let mut state = State::default();
    for t in store.list_tables(ACCOUNT, None, 1000).await? {
        let request = ScanRequest {
            ranges: vec![KeyRange::all()],
            limit: usize::MAX,
            filter: None,
            deadline: None,
        };
        for (key, v) in store.scan_entities(ACCOUNT, &t.name, request).await?.rows {
            state.rows.insert((t.name.clone(), key), v.into());
        }
        if !store
            .list_indexes(ACCOUNT, &t.name)
            .await
            .map_err(index_error)?
            .is_empty()
        {
            state.indexed.insert(t.name.clone());
        }
        state.tables.insert(t.name, t.acl);
    }
    for s in store.list_savepoints().await.map_err(reset_error)? {
        let n = s.name.strip_prefix('s').and_then(|n| n.parse().ok());
        let n = n.ok_or_else(|| {
            crate::StoreError::failure(crate::error::FailureKind::Internal, format!("savepoint {:?}", s.name))
        })?;
        state.savepoints.insert(n);
    }
    Ok(state)
}
