//! The seam's read side: the store's named trees, and reading them by name from
//! a snapshot (the published [`ReadView`]) or from a group transaction
//! ([`GroupTx`](super::group::GroupTx)) through one trait, [`ReadTrees`].
//!
//! Keys and values are bytes. A read hands out guards over the engine's pages
//! ([`Bytes`]), not copies: a point read or a scan costs what it did when it
//! opened redb tables itself.

use std::ops::Bound;
use std::sync::Arc;

use redb::{AccessGuard, ReadableTable};

use super::blocks::{self, BlockRange, BlockRow};
use super::buffer::{Buffer, Merge};
use super::commit::{BaseView, ReadView};
use super::schema::{
    to_store_error, CHANGES, INDEX, META, TABLE_ORDER, T_CHANGES, T_ENTITIES, T_INDEX, T_META, T_ORDER, T_TABLES,
};
use crate::error::{FailureKind, StoreError};

/// The store's trees. Each is an ordered map of bytes to bytes; the layouts of
/// their keys and values are the store's business (`schema.rs`), not the engine's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::embedded) enum Tree {
    /// `account 0x00 lowercase-table-name` → table record.
    Tables,
    /// `account 0x00 table-name-as-created` → empty: the listing order.
    TableOrder,
    /// `table id u64 BE ++ EntityKey` → entity value.
    Entities,
    /// `account 0x00 position u64 BE` → a recorded change.
    Changes,
    /// Counters and per-account settings; keys are UTF-8.
    Meta,
    /// Secondary-index entries (`embedded/index.rs`).
    Index,
}

impl Tree {
    /// The tree's tag in log records.
    pub(in crate::embedded) fn tag(self) -> u8 {
        match self {
            Tree::Tables => T_TABLES,
            Tree::TableOrder => T_ORDER,
            Tree::Entities => T_ENTITIES,
            Tree::Changes => T_CHANGES,
            Tree::Meta => T_META,
            Tree::Index => T_INDEX,
        }
    }

    /// The tree a log record's tag names.
    pub(in crate::embedded) fn from_tag(tag: u8) -> Result<Tree, StoreError> {
        Ok(match tag {
            T_TABLES => Tree::Tables,
            T_ORDER => Tree::TableOrder,
            T_ENTITIES => Tree::Entities,
            T_CHANGES => Tree::Changes,
            T_META => Tree::Meta,
            T_INDEX => Tree::Index,
            _ => {
                return Err(StoreError::failure(
                    FailureKind::Corrupt,
                    format!("a change to tree {tag}"),
                ))
            }
        })
    }
}

/// A key or value read from a tree: a guard over the engine's page.
pub(in crate::embedded) enum Bytes<'a> {
    Slice(AccessGuard<'a, &'static [u8]>),
    Str(AccessGuard<'a, &'static str>),
    /// A value of the listing order, which holds none.
    Empty,
    /// A key or value in the write buffer (`buffer.rs`).
    Buf(&'a [u8]),
    /// An entity's value found by a point read: its block (`blocks.rs`) and
    /// where the value lies in it.
    Part(AccessGuard<'a, &'static [u8]>, usize, usize),
    /// An entity row's key or value, in a block shared by the rows read from it.
    Shared(Arc<AccessGuard<'a, &'static [u8]>>, usize, usize),
}

impl Bytes<'_> {
    pub(in crate::embedded) fn bytes(&self) -> &[u8] {
        match self {
            Bytes::Slice(g) => g.value(),
            Bytes::Str(g) => g.value().as_bytes(),
            Bytes::Empty => &[],
            Bytes::Buf(b) => b,
            Bytes::Part(g, s, e) => &g.value()[*s..*e],
            Bytes::Shared(g, s, e) => &g.value()[*s..*e],
        }
    }
}

impl<'a> Bytes<'a> {
    fn of_row(row: &BlockRow<'a>) -> (Bytes<'a>, Bytes<'a>) {
        let (kg, ks, ke) = row.part(false);
        let (vg, vs, ve) = row.part(true);
        (Bytes::Shared(kg, ks, ke), Bytes::Shared(vg, vs, ve))
    }
}

