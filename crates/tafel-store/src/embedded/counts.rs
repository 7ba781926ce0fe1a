//! Each table's counters: its entities and their bytes (encoded key plus stored
//! value, without the checksum), in META under `count/<id>`. They change in the
//! same group transaction as the rows they count (`apply.rs` adds each job's
//! change, [`Counts::flush`] writes them once per group), and the log records
//! them with the rows, so replay after a crash brings back both or neither. A
//! savepoint restore brings back META with the entities. A store from before the
//! counters gets them counted once when it is opened ([`fill_missing`]);
//! `tafel check` compares them with the rows ([`verify`]).

use std::collections::HashMap;
use std::ops::Bound;

use super::checksums::{seal, unseal};
use super::engine::entity_seal;
use super::engine::group::{GroupTx, Trees};
use super::engine::tree::{ReadTrees, Tree};
use super::schema::decode_table;
use crate::error::{FailureKind, StoreError};
use crate::traits::TableStats;

const PREFIX: &str = "count/";

/// The META key of table `id`'s counters.
pub(super) fn count_key(id: u64) -> String {
    format!("{PREFIX}{id:016x}")
}

fn encode(entities: u64, bytes: u64) -> [u8; 16] {
    let mut v = [0u8; 16];
    v[..8].copy_from_slice(&entities.to_le_bytes());
    v[8..].copy_from_slice(&bytes.to_le_bytes());
    v
}

fn corrupt() -> StoreError {
    StoreError::failure(FailureKind::Corrupt, "corrupt table counter")
}

/// Table `id`'s counters `(entities, bytes)`; `None` when it has none.
pub(super) fn read(trees: &impl ReadTrees, id: u64) -> Result<Option<(u64, u64)>, StoreError> {
    let key = count_key(id);
    let Some(v) = trees.get(Tree::Meta, key.as_bytes())? else {
        return Ok(None);
    };
    let v = unseal(key.as_bytes(), v.bytes())?;
    let (e, b) = v.split_at_checked(8).ok_or_else(corrupt)?;
    let e = u64::from_le_bytes(e.try_into().map_err(|_| corrupt())?);
    let b = u64::from_le_bytes(b.try_into().map_err(|_| corrupt())?);
    Ok(Some((e, b)))
}

/// The bytes a stored entity row counts for: its key (without the table id) and
/// its value (without the checksum).
pub(super) fn row_bytes(key_len: usize, value_len: usize) -> i64 {
    (key_len + value_len) as i64
}

/// Counts table `id`'s rows: `(entities, bytes)`.
pub(super) fn recount(trees: &impl ReadTrees, id: u64) -> Result<(u64, u64), StoreError> {
    let (lo, hi) = (id.to_be_bytes(), (id + 1).to_be_bytes());
    let (mut entities, mut bytes) = (0u64, 0u64);
    for row in trees.range(Tree::Entities, Bound::Included(&lo), Bound::Excluded(&hi))? {
        let (k, v) = row?;
        entities += 1;
        bytes += row_bytes(k.bytes().len().saturating_sub(8), entity_seal::payload(v.bytes()).len()) as u64;
    }
    Ok((entities, bytes))
}

/// Counts table `id`'s partitions: one seek past each.
pub(super) fn partitions(trees: &impl ReadTrees, id: u64) -> Result<u64, StoreError> {
    let hi = (id + 1).to_be_bytes();
    let mut from = id.to_be_bytes().to_vec();
    let mut n = 0;
    loop {
        let next = match trees
            .range(Tree::Entities, Bound::Included(&from), Bound::Excluded(&hi))?
            .next()
        {
            Some(row) => row?.0.bytes().to_vec(),
            None => return Ok(n),
        };
        n += 1;
        // The next partition starts past `pk 0x00`: at `pk 0x01`.
        let pk_end = next.iter().skip(8).position(|&b| b == 0).map_or(next.len(), |i| i + 8);
        from = next[..pk_end].to_vec();
        from.push(1);
    }
}

