//! The entities tree as redb holds it: rows packed into blocks.
//!
//! A scan through redb pays a page-cache lookup for every 4 KiB leaf, three
//! ~1 KiB rows, and a guard per key and value: ~0.12 µs of a scanned row's 0.2
//! (benchmark-history §53). So entity rows are stored many to a redb value: a
//! block, under its first row's key, holds rows in key order: their count (u32
//! LE), where each ends (u32 LE, from the rows' start), then the rows, each its
//! key's length (u32 LE), key and value. The directory lets a scan prefetch the
//! rows ahead and a point read search the block: walking rows by their lengths
//! waited on a cache miss per row. A block holds rows of one
//! table only (a row key's first 8 bytes), and up to [`BLOCK_BYTES`] of them (a
//! larger row has a block of its own). Nothing outside the engine sees blocks:
//! `Tree::Entities` reads and writes rows.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

use redb::{AccessGuard, ReadableTable};

use super::rows_ahead::{prefetch_lines, LOOKAHEAD};
use super::schema::to_store_error;
use crate::error::{FailureKind, StoreError};

/// The most bytes of rows a block is filled with: 32 KiB less room for redb's
/// leaf header, so a block takes one 32 KiB page. In `prototypes/scan-limit`
/// blocks of 32 KiB scanned 10–14× faster than a row a value, 16 KiB ones 6×.
pub(in crate::embedded) const BLOCK_BYTES: usize = (32 << 10) - 256;
/// Bytes of a row key that name its table.
const TABLE_ID: usize = 8;
/// Bytes of a block besides its rows: their count.
const BLOCK_HEADER: usize = 4;
/// Bytes a row takes in a block besides its key and value: its end and its key's length.
const ROW_HEADER: usize = 8;
/// Rows ahead of the one a block range hands out whose first lines it prefetches.
const PREFETCH_AHEAD: usize = 8;

type Guard<'a> = AccessGuard<'a, &'static [u8]>;
type Blocks<'t> = redb::Table<'t, &'static [u8], &'static [u8]>;

fn damaged() -> StoreError {
    StoreError::failure(FailureKind::Corrupt, "an entity block whose rows do not parse")
}

fn u32_at(block: &[u8], at: usize) -> Option<usize> {
    let bytes = block.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?) as usize)
}

/// How many rows `block` holds.
#[inline(always)]
fn count(block: &[u8]) -> Result<usize, StoreError> {
    u32_at(block, 0)
        .filter(|n| {
            n.checked_mul(4)
                .and_then(|d| d.checked_add(BLOCK_HEADER))
                .is_some_and(|d| d <= block.len())
        })
        .ok_or_else(damaged)
}

/// Where row `i` of a block of `n` rows begins.
#[inline(always)]
fn row_start(block: &[u8], n: usize, i: usize) -> Option<usize> {
    let start = if i == 0 {
        0
    } else {
        u32_at(block, BLOCK_HEADER + 4 * (i - 1))?
    };
    (BLOCK_HEADER + 4 * n).checked_add(start)
}

/// Where row `i` (< `n`) of `block` lies: its key's start and end, its value's
/// start and end.
#[inline(always)]
fn row_at(block: &[u8], n: usize, i: usize) -> Result<[usize; 4], StoreError> {
    let parse = || {
        let rs = row_start(block, n, i)?;
        let re = (BLOCK_HEADER + 4 * n).checked_add(u32_at(block, BLOCK_HEADER + 4 * i)?)?;
        let ks = rs.checked_add(4)?;
        let ke = ks.checked_add(u32_at(block, rs)?)?;
        (ke <= re && re <= block.len()).then_some([ks, ke, ke, re])
    };
    parse().ok_or_else(damaged)
}

/// The rows of a block, in key order.
pub(in crate::embedded) fn rows(block: &[u8]) -> impl Iterator<Item = Result<(&[u8], &[u8]), StoreError>> {
    // No block at all (`rewrite` of a table's first) has no rows.
    let (n, mut failed) = match count(block) {
        _ if block.is_empty() => (0, None),
        Ok(n) => (n, None),
        Err(e) => (0, Some(e)),
    };
    let mut i = 0;
    std::iter::from_fn(move || {
        if let Some(e) = failed.take() {
            return Some(Err(e));
        }
        if i >= n {
            return None;
        }
        let row = row_at(block, n, i);
        i += 1;
        match row {
            Ok([ks, ke, vs, ve]) => Some(Ok((&block[ks..ke], &block[vs..ve]))),
            Err(e) => {
                i = n;
                Some(Err(e))
            }
        }
    })
}

/// `rows` as a block, into `block`.
fn encode(rows: &[(&[u8], &[u8])], block: &mut Vec<u8>) {
    block.clear();
    block.extend_from_slice(&(rows.len() as u32).to_le_bytes());
    let mut end = 0;
    for (k, v) in rows {
        end += 4 + k.len() + v.len();
        block.extend_from_slice(&(end as u32).to_le_bytes());
    }
    for (k, v) in rows {
        block.extend_from_slice(&(k.len() as u32).to_le_bytes());
        block.extend_from_slice(k);
        block.extend_from_slice(v);
    }
}

