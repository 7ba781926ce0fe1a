//! Deleted tables kept restorable (`serve --table-soft-delete`, docs/lifecycle.md).
//!
//! A soft delete moves the table's row from `tafel_tables` to
//! `tafel_deleted_tables` in one statement (it waits for writes holding the row
//! FOR SHARE, as a hard delete's mark does): the name is free at once, the
//! entities and counters stay under the table's id. A restore moves the row
//! back in one transaction, under a free name. The reaper of every node claims
//! kept tables past their time (`until_ns` set to 0, which no restore accepts),
//! then removes their entities (and index entries) in chunks and the row last: two nodes sweeping
//! the same table only repeat each other's chunks, and a crash mid-way leaves a
//! claimed row the next pass finishes.

use deadpool_postgres::Pool;

use super::txn::DbError;
use super::{lower, PostgresStore};
use crate::error::{FailureKind, StoreError};
use crate::undelete::{DeletedTable, UndeleteError};

/// Moves a live table's row aside: `$3` now, `$4` until (ns). A row if moved.
const SOFT_DELETE: &str = "WITH m AS (
        DELETE FROM tafel_tables WHERE account = $1 AND lname = $2 AND NOT deleting RETURNING id, name, acl)
     INSERT INTO tafel_deleted_tables (account, id, name, acl, deleted_ns, until_ns)
     SELECT $1, m.id, m.name, m.acl, $3, $4 FROM m RETURNING id";
/// The same, recording the deletion in the change feed.
const SOFT_DELETE_RECORDED: &str = "WITH m AS (
        DELETE FROM tafel_tables WHERE account = $1 AND lname = $2 AND NOT deleting RETURNING id, name, acl),
     k AS (INSERT INTO tafel_deleted_tables (account, id, name, acl, deleted_ns, until_ns)
        SELECT $1, m.id, m.name, m.acl, $3, $4 FROM m RETURNING name),
     h AS (INSERT INTO tafel_feed_heads (account, head) SELECT $1, 1 FROM k
        ON CONFLICT (account) DO UPDATE SET head = tafel_feed_heads.head + 1 RETURNING head)
     INSERT INTO tafel_changes (account, position, txn, time_ns, op, tbl, ltbl, key, value)
     SELECT $1, h.head, h.head, $3, 5, k.name, $2, NULL, NULL FROM h, k RETURNING position";
/// An account's kept tables with their counters, most recently deleted first.
const LIST: &str = "SELECT d.id, d.name, d.deleted_ns, d.until_ns,
         CAST(COALESCE(sum(c.entities), 0) AS BIGINT), CAST(COALESCE(sum(c.bytes), 0) AS BIGINT)
     FROM tafel_deleted_tables d LEFT JOIN tafel_table_counts c ON c.table_id = d.id
     WHERE d.account = $1 AND d.until_ns > $2
     GROUP BY d.id, d.name, d.deleted_ns, d.until_ns ORDER BY d.deleted_ns DESC, d.id DESC";
/// A restore's first step: the kept row, taken (the transaction rolls it back if the name is taken).
const TAKE: &str = "DELETE FROM tafel_deleted_tables WHERE account = $1 AND id = $2 AND until_ns > $3
     RETURNING name, acl";
/// With its indexes, which stayed under its id (`index.rs`), listed in its row again.
const PUT_BACK: &str = "INSERT INTO tafel_tables (account, lname, name, id, acl, indexes)
     VALUES ($1, $2, $3, $4, $5, ARRAY(SELECT property FROM tafel_indexes WHERE table_id = $4 ORDER BY property))
     ON CONFLICT (account, lname) DO NOTHING";
/// The restored table's creation in the change feed: `$4` now.
const RECORD_RESTORE: &str = "WITH h AS (INSERT INTO tafel_feed_heads (account, head) VALUES ($1, 1)
        ON CONFLICT (account) DO UPDATE SET head = tafel_feed_heads.head + 1 RETURNING head)
     INSERT INTO tafel_changes (account, position, txn, time_ns, op, tbl, ltbl, key, value)
     SELECT $1, h.head, h.head, $4, 4, $3, $2, NULL, NULL FROM h";
const NAME_OF: &str = "SELECT name FROM tafel_tables WHERE account = $1 AND lname = $2";
/// Claims kept tables past their time (`$1` now) for removal: none can be restored after.
const CLAIM: &str = "UPDATE tafel_deleted_tables SET until_ns = 0 WHERE id IN
     (SELECT id FROM tafel_deleted_tables WHERE until_ns <= $1 LIMIT 64) RETURNING id";
