use tafel_store::{EntityKey, KeyRange};

use super::{cmp, s};
use crate::model::Value;
use crate::query::{plan_entities, CompareOp, Expr, Plan};

fn pk(op: CompareOp, v: &str) -> Expr {
    cmp("PartitionKey", op, s(v))
}

fn rk(op: CompareOp, v: &str) -> Expr {
    cmp("RowKey", op, s(v))
}

fn plan(e: &Expr) -> Plan {
    let p = plan_entities(Some(e));
    assert_well_formed(&p.ranges);
    p
}

pub(super) fn assert_well_formed(ranges: &[KeyRange]) {
    for r in ranges {
        assert!(!r.is_empty(), "{ranges:?}");
    }
    for w in ranges.windows(2) {
        let end = w[0].end.as_deref();
        assert!(end.is_some_and(|e| e < w[1].start.as_slice()), "{ranges:?}");
    }
}

fn exact(e: &Expr, ranges: Vec<KeyRange>) {
    assert_eq!(plan(e), Plan { ranges, residual: None }, "{e:?}");
}

#[test]
fn no_filter_scans_everything() {
    assert_eq!(
        plan_entities(None),
        Plan {
            ranges: vec![KeyRange::all()],
            residual: None
        }
    );
}

#[test]
fn partition_and_point_lookups() {
    exact(&pk(CompareOp::Eq, "a"), vec![KeyRange::partition("a")]);
    exact(
        &Expr::And(vec![pk(CompareOp::Eq, "a"), rk(CompareOp::Eq, "r")]),
        vec![KeyRange::point("a", "r")],
    );
    // Order inside `and` does not matter.
    exact(
        &Expr::And(vec![rk(CompareOp::Eq, "r"), pk(CompareOp::Eq, "a")]),
        vec![KeyRange::point("a", "r")],
    );
}

#[test]
fn partition_key_ranges() {
    let range = |start, end| KeyRange { start, end };
    exact(&pk(CompareOp::Gt, "m"), vec![range(KeyRange::pk_after("m"), None)]);
    exact(&pk(CompareOp::Ge, "m"), vec![range(KeyRange::pk_lower("m"), None)]);
    exact(
        &pk(CompareOp::Lt, "m"),
        vec![range(vec![], Some(KeyRange::pk_lower("m")))],
    );
    exact(
        &pk(CompareOp::Le, "m"),
        vec![range(vec![], Some(KeyRange::pk_after("m")))],
    );
    exact(
        &Expr::And(vec![pk(CompareOp::Ge, "abc"), pk(CompareOp::Lt, "abd")]),
        vec![range(KeyRange::pk_lower("abc"), Some(KeyRange::pk_lower("abd")))],
    );
    exact(
        &pk(CompareOp::Ne, "m"),
        vec![
            range(vec![], Some(KeyRange::pk_lower("m"))),
            range(KeyRange::pk_after("m"), None),
        ],
    );
    exact(
        &Expr::Not(Box::new(pk(CompareOp::Eq, "m"))),
        vec![
            range(vec![], Some(KeyRange::pk_lower("m"))),
            range(KeyRange::pk_after("m"), None),
        ],
    );
}

#[test]
fn row_key_prefix_idiom_in_a_partition() {
    use std::ops::Bound::{Excluded, Included};
    exact(
        &Expr::And(vec![
            pk(CompareOp::Eq, "p"),
            rk(CompareOp::Ge, "abc"),
            rk(CompareOp::Lt, "abd"),
        ]),
        vec![KeyRange::rows("p", Included("abc"), Excluded("abd"))],
    );
    // Nested `or` of row keys inside one partition.
    exact(
        &Expr::And(vec![
            Expr::Or(vec![rk(CompareOp::Eq, "x"), rk(CompareOp::Eq, "y")]),
            pk(CompareOp::Eq, "p"),
        ]),
        vec![KeyRange::point("p", "x"), KeyRange::point("p", "y")],
    );
}

#[test]
fn or_of_point_lookups_gives_sorted_merged_ranges() {
    let point = |p: &str, r: &str| Expr::And(vec![pk(CompareOp::Eq, p), rk(CompareOp::Eq, r)]);
    exact(
        &Expr::Or(vec![point("b", "2"), point("a", "1"), point("b", "2"), point("a", "0")]),
        vec![
            KeyRange::point("a", "0"),
            KeyRange::point("a", "1"),
            KeyRange::point("b", "2"),
        ],
    );
    // A whole partition swallows its points.
    exact(
        &Expr::Or(vec![point("a", "1"), pk(CompareOp::Eq, "a"), point("c", "1")]),
        vec![KeyRange::partition("a"), KeyRange::point("c", "1")],
    );
    let many = Expr::Or((0..300).map(|i| point("p", &format!("r{i:03}"))).collect());
    let p = plan(&many);
    assert_eq!(p.ranges.len(), 300);
    assert_eq!(p.residual, None);
}

#[test]
fn contradictions_and_type_mismatches_scan_nothing() {
    exact(&Expr::And(vec![pk(CompareOp::Eq, "a"), pk(CompareOp::Eq, "b")]), vec![]);
    exact(&cmp("PartitionKey", CompareOp::Eq, Value::Int32(1)), vec![]);
    exact(&cmp("RowKey", CompareOp::Ne, Value::Int32(1)), vec![]);
    exact(
        &Expr::And(vec![
            pk(CompareOp::Eq, "a"),
            rk(CompareOp::Gt, "b"),
            rk(CompareOp::Lt, "a"),
        ]),
        vec![],
    );
    exact(&Expr::Bool(false), vec![]);
    exact(&Expr::Property("PartitionKey".into()), vec![]);
}

