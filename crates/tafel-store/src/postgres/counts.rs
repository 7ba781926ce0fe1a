//! Each table's counters (entities, and bytes: encoded key plus stored value), as
//! rows of `tafel_table_counts` that each write adds its change to, in its own
//! transaction. A table's counters are spread over [`SLOTS`] rows, summed on
//! read: one row per table would be a lock every concurrent write of the table
//! waits on until the writer before it commits, where now two writes wait for
//! each other only when their first keys fall on the same slot (one in
//! [`SLOTS`]). A count reads at most [`SLOTS`] rows, whatever the table's size.

use super::txn::DbError;
use super::{schema, PostgresStore};
use crate::error::StoreError;
use crate::traits::{TableSize, TableStats};

/// Rows per table that its writes spread their counts over.
pub(super) const SLOTS: u32 = 16;

/// The slot a write whose first key is `key` adds its change to: by the key, so
/// writes of different rows mostly take different slots (FNV-1a).
pub(super) fn slot(key: &[u8]) -> i32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in key {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    (h % SLOTS) as i32
}

/// The bytes one entity counts for.
pub(super) fn row_bytes(key: &[u8], value: &[u8]) -> i64 {
    (key.len() + value.len()) as i64
}

impl PostgresStore {
    /// A table's counters, `None` without the table.
    pub(super) async fn counts_once(&self, account: &str, lname: &[u8]) -> Result<Option<TableStats>, DbError> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(schema::TABLE_COUNTS).await?;
        let Some(row) = client.query_opt(&stmt, &[&account, &lname]).await? else {
            return Ok(None);
        };
        let (entities, bytes): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
        Ok(Some(TableStats {
            entities: u64::try_from(entities).unwrap_or(0),
            bytes: u64::try_from(bytes).unwrap_or(0),
            partitions: None,
        }))
    }

    pub(super) async fn sizes_once(&self) -> Result<Vec<TableSize>, DbError> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(schema::ALL_TABLE_COUNTS).await?;
        let rows = client.query(&stmt, &[]).await?;
        rows.iter()
            .map(|row| {
                let name: &[u8] = row.try_get(1)?;
                let (entities, bytes): (i64, i64) = (row.try_get(2)?, row.try_get(3)?);
                Ok(TableSize {
                    account: row.try_get(0)?,
                    table: String::from_utf8_lossy(name).into_owned(),
                    entities: u64::try_from(entities).unwrap_or(0),
                    bytes: u64::try_from(bytes).unwrap_or(0),
                })
            })
            .collect::<Result<_, DbError>>()
    }
}

/// A missing table, as a count of one answers it.
pub(super) fn not_found() -> DbError {
    StoreError::TableNotFound.into()
}
