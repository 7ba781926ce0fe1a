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
