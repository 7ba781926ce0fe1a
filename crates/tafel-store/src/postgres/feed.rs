//! The PostgreSQL backend's change feed (`crate::feed`).
//!
//! A change is a row of `tafel_changes`, inserted by a statement of the write's
//! own transaction (so it commits, or not, with the write). Its position comes
//! from the account's row of `tafel_feed_heads`, bumped by the same statement: the
//! row lock that takes makes the account's recording writes commit in position
//! order (a plain sequence would not: a reader could pass a position whose
//! transaction commits after a later one's, and never see it). This costs the
//! account's writes their concurrency from that statement to their COMMIT (sent
//! together, one round trip), and only when the feed is on for the account.
//! Inserts take the two-round-trip path then (the one-statement insert has no
//! room for the recording).
//!
//! Retention: a task on every node deletes what is past each account's age and
//! size every few seconds. Long polls poll (the trait's default wait).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio::task::JoinHandle;

use super::txn::DbError;
use crate::error::{FailureKind, StoreError};
use crate::feed::{check_from, Change, ChangeOp, ChangesFrom, ChangesPage, ChangesRead, ChangesRequest, FeedSettings};
use crate::key::EntityKey;

/// Records one write's entity changes: `$1` account, `$2` how many, `$3` time,
/// `$4` the table's id, `$5` ops, `$6` keys, `$7` values (NULL for deletes),
/// `$8` the table's lowercase name.
pub(super) const RECORD_ENTITY_CHANGES: &str = "WITH h AS (
        INSERT INTO tafel_feed_heads (account, head) VALUES ($1, $2)
        ON CONFLICT (account) DO UPDATE SET head = tafel_feed_heads.head + excluded.head RETURNING head),
     t AS (SELECT name FROM tafel_tables WHERE id = $4)
     INSERT INTO tafel_changes (account, position, txn, time_ns, op, tbl, ltbl, key, value)
     SELECT $1, h.head - $2 + u.i, h.head - $2 + 1, $3, u.op, t.name, $8, u.k, u.v
     FROM h, t, UNNEST($5::SMALLINT[], $6::BYTEA[], $7::BYTEA[]) WITH ORDINALITY AS u(op, k, v, i)";

/// `schema::CREATE_TABLE` that records the creation: one row if created.
pub(super) const CREATE_TABLE_RECORDED: &str = "WITH c AS (
        INSERT INTO tafel_tables (account, lname, name, id, acl) VALUES ($1, $2, $3, $4, '')
        ON CONFLICT (account, lname) DO NOTHING RETURNING name),
     h AS (INSERT INTO tafel_feed_heads (account, head) SELECT $1, 1 FROM c
        ON CONFLICT (account) DO UPDATE SET head = tafel_feed_heads.head + 1 RETURNING head)
     INSERT INTO tafel_changes (account, position, txn, time_ns, op, tbl, ltbl, key, value)
     SELECT $1, h.head, h.head, $5, 4, $3, $2, NULL, NULL FROM h";

/// `schema::MARK_DELETING` that records the deletion: a row if marked.
pub(super) const MARK_DELETING_RECORDED: &str = "WITH m AS (
        UPDATE tafel_tables SET deleting = true WHERE account = $1 AND lname = $2 AND NOT deleting
        RETURNING name),
     h AS (INSERT INTO tafel_feed_heads (account, head) SELECT $1, 1 FROM m
        ON CONFLICT (account) DO UPDATE SET head = tafel_feed_heads.head + 1 RETURNING head)
     INSERT INTO tafel_changes (account, position, txn, time_ns, op, tbl, ltbl, key, value)
     SELECT $1, h.head, h.head, $3, 5, m.name, $2, NULL, NULL FROM h, m RETURNING position";

/// One page and the head and oldest position, in one statement (one snapshot):
/// `$1` account, `$2` after, `$3` limit, `$4` lowercase table or NULL, `$5` since.
const READ: &str = "SELECT (SELECT head FROM tafel_feed_heads WHERE account = $1),
        (SELECT min(position) FROM tafel_changes WHERE account = $1),
        c.position, c.txn, c.time_ns, c.op, c.tbl, c.key, c.value
     FROM (SELECT 1) one LEFT JOIN LATERAL (
        SELECT position, txn, time_ns, op, tbl, key, value FROM tafel_changes
        WHERE account = $1 AND position > $2 AND ($4::BYTEA IS NULL OR ltbl = $4) AND time_ns >= $5
        ORDER BY position LIMIT $3) c ON true
     ORDER BY c.position";

const ACCOUNTS: &str = "SELECT account FROM tafel_feed_heads";
const DROP_OLD: &str = "DELETE FROM tafel_changes WHERE account = $1 AND time_ns < $2";
/// Drops the oldest changes beyond `$2` bytes (counted roughly: keys, values, name).
const DROP_BEYOND: &str = "DELETE FROM tafel_changes WHERE account = $1 AND position <= (
        SELECT max(position) FROM (
            SELECT position, sum(coalesce(octet_length(key), 0) + coalesce(octet_length(value), 0)
                + octet_length(tbl) + 40) OVER (ORDER BY position DESC) AS kept
            FROM tafel_changes WHERE account = $1) s
        WHERE kept > $2)";

/// How often retention runs.
const RETENTION_EVERY: Duration = Duration::from_secs(2);

