//! The seam's scan primitive: entity rows in a key range, read a few ahead of the
//! one the scan is at, each row's bytes prefetched as it is read. Rows the write
//! buffer changed come merged in (`buffer.rs`); a range with none reads redb alone.
//!
//! The rows read ahead stay in the engine, as its own guards over its pages, and
//! the scan sees them as `&[u8]`s: a row's guards are never moved or wrapped
//! between the engine's range and the scan's loop (through a typed iterator that
//! handed each row out, wrapped, a scan cost ~20% more CPU per page), and every
//! method here is inlined into that loop.

use std::ops::Bound;

use super::blocks::{self, BlockRange, RowAt};
use super::buffer::Merge;
use super::commit::ReadView;
use super::entity_seal::{payload, unseal, unseal_joined};
use super::tree::{Bytes, Range, Tree};
use crate::error::{FailureKind, StoreError};

/// Rows read ahead of the one a scan is at.
pub(in crate::embedded) const LOOKAHEAD: usize = 8;

/// A row read ahead: its key and its value as stored, and both as one slice
/// where they lie together (an entity block keeps a row's key and value so).
#[derive(Clone, Copy)]
pub(in crate::embedded) struct Row<'s> {
    pub(in crate::embedded) key: &'s [u8],
    pub(in crate::embedded) stored: &'s [u8],
    joined: Option<&'s [u8]>,
}

impl<'s> Row<'s> {
    fn apart(key: &'s [u8], stored: &'s [u8]) -> Self {
        Row {
            key,
            stored,
            joined: None,
        }
    }

    /// The row's value, its checksum checked if `verify`: in one pass over key
    /// and value where they lie together; a second call per row for the key
    /// cost a verified scan 12–16% of its rate (benchmark-history §66). Rows
    /// merged with the write buffer's are checked apart.
    #[inline(always)]
    pub(in crate::embedded) fn value(&self, verify: bool) -> Result<&'s [u8], StoreError> {
        match (verify, self.joined) {
            (false, _) => Ok(payload(self.stored)),
            (true, Some(joined)) => unseal_joined(joined, self.key.len()),
            (true, None) => unseal(self.key, self.stored),
        }
    }

    /// The row's value, its checksum not checked (or checked already).
    #[inline(always)]
    pub(in crate::embedded) fn payload(&self) -> &'s [u8] {
        payload(self.stored)
    }
}

/// Asks the CPU to start loading up to `lines` cache lines from the start of `bytes`.
#[inline(always)]
pub(super) fn prefetch_lines(bytes: &[u8], lines: usize) {
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

/// Where a ring reads its rows from: redb's range as it is (the fast path, a
/// tree with nothing buffered), or redb's rows merged with the write buffer's.
pub(in crate::embedded) trait Source<'a> {
    /// What `next` returns, kept in a slot as returned (see [`Ring::slots`]).
    type Item;
    fn next(&mut self) -> Option<Self::Item>;
    /// The row in an item, read from the source (which may hold its bytes);
    /// `None` for an error.
    fn row<'s>(&'s self, item: &'s Self::Item) -> Option<Row<'s>>;
    /// The error an item `row` gave no row for is.
    fn into_error(item: Self::Item) -> Option<StoreError>;
}

type Item = Result<RowAt, StoreError>;

impl<'a> Source<'a> for BlockRange<'a> {
    type Item = Item;

    #[inline(always)]
    fn next(&mut self) -> Option<Item> {
        self.next_at()
    }

    #[inline(always)]
    fn row<'s>(&'s self, item: &'s Item) -> Option<Row<'s>> {
        match item {
            Ok(row) => {
                let (joined, key_len) = self.row_joined(row)?;
                let (key, stored) = joined.split_at_checked(key_len)?;
                Some(Row {
                    key,
                    stored,
                    joined: Some(joined),
                })
            }
            Err(_) => None,
        }
    }

    fn into_error(item: Item) -> Option<StoreError> {
        Some(
            item.err().unwrap_or_else(|| {
                StoreError::failure(FailureKind::Internal, "a scanned row's block was let go too soon")
            }),
        )
    }
}

