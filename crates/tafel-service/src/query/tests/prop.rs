//! Planned scan == full scan, on random entities and random filters.

use proptest::prelude::*;
use tafel_store::EntityKey;

use super::plan::assert_well_formed;
use super::{matches, stored};
use crate::model::{DateTime, Entity, Guid, Value};
use crate::query::{eval_stored, plan_entities, CompareOp, Expr};

/// Keys chosen so that UTF-8 and UTF-16 orders disagree and prefixes abound.
const KEYS: [&str; 12] = [
    "",
    "a",
    "ab",
    "abc",
    "abd",
    "b",
    "é",
    "\u{E000}",
    "\u{FFFD}",
    "\u{1F600}",
    "a\u{1F600}",
    "a\u{FFFF}",
];

const NAMES: [&str; 3] = ["A", "B", "C"];

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(&KEYS[..]).prop_map(str::to_owned)
}

/// Literals may also hold U+0000, which stored keys never do.
fn literal_key() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => key(),
        1 => prop::sample::select(vec!["a\0", "a\0b", "\0", "ab\0\u{1F600}"]).prop_map(str::to_owned),
    ]
}

fn timestamp() -> impl Strategy<Value = DateTime> {
    (0i64..4).prop_map(|i| DateTime(DateTime::MIN.0 + i * 10_000_000))
}

/// Values from a small domain so that comparisons often hit equality.
pub(super) fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        key().prop_map(Value::String),
        (-2i32..3).prop_map(Value::Int32),
        (-2i64..3).prop_map(Value::Int64),
        prop::sample::select(vec![-1.0, 0.0, 1.5, f64::NAN]).prop_map(Value::Double),
        any::<bool>().prop_map(Value::Boolean),
        timestamp().prop_map(Value::DateTime),
        (0u8..3).prop_map(|b| Value::Guid(Guid([b; 16]))),
        prop::collection::vec(0u8..3, 0..3).prop_map(Value::Binary),
    ]
}

pub(super) fn entity() -> impl Strategy<Value = Entity> {
    (
        key(),
        key(),
        timestamp(),
        prop::collection::vec((prop::sample::select(&NAMES[..]), value()), 0..4),
    )
        .prop_map(|(pk, rk, ts, props)| {
            let mut e = Entity::new(pk, rk);
            e.timestamp = Some(ts);
            for (n, v) in props {
                e.set(n, v);
            }
            e
        })
}

pub(super) fn op() -> impl Strategy<Value = CompareOp> {
    prop::sample::select(CompareOp::ALL.to_vec())
}

pub(super) fn filter() -> impl Strategy<Value = Expr> {
    let compare = |property: &'static str, value: BoxedStrategy<Value>| {
        (op(), value).prop_map(move |(op, value)| Expr::Compare {
            property: property.into(),
            op,
            value,
        })
    };
    let string = || literal_key().prop_map(Value::String).boxed();
    let leaf = prop_oneof![
        4 => compare("PartitionKey", string()),
        4 => compare("RowKey", string()),
        1 => compare("PartitionKey", value().boxed()),
        1 => compare("RowKey", value().boxed()),
        1 => compare("Timestamp", timestamp().prop_map(Value::DateTime).boxed()),
        2 => (prop::sample::select(&NAMES[..]), op(), value()).prop_map(|(n, op, value)| {
            Expr::Compare { property: n.into(), op, value }
        }),
        1 => prop::sample::select(vec!["A", "PartitionKey", "RowKey"])
            .prop_map(|n| Expr::Property(n.into())),
        1 => any::<bool>().prop_map(Expr::Bool),
    ];
    // Key conditions in the shapes the planner turns into exact ranges.
    let rows_of_partition = (
        compare("PartitionKey", string()),
        prop::collection::vec(compare("RowKey", string()), 1..3),
    )
        .prop_map(|(pk, rks)| Expr::And(std::iter::once(pk).chain(rks).collect()));
    let leaf = prop_oneof![3 => leaf, 2 => rows_of_partition];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..4).prop_map(Expr::And),
            prop::collection::vec(inner.clone(), 1..4).prop_map(Expr::Or),
            inner.prop_map(|e| Expr::Not(Box::new(e))),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn planned_scan_equals_full_scan(
        entities in prop::collection::vec(entity(), 0..48),
        f in filter(),
    ) {
        let mut rows: Vec<(EntityKey, Vec<u8>, Entity)> = entities
            .into_iter()
            .map(|e| {
                let (k, b) = stored(&e);
                (k, b, e)
            })
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        rows.dedup_by(|a, b| a.0 == b.0);

        let full: Vec<&EntityKey> =
            rows.iter().filter(|(_, _, e)| matches(&f, e)).map(|r| &r.0).collect();

        let plan = plan_entities(Some(&f));
        assert_well_formed(&plan.ranges);
        // Visit range by range, as a store does; rows come out in key order.
        let mut planned: Vec<&EntityKey> = Vec::new();
        for range in &plan.ranges {
            for (k, b, _) in &rows {
                if range.contains(k.as_bytes())
                    && plan.residual.as_ref().is_none_or(|r| eval_stored(r, k.view(), b))
                {
                    planned.push(k);
                }
            }
        }
        prop_assert_eq!(planned, full, "filter {:?} plan {:?}", f, plan);
    }
}
