//! A write's transaction in two round trips to the database (an insert's in one).
//!
//! tokio-postgres writes a statement to the connection when the statement's
//! future is first polled, and matches answers to statements in order, so
//! statements polled together travel together (pipelining; `futures_util`'s
//! joins poll in argument order, which is the order they run in). A write sends
//! BEGIN with its reads, then its changes with COMMIT: two round trips, however
//! many keys. A statement that fails aborts the transaction, and the COMMIT
//! behind it then rolls back.
//!
//! The transaction is opened by hand (tokio-postgres' `Transaction` waits for
//! BEGIN's answer), so [`OpenTxn`] ends it on every path: committed, rolled back,
//! or — when a request is dropped mid-way — its connection closed instead of
//! going back to the pool inside a transaction.

use deadpool_postgres::{Client, Object};

use super::txn::DbError;
use crate::error::{FailureKind, StoreError};

pub(super) const BEGIN: &str = "BEGIN";
pub(super) const COMMIT: &str = "COMMIT";
const ROLLBACK: &str = "ROLLBACK";

/// A pooled connection with a transaction begun on it (or about to be).
pub(super) struct OpenTxn {
    client: Option<Client>,
}

impl OpenTxn {
    pub(super) fn new(client: Client) -> Self {
        OpenTxn { client: Some(client) }
    }

    pub(super) fn client(&self) -> Result<&Client, DbError> {
        // Always there: only `finish` and `abandon`, which consume the guard, take it.
        self.client
            .as_ref()
            .ok_or_else(|| StoreError::failure(FailureKind::Internal, "transaction used after its end").into())
    }

    /// The transaction ended (its COMMIT answered): the connection goes back to the pool.
    pub(super) fn finish(mut self) {
        drop(self.client.take());
    }

    /// Ends the transaction after a failure, or after a write that changed nothing,
    /// in the background: the caller has its answer already. ROLLBACK outside a
    /// transaction (after a COMMIT that failed) is harmless. Until it answers, the
    /// task holds the connection as this guard did: a task dropped unfinished (its
    /// runtime stopping) closes it.
    pub(super) fn abandon(self) {
        tokio::spawn(async move {
            let rolled_back = match self.client() {
                Ok(client) => client.batch_execute(ROLLBACK).await.is_ok(),
                Err(_) => false,
            };
            if rolled_back {
                self.finish();
            }
            // Otherwise the guard closes the connection: it is not put back.
        });
    }
}

impl Drop for OpenTxn {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            // Dropped mid-transaction: closing the connection ends the transaction.
            drop(Object::take(client));
        }
    }
}
