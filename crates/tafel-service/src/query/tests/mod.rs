//! Tests of evaluation and planning; `prop` checks the planner against a full scan,
//! `index` the secondary-index encoding and plans against the evaluator.

mod eval;
mod index;
mod plan;
mod prop;

use tafel_store::EntityKey;

use super::{eval_entity, eval_stored, CompareOp, Expr};
use crate::model::{codec, Entity, Value};

fn cmp(property: &str, op: CompareOp, value: Value) -> Expr {
    Expr::Compare {
        property: property.into(),
        op,
        value,
    }
}

fn s(v: &str) -> Value {
    Value::String(v.into())
}

/// Stored form of an entity, as a scan sees it.
fn stored(e: &Entity) -> (EntityKey, Vec<u8>) {
    (
        EntityKey::new(&e.partition_key, &e.row_key),
        codec::encode(e.timestamp.expect("every test entity has a Timestamp"), &e.properties),
    )
}

/// Evaluates on the decoded and the stored form and insists they agree.
fn matches(expr: &Expr, e: &Entity) -> bool {
    let decoded = eval_entity(expr, e);
    if e.timestamp.is_some() {
        let (key, bytes) = stored(e);
        assert_eq!(eval_stored(expr, key.view(), &bytes), decoded, "{expr:?} on {e:?}");
    }
    decoded
}
