//! One page of an ordered scan, fetched range by range in key order in chunks,
//! each one statement that also looks the table up: a page that fits one chunk
//! (the common case) is one round trip and no transaction to hold open. Each
//! chunk reads its own snapshot, as a page of Azure's does not promise one
//! instant either; a table deleted mid-page ends the page with TableNotFound.
//! Its paging rules are every backend's ([`PageBuilder`]).

use std::panic::{catch_unwind, AssertUnwindSafe};

use deadpool_postgres::Client;

use super::schema;
use super::txn::DbError;
use crate::error::{FailureKind, StoreError};
use crate::key::KeyRef;
use crate::paging::PageBuilder;
use crate::stats::RowCounts;
use crate::traits::{ScanEnd, ScanRequest};

/// The rows of one attempt, kept until it ended: a retried attempt starts over,
/// and the caller's sink must see each row once.
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
    client: &Client,
    counts: &RowCounts,
    account: &str,
    lname: &[u8],
    request: &ScanRequest,
) -> Result<(Rows, ScanEnd), DbError> {
    let from = client.prepare_cached(schema::SCAN_FROM).await?;
    let between = client.prepare_cached(schema::SCAN_BETWEEN).await?;
    let mut rows = Rows::new();
    let mut page = PageBuilder::new(request, &mut rows).counted(counts);
    let mut looked_up = false;
    for range in &request.ranges {
        if range.is_empty() {
            continue;
        }
        let mut cursor = range.start.clone();
        loop {
            let n = chunk_size(request, page.len());
            let limit = i64::try_from(n).unwrap_or(i64::MAX);
            let chunk = match &range.end {
                Some(end) => {
                    client
                        .query(&between, &[&account, &lname, &cursor, &limit, end])
                        .await?
                }
                None => client.query(&from, &[&account, &lname, &cursor, &limit]).await?,
            };
            if chunk.is_empty() {
                return Err(StoreError::TableNotFound.into());
            }
            looked_up = true;
            // The service's filter runs in `offer`: a panic there is a bug of
            // ours, answered as one rather than taking the connection with it.
            let offered = catch_unwind(AssertUnwindSafe(|| -> Result<_, DbError> {
                let mut got = 0;
                for row in &chunk {
                    // The table's row with nothing joined: no entity in the range.
                    let Some(key) = row.try_get::<_, Option<&[u8]>>(0)? else {
                        break;
                    };
                    let value: &[u8] = row.try_get(1)?;
                    got += 1;
                    if let Some(end) = page.offer(KeyRef::new(key), value) {
                        return Ok((got, Some(end)));
                    }
                }
                Ok((got, None))
            }))
            .map_err(|_| StoreError::failure(FailureKind::Internal, "a scan's filter panicked (a bug)"))?;
            let (got, ended) = offered?;
            if let Some(end) = ended {
                drop(page);
                return Ok((rows, end));
            }
            if got < n {
                break;
            }
            // The smallest key after the chunk's last: that key with a 0x00 appended.
            let Some(last) = chunk.last() else { break };
            let last: &[u8] = last.try_get(0)?;
            cursor = [last, &[0u8][..]].concat();
        }
    }
    if !looked_up && !table_exists(client, account, lname).await? {
        return Err(StoreError::TableNotFound.into());
    }
    let end = page.finish();
    Ok((rows, end))
}

/// Hands an attempt's rows to the caller's sink, once the attempt has ended.
pub(super) fn deliver(rows: Rows, end: ScanEnd, sink: &mut (dyn crate::traits::RowSink + '_)) -> ScanEnd {
    for (key, value) in &rows {
        if sink.push(key.view(), value).is_break() {
            return ScanEnd { next: None };
        }
    }
    end
}

/// For a scan whose ranges are all empty (a filter no key can match): the table
/// must still exist for the answer to be an empty page.
async fn table_exists(client: &Client, account: &str, lname: &[u8]) -> Result<bool, DbError> {
    let stmt = client.prepare_cached(schema::GET_TABLE).await?;
    Ok(client.query_opt(&stmt, &[&account, &lname]).await?.is_some())
}
