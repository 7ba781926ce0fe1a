//! Secondary indexes (issue #59): how a property value is written as an index
//! entry (`encode`), and which index ranges a `$filter` needs (`plan`). The
//! store keeps the entries as opaque bytes, in the same commit as their entity;
//! everything about their order and meaning is here.

pub mod encode;
pub mod plan;

pub use encode::{comparison_ranges, encode, encode_into, ByteRange};
pub use plan::{plan_index, IndexPlan};