const DROP_KEPT: &str = "DELETE FROM tafel_deleted_tables WHERE id = $1 AND until_ns = 0";

fn ns(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn text(bytes: Vec<u8>) -> Result<String, DbError> {
    String::from_utf8(bytes).map_err(|_| {
        DbError::Store(StoreError::failure(
            FailureKind::Corrupt,
            "a deleted table's name is not UTF-8",
        ))
    })
}

impl PostgresStore {
    /// Moves table `lname` of `account` aside for `keep_ns`; whether there was one.
    pub(super) async fn soft_delete_once(&self, account: &str, lname: &[u8], keep_ns: u64) -> Result<bool, DbError> {
        let client = self.client().await?;
        let now = crate::feed::now_ns();
        let (now, until) = (ns(now), ns(now.saturating_add(keep_ns)));
        let sql = match self.feed.on(account) {
            true => SOFT_DELETE_RECORDED,
            false => SOFT_DELETE,
        };
        let stmt = client.prepare_cached(sql).await?;
        Ok(client
            .query_opt(&stmt, &[&account, &lname, &now, &until])
            .await?
            .is_some())
    }

    pub(super) async fn list_deleted(&self, account: &str) -> Result<Vec<DeletedTable>, DbError> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(LIST).await?;
        let now = ns(crate::feed::now_ns());
        let mut out = Vec::new();
        for row in client.query(&stmt, &[&account, &now]).await? {
            let n = |i: usize| -> Result<u64, DbError> { Ok(u64::try_from(row.try_get::<_, i64>(i)?).unwrap_or(0)) };
            // Ids are random BIGINTs, negative half the time: the API's u64 is their bits.
            let id: i64 = row.try_get(0)?;
            out.push(DeletedTable {
                id: id as u64,
                name: text(row.try_get(1)?)?,
                deleted_ns: n(2)?,
                until_ns: n(3)?,
                entities: n(4)?,
                bytes: n(5)?,
            });
        }
        Ok(out)
    }

    /// One attempt of a restore: `Ok(Err(_))` is a definite answer (no such
    /// table, the name taken), after which nothing changed.
    pub(super) async fn restore_once(
        &self,
        account: &str,
        id: u64,
        name: Option<&str>,
    ) -> Result<Result<String, UndeleteError>, DbError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let now = ns(crate::feed::now_ns());
        let id = id as i64;
        let take = tx.prepare_cached(TAKE).await?;
        let Some(kept) = tx.query_opt(&take, &[&account, &id, &now]).await? else {
            return Ok(Err(UndeleteError::NotFound));
        };
        let acl: Vec<u8> = kept.try_get(1)?;
        let name = match name {
            Some(n) => n.to_owned(),
            None => text(kept.try_get(0)?)?,
        };
        let lname = lower(&name);
        let put = tx.prepare_cached(PUT_BACK).await?;
        if tx
            .execute(&put, &[&account, &lname, &name.as_bytes(), &id, &acl])
            .await?
            == 0
        {
            let of = tx.prepare_cached(NAME_OF).await?;
            let taken = match tx.query_opt(&of, &[&account, &lname]).await? {
                Some(row) => text(row.try_get(0)?)?,
                None => name,
            };
            // Dropping the transaction rolls the take back.
            return Ok(Err(UndeleteError::NameTaken(taken)));
        }
        if self.feed.on(account) {
            let record = tx.prepare_cached(RECORD_RESTORE).await?;
            tx.execute(&record, &[&account, &lname, &name.as_bytes(), &now]).await?;
        }
        tx.commit().await?;
        Ok(Ok(name))
    }
}

/// Removes kept tables past their time (`now_ns`): claims them, then their
/// entities in chunks, their counters, their row. The entities removed.
pub(super) async fn sweep(pool: &Pool, now_ns: u64) -> Result<u64, DbError> {
    let client = pool.get().await?;
    let claim = client.prepare_cached(CLAIM).await?;
    let chunk = client.prepare_cached(super::schema::DELETE_CHUNK).await?;
    let drop_counts = client.prepare_cached(super::schema::DROP_COUNTS).await?;
    let drop_kept = client.prepare_cached(DROP_KEPT).await?;
    let mut removed = 0;
    for row in client.query(&claim, &[&ns(now_ns)]).await? {
        let id: i64 = row.try_get(0)?;
        // No write reaches a kept table, so nothing appears behind the cursor.
        removed += super::reaper::delete_rows(&client, &chunk, id).await?;
        super::index::drop_all(&client, id).await?;
        client.execute(&drop_counts, &[&id]).await?;
        client.execute(&drop_kept, &[&id]).await?;
    }
    Ok(removed)
}
