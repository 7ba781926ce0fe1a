//! Secondary indexes (issue #59): how a property value is written as an index
//! entry (`encode`), and which index ranges a `$filter` needs (`plan`). The
//! store keeps the entries as opaque bytes, in the same commit as their entity;
//! everything about their order and meaning is here.

pub mod encode;
pub mod plan;

pub use encode::{comparison_ranges, encode, encode_into, ByteRange};
pub use plan::{plan_index, IndexPlan};

/// How the store gets an entity's index entries from its stored form: one
/// property's value, encoded, or every property's (the `*` index), as
/// `Store::set_index_encoder` and `tafel check` take them.
pub fn encoder() -> tafel_store::IndexEncoder {
    tafel_store::IndexEncoder::new(
        |stored: &[u8], property: &str| crate::model::codec::lookup(stored, property).map(encode),
        every_property,
    )
}

/// Every property of a stored entity with its encoded value; nothing for corrupt
/// bytes (as `lookup` finds nothing in them). The keys and `Timestamp` are not
/// among the stored properties, and are skipped if they were.
fn every_property(stored: &[u8]) -> Vec<(String, Vec<u8>)> {
    let Ok((_, properties)) = crate::model::codec::read(stored) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in properties {
        let Ok((name, value)) = p else {
            return Vec::new();
        };
        if !matches!(name, "PartitionKey" | "RowKey" | "Timestamp") {
            out.push((name.to_owned(), encode(value)));
        }
    }
    out
}

/// Why `name` cannot be an indexed property, if it cannot: a property name of 1
/// to 255 ASCII letters, digits or `_`, other than the keys and `Timestamp`,
/// which the key planner serves, or `*`: every property (Cosmos DB's default
/// indexing policy). The admin API's and the config file's check.
pub fn property_problem(name: &str) -> Option<String> {
    if name == tafel_store::ALL_PROPERTIES {
        return None;
    }
    let ok = !name.is_empty()
        && name.len() <= 255
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !matches!(name, "PartitionKey" | "RowKey" | "Timestamp");
    (!ok).then(|| {
        format!(
            "an index is on a property named by 1 to 255 ASCII letters, digits or '_', \
             other than PartitionKey, RowKey and Timestamp, or '*' for every property (got {name:?})"
        )
    })
}
