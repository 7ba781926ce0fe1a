//! Reading entities: get by key and query.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tafel_store::{EntityKey, IndexScanRequest, KeyRange, KeyRef, RowFilter, RowSink, ScanRequest};

use super::{Ctx, Service};
use crate::access::Action;
use crate::error::{Error, ErrorCode, Result};
use crate::index::plan_index;
use crate::model::{StoredEntity, StoredRef};
use crate::query::Expr;
use crate::query::{eval_stored, plan_entities};
use crate::ttl::Expiry;

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

/// How a query page was found (the `x-tafel-query-plan` header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryPlan {
    /// Single entities by key.
    Point,
    /// Key ranges narrower than the table.
    PartitionRange,
    /// Candidates from the indexes on these properties.
    Index(Vec<String>),
    TableScan,
}

impl QueryPlan {
    /// The header's value: `point`, `partition-range`, `index:<property>[,…]`, `table-scan`.
    pub fn header(&self) -> String {
        match self {
            QueryPlan::Point => "point".into(),
            QueryPlan::PartitionRange => "partition-range".into(),
            QueryPlan::Index(properties) => {
                let names: Vec<String> = properties.iter().map(|p| header_text(p)).collect();
                format!("index:{}", names.join(","))
            }
            QueryPlan::TableScan => "table-scan".into(),
        }
    }
}

/// `name` as header text: a property name may hold any letter, a header only ASCII.
fn header_text(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One page of a query, as far as the caller needs to know besides its entities.
#[derive(Debug, Clone)]
pub struct QueryPage {
    /// Where the next page starts (`NextPartitionKey`, `NextRowKey`), if there may be one.
    pub next: Option<(String, String)>,
    pub plan: QueryPlan,
    /// Entities read to answer it (each index candidate, each scanned row).
    pub examined: u64,
}

/// An index plan answers a query only up to this many candidates; past it the
/// scan does (docs/design/indexes.md, "Pages and continuation").
const MAX_INDEX_CANDIDATES: usize = 50_000;

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
    pushed: u64,
}

impl RowSink for Rows<'_> {
    fn push(&mut self, key: KeyRef<'_>, bytes: &[u8]) -> ControlFlow<()> {
        self.pushed += 1;
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
        let Some(bytes) = self.store.get_entity(&ctx.account, table, &key).await? else {
            return Err(Error::new(ErrorCode::ResourceNotFound));
        };
        match self.expiry(&ctx.account, table).await? {
            Some(e) if e.expired(&bytes) => Err(Error::new(ErrorCode::ResourceNotFound)),
            _ => Ok(StoredEntity { key, bytes }),
        }
    }

    /// One page of a query: each entity goes to `sink`. A key plan narrower
    /// than the table is scanned; otherwise a ready index that plans the filter
    /// gives the candidates; otherwise the table is scanned.
    pub async fn query_entities(
        &self,
        ctx: &Ctx,
        table: &str,
        q: &EntityQuery,
        sink: &mut (dyn EntitySink + '_),
    ) -> Result<QueryPage> {
        ctx.access.check(Action::ReadEntity, Some(table), None)?;
        let expiry = self.expiry(&ctx.account, table).await?;
        let plan = plan_entities(q.filter.as_ref());
        let whole_table = plan.ranges == [KeyRange::all()];
        let kind = if whole_table {
            QueryPlan::TableScan
        } else if plan.ranges.len() == 1 && is_point(&plan.ranges[0]) {
            QueryPlan::Point
        } else {
            QueryPlan::PartitionRange
        };
        let examined = Arc::new(AtomicU64::new(0));
        let mut rows = Rows {
            sink,
            failed: None,
            pushed: 0,
        };
        if whole_table && ctx.access.key_range().is_none() {
            if let Some(filter) = &q.filter {
                let found = self
                    .query_by_index(ctx, table, q, filter, &expiry, &examined, &mut rows)
                    .await?;
                if let Some(page) = found {
                    return Ok(page);
                }
            }
        }
        let mut ranges = plan.ranges;
        if let Some((pk, rk)) = &q.resume {
            let from = EntityKey::new(pk, rk);
            ranges = KeyRange::resume(ranges, from.as_bytes());
        }
        ranges = ctx.access.clip(ranges);
        let counted = plan.residual.is_some();
        let filter = live(plan.residual.map(|expr| counting(expr, &examined)), &expiry);
        let request = ScanRequest {
            ranges,
            limit: q.page_limit(),
            filter,
            deadline: Some(Instant::now() + PAGE_BUDGET),
        };
        let end = self.store.scan_into(&ctx.account, table, request, &mut rows).await?;
        if let Some(e) = rows.failed {
            return Err(e);
        }
        Ok(QueryPage {
            next: end.next.map(|k| k.keys()),
            plan: kind,
            examined: if counted {
                examined.load(Ordering::Relaxed)
            } else {
                rows.pushed
            },
        })
    }

    /// The page from the table's ready indexes, when one plans the filter and
    /// the candidates are few enough; `None`: scan instead.
    #[allow(clippy::too_many_arguments)]
    async fn query_by_index(
        &self,
        ctx: &Ctx,
        table: &str,
        q: &EntityQuery,
        filter: &Expr,
        expiry: &Option<Expiry>,
        examined: &Arc<AtomicU64>,
        rows: &mut Rows<'_>,
    ) -> Result<Option<QueryPage>> {
        let ready = self.store.ready_indexes(&ctx.account, table).await?;
        if ready.is_empty() {
            return Ok(None);
        }
        // `*` ready: every property's entries are there.
        let every = ready.iter().any(|r| r == tafel_store::ALL_PROPERTIES);
        let Some(index) = plan_index(filter, &|p| every || ready.iter().any(|r| r == p)) else {
            return Ok(None);
        };
        let properties: Vec<String> = index.ranges.keys().cloned().collect();
        let request = IndexScanRequest {
            ranges: index
                .ranges
                .into_iter()
                .map(|(p, rs)| (p, rs.into_iter().map(|r| (r.start, r.end)).collect()))
                .collect(),
            from: q.resume.as_ref().map(|(pk, rk)| EntityKey::new(pk, rk)),
            limit: q.page_limit(),
            filter: live_all(counting(filter.clone(), examined), expiry),
            max_candidates: MAX_INDEX_CANDIDATES,
            deadline: Some(Instant::now() + PAGE_BUDGET),
        };
        let Some(end) = self.store.index_scan_into(&ctx.account, table, request, rows).await? else {
            return Ok(None);
        };
        if let Some(e) = rows.failed.take() {
            return Err(e);
        }
        Ok(Some(QueryPage {
            next: end.next.map(|k| k.keys()),
            plan: QueryPlan::Index(properties),
            examined: examined.load(Ordering::Relaxed),
        }))
    }
}

