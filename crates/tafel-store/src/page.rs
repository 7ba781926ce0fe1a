//! The paging rules every backend's scan follows, in one place: rows are offered
//! in key order; the page ends at the first matching row past the limit (where the
//! next page starts) or, once the deadline has passed, at the row being examined
//! (checked every [`DEADLINE_EVERY`] rows, so the clock is read rarely).

use std::time::Instant;

use crate::key::{EntityKey, KeyRef};
use crate::traits::{ScanPage, ScanRequest};

/// Rows examined between deadline checks.
const DEADLINE_EVERY: u32 = 512;

pub(crate) struct PageBuilder<'r> {
    request: &'r ScanRequest,
    rows: Vec<(EntityKey, Vec<u8>)>,
    examined: u32,
}

impl<'r> PageBuilder<'r> {
    pub(crate) fn new(request: &'r ScanRequest) -> Self {
        PageBuilder {
            request,
            rows: Vec::new(),
            examined: 0,
        }
    }

    /// Rows the page holds so far.
    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }

    /// Offers the next row in key order. Returns the finished page when the scan
    /// stops at this row; the row itself then starts the next page.
    pub(crate) fn offer(&mut self, key: KeyRef<'_>, value: &[u8]) -> Option<ScanPage> {
        let request = self.request;
        self.examined = self.examined.wrapping_add(1);
        if self.examined.is_multiple_of(DEADLINE_EVERY) && request.deadline.is_some_and(|d| Instant::now() >= d) {
            return Some(self.stop_at(key));
        }
        if !request.filter.as_ref().is_none_or(|f| f(key, value)) {
            return None;
        }
        if self.rows.len() == request.limit {
            // One more match exists: that is where the next page starts.
            return Some(self.stop_at(key));
        }
        self.rows.push((key.to_owned(), value.to_vec()));
        None
    }

    fn stop_at(&mut self, key: KeyRef<'_>) -> ScanPage {
        ScanPage {
            rows: std::mem::take(&mut self.rows),
            next: Some(key.to_owned()),
        }
    }

    /// The page of a scan that reached the end of its ranges.
    pub(crate) fn finish(self) -> ScanPage {
        ScanPage {
            rows: self.rows,
            next: None,
        }
    }
}
