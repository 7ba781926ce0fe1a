//! The engine: the only module that knows redb. It owns the store file and the
//! page file redb writes through (`page_file.rs`), the write-ahead log
//! (`wal.rs`), the write buffer in front of redb (`buffer.rs`: the groups'
//! changes since redb's last commit, folded into it at checkpoints), replay,
//! checkpoints, group commit (`writer.rs`, `commit.rs`; in memory a write's own
//! thread may run its group, `queue.rs`, and a fold goes at a lower priority,
//! `pace.rs`) and the one record of
//! whether the store is broken (`health.rs`).
//!
//! The store's logic (tables, entities, the change feed, savepoints, scans,
//! stats, snapshots, `tafel check`) lives beside this module and reaches the
//! data through named trees: a read snapshot (`commit::ReadView`, read through
//! [`ReadTrees`](tree::ReadTrees)) with `get` and
//! `range`, and for scans an inlined read-ahead window on its entity rows
//! ([`rows_ahead`]), and a group transaction ([`GroupTx`](group::GroupTx)) whose every
//! change is logged. See docs/design/embedded-store.md, "The engine seam".

pub(super) mod blocks;
pub(super) mod buffer;
pub(super) mod busy;
pub(super) mod checkpoint;
pub(super) mod checksums;
pub(super) mod commit;
pub(super) mod disk;
pub(super) mod durable_tx;
pub(super) mod entity_seal;
pub(super) mod fold_aside;
pub(super) mod group;
pub(super) mod header_copy;
pub(super) mod health;
pub(super) mod log_op;
pub(super) mod log_state;
pub(super) mod opening;
pub(super) mod pace;
pub(super) mod page_file;
pub(super) mod queue;
pub(super) mod reopen;
pub(super) mod replay;
pub(super) mod rows_ahead;
pub(super) mod schema;
pub(super) mod scratch_disk;
#[cfg(test)]
pub(super) mod sim_disk;
pub(super) mod tree;
pub(super) mod wal;
pub(super) mod writer;