#[test]
fn unusable_conditions_keep_the_filter_as_residual() {
    let age = cmp("Age", CompareOp::Gt, Value::Int32(5));
    let p = plan(&age);
    assert_eq!(p.ranges, vec![KeyRange::all()]);
    assert_eq!(p.residual.as_ref(), Some(&age));

    let f = Expr::And(vec![pk(CompareOp::Eq, "a"), age.clone()]);
    let p = plan(&f);
    assert_eq!(p.ranges, vec![KeyRange::partition("a")]);
    assert_eq!(p.residual.as_ref(), Some(&f));

    // RowKey without a single partition cannot be a range.
    let f = rk(CompareOp::Eq, "r");
    assert_eq!(plan(&f).ranges, vec![KeyRange::all()]);
    assert!(plan(&f).residual.is_some());
    let f = Expr::And(vec![pk(CompareOp::Ge, "a"), rk(CompareOp::Eq, "r")]);
    assert_eq!(
        plan(&f).ranges,
        vec![KeyRange {
            start: KeyRange::pk_lower("a"),
            end: None
        }]
    );
    assert!(plan(&f).residual.is_some());

    // `or` with an unusable branch scans everything.
    let f = Expr::Or(vec![pk(CompareOp::Eq, "a"), age.clone()]);
    assert_eq!(plan(&f).ranges, vec![KeyRange::all()]);
    assert!(plan(&f).residual.is_some());

    // `not` of an inexact plan cannot be complemented.
    let f = Expr::Not(Box::new(Expr::And(vec![pk(CompareOp::Eq, "a"), age])));
    assert_eq!(plan(&f).ranges, vec![KeyRange::all()]);
    assert!(plan(&f).residual.is_some());
}

#[test]
fn ranges_select_the_right_keys() {
    let f = Expr::Or(vec![
        Expr::And(vec![pk(CompareOp::Eq, "a"), rk(CompareOp::Gt, "m")]),
        pk(CompareOp::Eq, "a\u{1F600}"),
    ]);
    let p = plan(&f);
    let inside = |pk: &str, rk: &str| {
        let k = EntityKey::new(pk, rk);
        p.ranges.iter().any(|r| r.contains(k.as_bytes()))
    };
    assert!(inside("a", "n"));
    assert!(inside("a", "m\u{1}"));
    assert!(!inside("a", "m"));
    assert!(!inside("a", "l"));
    assert!(inside("a\u{1F600}", ""));
    assert!(!inside("a\u{E000}", "z"));
    assert!(!inside("ab", "z"));
}

#[test]
fn key_literals_with_nul_are_not_ranges() {
    // U+0000 separates the keys in the encoding: `'a\0b'` must not select the
    // entity (PartitionKey `a`, RowKey `b`), so such literals stay in the residual.
    for f in [
        pk(CompareOp::Eq, "a\0b"),
        pk(CompareOp::Gt, "a\0b"),
        Expr::And(vec![pk(CompareOp::Eq, "a"), rk(CompareOp::Lt, "b\0")]),
    ] {
        assert_eq!(plan(&f).residual.as_ref(), Some(&f));
    }
}

#[test]
fn a_filter_splitting_many_partitions_plans_within_the_range_cap() {
    // (PartitionKey eq 'k0' or … ×950) and RowKey ne 'r0' and … ×2400: planning used to
    // split every partition's range at every `ne` (minutes of CPU).
    let partitions = Expr::Or((0..950).map(|i| pk(CompareOp::Eq, &format!("k{i}"))).collect());
    let mut items = vec![partitions];
    items.extend((0..2400).map(|i| rk(CompareOp::Ne, &format!("r{i}"))));
    let filter = Expr::And(items);
    let p = plan(&filter);
    assert!(p.ranges.len() <= 512, "{} ranges", p.ranges.len());
    assert_eq!(p.residual.as_ref(), Some(&filter), "merged ranges are not exact");
    // Every row the filter can match is still inside the ranges.
    for i in (0..950).step_by(7) {
        let key = EntityKey::new(&format!("k{i}"), "zz");
        assert!(
            p.ranges.iter().any(|r| r.contains(key.as_bytes())),
            "k{i} is outside the plan"
        );
    }
}

#[test]
fn pinned_keys_are_the_first_eq_of_each_key_in_a_conjunction_only() {
    use crate::query::{pinned_keys, Pinned};
    let both = Expr::And(vec![
        pk(CompareOp::Eq, "p"),
        Expr::And(vec![rk(CompareOp::Eq, "r")]),
        pk(CompareOp::Eq, "q"),
    ]);
    assert_eq!(
        pinned_keys(&both),
        Pinned {
            partition: Some("p"),
            row: Some("r")
        }
    );
    // An `or`, a `not`, another comparison or a non-string literal pins nothing.
    let loose = Expr::Or(vec![pk(CompareOp::Eq, "p"), rk(CompareOp::Eq, "r")]);
    assert_eq!(pinned_keys(&loose), Pinned::default());
    assert_eq!(
        pinned_keys(&Expr::Not(Box::new(pk(CompareOp::Eq, "p")))),
        Pinned::default()
    );
    assert_eq!(pinned_keys(&pk(CompareOp::Ge, "p")), Pinned::default());
    assert_eq!(
        pinned_keys(&cmp("PartitionKey", CompareOp::Eq, Value::Int32(1))),
        Pinned::default()
    );
    assert_eq!(
        pinned_keys(&rk(CompareOp::Eq, "r")),
        Pinned {
            partition: None,
            row: Some("r")
        }
    );
}
