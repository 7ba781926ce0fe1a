//! Service layer of Tafel: the Table service data model and its rules, queries,
//! and the operations (tables, entities, batches) on top of a [`tafel_store::Store`].
//! It knows nothing of HTTP or JSON.

pub mod error;
pub mod model;
pub mod query;

pub use error::{Error, ErrorCode, Result};