/// The rows of one tree in a key range, in key order.
// One per range read, where it is made; boxed, the blocks' range (with the
// blocks it holds) would be a pointer away from a merged scan's every row.
#[allow(clippy::large_enum_variant)]
pub(in crate::embedded) enum Range<'a> {
    /// A tree the store never made (a store from before the change feed has no `changes`).
    Empty,
    Bytes(redb::Range<'a, &'static [u8], &'static [u8]>),
    Order(redb::Range<'a, &'static [u8], ()>),
    Str(redb::Range<'a, &'static str, &'static [u8]>),
    /// Entity rows, from their blocks.
    Blocks(BlockRange<'a>),
    /// redb's rows with the write buffer's changes over them.
    Merged(Box<Merge<'a, Range<'a>>>),
}

impl<'a> Iterator for Range<'a> {
    type Item = Result<(Bytes<'a>, Bytes<'a>), StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(
            match self {
                Range::Empty => return None,
                Range::Bytes(r) => r.next()?.map(|(k, v)| (Bytes::Slice(k), Bytes::Slice(v))),
                Range::Order(r) => r.next()?.map(|(k, _)| (Bytes::Slice(k), Bytes::Empty)),
                Range::Str(r) => r.next()?.map(|(k, v)| (Bytes::Str(k), Bytes::Slice(v))),
                Range::Blocks(b) => return Some(b.next()?.map(|row| Bytes::of_row(&row))),
                Range::Merged(m) => return m.next(),
            }
            .map_err(to_store_error),
        )
    }
}

/// One entity row's key or value, as [`EntityRows`] hands it out.
pub(in crate::embedded) struct Row<'a>(Arc<AccessGuard<'a, &'static [u8]>>, usize, usize);

impl Row<'_> {
    #[inline(always)]
    pub(in crate::embedded) fn bytes(&self) -> &[u8] {
        &self.0.value()[self.1..self.2]
    }
}

/// Entity rows in a key range, typed: no dispatch per row (a [`Range`] matches on
/// its tree's type at each one). Scans read through the cheaper read-ahead window
/// instead ([`RowsAhead`](super::rows_ahead::RowsAhead)), which hands out no row.
pub(in crate::embedded) struct EntityRows<'a>(BlockRange<'a>);

impl<'a> Iterator for EntityRows<'a> {
    type Item = Result<(Row<'a>, Row<'a>), StoreError>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        Some(self.0.next()?.map(|row| {
            let ((kg, ks, ke), (vg, vs, ve)) = (row.part(false), row.part(true));
            (Row(kg, ks, ke), Row(vg, vs, ve))
        }))
    }
}

impl ReadView {
    /// The entity rows with keys in `(lo, hi)`, in key order, of a view with
    /// nothing buffered: `tafel check`'s, over a store just opened (replay
    /// writes into redb itself).
    pub(in crate::embedded) fn entity_rows(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
    ) -> Result<EntityRows<'_>, StoreError> {
        if !self.buffer.holds_none_of(Tree::Entities) {
            return Err(StoreError::failure(
                FailureKind::Internal,
                "entity rows read from redb alone past buffered changes",
            ));
        }
        blocks::range(&self.base.entities, lo, hi).map(EntityRows)
    }
}

/// Reading named trees: a snapshot's reads and a group transaction's.
pub(in crate::embedded) trait ReadTrees {
    fn get(&self, tree: Tree, key: &[u8]) -> Result<Option<Bytes<'_>>, StoreError>;
    /// The rows with keys in `(lo, hi)`, in key order.
    fn range(&self, tree: Tree, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<Range<'_>, StoreError>;

    /// The rows with keys in `lo..hi`.
    fn range_of(&self, tree: Tree, lo: &[u8], hi: &[u8]) -> Result<Range<'_>, StoreError> {
        self.range(tree, Bound::Included(lo), Bound::Excluded(hi))
    }
}

/// A META key: text (redb stores that table's keys as `&str`).
pub(super) fn meta_key(key: &[u8]) -> Result<&str, StoreError> {
    std::str::from_utf8(key).map_err(|_| StoreError::failure(FailureKind::Internal, "a META key that is not UTF-8"))
}

pub(super) fn meta_bounds<'k>(
    lo: Bound<&'k [u8]>,
    hi: Bound<&'k [u8]>,
) -> Result<(Bound<&'k str>, Bound<&'k str>), StoreError> {
    let text = |b: Bound<&'k [u8]>| -> Result<Bound<&'k str>, StoreError> {
        Ok(match b {
            Bound::Included(k) => Bound::Included(meta_key(k)?),
            Bound::Excluded(k) => Bound::Excluded(meta_key(k)?),
            Bound::Unbounded => Bound::Unbounded,
        })
    };
    Ok((text(lo)?, text(hi)?))
}