/// The feed's settings, and its retention task once on.
#[derive(Default)]
pub(super) struct Feed {
    settings: RwLock<Arc<FeedSettings>>,
    task: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Feed {
    fn drop(&mut self) {
        if let Some(t) = self.task.get_mut().ok().and_then(Option::take) {
            t.abort();
        }
    }
}

impl Feed {
    pub(super) fn settings(&self) -> Arc<FeedSettings> {
        self.settings.read().map(|s| Arc::clone(&s)).unwrap_or_default()
    }

    pub(super) fn on(&self, account: &str) -> bool {
        self.settings().for_account(account).is_some()
    }

    /// Turns the feed on, and its retention task (on the calling runtime).
    pub(super) fn set(self: &Arc<Self>, settings: FeedSettings, pool: Pool) -> Result<(), StoreError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|e| {
            StoreError::failure(
                FailureKind::Internal,
                format!("the change feed's retention needs a runtime: {e}"),
            )
        })?;
        // A poisoned lock still holds whole settings: each write replaces them at once.
        *self.settings.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(settings);
        let feed = Arc::downgrade(self);
        let task = runtime.spawn(async move {
            loop {
                tokio::time::sleep(RETENTION_EVERY).await;
                let Some(feed) = feed.upgrade() else { return };
                if pool.is_closed() {
                    return;
                }
                if let Err(e) = retain(&pool, &feed.settings()).await.map_err(DbError::into_store) {
                    tracing::warn!(error = %e, "change feed retention failed; it runs again shortly");
                }
            }
        });
        if let Some(old) = self.task.lock().unwrap_or_else(|e| e.into_inner()).replace(task) {
            old.abort();
        }
        Ok(())
    }
}

/// One pass of retention over every account that records changes.
async fn retain(pool: &Pool, settings: &FeedSettings) -> Result<(), DbError> {
    let client = pool.get().await?;
    let now = crate::feed::now_ns();
    for row in client.query(ACCOUNTS, &[]).await? {
        let account: String = row.try_get(0)?;
        let Some(r) = settings.for_account(&account) else {
            continue;
        };
        let cutoff = i64::try_from(now.saturating_sub(r.age.as_nanos() as u64)).unwrap_or(i64::MAX);
        client.execute(DROP_OLD, &[&account, &cutoff]).await?;
        if let Some(max) = r.max_bytes {
            let max = i64::try_from(max).unwrap_or(i64::MAX);
            client.execute(DROP_BEYOND, &[&account, &max]).await?;
        }
    }
    Ok(())
}

fn corrupt(what: &str) -> DbError {
    StoreError::failure(FailureKind::Corrupt, format!("corrupt change feed row: {what}")).into()
}

fn op_of(n: i16) -> Result<ChangeOp, DbError> {
    u8::try_from(n)
        .ok()
        .and_then(ChangeOp::from_u8)
        .ok_or_else(|| corrupt("op"))
}

fn u64_of(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// One page of `account`'s feed.
pub(super) async fn read(
    client: &deadpool_postgres::Client,
    account: &str,
    request: &ChangesRequest,
) -> Result<ChangesRead, DbError> {
    let (after, since) = match request.from {
        ChangesFrom::Oldest => (0, 0),
        ChangesFrom::After(p) => (i64::try_from(p).unwrap_or(i64::MAX), 0),
        ChangesFrom::Latest => (i64::MAX, 0),
        ChangesFrom::Since(t) => (0, i64::try_from(t).unwrap_or(i64::MAX)),
    };
    let limit = i64::try_from(request.limit).unwrap_or(i64::MAX);
    let table: Option<Vec<u8>> = request
        .table
        .as_ref()
        .map(|t| t.bytes().map(|b| b.to_ascii_lowercase()).collect());
    let stmt = client.prepare_cached(READ).await?;
    let rows = client.query(&stmt, &[&account, &after, &limit, &table, &since]).await?;
    let head = match rows.first() {
        Some(r) => u64_of(r.try_get::<_, Option<i64>>(0)?.unwrap_or(0)),
        None => 0,
    };
    let oldest = match rows.first() {
        Some(r) => r.try_get::<_, Option<i64>>(1)?.map_or(head + 1, u64_of),
        None => head + 1,
    };
    if let Some(refused) = check_from(request.from, oldest, head) {
        return Ok(refused);
    }
    let mut changes = Vec::new();
    for r in &rows {
        let Some(position) = r.try_get::<_, Option<i64>>(2)? else {
            continue;
        };
        let table: Vec<u8> = r.try_get(6)?;
        changes.push(Change {
            position: u64_of(position),
            txn: u64_of(r.try_get(3)?),
            time_ns: u64_of(r.try_get(4)?),
            op: op_of(r.try_get(5)?)?,
            table: String::from_utf8(table).map_err(|_| corrupt("table name"))?,
            key: r.try_get::<_, Option<Vec<u8>>>(7)?.map(EntityKey::from_bytes),
            value: r.try_get(8)?,
        });
    }
    let start = match request.from {
        ChangesFrom::After(p) => p,
        ChangesFrom::Latest => head,
        ChangesFrom::Oldest | ChangesFrom::Since(_) => oldest.saturating_sub(1),
    };
    // A short page read up to the head (in this snapshot); a full one, up to its last.
    let next_after = match changes.last() {
        Some(last) if changes.len() >= request.limit => last.position,
        _ => head.max(start),
    };
    Ok(ChangesRead::Page(ChangesPage {
        changes,
        next_after,
        head,
    }))
}
