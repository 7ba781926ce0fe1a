//! Deleted tables' entities, removed in the background in bounded chunks; and
//! tables' counters, their change rows folded together (`counts.rs`).
//!
//! Deleting a table marks its row (`schema::MARK_DELETING`) and removes a first
//! chunk of its entities; this task, on every node, removes the rest: a chunk per
//! statement, each a short transaction of its own (distributed engines cap a
//! transaction's size, and a long one holds locks), then the table's row, which
//! frees its name. Woken by this node's deletes, and every few seconds for the
//! deletes of other nodes and of nodes that stopped mid-way. Nodes reaping the
//! same table at once only repeat each other's work: a chunk deletes what is
//! there, and the row goes only once no entity is left.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::schema;
use super::txn::DbError;

/// Entities removed per statement.
pub(super) const CHUNK: i64 = 1000;
/// How often every node looks for tables left being deleted.
const PERIOD: Duration = Duration::from_secs(5);

pub(super) struct Reaper {
    wake: Arc<Notify>,
    task: JoinHandle<()>,
}

impl Reaper {
    /// Starts the task on the runtime this is called on (the store's).
    pub(super) fn start(pool: Pool) -> Self {
        let wake = Arc::new(Notify::new());
        let task = tokio::spawn(run(pool, Arc::clone(&wake)));
        Reaper { wake, task }
    }

    pub(super) fn wake(&self) {
        self.wake.notify_one();
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(pool: Pool, wake: Arc<Notify>) {
    loop {
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(PERIOD) => {}
        }
        if pool.is_closed() {
            return;
        }
        match pass(&pool).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(entities = n, "deleted tables' entities removed"),
            // Another node's chunk conflicted with ours: it is doing the work.
            Err(e) if e.is_conflict() => {}
            Err(e) => tracing::warn!(error = %e.into_store(), "removing deleted tables' entities; retrying later"),
        }
        match super::deleted::sweep(&pool, crate::feed::now_ns()).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(entities = n, "deleted tables kept past their time removed"),
            Err(e) if e.is_conflict() => {}
            Err(e) => tracing::warn!(error = %e.into_store(), "removing kept deleted tables; retrying later"),
        }
        match fold_counts(&pool).await {
            Ok(()) => {}
            // Under SERIALIZABLE even the look for tables to fold can be cancelled.
            Err(e) if e.is_conflict() => {}
            Err(e) => tracing::warn!(error = %e.into_store(), "folding tables' counters; retrying later"),
        }
    }
}

/// Folds the change rows of each table's counters that has many into one
/// (`counts.rs`): a count then sums few rows.
async fn fold_counts(pool: &Pool) -> Result<(), DbError> {
    let client = pool.get().await?;
    let many = client.prepare_cached(schema::COUNTS_TO_FOLD).await?;
    let fold = client.prepare_cached(schema::FOLD_COUNTS).await?;
    for row in client.query(&many, &[]).await? {
        let id: i64 = row.try_get(0)?;
        match client
            .execute(&fold, &[&id, &super::counts::change_id()])
            .await
            .map_err(DbError::from)
        {
            Ok(_) => {}
            // Another node folded the same rows at once, or (serializable) a write
            // to the table ran beside: the next pass folds what is left. The other
            // tables are not held back by this one.
            Err(e) if e.is_conflict() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Empties every table marked deleted and drops its row; the entities removed.
async fn pass(pool: &Pool) -> Result<u64, DbError> {
    let client = pool.get().await?;
    let tables = client.prepare_cached(schema::DELETING_TABLES).await?;
    let chunk = client.prepare_cached(schema::DELETE_CHUNK).await?;
    let drop_empty = client.prepare_cached(schema::DROP_EMPTY).await?;
    let drop_counts = client.prepare_cached(schema::DROP_COUNTS).await?;
    let mut removed = 0;
    for row in client.query(&tables, &[]).await? {
        let id: i64 = row.try_get(0)?;
        // No write reaches a marked table, so nothing appears behind the cursor.
        removed += delete_rows(&client, &chunk, id).await?;
        super::index::drop_all(&client, id).await?;
        if client.execute(&drop_empty, &[&id]).await? == 1 {
            client.execute(&drop_counts, &[&id]).await?;
        }
    }
    Ok(removed)
}

/// Deletes every entity of table `id`, [`CHUNK`] rows per statement (`chunk` is
/// `DELETE_CHUNK`, prepared), walking a key cursor: for a table no write reaches
/// any more (marked deleted, or kept past its time). The rows removed.
pub(super) async fn delete_rows(
    client: &deadpool_postgres::Object,
    chunk: &tokio_postgres::Statement,
    id: i64,
) -> Result<u64, DbError> {
    let mut removed = 0;
    let mut after: Vec<u8> = Vec::new();
    loop {
        let row = client.query_one(chunk, &[&id, &after, &CHUNK]).await?;
        let n: i64 = row.try_get(0)?;
        removed += u64::try_from(n).unwrap_or(0);
        match row.try_get::<_, Option<Vec<u8>>>(1)? {
            Some(last) if n > 0 => after = last,
            _ => return Ok(removed),
        }
    }
}
