//! Everything a store holds as of one instant, read at leisure: what a backup
//! copies. No write made after the snapshot was taken is visible through it, and
//! every write before it is visible whole (a batch is one write).

use async_trait::async_trait;

use crate::error::StoreError;
use crate::key::EntityKey;
use crate::traits::{RowSink, TableRecord};

/// A table as a snapshot lists it, with the backend's id for it, so reading its
/// rows looks nothing up. Only a snapshot makes one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotTable {
    pub account: String,
    pub record: TableRecord,
    id: u64,
}

impl SnapshotTable {
    #[cfg_attr(not(any(feature = "embedded", feature = "postgres")), allow(dead_code))]
    pub(crate) fn new(account: String, record: TableRecord, id: u64) -> Self {
        SnapshotTable { account, record, id }
    }

    #[cfg_attr(not(any(feature = "embedded", feature = "postgres")), allow(dead_code))]
    pub(crate) fn id(&self) -> u64 {
        self.id
    }
}

#[async_trait]
pub trait Snapshot: Send {
    /// Every account's service properties, in account order.
    async fn service_properties(&mut self) -> Result<Vec<(String, Vec<u8>)>, StoreError>;

    /// Every table, by account, then in the listing order of each account.
    async fn tables(&mut self) -> Result<Vec<SnapshotTable>, StoreError>;

    /// Up to `limit` rows of one of [`Snapshot::tables`], in key order, after
    /// `after` (from the first when `None`), each handed to `sink`. Returns how
    /// many it handed: fewer than `limit` means the table has no more. A sink
    /// that stops ([`RowSink::push`]) ends the call at its row.
    async fn rows(
        &mut self,
        table: &SnapshotTable,
        after: Option<&EntityKey>,
        limit: usize,
        sink: &mut (dyn RowSink + '_),
    ) -> Result<usize, StoreError>;

    /// The properties one of [`Snapshot::tables`] has a secondary index on
    /// (ready or still building), in property order; none on a backend without
    /// indexes.
    async fn indexes(&mut self, table: &SnapshotTable) -> Result<Vec<String>, StoreError> {
        let _ = table;
        Ok(Vec::new())
    }
}
