//! Secondary indexes (issue #59): how a property value is written as an index
//! entry (`encode`), and which index ranges a `$filter` needs (`plan`). The
//! store keeps the entries as opaque bytes, in the same commit as their entity;
//! everything about their order and meaning is here.

pub mod encode;
pub mod plan;

pub use encode::{comparison_ranges, encode, encode_into, ByteRange};
pub use plan::{plan_index, IndexPlan};

/// How the store gets an entity's index entry for a property from its stored
/// form: the property's value, encoded (`Store::set_index_encoder`, `tafel check`).
pub fn encoder() -> tafel_store::IndexEncoder {
    Box::new(|stored: &[u8], property: &str| crate::model::codec::lookup(stored, property).map(encode))
}

/// Why `name` cannot be an indexed property, if it cannot: a property name of 1
/// to 255 ASCII letters, digits or `_`, other than the keys and `Timestamp`,
/// which the key planner serves. The admin API's and the config file's check.
pub fn property_problem(name: &str) -> Option<String> {
    let ok = !name.is_empty()
        && name.len() <= 255
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !matches!(name, "PartitionKey" | "RowKey" | "Timestamp");
    (!ok).then(|| {
        format!(
            "an index is on a property named by 1 to 255 ASCII letters, digits or '_', \
             other than PartitionKey, RowKey and Timestamp (got {name:?})"
        )
    })
}