type Merged<'a> = Merge<'a, Range<'a>>;
type MergedItem<'a> = Result<(Bytes<'a>, Bytes<'a>), StoreError>;

impl<'a> Source<'a> for Merged<'a> {
    type Item = MergedItem<'a>;

    #[inline(always)]
    fn next(&mut self) -> Option<MergedItem<'a>> {
        Iterator::next(self)
    }

    #[inline(always)]
    fn row<'s>(&'s self, item: &'s MergedItem<'a>) -> Option<Row<'s>> {
        match item {
            Ok((k, v)) => Some(Row::apart(k.bytes(), v.bytes())),
            Err(_) => None,
        }
    }

    fn into_error(item: MergedItem<'a>) -> Option<StoreError> {
        item.err()
    }
}

/// Rows from a [`Source`], in key order, up to [`LOOKAHEAD`] of them read
/// ahead, each with a mark `M` of the scan's (what it learnt of the row early).
///
/// The rows ahead are a ring whose rows stay where they were put and are dropped
/// there. A `VecDeque` moved each row (two guards, over a hundred bytes) out again
/// to drop it, with a `memcpy` call per row; the ring took 6% off a scan's CPU per
/// row (benchmark-history §24).
pub(in crate::embedded) struct Ring<'a, S: Source<'a>, M> {
    iter: S,
    /// Each slot holds what the source's `next` returned, as it returned it (an
    /// error only until `fill` takes it out): a row repacked on its way in, with
    /// its mark beside its guards, cost a second copy of them (~200 bytes) per row,
    /// 6% more instructions per scanned page in one build (benchmark-history §38).
    slots: [Option<S::Item>; LOOKAHEAD],
    /// Each slot's mark, set when its row is read.
    marks: [M; LOOKAHEAD],
    head: usize,
    len: usize,
    exhausted: bool,
}

/// Entity rows in a key range, read ahead: from redb alone where nothing of the
/// entities is buffered, merged with the write buffer otherwise. Each call
/// matches once on which; the rings themselves are monomorphic.
// One per range a scan reads, where it is made: a boxed ring would cost a
// pointer followed per row.
#[allow(clippy::large_enum_variant)]
pub(in crate::embedded) enum RowsAhead<'a, M> {
    Pages(Ring<'a, BlockRange<'a>, M>),
    Merged(Ring<'a, Merged<'a>, M>),
}

impl ReadView {
    /// The entity rows with keys in `(lo, hi)`, read ahead for a scan that reads
    /// no row at or past `stop` (the end of its table, where `hi` is open).
    pub(in crate::embedded) fn entities_ahead<M: Default>(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        stop: Option<&[u8]>,
    ) -> Result<RowsAhead<'_, M>, StoreError> {
        let pages = blocks::range(&self.base.entities, lo, hi)?;
        // The buffer is read up to `stop` only: changes to the tables after this
        // one would make a scan that never reaches them merge every row.
        let read = match (hi, stop) {
            (Bound::Unbounded, Some(stop)) => Bound::Excluded(stop),
            (Bound::Included(h) | Bound::Excluded(h), Some(stop)) if h > stop => Bound::Excluded(stop),
            _ => hi,
        };
        let mut changes = self.buffer.range(Tree::Entities, lo, read);
        if changes.peek().is_none() {
            return Ok(RowsAhead::Pages(Ring::new(pages)));
        }
        let merged = Merge::new(Range::Blocks(pages), changes);
        Ok(RowsAhead::Merged(Ring::new(merged)))
    }
}

