//! The paging rules every backend's scan follows, in one place: rows are offered
//! in key order; the page ends at the first matching row past the limit or past
//! [`MAX_PAGE_BYTES`] (where the next page starts) or, once the deadline has
//! passed, at the row being examined (checked every [`DEADLINE_EVERY`] rows, so
//! the clock is read rarely).

use std::time::Instant;

use crate::key::KeyRef;
use crate::stats::RowCounts;
use crate::traits::{RowSink, ScanEnd, ScanRequest};

/// Rows examined between deadline checks.
const DEADLINE_EVERY: u32 = 512;
/// Bytes of stored rows a page holds at most: 1,000 entities of 1 MiB would
/// take a gigabyte of memory to answer at once. Past it the page ends early,
/// with a continuation, as Azure's pages may for any reason.
pub(crate) const MAX_PAGE_BYTES: usize = 16 << 20;

pub(crate) struct PageBuilder<'r, S: RowSink + ?Sized> {
    request: &'r ScanRequest,
    sink: &'r mut S,
    rows: usize,
    bytes: usize,
    examined: u32,
    /// Where the rows examined and returned are counted when the page is done.
    counts: Option<&'r RowCounts>,
    scanned: u64,
}

impl<'r, S: RowSink + ?Sized> PageBuilder<'r, S> {
    pub(crate) fn new(request: &'r ScanRequest, sink: &'r mut S) -> Self {
        PageBuilder {
            request,
            sink,
            rows: 0,
            bytes: 0,
            examined: 0,
            counts: None,
            scanned: 0,
        }
    }

    /// Counts the page's rows in `counts` once it is done (however it ends).
    pub(crate) fn counted(mut self, counts: &'r RowCounts) -> Self {
        self.counts = Some(counts);
        self
    }

    /// Rows the page holds so far.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))] // the embedded scan counts its own
    pub(crate) fn len(&self) -> usize {
        self.rows
    }

    /// Offers the next row in key order. Returns how the page ends when the scan
    /// stops at this row; the row itself then starts the next page.
    pub(crate) fn offer(&mut self, key: KeyRef<'_>, value: &[u8]) -> Option<ScanEnd> {
        let matched = self.matches(key, value);
        self.offer_matched(key, value, matched)
    }

    /// Whether the row passes the request's filter. A scan may ask this ahead of
    /// offering the row, to load a matching row's bytes before it is encoded.
    pub(crate) fn matches(&self, key: KeyRef<'_>, value: &[u8]) -> bool {
        self.request.filter.as_ref().is_none_or(|f| f(key, value))
    }

    /// [`offer`](Self::offer) for a row whose [`matches`](Self::matches) is known.
    pub(crate) fn offer_matched(&mut self, key: KeyRef<'_>, value: &[u8], matched: bool) -> Option<ScanEnd> {
        let request = self.request;
        self.examined = self.examined.wrapping_add(1);
        self.scanned += 1;
        if self.examined.is_multiple_of(DEADLINE_EVERY) && request.deadline.is_some_and(|d| Instant::now() >= d) {
            return Some(stop_at(key));
        }
        if !matched {
            return None;
        }
        if self.rows == request.limit || self.bytes >= MAX_PAGE_BYTES {
            // One more match exists: that is where the next page starts.
            return Some(stop_at(key));
        }
        self.rows += 1;
        self.bytes += key.as_bytes().len() + value.len();
        if self.sink.push(key, value).is_break() {
            // The sink has failed and holds why: no continuation, no more rows.
            return Some(ScanEnd { next: None });
        }
        None
    }

    /// The end of a scan that reached the end of its ranges.
    pub(crate) fn finish(self) -> ScanEnd {
        ScanEnd { next: None }
    }
}

impl<S: RowSink + ?Sized> Drop for PageBuilder<'_, S> {
    fn drop(&mut self) {
        if let Some(c) = self.counts {
            c.add(self.scanned, self.rows as u64);
        }
    }
}

fn stop_at(key: KeyRef<'_>) -> ScanEnd {
    ScanEnd {
        next: Some(key.to_owned()),
    }
}
