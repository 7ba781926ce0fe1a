//! Turns a filter into the key ranges a scan must visit (spec/query.md §3–§4).
//!
//! Each node is planned *within a scope*, a set of key ranges known to hold every
//! row that can still match. The result is a subset of the scope that holds every
//! row of the scope satisfying the node, and is *exact* when it holds no other
//! row. `and` narrows the scope child by child, so `PartitionKey eq 'p' and RowKey
//! ge 'a'` becomes one range inside partition `p`; `or` unions; an exactly planned
//! `not` is a complement. Anything else (other properties, `RowKey` outside a
//! single partition) keeps its scope and makes the plan inexact, in which case the
//! whole filter is the residual, which is always correct.
//!
//! A node's set never holds more than [`MAX_RANGES`] ranges: past that, neighbouring
//! ranges are merged into a superset (inexact, so the residual decides), which
//! keeps planning linear in the filter's size. Without it, `(PartitionKey eq …
//! ×950) and RowKey ne … ×2400` split every partition's range at every `ne` and
//! took minutes of CPU to plan.

use std::cmp::Ordering;
use std::ops::Bound;

use tafel_store::KeyRange;

use super::ast::{CompareOp, Expr};
use crate::model::Value;

/// How to run a query: scan these ranges (sorted, non-overlapping) and keep the
/// rows that satisfy `residual` (`None`: every row in the ranges matches).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub ranges: Vec<KeyRange>,
    pub residual: Option<Expr>,
}

pub fn plan_entities(filter: Option<&Expr>) -> Plan {
    let Some(filter) = filter else {
        return Plan {
            ranges: vec![KeyRange::all()],
            residual: None,
        };
    };
    let planned = plan(filter, Set::all());
    Plan {
        ranges: planned.set.0,
        residual: (!planned.exact).then(|| filter.clone()),
    }
}

/// The most ranges a plan keeps at any node; more are merged (see above).
/// Real filters name a few partitions (Azure allows 15 comparisons).
const MAX_RANGES: usize = 512;

/// Sorted, disjoint, non-empty ranges.
#[derive(Debug, Clone, PartialEq)]
struct Set(Vec<KeyRange>);

struct Planned {
    set: Set,
    exact: bool,
}

impl Planned {
    fn exact(set: Set) -> Self {
        Planned { set, exact: true }
    }
    /// No narrowing possible: the scope, with the filter as residual.
    fn scope(scope: Set) -> Self {
        Planned {
            set: scope,
            exact: false,
        }
    }
}

/// Ends compare with `None` (unbounded) greatest.
fn cmp_end(a: Option<&[u8]>, b: Option<&[u8]>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(a), Some(b)) => a.cmp(b),
    }
}

impl Set {
    fn all() -> Set {
        Set(vec![KeyRange::all()])
    }

    fn empty() -> Set {
        Set(Vec::new())
    }

    fn from_ranges(mut ranges: Vec<KeyRange>) -> Set {
        ranges.retain(|r| !r.is_empty());
        ranges.sort_by(|a, b| a.start.cmp(&b.start));
        let mut out: Vec<KeyRange> = Vec::with_capacity(ranges.len());
        for r in ranges {
            match out.last_mut() {
                // Overlapping or touching: extend the previous range.
                Some(last) if cmp_end(last.end.as_deref(), Some(&r.start)).is_ge() => {
                    if cmp_end(r.end.as_deref(), last.end.as_deref()).is_gt() {
                        last.end = r.end;
                    }
                }
                _ => out.push(r),
            }
        }
        Set(out)
    }

    /// A superset of at most [`MAX_RANGES`] ranges: each run of consecutive
    /// ranges merged into one from its first start to its last end.
    fn coarsened(self) -> Set {
        if self.0.len() <= MAX_RANGES {
            return self;
        }
        let per = self.0.len().div_ceil(MAX_RANGES);
        let mut out = Vec::with_capacity(MAX_RANGES);
        let mut ranges = self.0.into_iter().peekable();
        while let Some(first) = ranges.next() {
            let mut end = first.end;
            for _ in 1..per {
                match ranges.next() {
                    Some(r) => end = r.end,
                    None => break,
                }
            }
            out.push(KeyRange {
                start: first.start,
                end,
            });
        }
        Set(out)
    }

    fn intersect(&self, other: &Set) -> Set {
        let (a, b) = (&self.0, &other.0);
        let (mut i, mut j) = (0, 0);
        let mut out = Vec::new();
        while i < a.len() && j < b.len() {
            let start = a[i].start.clone().max(b[j].start.clone());
            let (ea, eb) = (a[i].end.as_deref(), b[j].end.as_deref());
            let end_order = cmp_end(ea, eb);
            let end = if end_order.is_le() { ea } else { eb };
            if cmp_end(end, Some(&start)).is_gt() {
                out.push(KeyRange {
                    start,
                    end: end.map(<[u8]>::to_vec),
                });
            }
            match end_order {
                Ordering::Less => i += 1,
                Ordering::Greater => j += 1,
                Ordering::Equal => {
                    i += 1;
                    j += 1;
                }
            }
        }
        Set(out)
    }

    fn complement(&self) -> Set {
        let mut out = Vec::new();
        let mut from = Vec::new();
        for r in &self.0 {
            if r.start > from {
                out.push(KeyRange {
                    start: from,
                    end: Some(r.start.clone()),
                });
            }
            match &r.end {
                Some(end) => from = end.clone(),
                None => return Set(out),
            }
        }
        out.push(KeyRange { start: from, end: None });
        Set(out)
    }
}

