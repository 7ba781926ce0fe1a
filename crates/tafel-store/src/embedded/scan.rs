//! Scans: one page of rows from the published snapshot, pulled ahead and prefetched.

use std::cell::Cell;
use std::ops::Bound;
use std::time::{Duration, Instant};

use super::checksums::{payload, unseal};
use super::commit::ReadView;
use super::opening::Opening;
use super::schema::{decode_table, guarded, guarded_from, row_key, to_store_error};
use super::table_ids::TableIds;
use crate::error::StoreError;
use crate::key::KeyRef;
use crate::paging::PageBuilder;
use crate::stats::RowCounts;
use crate::traits::{RowSink, ScanEnd, ScanRequest};

/// Rows a scan pulls ahead of the one it offers.
const LOOKAHEAD: usize = 8;
/// Where in the lookahead a row is filtered (and its checksum read): far enough
/// behind its pull, when all of it was prefetched, that its cache lines have arrived.
const FILTER_AT: usize = LOOKAHEAD / 2;

/// Asks the CPU to start loading the first two cache lines of `bytes`.
#[inline(always)]
fn prefetch(bytes: &[u8]) {
    prefetch_lines(bytes, 2);
}

/// Prefetches up to `lines` cache lines from the start of `bytes`.
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

/// The entity key of a stored row key (after its 8-byte table id).
pub(super) fn entity_key(row_key: &[u8]) -> KeyRef<'_> {
    KeyRef::new(row_key.get(8..).unwrap_or_default())
}

/// The id of the table under `table_key` in `snapshot`, or `TableNotFound`;
/// `generation` was read from `ids` before the snapshot was loaded.
pub(super) fn table_id(
    snapshot: &ReadView,
    ids: &TableIds,
    table_key: &[u8],
    generation: u64,
) -> Result<u64, StoreError> {
    if let Some(id) = ids.get(table_key) {
        return Ok(id);
    }
    let id = match snapshot.tables.get(table_key).map_err(to_store_error)? {
        Some(v) => decode_table(table_key, v.value())?.id,
        None => return Err(StoreError::TableNotFound),
    };
    ids.remember(table_key, id, generation);
    Ok(id)
}

/// How long a scan runs before it lets the other requests of its thread run.
const SCAN_SLICE: Duration = Duration::from_millis(10);
/// Rows examined between looks at the clock.
const SLICE_CHECK_EVERY: u32 = 256;

/// One page of a scan, table lookup included, in a single snapshot. It runs on
/// the calling task, where its sink encodes each row while the row is in the CPU
/// cache, and gives way every [`SCAN_SLICE`]: a long page shares its thread with
/// other requests, yet the scans in flight never outnumber the runtime's threads
/// (more threads than cores only time-slice them and evict each other's rows
/// from the caches). Each row's checksum is checked if `verify` (see
/// `Disk::files_in_memory`).
pub(super) async fn scan(
    opening: &Opening,
    rows: &RowCounts,
    table_key: &[u8],
    request: &ScanRequest,
    verify: bool,
    sink: &mut (dyn RowSink + '_),
) -> Result<ScanEnd, StoreError> {
    let (generation, snapshot) = opening.id_view();
    let id = guarded(|| table_id(&snapshot, &opening.ids, table_key, generation))?;
    let mut page = PageBuilder::new(request, sink).counted(rows);
    for range in &request.ranges {
        if range.is_empty() {
            continue;
        }
        let lo = row_key(id, &range.start);
        // A range open at the end stops at the table's last row, which the loop
        // sees by the id prefix: cheaper than redb comparing every key to a bound.
        let hi = range.end.as_ref().map(|e| row_key(id, e));
        let upper = hi.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut rows = guarded(|| {
            let iter = snapshot
                .entities
                .range::<&[u8]>((Bound::Included(lo.as_slice()), upper))
                .map_err(to_store_error)?;
            Ok(RangeScan::new(iter, id, verify))
        })?;
        // A slice at a time behind one guard (see `schema::guarded`): a guard
        // around each row kept redb's iterator from being inlined into the
        // loop, and cost scans a quarter of their speed. A panic while the
        // service's filter or the encoder runs is a bug of ours, not damage.
        let ours = Cell::new(false);
        loop {
            match guarded_from(&ours, || rows.run(&mut page, Instant::now() + SCAN_SLICE, &ours))? {
                Slice::PageEnded(end) => return Ok(end),
                Slice::RangeEnded => break,
                Slice::TimeUp => tokio::task::yield_now().await,
            }
        }
    }
    Ok(page.finish())
}

type Row<'a> = redb::AccessGuard<'a, &'static [u8]>;

/// One key range of a scan, pulled ahead.
struct RangeScan<'a> {
    iter: redb::Range<'a, &'static [u8], &'static [u8]>,
    /// Rows pulled, not yet offered, each with whether it matched the filter
    /// (once known; its checksum was verified then too, if the scan verifies).
    ahead: Ahead<(Row<'a>, Row<'a>, Option<bool>)>,
    exhausted: bool,
    table_prefix: [u8; 8],
    verify: bool,
}

