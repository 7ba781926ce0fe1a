//! `tafel copy --follow` from a Tafel source: the source's change feed applied to a
//! target table, in order, page by page, until Ctrl-C.
//!
//! Each entity change carries the whole entity as it stands after the change, so
//! applying it is an upsert-replace of that after-image (a delete: a delete that
//! finds nothing is fine). Applying changes in order therefore reaches the source's
//! state whatever the target held: changes the initial full copy already saw are
//! applied again harmlessly, and a page applied in part before a stop is applied
//! again whole after it. Within a page only each key's last change matters, and
//! keys of different partitions are independent, so a page's partitions are
//! written at once, each in changesets. The checkpoint (the position after the last
//! page applied in full) is written aside and renamed over, so a stop at any point
//! resumes exactly.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::task::JoinSet;

use crate::client::BatchOp;
use crate::feed::{self, Change, From, Page};
use crate::format::{self, Row};
use crate::import::{backoff, RETRIES};
use crate::progress::Progress;
use crate::{TableClient, TransferError};

/// How long a read of the feed waits for a change when there is none.
const WAIT: Duration = Duration::from_secs(20);
/// The most changes one read returns (the feed's own maximum).
const PAGE: u32 = 1000;
/// A changeset's body stays under the service's 4 MiB request limit.
const MAX_BATCH_BYTES: usize = 3 << 20;

/// Writes entities into one target table: upserts in changesets per partition,
/// deletes one by one, retrying what is worth retrying.
pub struct Applier {
    pub target: Arc<TableClient>,
    pub table: String,
    pub in_flight: usize,
}

enum Step {
    Upsert(Row),
    Delete(String, String),
}

impl Applier {
    /// Applies a page's changes in order; returns how many were entity changes.
    pub async fn apply(&self, changes: &[Change]) -> Result<u64, TransferError> {
        let mut segment: Vec<&Change> = Vec::new();
        let mut entities = 0;
        for c in changes {
            match c.op.as_str() {
                // A table change divides the page: what came before it is written first.
                "createTable" | "deleteTable" | "truncateTable" => {
                    self.entities(std::mem::take(&mut segment)).await?;
                    self.table_change(&c.op).await?;
                }
                "insert" | "replace" | "merge" | "delete" => {
                    entities += 1;
                    segment.push(c);
                }
                other => {
                    return Err(TransferError::Protocol(format!(
                        "the change feed sent an operation this tafel does not know: {other}"
                    )))
                }
            }
        }
        self.entities(segment).await?;
        Ok(entities)
    }

    /// Upserts rows (a polling round's page); keys must not repeat.
    pub async fn upsert(&self, rows: Vec<Row>) -> Result<(), TransferError> {
        let mut partitions: HashMap<String, Vec<Step>> = HashMap::new();
        for row in rows {
            partitions
                .entry(row.partition_key.clone())
                .or_default()
                .push(Step::Upsert(row));
        }
        self.write(partitions).await
    }

    async fn entities(&self, changes: Vec<&Change>) -> Result<(), TransferError> {
        // Each key's last change wins: it carries the entity's whole after-image.
        let mut last: HashMap<(&str, &str), &Change> = HashMap::new();
        for c in &changes {
            let (pk, rk) = keys(c)?;
            last.insert((pk, rk), c);
        }
        let mut partitions: HashMap<String, Vec<Step>> = HashMap::new();
        for ((pk, rk), c) in last {
            let step = match (&c.entity, c.op.as_str()) {
                (_, "delete") => Step::Delete(pk.to_owned(), rk.to_owned()),
                (Some(e), _) => Step::Upsert(format::import_value(e.clone()).map_err(|why| {
                    TransferError::Protocol(format!(
                        "a change at position {} has no usable entity: {why}",
                        c.position
                    ))
                })?),
                (None, op) => {
                    return Err(TransferError::Protocol(format!(
                        "the {op} at position {} came without its entity",
                        c.position
                    )))
                }
            };
            partitions.entry(pk.to_owned()).or_default().push(step);
        }
        self.write(partitions).await
    }

    /// Writes each partition's steps, `in_flight` partitions at a time.
    async fn write(&self, partitions: HashMap<String, Vec<Step>>) -> Result<(), TransferError> {
        let mut running = JoinSet::new();
        for (_, steps) in partitions {
            while running.len() >= self.in_flight.max(1) {
                joined(running.join_next().await)?;
            }
            let (target, table) = (self.target.clone(), self.table.clone());
            running.spawn(async move { write_partition(&target, &table, steps).await });
        }
        while let Some(done) = running.join_next().await {
            joined(Some(done))?;
        }
        Ok(())
    }