fn plan(expr: &Expr, scope: Set) -> Planned {
    let planned = plan_node(expr, scope);
    if planned.set.0.len() <= MAX_RANGES {
        return planned;
    }
    Planned {
        set: planned.set.coarsened(),
        exact: false,
    }
}

fn plan_node(expr: &Expr, scope: Set) -> Planned {
    match expr {
        Expr::Bool(true) => Planned::exact(scope),
        Expr::Bool(false) => Planned::exact(Set::empty()),
        // Keys are Strings, never Boolean `true`.
        Expr::Property(p) if is_key(p) => Planned::exact(Set::empty()),
        Expr::Property(_) => Planned::scope(scope),
        Expr::Not(inner) => {
            let planned = plan(inner, scope.clone());
            if planned.exact {
                Planned::exact(scope.intersect(&planned.set.complement()))
            } else {
                Planned::scope(scope)
            }
        }
        Expr::Or(items) => {
            let mut exact = true;
            let mut ranges = Vec::new();
            for item in items {
                let planned = plan(item, scope.clone());
                exact &= planned.exact;
                ranges.extend(planned.set.0);
                // Merged as they come, so a long `or` never sorts more than a few
                // times MAX_RANGES ranges at once.
                if ranges.len() > 4 * MAX_RANGES {
                    let merged = Set::from_ranges(ranges);
                    exact &= merged.0.len() <= MAX_RANGES;
                    ranges = merged.coarsened().0;
                }
            }
            Planned {
                set: Set::from_ranges(ranges),
                exact,
            }
        }
        Expr::And(items) => {
            // Children without RowKey first, so RowKey conditions see the
            // partitions the others selected. Order does not change the result
            // rows, only how much is narrowed.
            let mut ordered: Vec<&Expr> = items.iter().collect();
            ordered.sort_by_key(|e| mentions_row_key(e));
            let mut set = scope;
            let mut exact = true;
            for item in ordered {
                if set.0.is_empty() {
                    return Planned::exact(set);
                }
                let planned = plan(item, set);
                set = planned.set;
                exact &= planned.exact;
            }
            Planned { set, exact }
        }
        Expr::Compare { property, op, value } => match (property.as_str(), value) {
            // Key ranges use U+0000 as the PartitionKey/RowKey separator, which
            // stored keys never contain but a literal can (`%00`).
            ("PartitionKey" | "RowKey", Value::String(v)) if v.contains('\0') => Planned::scope(scope),
            ("PartitionKey", Value::String(pk)) => Planned::exact(scope.intersect(&partition_key_set(*op, pk))),
            ("RowKey", Value::String(rk)) => row_key_within(scope, *op, rk),
            // A key compared with a non-string literal never matches.
            ("PartitionKey" | "RowKey", _) => Planned::exact(Set::empty()),
            _ => Planned::scope(scope),
        },
    }
}

fn is_key(property: &str) -> bool {
    property == "PartitionKey" || property == "RowKey"
}

/// Whether `expr` has a RowKey condition anywhere (depth is bounded by the parser).
fn mentions_row_key(expr: &Expr) -> bool {
    match expr {
        Expr::Compare { property, .. } | Expr::Property(property) => property == "RowKey",
        Expr::Bool(_) => false,
        Expr::Not(inner) => mentions_row_key(inner),
        Expr::And(items) | Expr::Or(items) => items.iter().any(mentions_row_key),
    }
}

/// The keys whose PartitionKey satisfies `PartitionKey op pk`.
fn partition_key_set(op: CompareOp, pk: &str) -> Set {
    let range = |start, end| KeyRange { start, end };
    match op {
        CompareOp::Eq => Set(vec![KeyRange::partition(pk)]),
        CompareOp::Ne => Set(vec![KeyRange::partition(pk)]).complement(),
        CompareOp::Gt => Set::from_ranges(vec![range(KeyRange::pk_after(pk), None)]),
        CompareOp::Ge => Set::from_ranges(vec![range(KeyRange::pk_lower(pk), None)]),
        CompareOp::Lt => Set::from_ranges(vec![range(Vec::new(), Some(KeyRange::pk_lower(pk)))]),
        CompareOp::Le => Set::from_ranges(vec![range(Vec::new(), Some(KeyRange::pk_after(pk)))]),
    }
}

/// `RowKey op rk` narrows each scope range that lies within one partition; a
/// range spanning partitions stays whole and makes the plan inexact.
fn row_key_within(scope: Set, op: CompareOp, rk: &str) -> Planned {
    use Bound::{Excluded, Included, Unbounded};
    let mut exact = true;
    let mut out = Vec::with_capacity(scope.0.len());
    for range in scope.0 {
        let Some(pk) = range.single_partition() else {
            exact = false;
            out.push(range);
            continue;
        };
        let rows = |lower, upper| KeyRange::rows(&pk, lower, upper);
        let allowed = match op {
            CompareOp::Eq => vec![rows(Included(rk), Included(rk))],
            CompareOp::Ne => vec![rows(Unbounded, Excluded(rk)), rows(Excluded(rk), Unbounded)],
            CompareOp::Gt => vec![rows(Excluded(rk), Unbounded)],
            CompareOp::Ge => vec![rows(Included(rk), Unbounded)],
            CompareOp::Lt => vec![rows(Unbounded, Excluded(rk))],
            CompareOp::Le => vec![rows(Unbounded, Included(rk))],
        };
        out.extend(Set(vec![range]).intersect(&Set::from_ranges(allowed)).0);
    }
    Planned { set: Set(out), exact }
}
