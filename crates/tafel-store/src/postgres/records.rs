//! Operator records (`Store::put_record`) in `tafel_records` (migration 5),
//! and the lease that lets one node at a time work one: taken with a
//! conditional update, renewed by its owner, free to take once it expires (its
//! node died or lost the database). Leases, not advisory locks: CockroachDB has
//! none, and a lease outlives no connection's quirks.

use std::time::Duration;

use super::txn::DbError;
use super::PostgresStore;

const NOW_MS: &str = "CAST(extract(epoch FROM now()) * 1000 AS BIGINT)";

impl PostgresStore {
    pub(super) async fn put_record_once(&self, kind: &str, id: &str, value: &[u8]) -> Result<(), DbError> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO tafel_records (kind, id, value) VALUES ($1, $2, $3)
                 ON CONFLICT (kind, id) DO UPDATE SET value = excluded.value",
            )
            .await?;
        client.execute(&stmt, &[&kind, &id, &value]).await?;
        Ok(())
    }

    pub(super) async fn get_record_once(&self, kind: &str, id: &str) -> Result<Option<Vec<u8>>, DbError> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached("SELECT value FROM tafel_records WHERE kind = $1 AND id = $2")
            .await?;
        match client.query_opt(&stmt, &[&kind, &id]).await? {
            Some(row) => Ok(Some(row.try_get(0)?)),
            None => Ok(None),
        }
    }

    pub(super) async fn list_records_once(&self, kind: &str) -> Result<Vec<(String, Vec<u8>)>, DbError> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached("SELECT id, value FROM tafel_records WHERE kind = $1 ORDER BY id")
            .await?;
        let rows = client.query(&stmt, &[&kind]).await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            out.push((row.try_get(0)?, row.try_get(1)?));
        }
        Ok(out)
    }

    pub(super) async fn delete_record_once(&self, kind: &str, id: &str) -> Result<(), DbError> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached("DELETE FROM tafel_records WHERE kind = $1 AND id = $2")
            .await?;
        client.execute(&stmt, &[&kind, &id]).await?;
        Ok(())
    }

    /// True when `owner` holds the lease now: it had it, or nobody's ran.
    pub(super) async fn claim_record_once(
        &self,
        kind: &str,
        id: &str,
        owner: &str,
        lease: Duration,
    ) -> Result<bool, DbError> {
        let client = self.client().await?;
        let sql = format!(
            "UPDATE tafel_records SET owner = $3, lease_until = {NOW_MS} + $4
             WHERE kind = $1 AND id = $2 AND (owner IS NULL OR owner = $3 OR lease_until < {NOW_MS})"
        );
        let stmt = client.prepare_cached(&sql).await?;
        let ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
        Ok(client.execute(&stmt, &[&kind, &id, &owner, &ms]).await? == 1)
    }
}
