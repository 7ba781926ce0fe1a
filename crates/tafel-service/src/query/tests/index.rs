//! Secondary-index encoding and plans against the evaluator: the encoding sorts
//! as the evaluator compares, a comparison's ranges hold exactly its matches, and
//! a filter's plan never misses a matching entity.

use std::cmp::Ordering;

use proptest::prelude::*;

use super::prop::{entity, filter, op, value};
use super::{cmp, matches};
use crate::index::{comparison_ranges, encode, plan_index, ByteRange};
use crate::model::codec::ValueRef;
use crate::model::{DateTime, Entity, Guid, Value};
use crate::query::{CompareOp, Expr};

/// Values from the whole domain of each type, the corners included.
fn wide_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<String>().prop_map(Value::String),
        prop::sample::select(vec!["", "\0", "a\0", "a", "a\u{FFFF}", "a\u{1F600}", "\u{E000}"])
            .prop_map(|s| Value::String(s.into())),
        any::<i32>().prop_map(Value::Int32),
        prop::sample::select(vec![i32::MIN, -1, 0, 1, i32::MAX]).prop_map(Value::Int32),
        any::<i64>().prop_map(Value::Int64),
        prop::sample::select(vec![i64::MIN, -1, 0, i64::MAX]).prop_map(Value::Int64),
        any::<f64>().prop_map(Value::Double),
        prop::sample::select(vec![
            f64::NEG_INFINITY,
            -1.0,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NAN
        ])
        .prop_map(Value::Double),
        any::<bool>().prop_map(Value::Boolean),
        (DateTime::MIN.0..=DateTime::MIN.0 + (1 << 62)).prop_map(|t| Value::DateTime(DateTime(t))),
        any::<[u8; 16]>().prop_map(|b| Value::Guid(Guid(b))),
        prop::collection::vec(prop::sample::select(vec![0u8, 1, 0x7F, 0xFE, 0xFF]), 0..5).prop_map(Value::Binary),
    ]
}

fn entity_with(v: &Value) -> Entity {
    let mut e = Entity::new("p", "r");
    e.timestamp = Some(DateTime(DateTime::MIN.0));
    e.set("A", v.clone());
    e
}

/// An index key: the value's encoding, then an entity key's bytes (which may be
/// anything, 0xFF runs included).
fn index_key(v: &Value, rest: &[u8]) -> Vec<u8> {
    let mut k = encode(ValueRef::from(v));
    k.extend_from_slice(rest);
    k
}

fn in_ranges(ranges: &[ByteRange], key: &[u8]) -> bool {
    ranges.iter().any(|r| r.contains(key))
}

