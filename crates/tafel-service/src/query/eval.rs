//! Filter evaluation with Azure semantics (spec/query.md §4). Entities are
//! schema-less, so a comparison holds only when the entity has the property with
//! exactly the literal's EDM type (Int32, Int64 and Double never cross-match, as
//! the REST docs require "the same data type as the property"); a missing property
//! or a type mismatch makes every comparison false, `ne` included. `not` negates
//! the result of its operand.
//!
//! Doubles compare by IEEE rules: NaN is unordered, so every comparison with it
//! is false except `ne`, which is true (`NaN != x` in IEEE and .NET alike).

use std::cell::Cell;
use std::cmp::Ordering;

use tafel_store::key::{azure_bytes_cmp, azure_str_cmp};
use tafel_store::KeyRef;

use super::ast::{CompareOp, Expr};
use crate::model::codec::{self, ValueRef};
use crate::model::{Entity, Value};

/// Whether a stored entity matches. Reads only the properties the filter names,
/// and compares key literals against the encoded key without decoding it.
pub fn eval_stored(expr: &Expr, key: KeyRef<'_>, stored: &[u8]) -> bool {
    eval(
        expr,
        &StoredRow {
            key,
            stored,
            last: Cell::new(None),
            last_string: Cell::new(None),
        },
    )
}

/// Whether a decoded entity matches (same semantics as [`eval_stored`]).
pub fn eval_entity(expr: &Expr, entity: &Entity) -> bool {
    eval(expr, entity)
}

/// Whether a table matches a Query Tables filter: `TableName` is its only
/// property (a String); every other property is missing.
pub fn eval_table_name(expr: &Expr, name: &str) -> bool {
    eval(expr, &TableRow(name))
}

/// What a comparison found: the property's value against the literal.
enum Found {
    /// Missing, or present with another EDM type.
    NoMatch,
    /// Both Doubles, at least one NaN.
    Unordered,
    Ordered(Ordering),
}

/// An entity or table seen by the evaluator; `'e` is the filter's lifetime.
trait Row<'e> {
    /// Compares property `name` with the literal `value`.
    fn compare(&self, name: &'e str, value: &Value) -> Found;
    /// A bare property as a condition: true when it is Boolean `true`.
    fn is_true(&self, name: &'e str) -> bool {
        matches!(
            self.compare(name, &Value::Boolean(true)),
            Found::Ordered(Ordering::Equal)
        )
    }
}

fn eval<'e>(expr: &'e Expr, row: &impl Row<'e>) -> bool {
    match expr {
        Expr::And(items) => items.iter().all(|e| eval(e, row)),
        Expr::Or(items) => items.iter().any(|e| eval(e, row)),
        Expr::Not(inner) => !eval(inner, row),
        Expr::Bool(b) => *b,
        Expr::Property(name) => row.is_true(name),
        Expr::Compare { property, op, value } => holds(*op, row.compare(property, value)),
    }
}

fn holds(op: CompareOp, found: Found) -> bool {
    match found {
        Found::NoMatch => false,
        Found::Unordered => op == CompareOp::Ne,
        Found::Ordered(o) => match op {
            CompareOp::Eq => o.is_eq(),
            CompareOp::Ne => o.is_ne(),
            CompareOp::Gt => o.is_gt(),
            CompareOp::Ge => o.is_ge(),
            CompareOp::Lt => o.is_lt(),
            CompareOp::Le => o.is_le(),
        },
    }
}

/// Compares a property value with a literal of the same EDM type.
fn compare_values(prop: ValueRef<'_>, lit: &Value) -> Found {
    let ord = match (prop, lit) {
        (ValueRef::String(a), Value::String(b)) => azure_str_cmp(a, b),
        (ValueRef::Int32(a), Value::Int32(b)) => a.cmp(b),
        (ValueRef::Int64(a), Value::Int64(b)) => a.cmp(b),
        (ValueRef::Double(a), Value::Double(b)) => match a.partial_cmp(b) {
            Some(o) => o,
            None => return Found::Unordered,
        },
        (ValueRef::Boolean(a), Value::Boolean(b)) => a.cmp(b),
        (ValueRef::DateTime(a), Value::DateTime(b)) => a.cmp(b),
        (ValueRef::Guid(a), Value::Guid(b)) => a.cmp(b),
        (ValueRef::Binary(a), Value::Binary(b)) => a.cmp(b.as_slice()),
        _ => return Found::NoMatch,
    };
    Found::Ordered(ord)
}

fn compare_opt(prop: Option<ValueRef<'_>>, lit: &Value) -> Found {
    prop.map_or(Found::NoMatch, |p| compare_values(p, lit))
}

impl Row<'_> for Entity {
    fn compare(&self, name: &str, value: &Value) -> Found {
        match name {
            "PartitionKey" => compare_values(ValueRef::String(&self.partition_key), value),
            "RowKey" => compare_values(ValueRef::String(&self.row_key), value),
            "Timestamp" => compare_opt(self.timestamp.map(ValueRef::DateTime), value),
            _ => compare_opt(self.get(name).map(ValueRef::from), value),
        }
    }
}

struct TableRow<'a>(&'a str);

impl Row<'_> for TableRow<'_> {
    fn compare(&self, name: &str, value: &Value) -> Found {
        match name {
            "TableName" => compare_values(ValueRef::String(self.0), value),
            _ => Found::NoMatch,
        }
    }
}

/// A property looked up last, by name: what it held, if anything.
type Last<'e, T> = Cell<Option<(&'e str, Option<T>)>>;

struct StoredRow<'a, 'e> {
    key: KeyRef<'a>,
    stored: &'a [u8],
    /// The last property looked up: chains like `A eq 1 or A eq 2 or …` test one
    /// property many times, and each lookup walks the stored bytes.
    last: Last<'e, ValueRef<'a>>,
    /// The same for a String property compared with a string literal.
    last_string: Last<'e, &'a [u8]>,
}

/// `cell`'s value if it holds `name`'s, else what `find` reads, kept in `cell`.
fn remembered<'e, T: Copy>(cell: &Last<'e, T>, name: &'e str, find: impl FnOnce() -> Option<T>) -> Option<T> {
    if let Some((last, v)) = cell.get() {
        if last == name {
            return v;
        }
    }
    let v = find();
    cell.set(Some((name, v)));
    v
}

impl<'a, 'e> StoredRow<'a, 'e> {
    fn lookup(&self, name: &'e str) -> Option<ValueRef<'a>> {
        remembered(&self.last, name, || codec::lookup(self.stored, name))
    }

    fn lookup_string(&self, name: &'e str) -> Option<&'a [u8]> {
        remembered(&self.last_string, name, || codec::lookup_string(self.stored, name))
    }
}

impl<'e> Row<'e> for StoredRow<'_, 'e> {
    fn compare(&self, name: &'e str, value: &Value) -> Found {
        match (name, value) {
            ("PartitionKey", Value::String(s)) => Found::Ordered(self.key.cmp_partition_key(s)),
            ("RowKey", Value::String(s)) => Found::Ordered(self.key.cmp_row_key(s)),
            ("PartitionKey" | "RowKey", _) => Found::NoMatch,
            ("Timestamp", _) => compare_opt(codec::timestamp(self.stored).map(ValueRef::DateTime), value),
            // A string compares by its bytes: no UTF-8 check of every row's value.
            (_, Value::String(s)) => self
                .lookup_string(name)
                .map_or(Found::NoMatch, |v| Found::Ordered(azure_bytes_cmp(v, s.as_bytes()))),
            _ => compare_opt(self.lookup(name), value),
        }
    }
}
