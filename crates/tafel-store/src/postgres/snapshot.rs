//! A backup's view of the database: one REPEATABLE READ, READ ONLY transaction
//! on a connection of its own, so every read sees the database as of its first
//! statement (PostgreSQL's snapshot; CockroachDB runs it as SERIALIZABLE and
//! YugabyteDB as Snapshot isolation, each reading one snapshot too). The connection is taken out of
//! the pool: dropping the snapshot closes it, and the transaction with it.

use async_trait::async_trait;
use deadpool_postgres::ClientWrapper;

use super::schema;
use super::txn::DbError;
use crate::error::StoreError;
use crate::key::{EntityKey, KeyRef};
use crate::snapshot::{Snapshot, SnapshotTable};
use crate::traits::RowSink;

pub(super) struct PgSnapshot {
    client: ClientWrapper,
}

impl PgSnapshot {
    pub(super) async fn begin(client: ClientWrapper) -> Result<Self, DbError> {
        // A backup may sit idle between reads while its reader is slow: the pool's
        // idle-in-transaction limit is not for this connection (it leaves the pool).
        client
            .batch_execute(
                "SET idle_in_transaction_session_timeout = 0;
                 BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
            )
            .await?;
        Ok(PgSnapshot { client })
    }
}

fn store(e: impl Into<DbError>) -> StoreError {
    e.into().into_store()
}

#[async_trait]
impl Snapshot for PgSnapshot {
    async fn service_properties(&mut self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let rows = self.client.query(schema::ALL_PROPS, &[]).await.map_err(store)?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Result<_, tokio_postgres::Error>>()
            .map_err(store)
    }

    async fn tables(&mut self) -> Result<Vec<SnapshotTable>, StoreError> {
        let rows = self.client.query(schema::ALL_TABLES, &[]).await.map_err(store)?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let account: String = row.try_get(0).map_err(store)?;
            let id: i64 = row.try_get(3).map_err(store)?;
            let record = record_at(row).map_err(DbError::into_store)?;
            // The id's bits, kept as the snapshot's u64 and given back as they were.
            out.push(SnapshotTable::new(account, record, id as u64));
        }
        Ok(out)
    }

    async fn rows(
        &mut self,
        table: &SnapshotTable,
        after: Option<&EntityKey>,
        limit: usize,
        sink: &mut (dyn RowSink + '_),
    ) -> Result<usize, StoreError> {
        let id = table.id() as i64;
        let limit_sql = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = match after {
            Some(after) => {
                let stmt = self.client.prepare_cached(schema::ROWS_AFTER).await.map_err(store)?;
                self.client.query(&stmt, &[&id, &after.as_bytes(), &limit_sql]).await
            }
            None => {
                let stmt = self.client.prepare_cached(schema::ROWS_FIRST).await.map_err(store)?;
                self.client.query(&stmt, &[&id, &limit_sql]).await
            }
        }
        .map_err(store)?;
        for (n, row) in rows.iter().enumerate() {
            let key: &[u8] = row.try_get(0).map_err(store)?;
            let value: &[u8] = row.try_get(1).map_err(store)?;
            if sink.push(KeyRef::new(key), value).is_break() {
                return Ok(n + 1);
            }
        }
        Ok(rows.len())
    }

    async fn indexes(&mut self, table: &SnapshotTable) -> Result<Vec<String>, StoreError> {
        let id = table.id() as i64;
        let rows = self
            .client
            .query(
                "SELECT property FROM tafel_indexes WHERE table_id = $1 ORDER BY property",
                &[&id],
            )
            .await
            .map_err(store)?;
        rows.iter()
            .map(|r| r.try_get(0))
            .collect::<Result<_, tokio_postgres::Error>>()
            .map_err(store)
    }
}

/// The name and acl of an `ALL_TABLES` row, whose account comes first.
fn record_at(row: &tokio_postgres::Row) -> Result<crate::traits::TableRecord, DbError> {
    let name: Vec<u8> = row.try_get(1)?;
    let name = String::from_utf8(name)
        .map_err(|_| StoreError::failure(crate::FailureKind::Corrupt, "table name is not UTF-8"))?;
    Ok(crate::traits::TableRecord {
        name,
        acl: row.try_get(2)?,
    })
}
