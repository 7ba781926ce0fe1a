//! Which secondary-index ranges hold every entity a filter can match.
//!
//! The answer is a *superset*: for each named property, ranges of its index
//! whose entries include every matching entity (an entity can match without a
//! property only under `not` or a bare `true`, which plan to nothing). The query
//! still evaluates the whole filter on each candidate, so a plan need not be exact
//! — only never miss a row. `and` takes the most selective child (and intersects
//! children on one property: `A ge 1 and A lt 9` is one range); `or` needs every
//! child planned and unions them, across properties too.

use std::collections::BTreeMap;

use super::encode::{comparison_ranges, intersect, union, ByteRange};
use crate::model::Value;
use crate::query::{CompareOp, Expr};

/// Ranges per indexed property; an entity is a candidate when it has one of the
/// properties with an entry in that property's ranges.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexPlan {
    pub ranges: BTreeMap<String, Vec<ByteRange>>,
}

impl IndexPlan {
    fn single(property: &str, ranges: Vec<ByteRange>) -> IndexPlan {
        IndexPlan {
            ranges: BTreeMap::from([(property.to_owned(), ranges)]),
        }
    }

    /// The ranges in all: a rough cost, fewer and narrower being better.
    fn weight(&self) -> usize {
        self.ranges.values().map(Vec::len).sum()
    }

    fn is_point(&self) -> bool {
        self.ranges.len() == 1 && self.ranges.values().all(|r| r.len() == 1)
    }

    /// Whether an entity with value `encoded` for `property` is a candidate.
    pub fn covers(&self, property: &str, encoded: &[u8]) -> bool {
        self.ranges
            .get(property)
            .is_some_and(|rs| rs.iter().any(|r| r.contains(encoded)))
    }
}

/// The index plan for `filter`, given which properties have a ready index;
/// `None` when no index can narrow it (the key planner or a scan then serves it).
/// `PartitionKey`, `RowKey` and `Timestamp` are the key planner's, never indexed.
pub fn plan_index(filter: &Expr, indexed: &dyn Fn(&str) -> bool) -> Option<IndexPlan> {
    match filter {
        Expr::Compare { property, op, value } => {
            if is_system(property) || !indexed(property) {
                return None;
            }
            Some(IndexPlan::single(property, comparison_ranges(*op, value)))
        }
        Expr::Property(name) if !is_system(name) && indexed(name) => Some(IndexPlan::single(
            name,
            comparison_ranges(CompareOp::Eq, &Value::Boolean(true)),
        )),
        Expr::And(items) => plan_and(items, indexed),
        Expr::Or(items) => {
            let mut merged: BTreeMap<String, Vec<ByteRange>> = BTreeMap::new();
            for item in items {
                for (property, ranges) in plan_index(item, indexed)?.ranges {
                    merged.entry(property).or_default().extend(ranges);
                }
            }
            Some(IndexPlan {
                ranges: merged.into_iter().map(|(p, r)| (p, union(r))).collect(),
            })
        }
        // `not` and bare literals hold for entities without the property, which
        // no index lists.
        Expr::Not(_) | Expr::Bool(_) | Expr::Property(_) => None,
    }
}

fn is_system(property: &str) -> bool {
    matches!(property, "PartitionKey" | "RowKey" | "Timestamp")
}

/// A conjunction holds only where each child does, so any one child's plan is a
/// superset; children on a single property intersect into one tighter plan.
fn plan_and(items: &[Expr], indexed: &dyn Fn(&str) -> bool) -> Option<IndexPlan> {
    let plans: Vec<IndexPlan> = items.iter().filter_map(|i| plan_index(i, indexed)).collect();
    let mut narrowed: BTreeMap<&str, Vec<ByteRange>> = BTreeMap::new();
    for plan in plans.iter().filter(|p| p.ranges.len() == 1) {
        for (property, ranges) in &plan.ranges {
            let ranges = match narrowed.get(property.as_str()) {
                Some(before) => intersect(before, ranges),
                None => ranges.clone(),
            };
            narrowed.insert(property.as_str(), ranges);
        }
    }
    let candidates = narrowed
        .into_iter()
        .map(|(p, r)| IndexPlan::single(p, r))
        .chain(plans.iter().filter(|p| p.ranges.len() > 1).cloned());
    // Prefer a single range (an `eq` or a bounded range), then the fewest ranges.
    candidates.min_by_key(|p| (!p.is_point(), p.weight()))
}
