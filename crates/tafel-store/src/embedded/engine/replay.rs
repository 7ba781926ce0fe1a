//! The log's replay on open (see the protocol in `wal.rs`).

use redb::{Database, Durability};

use super::checksums::seal;
use super::group::Trees;
use super::log_op::decode_ops;
use super::schema::*;
use super::tree::Tree;
use super::wal;
use crate::error::{FailureKind, StoreError};

/// Applies the records found in the log on open and commits them durably, so
/// the log can be written from its start again; the commit also sets `wal_seq`
/// to `next`, the number the records after open count on from (see [`Wal::open`]).
/// `sealed`: whether the store's values carry checksums (the records hold the
/// values as stored, so they do too).
pub(in crate::embedded) fn replay(
    db: &Database,
    records: &[wal::Record],
    next: u64,
    sealed: bool,
) -> Result<(), StoreError> {
    let mut txn = db.begin_write().map_err(to_store_error)?;
    txn.set_durability(Durability::Immediate).map_err(to_store_error)?;
    {
        let mut trees = Trees::open(&txn)?;
        for r in records {
            let ops = decode_ops(&r.payload)
                .ok_or_else(|| StoreError::failure(FailureKind::Corrupt, format!("corrupt log record {}", r.seq)))?;
            for op in &ops {
                trees.apply(&op.op())?;
            }
        }
        let next = match sealed {
            true => seal(WAL_SEQ.as_bytes(), &next.to_le_bytes()),
            false => next.to_le_bytes().to_vec(),
        };
        trees.insert_unlogged(Tree::Meta, WAL_SEQ.as_bytes(), &next)?;
    }
    txn.commit().map_err(to_store_error)
}
