//! Scans: one page of rows from the published snapshot, pulled ahead and prefetched.

use std::cell::Cell;
use std::ops::Bound;
use std::time::{Duration, Instant};

use super::commit::ReadView;
use super::engine::rows_ahead::{RowsAhead, LOOKAHEAD};
use super::engine::tree::{ReadTrees, Tree};
use super::opening::Opening;
use super::schema::{decode_table, guarded, guarded_from, row_key};
use super::table_ids::TableIds;
use crate::error::StoreError;
use crate::key::KeyRef;
use crate::paging::PageBuilder;
use crate::stats::RowCounts;
use crate::traits::{RowSink, ScanEnd, ScanRequest};

/// Where among the rows read ahead a row is filtered (and its checksum read): far
/// enough behind its read, when all of it was prefetched, that its cache lines
/// have arrived.
const FILTER_AT: usize = LOOKAHEAD / 2;

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
    let id = match snapshot.get(Tree::Tables, table_key)? {
        Some(v) => decode_table(table_key, v.bytes())?.id,
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
        // sees by the id prefix: cheaper than the engine comparing every key to a bound.
        let hi = range.end.as_ref().map(|e| row_key(id, e));
        let upper = hi.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut rows = guarded(|| {
            let stop = id.checked_add(1).map(u64::to_be_bytes);
            let ahead =
                snapshot.entities_ahead(Bound::Included(lo.as_slice()), upper, stop.as_ref().map(|s| &s[..]))?;
            Ok(RangeScan::new(ahead, id, verify))
        })?;
        // A slice at a time behind one guard (see `schema::guarded`): a guard
        // around each row kept the engine's range from being inlined into the
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

/// One key range of a scan, read ahead (`engine/rows_ahead.rs`); each row ahead is
/// marked with whether it matched the filter, once known (its checksum was
/// verified then too, if the scan verifies).
struct RangeScan<'a> {
    rows: RowsAhead<'a, Option<bool>>,
    table_prefix: [u8; 8],
    verify: bool,
}

/// How a slice of a range's scan ended.
enum Slice {
    PageEnded(ScanEnd),
    RangeEnded,
    TimeUp,
}

impl<'a> RangeScan<'a> {
    fn new(rows: RowsAhead<'a, Option<bool>>, id: u64, verify: bool) -> Self {
        RangeScan {
            rows,
            table_prefix: id.to_be_bytes(),
            verify,
        }
    }

    /// Offers rows to `page` until it is full, the range ends, or `until`.
    /// Rows are offered in order, but read a few ahead with their bytes prefetched
    /// (`RowsAhead::fill`), and filtered halfway (FILTER_AT): a scan of a table
    /// larger than the CPU cache otherwise waits on one miss per row, and on
    /// several per row it encodes.
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
            self.rows.fill(verify)?;
            if let Some((row, matched)) = self.rows.get_mut(FILTER_AT) {
                if in_table(row.key) {
                    // Checked here, where the filter reads the row anyway; a
                    // damaged row fails the scan rather than match or show wrongly.
                    let value = row.value(verify)?;
                    ours.set(true);
                    let m = page.matches(entity_key(row.key), value);
                    ours.set(false);
                    *matched = Some(m);
                }
            }
            let Some((row, matched)) = self.rows.front() else {
                return Ok(Slice::RangeEnded);
            };
            if !in_table(row.key) {
                return Ok(Slice::RangeEnded);
            }
            let key = entity_key(row.key);
            let (value, matched) = match *matched {
                Some(m) => (row.payload(), Some(m)),
                None => (row.value(verify)?, None),
            };
            ours.set(true);
            let matched = matched.unwrap_or_else(|| page.matches(key, value));
            let ended = page.offer_matched(key, value, matched);
            ours.set(false);
            if let Some(end) = ended {
                return Ok(Slice::PageEnded(end));
            }
            self.rows.pop();
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