fn row_len(key: &[u8], value: &[u8]) -> usize {
    ROW_HEADER + key.len() + value.len()
}

/// The first key past the table `key` belongs to; `None` for the last table id.
fn table_end(key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
    let id = key
        .get(..TABLE_ID)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| StoreError::failure(FailureKind::Internal, "an entity key without a table id"))?;
    Ok(id.checked_add(1).map(|next| next.to_be_bytes().to_vec()))
}

fn same_table(a: &[u8], b: &[u8]) -> bool {
    a.get(..TABLE_ID).is_some() && a.get(..TABLE_ID) == b.get(..TABLE_ID)
}

/// One entity row, read from its block; the block stays alive while a row of it does.
pub(in crate::embedded) struct BlockRow<'a> {
    block: Arc<Guard<'a>>,
    at: [usize; 4],
}

impl<'a> BlockRow<'a> {
    #[cfg(test)]
    pub(in crate::embedded) fn key(&self) -> &[u8] {
        &self.block.value()[self.at[0]..self.at[1]]
    }

    #[cfg(test)]
    pub(in crate::embedded) fn value(&self) -> &[u8] {
        &self.block.value()[self.at[2]..self.at[3]]
    }

    /// The same row's key (`false`) or value (`true`), shared.
    pub(in crate::embedded) fn part(&self, value: bool) -> (Arc<Guard<'a>>, usize, usize) {
        let (s, e) = if value {
            (self.at[2], self.at[3])
        } else {
            (self.at[0], self.at[1])
        };
        (self.block.clone(), s, e)
    }
}

/// The value of `key`: its block's guard and where the value lies in it.
pub(in crate::embedded) fn get<'a, T>(table: &'a T, key: &[u8]) -> Result<Option<(Guard<'a>, usize, usize)>, StoreError>
where
    T: ReadableTable<&'static [u8], &'static [u8]>,
{
    let Some(found) = table.range::<&[u8]>(..=key).map_err(to_store_error)?.next_back() else {
        return Ok(None);
    };
    let (_, block) = found.map_err(to_store_error)?;
    let bytes = block.value();
    let n = count(bytes)?;
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        let [ks, ke, vs, ve] = row_at(bytes, n, mid)?;
        match bytes[ks..ke].cmp(key) {
            Ordering::Less => lo = mid + 1,
            Ordering::Greater => hi = mid,
            Ordering::Equal => return Ok(Some((block, vs, ve))),
        }
    }
    Ok(None)
}

/// Entity rows with keys in a range, in key order, a block at a time.
///
/// The blocks rows were read from stay in [`BlockRange::held`], the last
/// [`HELD`] of them: a row handed out as a [`RowAt`] (to the scan's ring, which
/// never holds more than `LOOKAHEAD` rows) is read from there, where a
/// [`BlockRow`] holds its block itself. Counting a block's users per row, a
/// locked increment and decrement, was ~9% of a scan (benchmark-history §55).
pub(in crate::embedded) struct BlockRange<'a> {
    blocks: redb::Range<'a, &'static [u8], &'static [u8]>,
    /// The blocks entered, the newest at `entered % HELD`, each with its number.
    held: [Option<(usize, Arc<Guard<'a>>)>; HELD],
    entered: usize,
    /// The newest block's rows, and the next one's index.
    n: usize,
    i: usize,
    /// Rows before this are skipped (only the first block can hold any).
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    done: bool,
}

/// Blocks a range keeps: every block a row in the scan's ring lies in. The ring's
/// oldest row's block and each block entered since (each gave it a row, but the
/// first, whose rows may all lie before the range) are at most `LOOKAHEAD`.
const HELD: usize = LOOKAHEAD + 1;

/// A row handed out by [`BlockRange::next_at`]: which block (by number) and
/// where in it; [`BlockRange::row`] reads it.
pub(in crate::embedded) struct RowAt {
    block: usize,
    at: [usize; 4],
}

/// The entity rows of `table` with keys in `(lo, hi)`.
pub(in crate::embedded) fn range<'a, T>(
    table: &'a T,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
) -> Result<BlockRange<'a>, StoreError>
where
    T: ReadableTable<&'static [u8], &'static [u8]>,
{
    // The rows from `lo` on begin in the block at or before it.
    let start = match lo {
        Bound::Unbounded => None,
        Bound::Included(k) | Bound::Excluded(k) => {
            match table.range::<&[u8]>(..=k).map_err(to_store_error)?.next_back() {
                Some(found) => Some(found.map_err(to_store_error)?.0.value().to_vec()),
                None => None,
            }
        }
    };
    let from = start.as_deref().map_or(Bound::Unbounded, Bound::Included);
    // A block whose first key is past `hi` holds no row before it.
    let blocks = table.range::<&[u8]>((from, hi)).map_err(to_store_error)?;
    Ok(BlockRange {
        blocks,
        held: std::array::from_fn(|_| None),
        entered: 0,
        n: 0,
        i: 0,
        lo: lo.map(<[u8]>::to_vec),
        hi: hi.map(<[u8]>::to_vec),
        done: false,
    })
}