    async fn table_change(&self, op: &str) -> Result<(), TransferError> {
        let (target, table) = (&self.target, self.table.as_str());
        if op == "deleteTable" {
            return retried(|| target.delete_table(table)).await.map(drop);
        }
        // A truncated table: emptied on the target by deleting and creating it
        // again (a target is any Table service, with no truncate of its own).
        if op == "truncateTable" {
            match retried(|| target.delete_table(table)).await {
                Err(TransferError::Service { code, .. }) if code == "ResourceNotFound" || code == "TableNotFound" => {}
                other => other.map(drop)?,
            }
        }
        // A table deleted a moment ago may still be going away on the target.
        let mut attempt = 0;
        loop {
            match retried(|| target.create_table(table)).await {
                Err(TransferError::Service { code, .. }) if code == "TableBeingDeleted" && attempt < 60 => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                other => return other.map(drop),
            }
        }
    }
}

fn joined(done: Option<Result<Result<(), TransferError>, tokio::task::JoinError>>) -> Result<(), TransferError> {
    match done {
        Some(Ok(r)) => r,
        Some(Err(e)) => Err(TransferError::Protocol(format!("a writer stopped: {e}"))),
        None => Ok(()),
    }
}

fn keys(c: &Change) -> Result<(&str, &str), TransferError> {
    let from_entity = |k: &str| c.entity.as_ref().and_then(|e| e.get(k)).and_then(Value::as_str);
    match (
        c.partition_key.as_deref().or_else(|| from_entity("PartitionKey")),
        c.row_key.as_deref().or_else(|| from_entity("RowKey")),
    ) {
        (Some(pk), Some(rk)) => Ok((pk, rk)),
        _ => Err(TransferError::Protocol(format!(
            "the change at position {} names no PartitionKey and RowKey",
            c.position
        ))),
    }
}

/// Calls `f` until it succeeds, fails for good, or a transient failure happened
/// `RETRIES` times.
async fn retried<T, F, Fut>(mut f: F) -> Result<T, TransferError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, TransferError>>,
{
    let mut attempt = 0;
    loop {
        match f().await {
            Err(TransferError::Transient(why)) if attempt < RETRIES => {
                attempt += 1;
                eprintln!("retrying a write to the target (attempt {attempt}): {why}");
                tokio::time::sleep(backoff(attempt)).await;
            }
            other => return other,
        }
    }
}

/// One partition's upserts as changesets of up to 100 rows and 3 MiB, and its deletes.
async fn write_partition(target: &TableClient, table: &str, steps: Vec<Step>) -> Result<(), TransferError> {
    let mut upserts = Vec::new();
    for step in steps {
        match step {
            Step::Upsert(row) => upserts.push(row),
            Step::Delete(pk, rk) => {
                retried(|| target.delete_entity(table, &pk, &rk)).await?;
            }
        }
    }
    let mut start = 0;
    while start < upserts.len() {
        let (mut end, mut bytes) = (start, 0);
        while end < upserts.len()
            && end - start < 100
            && (end == start || bytes + upserts[end].body.len() <= MAX_BATCH_BYTES)
        {
            bytes += upserts[end].body.len();
            end += 1;
        }
        let ops: Vec<BatchOp<'_>> = upserts[start..end]
            .iter()
            .map(|r| BatchOp {
                method: "PUT",
                partition_key: &r.partition_key,
                row_key: &r.row_key,
                body: &r.body,
            })
            .collect();
        retried(|| target.batch(table, &ops)).await.map_err(|e| match e {
            TransferError::Service {
                status, code, message, ..
            } => TransferError::Service {
                status,
                code,
                message: format!(
                    "the target refused a change in partition '{}': {message}",
                    upserts[start].partition_key
                ),
                index: None,
            },
            other => other,
        })?;
        start = end;
    }
    Ok(())
}

/// Where a following copy stands, kept in its checkpoint file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    /// The feed's position after the last change applied (`Feed`), or the Timestamp
    /// polling has reached (`Poll`).
    pub after: Option<String>,
    pub since: Option<String>,
    /// Whether the initial full copy is done.
    pub copied: bool,
    /// Entity changes applied so far.
    pub applied: u64,
    /// The source's head as last read, and whether that read found nothing more.
    pub head: Option<String>,
    pub caught_up: bool,
    /// The last page's lag in seconds (for a look from outside: benchmarks, tests).
    pub lag_seconds: f64,
}

