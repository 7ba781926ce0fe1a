//! A transaction that commits durably by itself, outside any group: a
//! savepoint job's (`savepoints.rs`). It can save, restore and delete the
//! engine's persistent savepoints; its changes to the trees are not logged,
//! since its commit is itself durable (a checkpoint).

use redb::{Database, Durability};

use super::group::Trees;
use super::log_state::LogState;
use super::schema::to_store_error;
use crate::error::StoreError;

/// The engine's database, as the writer thread hands it on.
pub(in crate::embedded) type Db = Database;

pub(in crate::embedded) struct DurableTx {
    txn: redb::WriteTransaction,
}

impl DurableTx {
    /// Tests': on a database no writer runs over.
    #[cfg(test)]
    pub(in crate::embedded) fn begin(db: &Db) -> Result<Self, StoreError> {
        Self::durable(db.begin_write().map_err(to_store_error)?)
    }

    /// Begun as the writer's every transaction is ([`LogState::begin_write`]).
    pub(in crate::embedded) fn begin_for(state: &LogState, db: &Db) -> Result<Self, StoreError> {
        Self::durable(state.begin_write(db).map_err(to_store_error)?)
    }

    fn durable(mut txn: redb::WriteTransaction) -> Result<Self, StoreError> {
        txn.set_durability(Durability::Immediate).map_err(to_store_error)?;
        Ok(DurableTx { txn })
    }

    /// Saves the state this transaction began from; answers its id. Before
    /// any tree is opened: redb's rule.
    pub(in crate::embedded) fn save_point(&self) -> Result<u64, StoreError> {
        self.txn.persistent_savepoint().map_err(to_store_error)
    }

    /// Brings back the state saved as `id`; those saved after it are gone.
    pub(in crate::embedded) fn restore_point(&mut self, id: u64) -> Result<(), StoreError> {
        let savepoint = self.txn.get_persistent_savepoint(id).map_err(to_store_error)?;
        self.txn.restore_savepoint(&savepoint).map_err(to_store_error)
    }

    pub(in crate::embedded) fn delete_point(&self, id: u64) -> Result<(), StoreError> {
        self.txn
            .delete_persistent_savepoint(id)
            .map(drop)
            .map_err(to_store_error)
    }

    /// The trees, to change without logging.
    pub(in crate::embedded) fn trees(&self) -> Result<Trees<'_>, StoreError> {
        Trees::open(&self.txn)
    }

    pub(in crate::embedded) fn commit(self) -> Result<(), StoreError> {
        self.txn.commit().map_err(to_store_error)
    }
}