/// A row's value, its checksum checked if the scan `verify`s.
#[inline(always)]
fn value<'r>(verify: bool, k: &Row<'_>, v: &'r Row<'_>) -> Result<&'r [u8], StoreError> {
    if verify {
        unseal(k.value(), v.value())
    } else {
        Ok(payload(v.value()))
    }
}

/// The rows pulled ahead: a ring whose rows stay where they were put and are
/// dropped there. A `VecDeque` moved each row (two redb guards, over a hundred
/// bytes) out again to drop it, with a `memcpy` call per row; the ring took 6%
/// off a scan's CPU per row (benchmark-history §24).
struct Ahead<T> {
    slots: [Option<T>; LOOKAHEAD],
    head: usize,
    len: usize,
}

impl<T> Default for Ahead<T> {
    fn default() -> Self {
        Ahead {
            slots: std::array::from_fn(|_| None),
            head: 0,
            len: 0,
        }
    }
}

impl<T> Ahead<T> {
    fn len(&self) -> usize {
        self.len
    }

    /// Adds a row behind the others; there must be room (fewer than LOOKAHEAD).
    fn push(&mut self, row: T) {
        self.slots[(self.head + self.len) % LOOKAHEAD] = Some(row);
        self.len += 1;
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i >= self.len {
            return None;
        }
        self.slots[(self.head + i) % LOOKAHEAD].as_mut()
    }

    fn front(&self) -> Option<&T> {
        self.slots[self.head].as_ref()
    }

    /// Drops the front row where it lies.
    fn pop(&mut self) {
        if self.len > 0 {
            self.slots[self.head] = None;
            self.head = (self.head + 1) % LOOKAHEAD;
            self.len -= 1;
        }
    }
}

/// How a slice of a range's scan ended.
enum Slice {
    PageEnded(ScanEnd),
    RangeEnded,
    TimeUp,
}

impl<'a> RangeScan<'a> {
    fn new(iter: redb::Range<'a, &'static [u8], &'static [u8]>, id: u64, verify: bool) -> Self {
        RangeScan {
            iter,
            ahead: Ahead::default(),
            exhausted: false,
            table_prefix: id.to_be_bytes(),
            verify,
        }
    }

    /// Offers rows to `page` until it is full, the range ends, or `until`.
    /// Rows are offered in order, but pulled a few ahead with their first cache
    /// lines prefetched, and filtered halfway (FILTER_AT) with the rest of a
    /// match prefetched: a scan of a table larger than the CPU cache otherwise
    /// waits on one miss per row, and on several per row it encodes.
    /// `ours` is set while the service's filter or the page's sink runs.
    fn run<S: RowSink + ?Sized>(
        &mut self,
        page: &mut PageBuilder<'_, S>,
        until: Instant,
        ours: &Cell<bool>,
    ) -> Result<Slice, StoreError> {
        let prefix = self.table_prefix;
        let in_table = |k: &[u8]| k.starts_with(&prefix);
        let verify = self.verify;
        let mut since_check = 0u32;
        loop {
            while !self.exhausted && self.ahead.len() < LOOKAHEAD {
                match self.iter.next() {
                    Some(Ok((k, v))) => {
                        prefetch(k.value());
                        // All of it: its checksum reads every byte at FILTER_AT.
                        // Unverified (in memory), the first lines alone measured
                        // slower all the same (benchmark-history §24).
                        prefetch_lines(v.value(), usize::MAX);
                        self.ahead.push((k, v, None));
                    }
                    Some(Err(e)) => return Err(to_store_error(e)),
                    None => self.exhausted = true,
                }
            }
            if let Some((k, v, matched)) = self.ahead.get_mut(FILTER_AT) {
                if in_table(k.value()) {
                    // Checked here, where the filter reads the row anyway; a
                    // damaged row fails the scan rather than match or show wrongly.
                    let value = value(verify, k, v)?;
                    ours.set(true);
                    let m = page.matches(entity_key(k.value()), value);
                    ours.set(false);
                    *matched = Some(m);
                }
            }
            let Some((k, v, matched)) = self.ahead.front() else {
                return Ok(Slice::RangeEnded);
            };
            if !in_table(k.value()) {
                return Ok(Slice::RangeEnded);
            }
            let key = entity_key(k.value());
            let (value, matched) = match *matched {
                Some(m) => (payload(v.value()), Some(m)),
                None => (value(verify, k, v)?, None),
            };
            ours.set(true);
            let matched = matched.unwrap_or_else(|| page.matches(key, value));
            let ended = page.offer_matched(key, value, matched);
            ours.set(false);
            if let Some(end) = ended {
                return Ok(Slice::PageEnded(end));
            }
            self.ahead.pop();
            since_check += 1;
            if since_check == SLICE_CHECK_EVERY {
                since_check = 0;
                if Instant::now() >= until {
                    return Ok(Slice::TimeUp);
                }
            }
        }
    }
}