/// The row filter of `expr`, counting the rows it is asked about.
fn counting(expr: Expr, examined: &Arc<AtomicU64>) -> RowFilter {
    let (expr, examined) = (Arc::new(expr), examined.clone());
    Arc::new(move |k: KeyRef<'_>, v: &[u8]| {
        // A load and a store, not `fetch_add`: a query's rows are filtered one
        // at a time, on whichever thread its task runs, and a locked add per row
        // cost a scan 4–6% (it waits for the row's prefetches ahead of it).
        examined.store(examined.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        eval_stored(&expr, k, v)
    })
}

/// `filter` that also refuses expired entities, when the table has a policy:
/// the one place a read decides what has expired (a point read asks
/// [`Expiry::expired`] itself).
fn live(filter: Option<RowFilter>, expiry: &Option<Expiry>) -> Option<RowFilter> {
    match (filter, expiry) {
        (f, None) => f,
        (Some(f), Some(e)) => Some(live_all(f, &Some(e.clone()))),
        (None, Some(e)) => {
            let e = e.clone();
            Some(Arc::new(move |_: KeyRef<'_>, v: &[u8]| !e.expired(v)))
        }
    }
}

/// [`live`] of a filter that is always there.
fn live_all(filter: RowFilter, expiry: &Option<Expiry>) -> RowFilter {
    match expiry {
        None => filter,
        Some(e) => {
            let e = e.clone();
            Arc::new(move |k: KeyRef<'_>, v: &[u8]| !e.expired(v) && filter(k, v))
        }
    }
}

/// Whether `range` holds one entity key at most (`KeyRange::point`).
fn is_point(range: &KeyRange) -> bool {
    range
        .end
        .as_deref()
        .is_some_and(|e| e.len() == range.start.len() + 1 && e.starts_with(&range.start) && e.last() == Some(&0))
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
        // With a TTL policy the counter includes expired entities not yet
        // swept: count the live ones instead.
        let expiry = self.expiry(&ctx.account, table).await?;
        if plan.residual.is_none() && ranges == all && expiry.is_none() {
            return Ok(self.store.count_entities(&ctx.account, table).await?);
        }
        let filter: Option<RowFilter> = plan.residual.map(|expr| {
            let expr = Arc::new(expr);
            Arc::new(move |k: KeyRef<'_>, v: &[u8]| eval_stored(&expr, k, v)) as RowFilter
        });
        let filter = live(filter, &expiry);
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
                Some(next) => ranges = KeyRange::resume(ranges, next.as_bytes()),
                None => break,
            }
        }
        Ok(counter.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_drops_ranges_before_the_token() {
        let a = KeyRange::partition("a");
        let c = KeyRange::partition("c");
        let from = EntityKey::new("b", "x");
        let out = KeyRange::resume(vec![a, c.clone()], from.as_bytes());
        assert_eq!(out, vec![c]);
        let mid = EntityKey::new("a", "m");
        let out = KeyRange::resume(vec![KeyRange::partition("a")], mid.as_bytes());
        assert_eq!(out[0].start, mid.as_bytes());
    }
}
