//! Service layer of Tafel: the Table service data model and its rules, queries,
//! and the operations (tables, entities, batches) on top of a [`tafel_store::Store`].
//! It knows nothing of HTTP or JSON.

mod access;
pub mod acl;
mod blob;
mod clock;
mod error;
pub mod model;
mod ops;
pub mod properties;
pub mod query;
pub mod validate;

pub use access::{
    Access, AccountGrant, AccountPermissions, Action, ResourceTypes, SasGrant, TableGrant, TablePermissions, TableRole,
    TokenGrant,
};
pub use error::{Error, ErrorCode, Result};
pub use ops::{
    BatchFailure, Ctx, EntityQuery, EntitySink, IfMatch, Service, TablePage, TableQuery, WriteKind, WriteOp,
};