impl State {
    pub fn load(path: &Path) -> Result<State, TransferError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| TransferError::Usage(format!("--resume: reading {}: {e}", path.display())))?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| TransferError::Usage(format!("--resume: {} is damaged: {e}", path.display())))?;
        let s = |k: &str| v[k].as_str().map(str::to_owned);
        Ok(State {
            after: s("after"),
            since: s("since"),
            copied: v["copied"].as_bool().unwrap_or(false),
            applied: v["applied"].as_u64().unwrap_or(0),
            head: s("head"),
            caught_up: v["caught_up"].as_bool().unwrap_or(false),
            lag_seconds: v["lag_seconds"].as_f64().unwrap_or(0.0),
        })
    }

    /// Written aside and renamed over: a crash leaves the old state or the new one.
    pub fn save(&self, path: &Path) -> Result<(), TransferError> {
        let v = json!({
            "after": self.after, "since": self.since, "copied": self.copied, "applied": self.applied,
            "head": self.head, "caught_up": self.caught_up, "lag_seconds": self.lag_seconds,
        });
        let tmp = PathBuf::from(format!("{}.tmp", path.display()));
        std::fs::write(&tmp, v.to_string())?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    }
}

/// How far the target is behind the source, as last measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lag {
    /// Changes committed at the source and not yet applied (0 when the last read
    /// found everything there was; an upper bound otherwise).
    pub changes: u64,
    /// From the commit of the last change applied to its being applied.
    pub seconds: f64,
}

impl std::fmt::Display for Lag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "lag {} changes, {:.1} s", self.changes, self.seconds)
    }
}

/// The feed's head now: where a copy that is about to start follows from.
pub async fn head(source: &TableClient, table: &str) -> Result<String, TransferError> {
    let req = feed::Request {
        table: Some(table),
        from: &From::Latest,
        limit: Some(1),
        wait: None,
    };
    Ok(feed::read(source, &req).await?.next_after)
}

/// Applies the feed of `table` from `state.after` on, until Ctrl-C; saves the state
/// after each page. Returns the lag when stopped.
pub async fn follow(
    source: &TableClient,
    table: &str,
    applier: &Applier,
    state: &mut State,
    checkpoint: &Path,
    progress: &dyn Progress,
) -> Result<Lag, TransferError> {
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut lag = Lag::default();
    loop {
        let from = From::After(state.after.clone().unwrap_or_else(|| "latest".into()));
        let step = async {
            let page = feed::read(
                source,
                &feed::Request {
                    table: Some(table),
                    from: &from,
                    limit: Some(PAGE),
                    wait: Some(WAIT),
                },
            )
            .await?;
            let changes: Vec<Change> = page.changes.iter().map(|(c, _)| c.clone()).collect();
            let applied = applier.apply(&changes).await?;
            Ok::<_, TransferError>((page, applied))
        };
        // A stop in the middle of a page leaves the checkpoint before it: the page is
        // applied again, whole, next time.
        let (page, applied) = tokio::select! {
            r = step => r?,
            _ = &mut ctrl_c => {
                eprintln!("stopping: the checkpoint is at position {}", state.after.as_deref().unwrap_or("latest"));
                return Ok(lag);
            }
        };
        lag = measure(&page);
        state.after = Some(page.next_after.clone());
        state.applied += applied;
        state.head = Some(page.head.clone());
        state.caught_up = lag.changes == 0;
        state.lag_seconds = lag.seconds;
        state.save(checkpoint)?;
        progress.add(applied, 0);
        progress.status(&lag.to_string());
    }
}

fn measure(page: &Page) -> Lag {
    let full = page.changes.len() >= PAGE as usize;
    let seconds = page.changes.last().and_then(|(c, _)| age(&c.time)).unwrap_or_default();
    Lag {
        changes: if full { page.behind().max(1) } else { 0 },
        seconds,
    }
}

/// Seconds from an RFC 3339 time to now (0 if it is in the future or unreadable).
pub fn age(time: &str) -> Option<f64> {
    let t = time::OffsetDateTime::parse(time, &time::format_description::well_known::Rfc3339).ok()?;
    Some((time::OffsetDateTime::now_utc() - t).as_seconds_f64().max(0.0))
}