/// `key` in `tree` as `buffer` over `base` has it.
pub(super) fn get_over<'a, B: ReadTrees>(
    base: &'a B,
    buffer: &'a Buffer,
    tree: Tree,
    key: &[u8],
) -> Result<Option<Bytes<'a>>, StoreError> {
    match buffer.get(tree, key) {
        Some(Some(value)) => Ok(Some(Bytes::Buf(value))),
        Some(None) => Ok(None),
        None => base.get(tree, key),
    }
}

/// The rows of `tree` in `(lo, hi)` as `buffer` over `base` has them.
pub(super) fn range_over<'a, B: ReadTrees>(
    base: &'a B,
    buffer: &'a Buffer,
    tree: Tree,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
) -> Result<Range<'a>, StoreError> {
    let rows = base.range(tree, lo, hi)?;
    let mut changes = buffer.range(tree, lo, hi);
    if changes.peek().is_none() {
        return Ok(rows);
    }
    Ok(Range::Merged(Box::new(Merge::new(rows, changes))))
}

impl ReadTrees for ReadView {
    fn get(&self, tree: Tree, key: &[u8]) -> Result<Option<Bytes<'_>>, StoreError> {
        get_over(&*self.base, &self.buffer, tree, key)
    }

    fn range(&self, tree: Tree, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<Range<'_>, StoreError> {
        range_over(&*self.base, &self.buffer, tree, lo, hi)
    }
}

impl ReadTrees for BaseView {
    fn get(&self, tree: Tree, key: &[u8]) -> Result<Option<Bytes<'_>>, StoreError> {
        let found = match tree {
            Tree::Tables => self.tables.get(key).map(|g| g.map(Bytes::Slice)),
            Tree::Entities => return Ok(blocks::get(&self.entities, key)?.map(|(g, s, e)| Bytes::Part(g, s, e))),
            Tree::Changes => {
                let t = self.txn.open_table(CHANGES).map_err(to_store_error)?;
                t.get(key).map(|g| g.map(Bytes::Slice))
            }
            Tree::TableOrder => {
                let t = self.txn.open_table(TABLE_ORDER).map_err(to_store_error)?;
                t.get(key).map(|g| g.map(|_| Bytes::Empty))
            }
            Tree::Meta => {
                let t = self.txn.open_table(META).map_err(to_store_error)?;
                t.get(meta_key(key)?).map(|g| g.map(Bytes::Slice))
            }
            Tree::Index => match self.txn.open_table(INDEX) {
                Ok(t) => t.get(key).map(|g| g.map(Bytes::Slice)),
                Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
                Err(e) => return Err(to_store_error(e)),
            },
        };
        found.map_err(to_store_error)
    }

    fn range(&self, tree: Tree, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<Range<'_>, StoreError> {
        let range = match tree {
            Tree::Tables => ReadableTable::range::<&[u8]>(&self.tables, (lo, hi)).map(Range::Bytes),
            Tree::Entities => return blocks::range(&self.entities, lo, hi).map(Range::Blocks),
            Tree::Changes => match self.txn.open_table(CHANGES) {
                Ok(t) => t.range::<&[u8]>((lo, hi)).map(Range::Bytes),
                Err(redb::TableError::TableDoesNotExist(_)) => Ok(Range::Empty),
                Err(e) => return Err(to_store_error(e)),
            },
            Tree::TableOrder => {
                let t = self.txn.open_table(TABLE_ORDER).map_err(to_store_error)?;
                t.range::<&[u8]>((lo, hi)).map(Range::Order)
            }
            Tree::Meta => {
                let t = self.txn.open_table(META).map_err(to_store_error)?;
                t.range::<&str>(meta_bounds(lo, hi)?).map(Range::Str)
            }
            Tree::Index => match self.txn.open_table(INDEX) {
                Ok(t) => t.range::<&[u8]>((lo, hi)).map(Range::Bytes),
                Err(redb::TableError::TableDoesNotExist(_)) => Ok(Range::Empty),
                Err(e) => return Err(to_store_error(e)),
            },
        };
        range.map_err(to_store_error)
    }
}