/// What a table's stats say, from its counters and a count of its partitions.
pub(super) fn stats(trees: &impl ReadTrees, id: u64) -> Result<TableStats, StoreError> {
    let (entities, bytes) = match read(trees, id)? {
        Some(c) => c,
        None => recount(trees, id)?,
    };
    Ok(TableStats {
        entities,
        bytes,
        partitions: Some(partitions(trees, id)?),
    })
}

/// The changes of one group's jobs to each table's counters, written once at the
/// group's end: a group of a thousand inserts into one table reads and writes
/// its counter once, not a thousand times.
#[derive(Default)]
pub(in crate::embedded) struct Counts {
    deltas: HashMap<u64, (i64, i64)>,
}

impl Counts {
    pub(super) fn add(&mut self, id: u64, entities: i64, bytes: i64) {
        if entities != 0 || bytes != 0 {
            let d = self.deltas.entry(id).or_default();
            d.0 += entities;
            d.1 += bytes;
        }
    }

    /// A table deleted (or emptied) in this group: nothing is left to add to
    /// its counter; the entities this group had added to it.
    pub(super) fn forget(&mut self, id: u64) -> i64 {
        self.deltas.remove(&id).map_or(0, |d| d.0)
    }

    /// Writes the group's changes into the counters.
    pub(in crate::embedded) fn flush(&mut self, tx: &mut GroupTx<'_, '_>) -> Result<(), StoreError> {
        for (id, (de, db)) in self.deltas.drain() {
            // A table created before the counters and not yet counted (only
            // between a reopen and its fill) is counted here, rows of this group included.
            let (e, b) = match read(tx, id)? {
                Some((e, b)) => (e.saturating_add_signed(de), b.saturating_add_signed(db)),
                None => recount(tx, id)?,
            };
            let key = count_key(id);
            tx.insert(Tree::Meta, key.as_bytes(), &seal(key.as_bytes(), &encode(e, b)))?;
        }
        Ok(())
    }
}

/// Sets table `id`'s counters to nothing (a new table).
pub(super) fn start(tx: &mut GroupTx<'_, '_>, id: u64) -> Result<(), StoreError> {
    let key = count_key(id);
    tx.insert(Tree::Meta, key.as_bytes(), &seal(key.as_bytes(), &encode(0, 0)))
}

/// Removes table `id`'s counters (a deleted table).
pub(super) fn remove(tx: &mut GroupTx<'_, '_>, id: u64) -> Result<(), StoreError> {
    let key = count_key(id);
    if tx.get(Tree::Meta, key.as_bytes())?.is_some() {
        tx.remove(Tree::Meta, key.as_bytes())?;
    }
    Ok(())
}

/// Counts the tables that have no counters (a store last written by a Tafel
/// from before them), in the opening's own durable commit; returns how many.
pub(in crate::embedded) fn fill_missing(trees: &mut Trees<'_>) -> Result<usize, StoreError> {
    let mut ids = Vec::new();
    for row in trees.range(Tree::Tables, Bound::Unbounded, Bound::Unbounded)? {
        let (k, v) = row?;
        ids.push(decode_table(k.bytes(), v.bytes())?.id);
    }
    let mut filled = 0;
    for id in ids {
        if read(trees, id)?.is_none() {
            let (e, b) = recount(trees, id)?;
            let key = count_key(id);
            trees.insert_unlogged(Tree::Meta, key.as_bytes(), &seal(key.as_bytes(), &encode(e, b)))?;
            filled += 1;
        }
    }
    Ok(filled)
}

/// What [`verify`] found wrong with one table's counters.
pub(super) fn mismatch(stored: Option<(u64, u64)>, counted: (u64, u64)) -> Option<String> {
    match stored {
        None if counted == (0, 0) => None,
        None => Some(format!(
            "has no counter (it holds {} entities; the server counts them when it next opens the store)",
            counted.0
        )),
        Some(s) if s == counted => None,
        Some((e, b)) => Some(format!(
            "its counter says {e} entities of {b} bytes, its rows are {} entities of {} bytes",
            counted.0, counted.1
        )),
    }
}
