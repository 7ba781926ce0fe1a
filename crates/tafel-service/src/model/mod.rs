//! The Table service data model: values, entities and their stored encoding.

pub mod codec;
mod datetime;
mod entity;
mod guid;
mod stored;
mod value;

pub use datetime::{DateTime, Iso};
pub use entity::{etag_bytes, etag_for, etag_of_iso, Entity, Etag, Property};
pub use guid::Guid;
pub use stored::{StoredEntity, StoredRef};
pub use value::{EdmType, Value};
