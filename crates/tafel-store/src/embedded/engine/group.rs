//! The seam's write side: a group transaction. The writer thread opens one per
//! group (`writer.rs`); the store's logic reads and changes named trees through
//! it, and every change it makes goes into the group's log record as it is
//! made, so what the log replays is exactly what was applied.

use std::cell::OnceCell;
use std::ops::Bound;

use redb::{CursorError, ReadableTable};

use super::blocks;
use super::buffer::Buffer;
use super::commit::BaseView;
use super::log_op::{self, Op};
use super::schema::{
    to_store_error, CHANGES, ENTITIES, INDEX, META, TABLES, TABLE_ORDER, T_CHANGES, T_ENTITIES, T_INDEX, T_META,
    T_ORDER, T_TABLES,
};
use super::tree::{get_over, meta_bounds, meta_key, range_over, Bytes, Range, ReadTrees, Tree};
use super::wal::LogBuf;
pub(in crate::embedded) use super::wal::Logged;
use crate::error::{FailureKind, StoreError};

/// The store's redb tables, open in one write transaction. The two that
/// entity writes do not touch open on first use: redb looks each open table
/// up in its table tree twice (at the open and at the commit), in every
/// group's commit (benchmark-history §23).
pub(in crate::embedded) struct Trees<'t> {
    txn: &'t redb::WriteTransaction,
    tables: redb::Table<'t, &'static [u8], &'static [u8]>,
    order: OnceCell<redb::Table<'t, &'static [u8], ()>>,
    entities: redb::Table<'t, &'static [u8], &'static [u8]>,
    changes: OnceCell<redb::Table<'t, &'static [u8], &'static [u8]>>,
    index: OnceCell<redb::Table<'t, &'static [u8], &'static [u8]>>,
    meta: redb::Table<'t, &'static str, &'static [u8]>,
}

/// The table in `slot`, opened in `txn` the first time it is asked for.
fn opened<'s, 't, K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &'t redb::WriteTransaction,
    slot: &'s OnceCell<redb::Table<'t, K, V>>,
    table: redb::TableDefinition<'_, K, V>,
) -> Result<&'s redb::Table<'t, K, V>, StoreError> {
    if slot.get().is_none() {
        // Set only here, just checked empty: the set cannot fail.
        let _ = slot.set(txn.open_table(table).map_err(to_store_error)?);
    }
    slot.get()
        .ok_or_else(|| StoreError::failure(FailureKind::Internal, "a tree that did not open"))
}

/// [`opened`], for a change.
fn opened_mut<'s, 't, K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &'t redb::WriteTransaction,
    slot: &'s mut OnceCell<redb::Table<'t, K, V>>,
    table: redb::TableDefinition<'_, K, V>,
) -> Result<&'s mut redb::Table<'t, K, V>, StoreError> {
    opened(txn, slot, table)?;
    slot.get_mut()
        .ok_or_else(|| StoreError::failure(FailureKind::Internal, "a tree that did not open"))
}

impl<'t> Trees<'t> {
    pub(in crate::embedded) fn open(txn: &'t redb::WriteTransaction) -> Result<Self, StoreError> {
        Ok(Trees {
            txn,
            tables: txn.open_table(TABLES).map_err(to_store_error)?,
            order: OnceCell::new(),
            entities: txn.open_table(ENTITIES).map_err(to_store_error)?,
            changes: OnceCell::new(),
            index: OnceCell::new(),
            meta: txn.open_table(META).map_err(to_store_error)?,
        })
    }

