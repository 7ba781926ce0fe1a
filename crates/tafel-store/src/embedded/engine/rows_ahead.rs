//! The seam's scan primitive: entity rows in a key range, read a few ahead of the
//! one the scan is at, each row's bytes prefetched as it is read.
//!
//! The rows read ahead stay in the engine, as its own guards over its pages, and
//! the scan sees them as `&[u8]`s: a row's guards are never moved or wrapped
//! between the engine's range and the scan's loop (through a typed iterator that
//! handed each row out, wrapped, a scan cost ~20% more CPU per page), and every
//! method here is inlined into that loop.

use std::ops::Bound;

use redb::{AccessGuard, ReadableTable};

use super::commit::ReadView;
use super::schema::to_store_error;
use crate::error::StoreError;

/// Rows read ahead of the one a scan is at.
pub(in crate::embedded) const LOOKAHEAD: usize = 8;

type Guard<'a> = AccessGuard<'a, &'static [u8]>;

/// Asks the CPU to start loading up to `lines` cache lines from the start of `bytes`.
#[inline(always)]
fn prefetch_lines(bytes: &[u8], lines: usize) {
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

/// Entity rows in a key range, in key order, up to [`LOOKAHEAD`] of them read
/// ahead, each with a mark `M` of the scan's (what it learnt of the row early).
///
/// The rows ahead are a ring whose rows stay where they were put and are dropped
/// there. A `VecDeque` moved each row (two guards, over a hundred bytes) out again
/// to drop it, with a `memcpy` call per row; the ring took 6% off a scan's CPU per
/// row (benchmark-history §24).
pub(in crate::embedded) struct RowsAhead<'a, M> {
    iter: redb::Range<'a, &'static [u8], &'static [u8]>,
    /// Each slot holds what the range's `next` returned, as it returned it (an
    /// error only until `fill` takes it out): a row repacked on its way in, with
    /// its mark beside its guards, cost a second copy of them (~200 bytes) per row,
    /// 6% more instructions per scanned page in one build (benchmark-history §38).
    slots: [Option<Item<'a>>; LOOKAHEAD],
    /// Each slot's mark, set when its row is read.
    marks: [M; LOOKAHEAD],
    head: usize,
    len: usize,
    exhausted: bool,
}

type Item<'a> = Result<(Guard<'a>, Guard<'a>), redb::StorageError>;

impl ReadView {
    /// The entity rows with keys in `(lo, hi)`, read ahead for a scan.
    pub(in crate::embedded) fn entities_ahead<M: Default>(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
    ) -> Result<RowsAhead<'_, M>, StoreError> {
        let iter = ReadableTable::range::<&[u8]>(&self.entities, (lo, hi)).map_err(to_store_error)?;
        Ok(RowsAhead {
            iter,
            slots: std::array::from_fn(|_| None),
            marks: std::array::from_fn(|_| M::default()),
            head: 0,
            len: 0,
            exhausted: false,
        })
    }
}

impl<M: Default> RowsAhead<'_, M> {
    /// Reads rows until [`LOOKAHEAD`] are ahead or the range has ended, each marked
    /// `M::default()`. Each row's key's first two cache lines and all of its value
    /// are prefetched: a checksum, or a filter, reads every byte of the value a few
    /// rows later. Unverified (in memory), the value's first lines alone measured
    /// slower all the same (benchmark-history §24).
    #[inline(always)]
    pub(in crate::embedded) fn fill(&mut self) -> Result<(), StoreError> {
        while !self.exhausted && self.len < LOOKAHEAD {
            let at = (self.head + self.len) % LOOKAHEAD;
            let slot = &mut self.slots[at];
            *slot = self.iter.next();
            match slot {
                Some(Ok((k, v))) => {
                    prefetch_lines(k.value(), 2);
                    prefetch_lines(v.value(), usize::MAX);
                    self.marks[at] = M::default();
                    self.len += 1;
                }
                Some(Err(_)) => {
                    if let Some(Err(e)) = slot.take() {
                        return Err(to_store_error(e));
                    }
                }
                None => self.exhausted = true,
            }
        }
        Ok(())
    }
}

impl<M> RowsAhead<'_, M> {
    /// The `i`th row ahead (0 is the one the scan is at): its key, value and mark.
    #[inline(always)]
    pub(in crate::embedded) fn get_mut(&mut self, i: usize) -> Option<(&[u8], &[u8], &mut M)> {
        if i >= self.len {
            return None;
        }
        let at = (self.head + i) % LOOKAHEAD;
        match &self.slots[at] {
            Some(Ok((k, v))) => Some((k.value(), v.value(), &mut self.marks[at])),
            _ => None,
        }
    }

    /// The row the scan is at, or none when the range has ended.
    #[inline(always)]
    pub(in crate::embedded) fn front(&self) -> Option<(&[u8], &[u8], &M)> {
        match &self.slots[self.head] {
            Some(Ok((k, v))) => Some((k.value(), v.value(), &self.marks[self.head])),
            _ => None,
        }
    }

    /// Drops the row the scan is at where it lies; the next becomes the front.
    #[inline(always)]
    pub(in crate::embedded) fn pop(&mut self) {
        if self.len > 0 {
            self.slots[self.head] = None;
            self.head = (self.head + 1) % LOOKAHEAD;
            self.len -= 1;
        }
    }
}
