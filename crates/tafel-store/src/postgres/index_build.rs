//! Online index builds on PostgreSQL (docs/design/indexes.md, "PostgreSQL",
//! "Build"). A create on a table with entities commits the definition
//! `building` (its cursor `build_after` empty); from that commit on every write
//! keeps the index's entries, as for a ready one (`index.rs`). This task, on
//! every node, writes the entries of the entities the writes did not touch: in
//! batches of [`BATCH`] entities after the cursor, each one short transaction
//! that also moves the cursor (or marks the index ready at the table's end), so
//! a node stopped mid-build leaves a cursor any node resumes from.
//!
//! Each batch first UPDATEs the table's row (changing nothing), as a create
//! does: it waits for the writes holding the row FOR SHARE, and the table's
//! writes wait for it, one batch long. So no write runs in the table while a
//! batch reads its entities and writes their entries: what the batch reads (at
//! READ COMMITTED, after the lock) is every entity's newest value, and a write
//! after it finds the batch's entries committed (a write that waited fails with
//! a serialization failure under REPEATABLE READ or SERIALIZABLE, as against a
//! create, and runs again with a snapshot that has them). Nodes building the
//! same index take turns on that row, each reading the cursor after its lock:
//! no batch is built twice. Between batches the task waits as long as its batch
//! took, leaving the table to its writes at least half the time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use tokio::task::JoinHandle;

use super::index::{self, Indexes};
use super::txn::{backoff, DbError, MAX_ATTEMPTS};

/// Entities one batch reads at most: how long the table's writes may wait for it.
pub(super) const BATCH: i64 = 1000;
/// How often every node looks for builds (another node's, or one a stopped node left).
const PERIOD: Duration = Duration::from_secs(2);
/// The longest one batch may take (the database answering included).
const BATCH_DEADLINE: Duration = Duration::from_secs(60);

/// Indexes being built, of tables no delete has marked.
const BUILDING: &str = "SELECT d.table_id, d.property FROM tafel_indexes d
     JOIN tafel_tables t ON t.id = d.table_id AND NOT t.deleting
     WHERE NOT d.ready ORDER BY d.table_id, d.property LIMIT 64";
/// A batch's lock: the table's row, updated without a change (see the top); no
/// row when the table is gone, marked deleted, kept deleted, or lists no index `$2`.
const LOCK: &str = "UPDATE tafel_tables SET indexes = indexes
     WHERE id = $1 AND NOT deleting AND $2 = ANY(indexes) RETURNING id";
/// The build's cursor, read after the lock; no row when it is ready (or gone).
const CURSOR: &str = "SELECT build_after FROM tafel_indexes WHERE table_id = $1 AND property = $2 AND NOT ready";
const ROWS_FIRST: &str = "SELECT key, value FROM tafel_entities WHERE table_id = $1 ORDER BY key LIMIT $2";
const ROWS_AFTER: &str = "SELECT key, value FROM tafel_entities WHERE table_id = $1 AND key > $2 ORDER BY key LIMIT $3";
/// The cursor past a batch (`$3`, NULL with `$5` ready) and the entities it read.
const ADVANCE: &str = "UPDATE tafel_indexes SET build_after = $3, done = done + $4, ready = $5
     WHERE table_id = $1 AND property = $2";

/// The build task of this node; ends with the store.
pub(super) struct Builder {
    task: JoinHandle<()>,
}

impl Builder {
    /// Starts the task on the runtime this is called on (the store's). It runs
    /// when woken ([`Indexes::wake_builder`]: a create, the encoder given) and
    /// every [`PERIOD`].
    pub(super) fn start(pool: Pool, indexes: Arc<Indexes>) -> Self {
        Builder {
            task: tokio::spawn(run(pool, indexes)),
        }
    }
}

impl Drop for Builder {
    fn drop(&mut self) {
        // A batch cut short ends with its connection: rolled back, the cursor where it was.
        self.task.abort();
    }
}

