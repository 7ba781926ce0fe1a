use super::{cmp, matches, s, stored};
use crate::model::{DateTime, Entity, Guid, Value};
use crate::query::{eval_stored, eval_table_name, CompareOp, Expr};

/// Whether `op` holds between the values at ladder positions `i` and `j` (a
/// ladder ascends), told apart from the evaluator's own mapping.
fn expected(op: CompareOp, i: usize, j: usize) -> bool {
    match op {
        CompareOp::Eq => i == j,
        CompareOp::Ne => i != j,
        CompareOp::Gt => i > j,
        CompareOp::Ge => i >= j,
        CompareOp::Lt => i < j,
        CompareOp::Le => i <= j,
    }
}

fn entity(props: &[(&str, Value)]) -> Entity {
    let mut e = Entity::new("pk", "rk");
    e.timestamp = DateTime::parse("2024-06-04T08:15:30Z");
    for (n, v) in props {
        e.set(*n, v.clone());
    }
    e
}

/// Per EDM type: ascending values (property side and literal side alike).
fn ladders() -> Vec<Vec<Value>> {
    let dt = |t: &str| DateTime::parse(t).map(Value::DateTime);
    vec![
        ["", "A", "a", "ab", "b", "é", "\u{1F600}", "\u{E000}", "\u{FFFD}"]
            .map(s)
            .to_vec(),
        vec![
            Value::Int32(i32::MIN),
            Value::Int32(-1),
            Value::Int32(0),
            Value::Int32(36),
        ],
        vec![
            Value::Int64(i64::MIN),
            Value::Int64(-1),
            Value::Int64(36),
            Value::Int64(1 << 40),
        ],
        vec![
            Value::Double(f64::NEG_INFINITY),
            Value::Double(-0.5),
            Value::Double(0.0),
            Value::Double(1e10),
        ],
        vec![Value::Boolean(false), Value::Boolean(true)],
        [
            dt("1601-01-01T00:00:00Z"),
            dt("2024-06-04T08:15:30.1234567Z"),
            dt("2024-06-04T08:15:30.1234568Z"),
            dt("9999-12-31T23:59:59.9999999Z"),
        ]
        .into_iter()
        .flatten()
        .collect(),
        [
            "00000000-0000-0000-0000-000000000000",
            "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
            "3f2504e0-4f89-11d3-9a0c-0305e82c3302",
            "ffffffff-ffff-ffff-ffff-ffffffffffff",
        ]
        .into_iter()
        .map(|g| Value::Guid(Guid::parse(g).unwrap_or_else(|| panic!("not a Guid: {g}"))))
        .collect(),
        vec![
            Value::Binary(vec![]),
            Value::Binary(vec![0]),
            Value::Binary(vec![0, 255]),
            Value::Binary(vec![1]),
        ],
    ]
}

#[test]
fn every_operator_on_every_type() {
    for ladder in ladders() {
        for (i, prop) in ladder.iter().enumerate() {
            let e = entity(&[("P", prop.clone())]);
            for (j, lit) in ladder.iter().enumerate() {
                for op in CompareOp::ALL {
                    let f = cmp("P", op, lit.clone());
                    assert_eq!(matches(&f, &e), expected(op, i, j), "{f:?} vs {prop:?}");
                }
            }
        }
    }
}

#[test]
fn types_never_cross_match() {
    let ladders = ladders();
    for (a, la) in ladders.iter().enumerate() {
        for (b, lb) in ladders.iter().enumerate() {
            if a == b {
                continue;
            }
            let e = entity(&[("P", la[1].clone())]);
            for op in CompareOp::ALL {
                let f = cmp("P", op, lb[1].clone());
                assert!(!matches(&f, &e), "{f:?} on {:?}", la[1]);
                assert!(matches(&Expr::Not(Box::new(f)), &e));
            }
        }
    }
    // The classic trap: Int32 36 is not 36L, nor 36.0.
    let e = entity(&[("Age", Value::Int32(36))]);
    assert!(matches(&cmp("Age", CompareOp::Eq, Value::Int32(36)), &e));
    assert!(!matches(&cmp("Age", CompareOp::Eq, Value::Int64(36)), &e));
    assert!(!matches(&cmp("Age", CompareOp::Eq, Value::Double(36.0)), &e));
    assert!(!matches(&cmp("Age", CompareOp::Eq, s("36")), &e));
}

