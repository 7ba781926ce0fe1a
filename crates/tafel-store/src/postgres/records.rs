//! Operator records (`Store::put_record`) in `tafel_records` (migration 6),
//! and the lease that lets one node at a time work one: taken with a
//! conditional update, renewed by its owner, free to take once it expires (its
//! node died or lost the database). Leases, not advisory locks: CockroachDB has
//! none, and a lease outlives no connection's quirks. Also the whole-table
//! truncate, one statement (its feed-recording twin in `feed.rs`'s manner).

use std::time::Duration;

use super::txn::DbError;
use super::{counts, lower, PostgresStore};

/// Empties table `$2` of account `$1`: its rows and index entries go in this
/// statement, its counters get one change row (`$3`, its id) taking off exactly
/// what went. The count of what went, or no row without the table. Run after
/// [`LOCK_FOR_TRUNCATE`], in its transaction.
const TRUNCATE: &str = "WITH t AS (SELECT id FROM tafel_tables WHERE account = $1 AND lname = $2 AND NOT deleting),
     d AS (DELETE FROM tafel_entities e USING t WHERE e.table_id = t.id
           RETURNING octet_length(e.key) + octet_length(e.value) AS b),
     x AS (DELETE FROM tafel_index_entries e USING t WHERE e.table_id = t.id),
     c AS (INSERT INTO tafel_table_counts (table_id, id, entities, bytes)
           SELECT t.id, $3, -(SELECT count(*) FROM d), -(SELECT COALESCE(sum(b), 0) FROM d) FROM t)
     SELECT (SELECT count(*) FROM d) FROM t";
/// [`TRUNCATE`] that records one `truncateTable` change (`ChangeOp::TruncateTable`,
/// 7: a test below holds the literal to it), `$4` its time.
const TRUNCATE_RECORDED: &str = "WITH t AS (SELECT id, name FROM tafel_tables
           WHERE account = $1 AND lname = $2 AND NOT deleting),
     d AS (DELETE FROM tafel_entities e USING t WHERE e.table_id = t.id
           RETURNING octet_length(e.key) + octet_length(e.value) AS b),
     x AS (DELETE FROM tafel_index_entries e USING t WHERE e.table_id = t.id),
     c AS (INSERT INTO tafel_table_counts (table_id, id, entities, bytes)
           SELECT t.id, $3, -(SELECT count(*) FROM d), -(SELECT COALESCE(sum(b), 0) FROM d) FROM t),
     h AS (INSERT INTO tafel_feed_heads (account, head) SELECT $1, 1 FROM t
           ON CONFLICT (account) DO UPDATE SET head = tafel_feed_heads.head + 1 RETURNING head),
     f AS (INSERT INTO tafel_changes (account, position, txn, time_ns, op, tbl, ltbl, key, value)
           SELECT $1, h.head, h.head, $4, 7, t.name, $2, NULL, NULL FROM h, t)
     SELECT (SELECT count(*) FROM d) FROM t";

/// A truncate first holds the table's row against every write (writes hold it
/// FOR SHARE): its delete, a statement after, then sees every write committed
/// and none under way. Without it, an entity updated meanwhile would be deleted
/// (its new version found) while its new index entry, not in the delete's
/// snapshot, stayed.
const LOCK_FOR_TRUNCATE: &str =
    "SELECT id FROM tafel_tables WHERE account = $1 AND lname = $2 AND NOT deleting FOR UPDATE";

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

    pub(super) async fn truncate_once(&self, account: &str, table: &str) -> Result<Option<u64>, DbError> {
        let mut client = self.client().await?;
        let tx = super::index::read_committed(&mut client).await?;
        let lname = lower(table);
        let id = counts::change_id();
        let lock = tx.prepare_cached(LOCK_FOR_TRUNCATE).await?;
        if tx.query_opt(&lock, &[&account, &lname]).await?.is_none() {
            return Ok(None);
        }
        let row = if self.feed.on(account) {
            let stmt = tx.prepare_cached(TRUNCATE_RECORDED).await?;
            let now = i64::try_from(crate::feed::now_ns()).unwrap_or(i64::MAX);
            tx.query_opt(&stmt, &[&account, &lname, &id, &now]).await?
        } else {
            let stmt = tx.prepare_cached(TRUNCATE).await?;
            tx.query_opt(&stmt, &[&account, &lname, &id]).await?
        };
        tx.commit().await?;
        match row {
            Some(row) => Ok(Some(u64::try_from(row.try_get::<_, i64>(0)?).unwrap_or(0))),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::TRUNCATE_RECORDED;
    use crate::feed::ChangeOp;

    /// The op number is a literal in the statement: renumbering `ChangeOp` once
    /// recorded truncates as deletes.
    #[test]
    fn a_recorded_truncate_is_written_with_the_truncate_ops_number() {
        let written = format!("$4, {}, t.name", ChangeOp::TruncateTable as u8);
        assert!(TRUNCATE_RECORDED.contains(&written), "{TRUNCATE_RECORDED}");
    }
}
