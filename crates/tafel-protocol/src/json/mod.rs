//! OData v3 JSON ("JSON light") payloads: entities and tables, at the three
//! metadata levels.

mod decode;
mod encode;
mod format;

pub(crate) use decode::{decode_entity_write, decode_table_name, DecodedEntity};
pub(crate) use encode::{write_json_str, EntityFormat, Select};
pub(crate) use format::negotiate;
pub use format::{content_type, content_type_value, MetadataLevel};