/// Whether an entity is a candidate of `plan`: it has one of the plan's
/// properties with an entry in that property's ranges.
fn candidate(plan: &crate::index::IndexPlan, e: &Entity) -> bool {
    e.properties
        .iter()
        .any(|p| plan.covers(&p.name, &encode(ValueRef::from(&p.value))))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn encodings_sort_as_the_evaluator_compares(a in wide_value(), b in wide_value()) {
        let (ea, eb) = (encode(ValueRef::from(&a)), encode(ValueRef::from(&b)));
        if a.edm_type() != b.edm_type() {
            prop_assert_ne!(ea[0], eb[0], "types never share a tag");
            return Ok(());
        }
        let e = entity_with(&a);
        let says = |op| matches(&cmp("A", op, b.clone()), &e);
        let evaluator = if says(CompareOp::Lt) {
            Some(Ordering::Less)
        } else if says(CompareOp::Gt) {
            Some(Ordering::Greater)
        } else if says(CompareOp::Eq) {
            Some(Ordering::Equal)
        } else {
            None // NaN: unordered
        };
        match evaluator {
            Some(o) => prop_assert_eq!(ea.cmp(&eb), o, "{:?} vs {:?}", a, b),
            None => prop_assert!(ea.len() == 1 && eb.len() == 1 || ea != eb),
        }
    }

    #[test]
    fn a_comparisons_ranges_hold_exactly_its_matches(
        v in wide_value(),
        literal in wide_value(),
        op in op(),
        rest in prop::collection::vec(prop::sample::select(vec![0u8, 1, 0x61, 0xFF]), 0..6),
    ) {
        let ranges = comparison_ranges(op, &literal);
        let found = in_ranges(&ranges, &index_key(&v, &rest));
        let holds = matches(&cmp("A", op, literal.clone()), &entity_with(&v));
        prop_assert_eq!(found, holds, "{:?} {:?} {:?}: ranges {:?}", v, op, literal, ranges);
    }

    /// The same on the small domain, where literals often equal the value.
    #[test]
    fn a_comparisons_ranges_hold_exactly_its_matches_near_equality(v in value(), literal in value(), op in op()) {
        let found = in_ranges(&comparison_ranges(op, &literal), &index_key(&v, b"\xFF\xFF"));
        let holds = matches(&cmp("A", op, literal.clone()), &entity_with(&v));
        prop_assert_eq!(found, holds, "{:?} {:?} {:?}", v, op, literal);
    }

    #[test]
    fn a_filters_index_plan_never_misses_a_match(
        f in filter(),
        entities in prop::collection::vec(entity(), 1..6),
        indexed in prop::sample::subsequence(vec!["A", "B", "C"], 0..=3),
    ) {
        let Some(plan) = plan_index(&f, &|p| indexed.contains(&p)) else {
            return Ok(());
        };
        prop_assert!(plan.ranges.keys().all(|p| indexed.contains(&p.as_str())));
        for e in &entities {
            if matches(&f, e) {
                prop_assert!(candidate(&plan, e), "{:?} matches {:?} but plan {:?} misses it", e, f, plan);
            }
        }
    }
}

#[test]
fn a_range_on_one_property_is_one_range() {
    let f = Expr::And(vec![
        cmp("A", CompareOp::Ge, Value::Int64(10)),
        cmp("A", CompareOp::Lt, Value::Int64(20)),
        cmp("B", CompareOp::Ne, Value::Int32(0)),
    ]);
    let plan = plan_index(&f, &|p| p != "C").expect("planned");
    assert_eq!(plan.ranges.len(), 1);
    let a = &plan.ranges["A"];
    assert_eq!(a.len(), 1);
    assert!(a[0].contains(&encode(ValueRef::Int64(10))));
    assert!(a[0].contains(&encode(ValueRef::Int64(19))));
    assert!(!a[0].contains(&encode(ValueRef::Int64(20))));
    assert!(!a[0].contains(&encode(ValueRef::Int32(15))), "type-strict");
}

#[test]
fn keys_not_and_unindexed_properties_plan_to_nothing() {
    let none = |f: Expr| assert_eq!(plan_index(&f, &|_| true), None, "{f:?}");
    none(cmp("PartitionKey", CompareOp::Eq, Value::String("p".into())));
    none(cmp("Timestamp", CompareOp::Gt, Value::DateTime(DateTime::MIN)));
    none(Expr::Not(Box::new(cmp("A", CompareOp::Eq, Value::Int32(1)))));
    none(Expr::Or(vec![
        cmp("A", CompareOp::Eq, Value::Int32(1)),
        cmp("RowKey", CompareOp::Eq, Value::String("r".into())),
    ]));
    assert_eq!(
        plan_index(&cmp("A", CompareOp::Eq, Value::Int32(1)), &|p| p == "B"),
        None
    );
}

#[test]
fn an_or_across_properties_unions_their_indexes() {
    let f = Expr::Or(vec![
        cmp("Email", CompareOp::Eq, Value::String("a@x".into())),
        cmp("Phone", CompareOp::Eq, Value::String("123".into())),
        cmp("Email", CompareOp::Eq, Value::String("b@x".into())),
    ]);
    let plan = plan_index(&f, &|_| true).expect("planned");
    assert_eq!(plan.ranges["Email"].len(), 2);
    assert_eq!(plan.ranges["Phone"].len(), 1);
}