async fn run(pool: Pool, indexes: Arc<Indexes>) {
    loop {
        tokio::select! {
            _ = indexes.woken() => {}
            _ = tokio::time::sleep(PERIOD) => {}
        }
        if pool.is_closed() {
            return;
        }
        // Without the service's encoder no entry can be made: it comes right after opening.
        if !indexes.has_encoder() {
            continue;
        }
        if let Err(e) = pass(&pool, &indexes).await {
            tracing::warn!(error = %e.into_store(), "building an index online; retrying later");
        }
    }
}

/// What a batch found.
enum Step {
    More,
    /// The table's end: the index is ready (this batch made it so).
    Ready,
    /// Nothing to build: ready already (another node's batch), dropped, or its table deleted.
    Gone,
}

/// Builds every index being built, one after the other, to its end.
async fn pass(pool: &Pool, indexes: &Indexes) -> Result<(), DbError> {
    let building: Vec<(i64, String)> = {
        let client = pool.get().await?;
        let stmt = client.prepare_cached(BUILDING).await?;
        let rows = client.query(&stmt, &[]).await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Result<_, DbError>>()?
    };
    for (id, property) in building {
        let mut conflicts = 0;
        loop {
            let started = Instant::now();
            let step = tokio::time::timeout(BATCH_DEADLINE, batch(pool, indexes, id, &property))
                .await
                .unwrap_or(Err(DbError::TimedOut(BATCH_DEADLINE)));
            match step {
                Ok(Step::More) => conflicts = 0,
                Ok(Step::Ready) => {
                    tracing::info!(table = id, property, "index built online");
                    // This node's queries use it at once (other nodes' within `READY_FRESH`).
                    indexes.forget_all_ready();
                    break;
                }
                Ok(Step::Gone) => break,
                // Not expected (the batch takes its locks in the order creates and
                // writes do), but whatever conflicts runs again, as any attempt does.
                Err(e) if e.is_conflict() && conflicts < MAX_ATTEMPTS => {
                    conflicts += 1;
                    tokio::time::sleep(backoff(conflicts)).await;
                    continue;
                }
                Err(e) => return Err(e),
            }
            tokio::time::sleep(started.elapsed()).await;
        }
    }
    Ok(())
}

/// One batch of the build of `property` on table `id`, one transaction (see the top).
async fn batch(pool: &Pool, indexes: &Indexes, id: i64, property: &str) -> Result<Step, DbError> {
    let mut client = pool.get().await?;
    let tx = index::read_committed(&mut client).await?;
    let lock = tx.prepare_cached(LOCK).await?;
    if tx.query_opt(&lock, &[&id, &property]).await?.is_none() {
        return Ok(Step::Gone);
    }
    let cursor = tx.prepare_cached(CURSOR).await?;
    let Some(row) = tx.query_opt(&cursor, &[&id, &property]).await? else {
        return Ok(Step::Gone);
    };
    let cursor: Option<Vec<u8>> = row.try_get(0)?;
    let rows = match &cursor {
        None => {
            let first = tx.prepare_cached(ROWS_FIRST).await?;
            tx.query(&first, &[&id, &BATCH]).await?
        }
        Some(c) => {
            let after = tx.prepare_cached(ROWS_AFTER).await?;
            tx.query(&after, &[&id, c, &BATCH]).await?
        }
    };
    let mut keys: Vec<&[u8]> = Vec::with_capacity(rows.len());
    let mut values: Vec<&[u8]> = Vec::with_capacity(rows.len());
    for row in &rows {
        keys.push(row.try_get(0)?);
        values.push(row.try_get(1)?);
    }
    let entries = index::entries_of(indexes, &[property.to_owned()], &keys, &values)?;
    if !entries.is_empty() {
        // An entry a write made already is the same one: left as it is.
        let insert = tx.prepare_cached(index::INSERT_ENTRIES).await?;
        tx.execute(&insert, &[&id, &entries.properties, &entries.values, &entries.keys])
            .await?;
    }
    let more = rows.len() as i64 == BATCH;
    let last: Option<&[u8]> = keys.last().copied().filter(|_| more);
    let advance = tx.prepare_cached(ADVANCE).await?;
    tx.execute(&advance, &[&id, &property, &last, &(rows.len() as i64), &!more])
        .await?;
    tx.commit().await?;
    Ok(if more { Step::More } else { Step::Ready })
}
