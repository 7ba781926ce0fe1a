//! The admin listener of Tafel and what it serves, on a port of its own that no
//! Table API path reaches: `/health`, `/ready` and `/metrics` ([`listener`],
//! [`scrape`]), the fault rules in force ([`faults`]), online backups
//! ([`backup`]), secondary indexes ([`indexes`]), instant resets for test suites ([`snapshots`]),
//! tables' statistics ([`table_stats`]), expiry policies and the test clock
//! (`ttl`), deleted tables kept restorable ([`deleted_tables`]), purge by filter
//! ([`purge`], [`purge_job`]), and the web
//! explorer ([`explorer`]), whose calls reach the Table API through tafel-http's
//! pipeline as any client's would.
//!
//! It sits beside tafel-http, over it and the store: it reads what the pipeline
//! reports (`tafel_http::ops`) and what the store says of itself (readiness,
//! metrics, snapshots, savepoints), so the HTTP layer needs neither the store
//! nor the backup crate.

pub mod backup;
mod cross_site;
mod deleted_tables;
pub mod explorer;
pub mod faults;
mod indexes;
pub mod listener;
mod purge;
pub mod purge_job;
pub mod scrape;
mod snapshots;
pub mod table_stats;
mod ttl;

pub use listener::{check_exposure, serve_admin, AdminState};
