//! Service layer of Tafel: the Table service data model and its rules, queries,
//! and the operations (tables, entities, batches) on top of a [`tafel_store::Store`].
//! It knows nothing of HTTP or JSON.

mod access;
pub mod acl;
mod blob;
mod clock;
mod error;
pub mod index;
pub mod model;
mod ops;
pub mod properties;
pub mod query;
pub mod ttl;
pub mod validate;

pub use access::{
    Access, AccountGrant, AccountPermissions, Action, ResourceTypes, SasGrant, TableGrant, TablePermissions, TableRole,
    TokenGrant,
};
pub use error::{Error, ErrorCode, Result};
pub use ttl::TtlPolicy;
/// The change feed's types, as the store records them (`$changes`).
pub mod feed {
    pub use tafel_store::feed::{Change, ChangeOp, ChangesFrom, ChangesPage};
}
pub use ops::{
    BatchFailure, ChangesQuery, Ctx, EntityQuery, EntitySink, IfMatch, QueryPage, QueryPlan, Recheck, Service,
    TablePage, TableQuery, WriteKind, WriteOp, DISCOVER_EVERY, MAX_CHANGES, MAX_WAIT, SWEEP_EVERY,
};