#[test]
fn missing_property_fails_every_comparison_even_ne() {
    let e = entity(&[("Other", Value::Int32(1))]);
    for op in CompareOp::ALL {
        let f = cmp("Missing", op, Value::Int32(1));
        assert!(!matches(&f, &e));
        assert!(matches(&Expr::Not(Box::new(f)), &e));
    }
}

#[test]
fn nan_is_unordered_but_not_equal() {
    let nan = entity(&[("D", Value::Double(f64::NAN))]);
    let one = entity(&[("D", Value::Double(1.0))]);
    for op in CompareOp::ALL {
        let want = op == CompareOp::Ne;
        assert_eq!(matches(&cmp("D", op, Value::Double(1.0)), &nan), want);
        assert_eq!(matches(&cmp("D", op, Value::Double(f64::NAN)), &nan), want);
        assert_eq!(matches(&cmp("D", op, Value::Double(f64::NAN)), &one), want);
    }
    let zero = entity(&[("D", Value::Double(-0.0))]);
    assert!(matches(&cmp("D", CompareOp::Eq, Value::Double(0.0)), &zero));
}

#[test]
fn strings_are_ordinal_utf16_and_case_sensitive() {
    let e = entity(&[("S", s("\u{1F600}"))]);
    // UTF-16: U+1F600 is D83D DE00, below U+FFFD; UTF-8 order says the opposite.
    assert!(matches(&cmp("S", CompareOp::Lt, s("\u{FFFD}")), &e));
    assert!(matches(&cmp("S", CompareOp::Gt, s("\u{D7FF}")), &e));
    let e = entity(&[("S", s("abc"))]);
    assert!(matches(&cmp("S", CompareOp::Gt, s("ABC")), &e));
    assert!(!matches(&cmp("S", CompareOp::Eq, s("ABC")), &e));
}

#[test]
fn system_properties() {
    let mut e = Entity::new("uk", "0009");
    e.timestamp = DateTime::parse("2024-06-04T08:15:30Z");
    let ts = |t: &str| DateTime::parse(t).map(Value::DateTime).unwrap_or(Value::Int32(0));
    assert!(matches(&cmp("PartitionKey", CompareOp::Eq, s("uk")), &e));
    assert!(matches(&cmp("PartitionKey", CompareOp::Lt, s("ul")), &e));
    assert!(matches(&cmp("PartitionKey", CompareOp::Gt, s("u")), &e));
    assert!(!matches(&cmp("PartitionKey", CompareOp::Gt, s("ukk")), &e));
    assert!(matches(&cmp("RowKey", CompareOp::Ge, s("0009")), &e));
    assert!(matches(&cmp("RowKey", CompareOp::Ne, s("0010")), &e));
    assert!(!matches(&cmp("RowKey", CompareOp::Eq, Value::Int32(9)), &e));
    assert!(!matches(&cmp("RowKey", CompareOp::Ne, Value::Int32(9)), &e));
    let before = ts("2024-06-04T08:15:29.9999999Z");
    assert!(matches(&cmp("Timestamp", CompareOp::Gt, before.clone()), &e));
    assert!(matches(
        &cmp("Timestamp", CompareOp::Eq, ts("2024-06-04T08:15:30Z")),
        &e
    ));
    assert!(!matches(
        &cmp("Timestamp", CompareOp::Eq, s("2024-06-04T08:15:30Z")),
        &e
    ));
    e.timestamp = None;
    assert!(!matches(&cmp("Timestamp", CompareOp::Gt, before), &e));
}

