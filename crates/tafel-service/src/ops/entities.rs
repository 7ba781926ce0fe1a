//! Reading entities: get by key and query.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tafel_store::{EntityKey, KeyRange, KeyRef, RowFilter, RowSink, ScanRequest};

use super::{Ctx, Service};
use crate::access::Action;
use crate::error::{Error, ErrorCode, Result};
use crate::model::{StoredEntity, StoredRef};
use crate::query::Expr;
use crate::query::{eval_stored, plan_entities};

pub(crate) const MAX_PAGE: usize = 1000;
/// Azure returns a partial page with a continuation after this much work.
const PAGE_BUDGET: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Default)]
pub struct EntityQuery {
    pub filter: Option<Expr>,
    pub top: Option<usize>,
    /// `(NextPartitionKey, NextRowKey)` of the previous page.
    pub resume: Option<(String, String)>,
}

impl EntityQuery {
    /// The most entities one page of this query holds.
    pub fn page_limit(&self) -> usize {
        self.top.unwrap_or(MAX_PAGE).clamp(1, MAX_PAGE)
    }
}

/// Takes the entities of a query page in key order, as the store finds them:
/// borrowed from the store's pages, so they are written out while in the CPU cache.
pub trait EntitySink: Send {
    /// An error (corrupt stored bytes) ends the query with it.
    fn entity(&mut self, e: StoredRef<'_>) -> Result<()>;
}

/// Hands a scan's rows to an [`EntitySink`], keeping its error, which stops the scan.
struct Rows<'s> {
    sink: &'s mut (dyn EntitySink + 's),
    failed: Option<Error>,
}

impl RowSink for Rows<'_> {
    fn push(&mut self, key: KeyRef<'_>, bytes: &[u8]) -> ControlFlow<()> {
        match self.sink.entity(StoredRef { key, bytes }) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                self.failed = Some(e);
                ControlFlow::Break(())
            }
        }
    }
}

impl Service {
    /// One entity in its stored form (its bytes are validated when encoded).
    pub async fn get_entity(&self, ctx: &Ctx, table: &str, pk: &str, rk: &str) -> Result<StoredEntity> {
        ctx.access.check(Action::ReadEntity, Some(table), Some((pk, rk)))?;
        let key = EntityKey::new(pk, rk);
        match self.store.get_entity(&ctx.account, table, &key).await? {
            Some(bytes) => Ok(StoredEntity { key, bytes }),
            None => Err(Error::new(ErrorCode::ResourceNotFound)),
        }
    }

    /// One page of a query: each entity goes to `sink`; returns where the next page
    /// starts (`NextPartitionKey`, `NextRowKey`), if there may be one.
    pub async fn query_entities(
        &self,
        ctx: &Ctx,
        table: &str,
        q: &EntityQuery,
        sink: &mut (dyn EntitySink + '_),
    ) -> Result<Option<(String, String)>> {
        ctx.access.check(Action::ReadEntity, Some(table), None)?;
        let plan = plan_entities(q.filter.as_ref());
        let mut ranges = plan.ranges;
        if let Some((pk, rk)) = &q.resume {
            let from = EntityKey::new(pk, rk);
            ranges = resume_ranges(ranges, from.as_bytes());
        }
        ranges = ctx.access.clip(ranges);
        let filter: Option<RowFilter> = plan.residual.map(|expr| {
            let expr = Arc::new(expr);
            Arc::new(move |k: KeyRef<'_>, v: &[u8]| eval_stored(&expr, k, v)) as RowFilter
        });
        let limit = q.page_limit();
        let request = ScanRequest {
            ranges,
            limit,
            filter,
            deadline: Some(Instant::now() + PAGE_BUDGET),
        };
        let mut rows = Rows { sink, failed: None };
        let end = self.store.scan_into(&ctx.account, table, request, &mut rows).await?;
        match rows.failed {
            Some(e) => Err(e),
            None => Ok(end.next.map(|k| k.keys())),
        }
    }
}

/// Counts the rows a scan finds, encoding none of them.
struct Counter(u64);

impl RowSink for Counter {
    fn push(&mut self, _: KeyRef<'_>, _: &[u8]) -> ControlFlow<()> {
        self.0 += 1;
        ControlFlow::Continue(())
    }
}

/// Rows a count asks of the store per page: its pages end at this many rows
/// or at the store's byte limit, whichever comes first.
const COUNT_PAGE: usize = 100_000;

impl Service {
    /// How many entities of `table` match `filter` (all of them without one)
    /// that the caller may read: authorized as a query of the table, clipped to
    /// a SAS's key range as a query is. The whole table's count, when the caller
    /// may read all of it, is the store's counter; any other count is a scan
    /// that counts rows without encoding them.
    pub async fn count_entities(&self, ctx: &Ctx, table: &str, filter: Option<&Expr>) -> Result<u64> {
        ctx.access.check(Action::ReadEntity, Some(table), None)?;
        let plan = plan_entities(filter);
        let all = vec![KeyRange::all()];
        let mut ranges = ctx.access.clip(plan.ranges);
        if plan.residual.is_none() && ranges == all {
            return Ok(self.store.count_entities(&ctx.account, table).await?);
        }
        let filter: Option<RowFilter> = plan.residual.map(|expr| {
            let expr = Arc::new(expr);
            Arc::new(move |k: KeyRef<'_>, v: &[u8]| eval_stored(&expr, k, v)) as RowFilter
        });
        let mut counter = Counter(0);
        // At least one scan, even of no range: it says whether the table exists.
        loop {
            let request = ScanRequest {
                ranges: ranges.clone(),
                limit: COUNT_PAGE,
                filter: filter.clone(),
                deadline: None,
            };
            let end = self.store.scan_into(&ctx.account, table, request, &mut counter).await?;
            match end.next {
                Some(next) => ranges = resume_ranges(ranges, next.as_bytes()),
                None => break,
            }
        }
        Ok(counter.0)
    }
}

/// The part of `ranges` at or after `from`.
fn resume_ranges(ranges: Vec<KeyRange>, from: &[u8]) -> Vec<KeyRange> {
    ranges
        .into_iter()
        .filter_map(|mut r| {
            if r.start.as_slice() < from {
                r.start = from.to_vec();
            }
            (!r.is_empty()).then_some(r)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_drops_ranges_before_the_token() {
        let a = KeyRange::partition("a");
        let c = KeyRange::partition("c");
        let from = EntityKey::new("b", "x");
        let out = resume_ranges(vec![a, c.clone()], from.as_bytes());
        assert_eq!(out, vec![c]);
        let mid = EntityKey::new("a", "m");
        let out = resume_ranges(vec![KeyRange::partition("a")], mid.as_bytes());
        assert_eq!(out[0].start, mid.as_bytes());
    }
}
