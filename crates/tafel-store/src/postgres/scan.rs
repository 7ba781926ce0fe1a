//! One page of an ordered scan, in one read-only snapshot (the table lookup
//! included), fetched range by range in key order in chunks. Its paging rules are
//! every backend's ([`PageBuilder`]).

use deadpool_postgres::Transaction;

use super::schema;
use super::txn::DbError;
use crate::error::StoreError;
use crate::key::KeyRef;
use crate::page::PageBuilder;
use crate::stats::RowCounts;
use crate::traits::{ScanEnd, ScanRequest};

/// The rows of one attempt, kept until its snapshot committed: a retried attempt
/// starts over, and the caller's sink must see each row once.
pub type Rows = Vec<(crate::key::EntityKey, Vec<u8>)>;

/// Rows fetched per round trip when a filter may reject some of them.
const MIN_CHUNK: usize = 256;
const MAX_CHUNK: usize = 1000;

/// Rows to ask for next: enough for the rest of the page plus the row that
/// proves there is a next page; more when a filter may reject rows.
fn chunk_size(request: &ScanRequest, have: usize) -> usize {
    let want = request.limit.saturating_sub(have).saturating_add(1);
    let want = if request.filter.is_some() {
        want.max(MIN_CHUNK)
    } else {
        want
    };
    want.min(MAX_CHUNK)
}

pub async fn scan(
    tx: &Transaction<'_>,
    counts: &RowCounts,
    account: &str,
    lname: &[u8],
    request: &ScanRequest,
) -> Result<(Rows, ScanEnd), DbError> {
    let lookup = tx.prepare_cached(schema::TABLE_ID).await?;
    let Some(row) = tx.query_opt(&lookup, &[&account, &lname]).await? else {
        return Err(StoreError::TableNotFound.into());
    };
    let id: i64 = row.try_get(0)?;
    let from = tx.prepare_cached(schema::SCAN_FROM).await?;
    let between = tx.prepare_cached(schema::SCAN_BETWEEN).await?;
    let mut rows = Rows::new();
    let mut page = PageBuilder::new(request, &mut rows).counted(counts);
    for range in &request.ranges {
        if range.is_empty() {
            continue;
        }
        let mut cursor = range.start.clone();
        loop {
            let n = chunk_size(request, page.len());
            let limit = i64::try_from(n).unwrap_or(i64::MAX);
            let chunk = match &range.end {
                Some(end) => tx.query(&between, &[&id, &cursor, &limit, end]).await?,
                None => tx.query(&from, &[&id, &cursor, &limit]).await?,
            };
            for row in &chunk {
                let key: &[u8] = row.try_get(0)?;
                let value: &[u8] = row.try_get(1)?;
                if let Some(end) = page.offer(KeyRef::new(key), value) {
                    drop(page);
                    return Ok((rows, end));
                }
            }
            if chunk.len() < n {
                break;
            }
            // The smallest key after the chunk's last: that key with a 0x00 appended.
            let Some(last) = chunk.last() else { break };
            let last: &[u8] = last.try_get(0)?;
            cursor = [last, &[0u8][..]].concat();
        }
    }
    let end = page.finish();
    Ok((rows, end))
}