#[test]
fn bare_properties_and_logic() {
    let e = entity(&[
        ("T", Value::Boolean(true)),
        ("F", Value::Boolean(false)),
        ("I", Value::Int32(1)),
    ]);
    let p = |n: &str| Expr::Property(n.into());
    let not = |x: Expr| Expr::Not(Box::new(x));
    assert!(matches(&p("T"), &e));
    assert!(!matches(&p("F"), &e));
    assert!(!matches(&p("I"), &e));
    assert!(!matches(&p("Missing"), &e));
    assert!(!matches(&p("PartitionKey"), &e));
    assert!(matches(&not(p("F")), &e));
    assert!(matches(&not(p("Missing")), &e));
    assert!(matches(&Expr::And(vec![p("T"), not(p("F"))]), &e));
    assert!(!matches(&Expr::And(vec![p("T"), p("F")]), &e));
    assert!(matches(&Expr::Or(vec![p("F"), p("T")]), &e));
    assert!(!matches(&Expr::Or(vec![p("F"), Expr::Bool(false)]), &e));
    assert!(matches(&Expr::Bool(true), &e));
    assert!(matches(&Expr::And(vec![]), &e));
    assert!(!matches(&Expr::Or(vec![]), &e));
}

#[test]
fn repeated_lookups_of_one_property() {
    // Exercises the one-entry lookup memo with several names interleaved.
    let e = entity(&[("A", Value::Int32(5)), ("B", Value::Int32(6))]);
    let chain = |n: &str, hit: i32| {
        Expr::Or(
            (0..10)
                .map(|i| cmp(n, CompareOp::Eq, Value::Int32(if i == 9 { hit } else { 100 + i })))
                .collect(),
        )
    };
    assert!(matches(
        &Expr::And(vec![chain("A", 5), chain("B", 6), chain("A", 5)]),
        &e
    ));
    assert!(!matches(&Expr::And(vec![chain("A", 5), chain("B", 5)]), &e));
}

#[test]
fn corrupt_stored_bytes_do_not_panic() {
    let e = entity(&[("A", Value::Int32(5)), ("S", s("x"))]);
    let (key, bytes) = stored(&e);
    let f = Expr::Or(vec![
        cmp("A", CompareOp::Eq, Value::Int32(5)),
        cmp("Timestamp", CompareOp::Gt, Value::DateTime(DateTime::MIN)),
    ]);
    assert!(eval_stored(&f, key.view(), &bytes));
    for cut in 0..bytes.len() {
        let _ = eval_stored(&f, key.view(), &bytes[..cut]);
    }
    assert!(!eval_stored(&f, key.view(), &[]));
    assert!(eval_stored(
        &cmp("PartitionKey", CompareOp::Eq, s("pk")),
        key.view(),
        &[]
    ));
}

#[test]
fn table_names() {
    let f = Expr::And(vec![
        cmp("TableName", CompareOp::Ge, s("cust")),
        cmp("TableName", CompareOp::Lt, s("cusu")),
    ]);
    assert!(eval_table_name(&f, "customers"));
    assert!(eval_table_name(&f, "cust"));
    assert!(!eval_table_name(&f, "Customers"));
    assert!(!eval_table_name(&f, "cusu"));
    assert!(eval_table_name(&cmp("TableName", CompareOp::Eq, s("T1")), "T1"));
    assert!(!eval_table_name(&cmp("TableName", CompareOp::Eq, Value::Int32(1)), "1"));
    assert!(!eval_table_name(&cmp("Other", CompareOp::Ne, s("x")), "t"));
    assert!(!eval_table_name(&cmp("PartitionKey", CompareOp::Ne, s("x")), "t"));
    assert!(!eval_table_name(&Expr::Property("TableName".into()), "t"));
    assert!(eval_table_name(
        &Expr::Not(Box::new(cmp("Other", CompareOp::Eq, s("x")))),
        "t"
    ));
}
