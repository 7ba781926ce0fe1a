//! Each table's counters (entities, and bytes: encoded key plus stored value), as
//! rows of `tafel_table_counts`: each write inserts a row of its change, in its
//! own transaction, and a count sums the table's rows. Only inserts, never an
//! update: one row per table updated by every write would be a lock each
//! concurrent write of the table waits on until the writer before it commits,
//! and at SERIALIZABLE a conflict that runs one of them again. The reaper
//! (`reaper.rs`) folds a table's rows into one every few seconds once there are
//! more than 32 (`schema::FOLD_COUNTS`, one statement), so a count sums few rows.

use super::txn::DbError;
use super::{schema, PostgresStore};
use crate::error::StoreError;
use crate::traits::{TableSize, TableStats};

/// The id of a new change row: random, as table ids are (a repeat fails the
/// write's transaction as a unique violation, and the write runs again).
pub(super) fn change_id() -> i64 {
    fastrand::i64(..)
}

/// The bytes one entity counts for.
pub(super) fn row_bytes(key: &[u8], value: &[u8]) -> i64 {
    (key.len() + value.len()) as i64
}

impl PostgresStore {
    /// A table's counters, `None` without the table; its partitions too when
    /// asked (counted: a seek per partition).
    pub(super) async fn counts_once(
        &self,
        account: &str,
        lname: &[u8],
        partitions: bool,
    ) -> Result<Option<TableStats>, DbError> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(schema::TABLE_COUNTS).await?;
        let Some(row) = client.query_opt(&stmt, &[&account, &lname]).await? else {
            return Ok(None);
        };
        let (entities, bytes, id): (i64, i64, i64) = (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
        let partitions = match partitions {
            false => None,
            true => {
                let stmt = client.prepare_cached(schema::TABLE_PARTITIONS).await?;
                let n: i64 = client.query_one(&stmt, &[&id]).await?.try_get(0)?;
                Some(u64::try_from(n).unwrap_or(0))
            }
        };
        Ok(Some(TableStats {
            entities: u64::try_from(entities).unwrap_or(0),
            bytes: u64::try_from(bytes).unwrap_or(0),
            partitions,
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