impl<'a> BlockRange<'a> {
    fn below_lo(&self, key: &[u8]) -> bool {
        match &self.lo {
            Bound::Unbounded => false,
            Bound::Included(lo) => key < lo.as_slice(),
            Bound::Excluded(lo) => key <= lo.as_slice(),
        }
    }

    fn past_hi(&self, key: &[u8]) -> bool {
        match &self.hi {
            Bound::Unbounded => false,
            Bound::Included(hi) => key > hi.as_slice(),
            Bound::Excluded(hi) => key >= hi.as_slice(),
        }
    }

    /// The newest block entered.
    #[inline(always)]
    fn newest(&self) -> Option<&Arc<Guard<'a>>> {
        self.held[self.entered % HELD].as_ref().map(|(_, b)| b)
    }

    /// The next row: where it lies in the newest block.
    #[inline(always)]
    fn advance(&mut self) -> Option<Result<[usize; 4], StoreError>> {
        loop {
            if self.i < self.n {
                // The field itself, not `newest`: `self.i` is written below.
                let bytes = self.held[self.entered % HELD].as_ref()?.1.value();
                if let Some(ahead) = row_start(bytes, self.n, (self.i + PREFETCH_AHEAD).min(self.n)) {
                    prefetch_lines(bytes.get(ahead..).unwrap_or_default(), 2);
                }
                match row_at(bytes, self.n, self.i) {
                    Ok(at) => {
                        self.i += 1;
                        let key = &bytes[at[0]..at[1]];
                        if self.past_hi(key) {
                            self.done = true;
                            self.n = 0;
                            return None;
                        }
                        if !matches!(self.lo, Bound::Unbounded) {
                            if self.below_lo(key) {
                                continue;
                            }
                            self.lo = Bound::Unbounded;
                        }
                        return Some(Ok(at));
                    }
                    Err(e) => {
                        self.done = true;
                        self.n = 0;
                        return Some(Err(e));
                    }
                }
            }
            if self.done {
                return None;
            }
            match self.blocks.next()? {
                Ok((_, block)) => {
                    let n = match count(block.value()) {
                        Ok(n) => n,
                        Err(e) => {
                            self.done = true;
                            return Some(Err(e));
                        }
                    };
                    if n == 0 {
                        // Gives no row: kept, it would push out one that did.
                        continue;
                    }
                    // The first rows' lines, for the ones handed out before the
                    // prefetch ahead reaches past them.
                    for i in 0..PREFETCH_AHEAD.min(n) {
                        if let Some(at) = row_start(block.value(), n, i) {
                            prefetch_lines(block.value().get(at..).unwrap_or_default(), 2);
                        }
                    }
                    self.entered += 1;
                    self.held[self.entered % HELD] = Some((self.entered, Arc::new(block)));
                    (self.n, self.i) = (n, 0);
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(to_store_error(e)));
                }
            }
        }
    }

    /// The next row, its block not counted: read it with [`BlockRange::row`]
    /// before `LOOKAHEAD` more are handed out.
    #[inline(always)]
    pub(in crate::embedded) fn next_at(&mut self) -> Option<Result<RowAt, StoreError>> {
        let at = self.advance()?;
        Some(at.map(|at| RowAt {
            block: self.entered,
            at,
        }))
    }

    /// The key and value of a row [`BlockRange::next_at`] handed out; none if
    /// its block is no longer held (a bug: more rows were kept than `HELD` allows).
    #[cfg(test)]
    pub(in crate::embedded) fn row(&self, row: &RowAt) -> Option<(&[u8], &[u8])> {
        let (joined, key_len) = self.row_joined(row)?;
        joined.split_at_checked(key_len)
    }

    /// A row [`BlockRange::next_at`] handed out, its key and value as the one
    /// slice they are in the block, and its key's length; none as [`BlockRange::row`].
    #[inline(always)]
    pub(in crate::embedded) fn row_joined(&self, row: &RowAt) -> Option<(&[u8], usize)> {
        match &self.held[row.block % HELD] {
            Some((n, block)) if *n == row.block => {
                // A row's value follows its key (`encode`).
                let [key, key_end, _, end] = row.at;
                Some((block.value().get(key..end)?, key_end - key))
            }
            _ => None,
        }
    }
}

impl<'a> Iterator for BlockRange<'a> {
    type Item = Result<BlockRow<'a>, StoreError>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let at = self.advance()?;
        Some(at.and_then(|at| {
            let block = self.newest().ok_or_else(damaged)?.clone();
            Ok(BlockRow { block, at })
        }))
    }
}

#[path = "block_writes.rs"]
mod writes;
pub(in crate::embedded) use writes::{convert, map_values, remove_range, write};

#[cfg(test)]
#[path = "blocks_tests.rs"]
mod tests;
