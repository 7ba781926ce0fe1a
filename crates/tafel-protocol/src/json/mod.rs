//! OData v3 JSON ("JSON light") payloads: entities and tables, at the three
//! metadata levels.

mod decode;
mod encode;
mod format;

pub use decode::{decode_entity, decode_table_name};
pub use encode::{write_entity, write_json_str, EntityFormat, EntityView};
pub use format::{content_type, negotiate, MetadataLevel};
