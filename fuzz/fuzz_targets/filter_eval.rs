//! `$filter` evaluation and planning: for every filter that parses, evaluating a
//! decoded entity and its stored bytes must agree, and the plan (ranges plus
//! residual) must select an entity exactly when the filter does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tafel_protocol::filter::parse_filter;
use tafel_service::model::{codec, DateTime, Entity, Guid, Value};
use tafel_service::query::{eval_entity, eval_stored, eval_table_name, plan_entities};
use tafel_store::EntityKey;

fn entities() -> Vec<Entity> {
    let mut uk = Entity::new("uk", "0009");
    uk.timestamp = DateTime::parse("2024-06-04T08:15:30.1234567Z");
    uk.set("Name", Value::String("O'Brien".into()));
    uk.set("Age", Value::Int32(36));
    uk.set("Balance", Value::Int64(9_000_000_001));
    uk.set("Ratio", Value::Double(0.25));
    uk.set("Nan", Value::Double(f64::NAN));
    uk.set("Active", Value::Boolean(true));
    uk.set("Joined", Value::DateTime(DateTime::MIN));
    if let Some(g) = Guid::parse("3f2504e0-4f89-11d3-9a0c-0305e82c3301") {
        uk.set("Id", Value::Guid(g));
    }
    uk.set("Blob", Value::Binary(vec![0, 1, 2, 3]));
    let mut odd = Entity::new("a\u{1F600}", "\u{E000}b");
    odd.timestamp = Some(DateTime::MAX);
    odd.set("Name", Value::String("\u{FFFD}".into()));
    odd.set("Active", Value::Boolean(false));
    let mut empty = Entity::new("", "");
    empty.timestamp = Some(DateTime::MIN);
    // Next to `'a\0b'`-like literals in key order (U+0000 is the key separator).
    let mut a = Entity::new("a", "b");
    a.timestamp = Some(DateTime::MIN);
    vec![uk, odd, empty, a]
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(expr) = parse_filter(text) else {
        return;
    };
    let plan = plan_entities(Some(&expr));
    for w in plan.ranges.windows(2) {
        assert!(w[0].end.as_deref().is_some_and(|e| e <= w[1].start.as_slice()));
    }
    for e in entities() {
        let key = EntityKey::new(&e.partition_key, &e.row_key);
        let bytes = codec::encode(e.timestamp.unwrap_or(DateTime::MIN), &e.properties);
        let decoded = eval_entity(&expr, &e);
        assert_eq!(eval_stored(&expr, key.view(), &bytes), decoded, "{expr:?}");
        let planned = plan.ranges.iter().any(|r| r.contains(key.as_bytes()))
            && plan.residual.as_ref().is_none_or(|r| eval_stored(r, key.view(), &bytes));
        assert_eq!(planned, decoded, "{expr:?} {plan:?}");
    }
    let _ = eval_table_name(&expr, "customers");
});