    /// The byte-keyed table a log op names.
    fn by_tag(&mut self, t: u8) -> Result<&mut redb::Table<'t, &'static [u8], &'static [u8]>, StoreError> {
        match t {
            T_TABLES => Ok(&mut self.tables),
            T_CHANGES => opened_mut(self.txn, &mut self.changes, CHANGES),
            T_INDEX => opened_mut(self.txn, &mut self.index, INDEX),
            _ => Err(StoreError::failure(
                FailureKind::Corrupt,
                format!("log op on table {t}"),
            )),
        }
    }

    /// Carries out one logged change (live, or replayed from the log).
    pub(super) fn apply(&mut self, op: &Op<'_>) -> Result<(), StoreError> {
        match *op {
            // Entity rows live in blocks (`blocks.rs`).
            Op::Insert {
                table: T_ENTITIES,
                key,
                value,
            } => blocks::write(&mut self.entities, &[(key, Some(value))]),
            Op::Remove { table: T_ENTITIES, key } => blocks::write(&mut self.entities, &[(key, None)]),
            Op::RemoveRange {
                table: T_ENTITIES,
                lo,
                hi,
            } => blocks::remove_range(&mut self.entities, lo, hi),
            Op::Insert {
                table: T_ORDER, key, ..
            } => opened_mut(self.txn, &mut self.order, TABLE_ORDER)?
                .insert(key, ())
                .map(drop)
                .map_err(to_store_error),
            Op::Remove { table: T_ORDER, key } => opened_mut(self.txn, &mut self.order, TABLE_ORDER)?
                .remove(key)
                .map(drop)
                .map_err(to_store_error),
            Op::Remove { table: T_META, key } => self.meta.remove(meta_key(key)?).map(drop).map_err(to_store_error),
            Op::Insert {
                table: T_META,
                key,
                value,
            } => self
                .meta
                .insert(meta_key(key)?, value)
                .map(drop)
                .map_err(to_store_error),
            Op::Insert { table, key, value } => {
                self.by_tag(table)?.insert(key, value).map(drop).map_err(to_store_error)
            }
            Op::Remove { table, key } => self.by_tag(table)?.remove(key).map(drop).map_err(to_store_error),
            Op::RemoveRange { table, lo, hi } => self
                .by_tag(table)?
                .retain_in(lo..hi, |_, _| false)
                .map_err(to_store_error),
            Op::InsertRepeat { .. } => Err(log_op::unresolved()),
        }
    }

    /// Sets `key` without logging it: for a commit that is durable itself (a
    /// savepoint job, replay) or the log's own bookkeeping (which record the
    /// state includes).
    pub(in crate::embedded) fn insert_unlogged(
        &mut self,
        tree: Tree,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), StoreError> {
        self.apply(&Op::Insert {
            table: tree.tag(),
            key,
            value,
        })
    }

    /// Inserts rows (sorted by key) into `tree` through one cursor, from the
    /// first row's gap up to the first row an existing one sorts before, or that
    /// exists; returns how many went in (none when the first exists). redb packs
    /// such a run into full leaves, where inserting rows one by one splits each
    /// full leaf in half. Logs nothing: `log` is told of each row placed.
    fn insert_run<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        tree: Tree,
        rows: &[(K, V)],
        mut log: impl FnMut(&[u8], &[u8]),
    ) -> Result<usize, StoreError> {
        let Some((first, _)) = rows.first() else {
            return Ok(0);
        };
        // Entity rows go into their blocks in one pass, all of them.
        if tree == Tree::Entities {
            let changes: Vec<(&[u8], Option<&[u8]>)> =
                rows.iter().map(|(k, v)| (k.as_ref(), Some(v.as_ref()))).collect();
            blocks::write(&mut self.entities, &changes)?;
            for (key, value) in rows {
                log(key.as_ref(), value.as_ref());
            }
            return Ok(rows.len());
        }
        let mut cursor = self
            .by_tag(tree.tag())?
            .lower_bound_mut(Bound::Included(first.as_ref()))
            .map_err(to_store_error)?;
        let mut placed = 0;
        for (key, value) in rows {
            let (key, value) = (key.as_ref(), value.as_ref());
            match cursor.insert_before(key, value) {
                Ok(()) => {}
                // An existing row sorts before this one, or is this one: the run ends here.
                Err(CursorError::UnorderedKey) => break,
                Err(e) => return Err(to_store_error(e)),
            }
            log(key, value);
            placed += 1;
        }
        cursor.close().map_err(to_store_error)?;
        Ok(placed)
    }

    /// Writes sorted rows of `tree`, new or not: runs of new ones through
    /// [`Trees::insert_run`], the rest one by one. The write buffer's fold.
    pub(super) fn put_rows(&mut self, tree: Tree, rows: &[(&[u8], &[u8])]) -> Result<(), StoreError> {
        if tree == Tree::Entities {
            let changes: Vec<(&[u8], Option<&[u8]>)> = rows.iter().map(|(k, v)| (*k, Some(*v))).collect();
            return self.put_entities(&changes);
        }
        // After a run of none or one (rows that exist, or new ones between
        // existing ones), a few go in one by one: a run of one costs a third
        // more than a plain insert, and a refused one its look-up again.
        const ONE_BY_ONE: usize = 8;
        let mut one_by_one = 0;
        let mut rest = rows;
        while let Some(((key, value), after)) = rest.split_first() {
            if one_by_one == 0 && !after.is_empty() {
                let placed = self.insert_run(tree, rest, |_, _| {})?;
                if placed > 1 {
                    rest = &rest[placed..];
                    continue;
                }
                one_by_one = ONE_BY_ONE;
                if placed == 1 {
                    rest = after;
                    continue;
                }
            }
            self.by_tag(tree.tag())?.insert(*key, *value).map_err(to_store_error)?;
            one_by_one = one_by_one.saturating_sub(1);
            rest = after;
        }
        Ok(())
    }

    /// Writes sorted entity changes (`None` removes), each block they fall in
    /// rewritten once. The write buffer's fold.
    pub(super) fn put_entities(&mut self, changes: &[(&[u8], Option<&[u8]>)]) -> Result<(), StoreError> {
        blocks::write(&mut self.entities, changes)
    }

    /// Removes `key` without logging it, as [`Trees::insert_unlogged`] sets one.
    pub(in crate::embedded) fn remove_unlogged(&mut self, tree: Tree, key: &[u8]) -> Result<(), StoreError> {
        self.apply(&Op::Remove { table: tree.tag(), key })
    }
}

