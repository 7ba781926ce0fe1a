//! Deleted tables' entities, removed in the background in bounded chunks.
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
    }
}

/// Empties every table marked deleted and drops its row; the entities removed.
async fn pass(pool: &Pool) -> Result<u64, DbError> {
    let client = pool.get().await?;
    let tables = client.prepare_cached(schema::DELETING_TABLES).await?;
    let chunk = client.prepare_cached(schema::DELETE_CHUNK).await?;
    let drop_empty = client.prepare_cached(schema::DROP_EMPTY).await?;
    let mut removed = 0;
    for row in client.query(&tables, &[]).await? {
        let id: i64 = row.try_get(0)?;
        // No write reaches a marked table, so nothing appears behind the cursor.
        let mut after: Vec<u8> = Vec::new();
        loop {
            let chunk = client.query_one(&chunk, &[&id, &after, &CHUNK]).await?;
            let n: i64 = chunk.try_get(0)?;
            removed += u64::try_from(n).unwrap_or(0);
            match chunk.try_get::<_, Option<Vec<u8>>>(1)? {
                Some(last) if n > 0 => after = last,
                _ => break,
            }
        }
        client.execute(&drop_empty, &[&id]).await?;
    }
    Ok(removed)
}
