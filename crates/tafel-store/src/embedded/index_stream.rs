//! A query's page read straight from its index entries, in key order, when each
//! range of the plan holds the entries of a single value (an `eq`, or an `or` of
//! them): one value's entries are in entity-key order, so several values' entries
//! merge into the order a page answers in, and the page reads only as far as it
//! ends, however many entities share the value. A plan whose ranges span several
//! values gathers and sorts its candidates instead (`index::scan`).
//!
//! Whether a range holds one value is found in the entries themselves, not from
//! the encoding (opaque here): an entry is `prefix ‖ value ‖ entity key` with the
//! key's length as its value, so the first entry in the range names a value, and
//! the range holds no other when nothing lies between that value's last possible
//! entry and the range's end.

use std::iter::Peekable;

use super::commit::ReadView;
use super::engine::tree::{Range, ReadTrees, Tree};
use super::index::{entity_key_of, entry_ranges, offer};
use crate::error::{FailureKind, StoreError};
use crate::paging::PageBuilder;
use crate::traits::{IndexScanRequest, RowSink, ScanEnd};

/// One value's entries at or after the page's start, as entity keys.
pub(super) struct ValueStream<'v> {
    entries: Peekable<Range<'v>>,
}

impl ValueStream<'_> {
    /// The entity key of the next entry, if any.
    fn peek(&mut self) -> Result<Option<&[u8]>, StoreError> {
        if matches!(self.entries.peek(), Some(Err(_))) {
            return Err(self.entries.next().and_then(Result::err).unwrap_or_else(corrupt));
        }
        match self.entries.peek() {
            Some(Ok((k, v))) => entity_key_of(k.bytes(), v.bytes()).map(Some),
            _ => Ok(None),
        }
    }
}

fn corrupt() -> StoreError {
    StoreError::failure(FailureKind::Corrupt, "corrupt index entry")
}

/// The smallest key greater than every key that starts with `prefix` (one that
/// ends in a byte below 0xFF: an entry prefix always does, in its 0x00).
fn after_prefix(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            break;
        }
    }
    end
}

/// One stream per non-empty range of `request` when every range holds the
/// entries of a single value; `None` when one holds several (the caller then
/// gathers candidates).
pub(super) fn single_values<'v>(
    view: &'v ReadView,
    id: u64,
    request: &IndexScanRequest,
) -> Result<Option<Vec<ValueStream<'v>>>, StoreError> {
    let from = request.from.as_ref().map(|k| k.as_bytes());
    let mut streams = Vec::new();
    for (lo, hi) in entry_ranges(id, request) {
        let Some(first) = view.range_of(Tree::Index, &lo, &hi)?.next() else {
            continue;
        };
        let (k, v) = first?;
        let (entry, key) = (k.bytes(), entity_key_of(k.bytes(), v.bytes())?);
        // `prefix ‖ value`: every entry of the value starts with it, and no
        // entry of another value does (encodings are prefix-free).
        let value = entry.get(..entry.len() - key.len()).ok_or_else(corrupt)?.to_vec();
        let value_end = after_prefix(&value);
        if value_end < hi && view.range_of(Tree::Index, &value_end, &hi)?.next().is_some() {
            return Ok(None);
        }
        let seek = match from {
            Some(f) => [value.as_slice(), f].concat(),
            None => value.clone(),
        };
        streams.push(ValueStream {
            entries: view.range_of(Tree::Index, &seek, &value_end)?.peekable(),
        });
    }
    Ok(Some(streams))
}

/// Reads the candidates of `streams` merged in key order (each once: an entity
/// can be in two streams, one per property) and offers each to the page.
pub(super) fn page(
    view: &ReadView,
    id: u64,
    request: &IndexScanRequest,
    mut streams: Vec<ValueStream<'_>>,
    sink: &mut (dyn RowSink + '_),
) -> Result<ScanEnd, StoreError> {
    let paging = request.paging();
    let mut page = PageBuilder::new(&paging, sink);
    loop {
        let mut next: Option<Vec<u8>> = None;
        for s in &mut streams {
            if let Some(key) = s.peek()? {
                if next.as_deref().is_none_or(|n| key < n) {
                    next = Some(key.to_vec());
                }
            }
        }
        let Some(key) = next else {
            return Ok(page.finish());
        };
        for s in &mut streams {
            if s.peek()? == Some(key.as_slice()) {
                s.entries.next();
            }
        }
        if let Some(end) = offer(view, id, &key, &mut page)? {
            return Ok(end);
        }
    }
}