impl ReadTrees for Trees<'_> {
    fn get(&self, tree: Tree, key: &[u8]) -> Result<Option<Bytes<'_>>, StoreError> {
        let found = match tree {
            Tree::Tables => self.tables.get(key).map(|g| g.map(Bytes::Slice)),
            Tree::Entities => return Ok(blocks::get(&self.entities, key)?.map(|(g, s, e)| Bytes::Part(g, s, e))),
            Tree::Changes => opened(self.txn, &self.changes, CHANGES)?
                .get(key)
                .map(|g| g.map(Bytes::Slice)),
            Tree::TableOrder => opened(self.txn, &self.order, TABLE_ORDER)?
                .get(key)
                .map(|g| g.map(|_| Bytes::Empty)),
            Tree::Meta => self.meta.get(meta_key(key)?).map(|g| g.map(Bytes::Slice)),
            Tree::Index => opened(self.txn, &self.index, INDEX)?
                .get(key)
                .map(|g| g.map(Bytes::Slice)),
        };
        found.map_err(to_store_error)
    }

    fn range(&self, tree: Tree, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<Range<'_>, StoreError> {
        let range = match tree {
            Tree::Tables => self.tables.range::<&[u8]>((lo, hi)).map(Range::Bytes),
            Tree::Entities => return blocks::range(&self.entities, lo, hi).map(Range::Blocks),
            Tree::Changes => opened(self.txn, &self.changes, CHANGES)?
                .range::<&[u8]>((lo, hi))
                .map(Range::Bytes),
            Tree::TableOrder => opened(self.txn, &self.order, TABLE_ORDER)?
                .range::<&[u8]>((lo, hi))
                .map(Range::Order),
            Tree::Meta => self.meta.range::<&str>(meta_bounds(lo, hi)?).map(Range::Str),
            Tree::Index => opened(self.txn, &self.index, INDEX)?
                .range::<&[u8]>((lo, hi))
                .map(Range::Bytes),
        };
        range.map_err(to_store_error)
    }
}

/// Where a group's changes go.
// One per group, on the writer's stack.
#[allow(clippy::large_enum_variant)]
pub(in crate::embedded) enum Mode<'t> {
    /// Into redb's write transaction: a group that folded the write buffer into it
    /// first (a checkpoint, a range removal of a whole table, a buffer full).
    Direct(Trees<'t>),
    /// Into the write buffer, read over redb as of its last commit; while a
    /// fold aside runs (in memory, `writer.rs`), into `also` as well.
    Buffered {
        base: &'t BaseView,
        buffer: &'t mut Buffer,
        also: Option<&'t mut Buffer>,
    },
}

/// One group's transaction: reads see the group's own changes so far, and
/// every change is applied and logged together.
pub(in crate::embedded) struct GroupTx<'t, 'l> {
    mode: Mode<'t>,
    log: &'l mut LogBuf,
}

impl<'t, 'l> GroupTx<'t, 'l> {
    pub(super) fn new(mode: Mode<'t>, log: &'l mut LogBuf) -> Self {
        GroupTx { mode, log }
    }

