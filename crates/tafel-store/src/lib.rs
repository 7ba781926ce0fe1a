//! Storage layer of Tafel: the [`Store`] trait every backend implements, the
//! order-preserving entity key encoding they share, the embedded backend (feature
//! `embedded`), and the scale-out backend over a PostgreSQL-wire database (feature
//! `postgres`); both are default features.
//!
//! The store knows accounts, tables (by case-insensitive name) and opaque entity
//! values under ordered keys. It never interprets an entity's properties: filtering,
//! merging and conditional checks are decided by the service layer through the
//! closures it hands to [`Store::scan_into`] and [`Store::write_entities`].

// A panic in a backend's engine or in the service's closures is caught and
// answered as an error (`embedded/schema.rs` `guarded`, the writer's decisions,
// the PostgreSQL write path): that needs unwinding.
#[cfg(panic = "abort")]
compile_error!("tafel-store catches panics to answer them as errors: build with panic = \"unwind\"");

#[cfg(feature = "embedded")]
pub mod embedded;
pub mod error;
pub mod feed;
pub mod key;
// The scans of both backends use it; a build with neither has no scan.
#[cfg_attr(not(any(feature = "embedded", feature = "postgres")), allow(dead_code))]
mod paging;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod reset;
mod snapshot;
pub mod stats;
#[cfg(test)]
mod test_support;
mod traits;
mod undelete;

pub use error::{BackendError, FailureKind, NotReady, StoreError};
pub use key::{EntityKey, KeyRange, KeyRef};
pub use reset::{ResetError, SavepointInfo};
pub use snapshot::{Snapshot, SnapshotTable};
pub use stats::{MetricValue, StoreMetric};
pub use tafel_stats::HistogramSnapshot;
pub use traits::{
    write_with, Decide, Expect, IndexEncoder, IndexError, IndexInfo, IndexProgress, IndexScanRequest, Mutation,
    RowFilter, RowSink, ScanEnd, ScanRequest, Store, TableRecord, TableSize, TableStats, ALL_PROPERTIES,
};
pub use undelete::{DeletedTable, UndeleteError};