impl<'a, S: Source<'a>, M: Default> Ring<'a, S, M> {
    fn new(iter: S) -> Self {
        Ring {
            iter,
            slots: std::array::from_fn(|_| None),
            marks: std::array::from_fn(|_| M::default()),
            head: 0,
            len: 0,
            exhausted: false,
        }
    }

    /// See [`RowsAhead::fill`].
    #[inline(always)]
    fn fill(&mut self, value_lines: usize) -> Result<(), StoreError> {
        while !self.exhausted && self.len < LOOKAHEAD {
            let at = (self.head + self.len) % LOOKAHEAD;
            let slot = &mut self.slots[at];
            *slot = self.iter.next();
            match slot.as_ref().map(|item| self.iter.row(item)) {
                Some(Some(Row { key: k, stored: v, .. })) => {
                    prefetch_lines(k, 2);
                    prefetch_lines(v, value_lines);
                    // A value's end says where it ends (`entity_seal.rs`).
                    prefetch_lines(v.get(v.len().saturating_sub(1)..).unwrap_or_default(), 1);
                    self.marks[at] = M::default();
                    self.len += 1;
                }
                Some(None) => {
                    if let Some(e) = slot.take().and_then(S::into_error) {
                        return Err(e);
                    }
                }
                None => self.exhausted = true,
            }
        }
        Ok(())
    }
}

impl<'a, S: Source<'a>, M> Ring<'a, S, M> {
    #[inline(always)]
    fn get_mut(&mut self, i: usize) -> Option<(Row<'_>, &mut M)> {
        if i >= self.len {
            return None;
        }
        let at = (self.head + i) % LOOKAHEAD;
        let row = self.iter.row(self.slots[at].as_ref()?)?;
        Some((row, &mut self.marks[at]))
    }

    #[inline(always)]
    fn front(&self) -> Option<(Row<'_>, &M)> {
        let row = self.iter.row(self.slots[self.head].as_ref()?)?;
        Some((row, &self.marks[self.head]))
    }

    #[inline(always)]
    fn pop(&mut self) {
        if self.len > 0 {
            self.slots[self.head] = None;
            self.head = (self.head + 1) % LOOKAHEAD;
            self.len -= 1;
        }
    }
}

impl<M: Default> RowsAhead<'_, M> {
    /// Reads rows until [`LOOKAHEAD`] are ahead or the range has ended, each marked
    /// `M::default()`. Each row's key's first two cache lines are prefetched, and
    /// all of its value if `whole_values` (a checksum reads every byte of it a few
    /// rows later), else its first four lines, where a filter mostly looks: in
    /// blocks (`blocks.rs`) rows lie in a row, and prefetching whole values a
    /// filter does not read cost an unverified scan 15–20% (benchmark-history §54).
    #[inline(always)]
    pub(in crate::embedded) fn fill(&mut self, whole_values: bool) -> Result<(), StoreError> {
        let lines = if whole_values { usize::MAX } else { 4 };
        match self {
            RowsAhead::Pages(r) => r.fill(lines),
            RowsAhead::Merged(r) => r.fill(lines),
        }
    }
}

impl<M> RowsAhead<'_, M> {
    /// The `i`th row ahead (0 is the one the scan is at) and its mark.
    #[inline(always)]
    pub(in crate::embedded) fn get_mut(&mut self, i: usize) -> Option<(Row<'_>, &mut M)> {
        match self {
            RowsAhead::Pages(r) => r.get_mut(i),
            RowsAhead::Merged(r) => r.get_mut(i),
        }
    }

    /// The row the scan is at, or none when the range has ended.
    #[inline(always)]
    pub(in crate::embedded) fn front(&self) -> Option<(Row<'_>, &M)> {
        match self {
            RowsAhead::Pages(r) => r.front(),
            RowsAhead::Merged(r) => r.front(),
        }
    }

    /// Drops the row the scan is at where it lies; the next becomes the front.
    #[inline(always)]
    pub(in crate::embedded) fn pop(&mut self) {
        match self {
            RowsAhead::Pages(r) => r.pop(),
            RowsAhead::Merged(r) => r.pop(),
        }
    }
}