    pub(super) fn into_mode(self) -> Mode<'t> {
        self.mode
    }

    fn change(&mut self, op: Op<'_>) -> Result<(), StoreError> {
        match &mut self.mode {
            Mode::Direct(trees) => trees.apply(&op)?,
            Mode::Buffered { base, buffer, also } => match &op {
                // Spelt out as a removal of each row there is: the rows may be
                // in redb, under the buffer. (Whole tables' removals fold first
                // and run direct, `LogState::folds_first` (`log_state.rs`); this is for the
                // feed's trimming, a second's changes at a time.)
                &Op::RemoveRange { table, lo, hi } => {
                    let tree = Tree::from_tag(table)?;
                    let keys = range_over(*base, buffer, tree, Bound::Included(lo), Bound::Excluded(hi))?
                        .map(|row| row.map(|(k, _)| k.bytes().to_vec()))
                        .collect::<Result<Vec<_>, _>>()?;
                    for key in keys {
                        buffer.apply(also.as_deref_mut(), &Op::Remove { table, key: &key })?;
                    }
                }
                op => buffer.apply(also.as_deref_mut(), op)?,
            },
        }
        self.log.push(&op);
        Ok(())
    }

    pub(in crate::embedded) fn insert(&mut self, tree: Tree, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.change(Op::Insert {
            table: tree.tag(),
            key,
            value,
        })
    }

    pub(in crate::embedded) fn remove(&mut self, tree: Tree, key: &[u8]) -> Result<(), StoreError> {
        self.change(Op::Remove { table: tree.tag(), key })
    }

    /// Removes the rows with keys in `lo..hi`. Not for META or the listing order.
    pub(in crate::embedded) fn remove_range(&mut self, tree: Tree, lo: &[u8], hi: &[u8]) -> Result<(), StoreError> {
        self.change(Op::RemoveRange {
            table: tree.tag(),
            lo,
            hi,
        })
    }

    /// Where the last insert logged its value in the group's record, for a
    /// later insert that repeats it ([`GroupTx::insert_run_repeating`]).
    pub(in crate::embedded) fn last_logged(&self) -> Option<Logged> {
        self.log.last_value()
    }

    /// Inserts rows of `tree` (sorted by key, none of them present) through one
    /// cursor, from the first row's gap up to the first row an existing one
    /// sorts before; returns how many went in (none when the first exists).
    /// redb packs such a run into full leaves, where inserting rows one by one
    /// splits each full leaf in half. Buffered, they all go in, and the fold
    /// writes them in key order.
    pub(in crate::embedded) fn insert_run<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        tree: Tree,
        rows: &[(K, V)],
    ) -> Result<usize, StoreError> {
        self.run(tree, rows, |log, _, op| log.push(&op))
    }

    /// [`GroupTx::insert_run`], adding to `logged` where each row placed logged its value.
    pub(in crate::embedded) fn insert_run_logged<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        tree: Tree,
        rows: &[(K, V)],
        logged: &mut Vec<Option<Logged>>,
    ) -> Result<usize, StoreError> {
        self.run(tree, rows, |log, _, op| {
            log.push(&op);
            logged.push(log.last_value());
        })
    }

    /// [`GroupTx::insert_run`] of rows whose values repeat bytes logged earlier
    /// in the group's record, row `i`'s as `repeats[i]` says: the log carries
    /// those bytes once ([`LogBuf::push_repeat`]).
    pub(in crate::embedded) fn insert_run_repeating<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        tree: Tree,
        rows: &[(K, V)],
        repeats: &[Option<Repeat>],
    ) -> Result<usize, StoreError> {
        self.run(tree, rows, |log, i, op| match (repeats.get(i).copied().flatten(), op) {
            (Some(r), Op::Insert { table, key, value }) => log.push_repeat(table, key, value, r.at, r.logged),
            (_, op) => log.push(&op),
        })
    }

    /// [`GroupTx::insert_run`], each row placed logged by `log_row` (with its index).
    fn run<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        tree: Tree,
        rows: &[(K, V)],
        mut log_row: impl FnMut(&mut LogBuf, usize, Op<'_>),
    ) -> Result<usize, StoreError> {
        let table = tree.tag();
        let GroupTx { mode, log } = self;
        match mode {
            Mode::Direct(trees) => {
                let mut i = 0;
                trees.insert_run(tree, rows, |key, value| {
                    log_row(log, i, Op::Insert { table, key, value });
                    i += 1;
                })
            }
            Mode::Buffered { buffer, also, .. } => {
                for (i, (key, value)) in rows.iter().enumerate() {
                    let (key, value) = (key.as_ref(), value.as_ref());
                    let op = Op::Insert { table, key, value };
                    buffer.apply(also.as_deref_mut(), &op)?;
                    log_row(log, i, op);
                }
                Ok(rows.len())
            }
        }
    }
}

/// What a row inserted by [`GroupTx::insert_run_repeating`] repeats: its
/// value's bytes from `at` are those `logged` earlier in the record.
#[derive(Debug, Clone, Copy)]
pub(in crate::embedded) struct Repeat {
    pub(in crate::embedded) at: usize,
    pub(in crate::embedded) logged: Logged,
}

impl ReadTrees for GroupTx<'_, '_> {
    fn get(&self, tree: Tree, key: &[u8]) -> Result<Option<Bytes<'_>>, StoreError> {
        match &self.mode {
            Mode::Direct(trees) => trees.get(tree, key),
            Mode::Buffered { base, buffer, .. } => get_over(*base, buffer, tree, key),
        }
    }

    fn range(&self, tree: Tree, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<Range<'_>, StoreError> {
        match &self.mode {
            Mode::Direct(trees) => trees.range(tree, lo, hi),
            Mode::Buffered { base, buffer, .. } => range_over(*base, buffer, tree, lo, hi),
        }
    }
}
