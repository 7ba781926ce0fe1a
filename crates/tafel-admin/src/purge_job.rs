//! Purge jobs: what one is (a table, a filter, how far it got), how it runs
//! (scan a batch of matching keys, delete them in one write, move on) and how
//! it survives a crash (its record, rewritten after every batch, in the store:
//! any node sharing the store resumes it once its node stops renewing its claim).
//!
//! Invariants: every delete goes through `Store::write_entities`, so counters
//! and the change feed follow it in the same commit as any user delete; a
//! write holds at most one batch ([`MAX_BATCH`] keys); a write deletes a key
//! only if its row is still there and still matches (a row rewritten between
//! the scan and the write so that it no longer matches is kept). Resuming
//! rescans from the last recorded cursor: rows deleted after it are simply not
//! found again.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tafel_store::{
    write_with, EntityKey, Expect, FailureKind, KeyRange, KeyRef, Mutation, RowFilter, RowSink, ScanRequest, Store,
    StoreError,
};

/// Keys one write deletes at most, and the default batch.
pub const MAX_BATCH: usize = 1000;
pub const DEFAULT_BATCH: usize = 500;

/// A filter compiled for the store: the key ranges it can match and, unless
/// the ranges are exact, the test each row in them must pass.
pub struct Compiled {
    pub ranges: Vec<KeyRange>,
    pub filter: Option<RowFilter>,
}

/// Compiles `$filter` text (the Table API's parser and planner, which this
/// crate does not depend on: the binary hands it over); `Err` says what is wrong.
pub type FilterCompiler = Arc<dyn Fn(&str) -> Result<Compiled, String> + Send + Sync>;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum JobState {
    Running,
    Done,
    Failed(String),
}

/// One purge, as recorded and as `GET /purge-jobs/ID` shows it.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    pub id: String,
    pub account: String,
    pub table: String,
    pub filter: Option<String>,
    pub partition: Option<String>,
    pub batch: usize,
    pub state: JobState,
    pub deleted: u64,
    /// Where the next scan starts (an encoded key, inclusive).
    pub cursor: Option<Vec<u8>>,
    pub started: u64,
    pub finished: Option<u64>,
}

impl Job {
    pub fn to_json(&self) -> Value {
        let (state, error) = match &self.state {
            JobState::Running => ("running", None),
            JobState::Done => ("done", None),
            JobState::Failed(e) => ("failed", Some(e.as_str())),
        };
        json!({
            "id": self.id,
            "account": self.account,
            "table": self.table,
            "filter": self.filter,
            "partition": self.partition,
            "batch": self.batch,
            "state": state,
            "error": error,
            "deleted": self.deleted,
            "cursor": self.cursor.as_deref().map(hex),
            "started": self.started,
            "finished": self.finished,
        })
    }

    fn from_json(v: &Value) -> Option<Job> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let state = match v.get("state")?.as_str()? {
            "running" => JobState::Running,
            "done" => JobState::Done,
            _ => JobState::Failed(s("error").unwrap_or_default()),
        };
        Some(Job {
            id: s("id")?,
            account: s("account")?,
            table: s("table")?,
            filter: s("filter"),
            partition: s("partition"),
            batch: v
                .get("batch")
                .and_then(Value::as_u64)
                .map_or(DEFAULT_BATCH, |b| b as usize),
            state,
            deleted: v.get("deleted").and_then(Value::as_u64).unwrap_or(0),
            cursor: match s("cursor") {
                Some(c) => Some(unhex(&c)?),
                None => None,
            },
            started: v.get("started").and_then(Value::as_u64).unwrap_or(0),
            finished: v.get("finished").and_then(Value::as_u64),
        })
    }

    /// Whether the job finished more than [`FINISHED_KEPT`] before `now`
    /// (seconds since the epoch), so its record may go.
    fn outlived(&self, now: u64) -> bool {
        self.state != JobState::Running
            && self
                .finished
                .is_some_and(|f| now.saturating_sub(f) > FINISHED_KEPT.as_secs())
    }

    /// The filter the job deletes by: the partition's and the user's, both.
    pub fn filter_text(&self) -> Option<String> {
        let partition = self
            .partition
            .as_ref()
            .map(|p| format!("PartitionKey eq '{}'", p.replace('\'', "''")));
        match (partition, &self.filter) {
            (Some(p), Some(f)) => Some(format!("{p} and ({f})")),
            (Some(p), None) => Some(p),
            (None, Some(f)) => Some(f.clone()),
            (None, None) => None,
        }
    }
}

/// The record kind purge jobs are kept under in the store.
const KIND: &str = "purge";
/// How long a node's claim on a job lasts unless renewed (each batch renews
/// it); after that, another node takes the job over.
const LEASE: Duration = Duration::from_secs(10);
/// How often a node looks for running jobs nobody works (a stopped node's).
const RESCAN: Duration = Duration::from_secs(2);
/// How long a finished job's record stays to be read (`GET /purge-jobs/ID`);
/// after that a node's look for running jobs deletes it, so the records every
/// node lists each [`RESCAN`] do not grow with every purge ever run.
const FINISHED_KEPT: Duration = Duration::from_secs(7 * 24 * 3600);

/// Purge jobs: their records live in the store (`Store::put_record`), so any
/// node sharing it sees every job and can resume one whose node stopped.
pub struct Purges {
    pub(crate) compile: FilterCompiler,
    store: Arc<dyn Store>,
    /// This node's name in job claims.
    owner: String,
    /// Jobs this node runs now, each with its latest record.
    active: Mutex<BTreeMap<String, Job>>,
}

impl Purges {
    pub fn new(compile: FilterCompiler, store: Arc<dyn Store>) -> Self {
        Purges {
            compile,
            store,
            owner: format!("{}-{:x}", std::process::id(), now_nanos()),
            active: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Job>> {
        self.active.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) async fn get(&self, id: &str) -> Result<Option<Job>, StoreError> {
        let record = self.store.get_record(KIND, id).await?;
        Ok(record.as_deref().and_then(parse))
    }

    pub(crate) async fn all(&self) -> Result<Vec<Job>, StoreError> {
        let records = self.store.list_records(KIND).await?;
        Ok(records.iter().filter_map(|(_, v)| parse(v)).collect())
    }

    /// Records a new job, claimed by this node; its id.
    pub(crate) async fn add(&self, mut job: Job) -> Result<String, StoreError> {
        job.id = format!("{:016x}", now_nanos());
        self.save(&job).await?;
        self.store.claim_record(KIND, &job.id, &self.owner, LEASE).await?;
        Ok(job.id)
    }

    /// Takes job `id` (its latest record) for this node to run, unless this
    /// node runs it already or another node's claim on it still holds.
    async fn take(&self, id: &str) -> Result<Option<Job>, StoreError> {
        if self.lock().contains_key(id) {
            return Ok(None);
        }
        if !self.store.claim_record(KIND, id, &self.owner, LEASE).await? {
            return Ok(None);
        }
        let Some(job) = self.get(id).await?.filter(|j| j.state == JobState::Running) else {
            return Ok(None);
        };
        let mut active = self.lock();
        if active.contains_key(id) {
            return Ok(None);
        }
        active.insert(id.to_owned(), job.clone());
        Ok(Some(job))
    }

    /// Renews this node's claim on job `id`: false once another node has it.
    async fn renew(&self, id: &str) -> Result<bool, StoreError> {
        self.store.claim_record(KIND, id, &self.owner, LEASE).await
    }

    /// Changes running job `id` with `f` and records it.
    async fn update(&self, id: &str, f: impl FnOnce(&mut Job)) {
        let job = {
            let mut active = self.lock();
            let Some(job) = active.get_mut(id) else { return };
            f(job);
            job.clone()
        };
        if let Err(e) = self.save(&job).await {
            tracing::warn!(id, error = %e, "could not record a purge job's progress");
        }
    }

    async fn save(&self, job: &Job) -> Result<(), StoreError> {
        let bytes = job.to_json().to_string().into_bytes();
        self.store.put_record(KIND, &job.id, bytes).await
    }
}

fn parse(bytes: &[u8]) -> Option<Job> {
    let job = serde_json::from_slice::<Value>(bytes)
        .ok()
        .and_then(|v| Job::from_json(&v));
    if job.is_none() {
        tracing::warn!("unreadable purge job record skipped");
    }
    job
}

/// Runs, until the store stops, every running job no node works: at start
/// those a stop interrupted, later those of a node that stopped renewing.
pub(crate) async fn watch(purges: Arc<Purges>) {
    loop {
        match purges.all().await {
            Ok(jobs) => {
                let now = now_secs();
                for job in jobs.iter().filter(|j| j.outlived(now)) {
                    if let Err(e) = purges.store.delete_record(KIND, &job.id).await {
                        tracing::warn!(id = job.id, error = %e, "could not delete a finished purge job's record");
                    }
                }
                for job in jobs.into_iter().filter(|j| j.state == JobState::Running) {
                    match purges.take(&job.id).await {
                        Ok(Some(job)) => {
                            tracing::info!(id = job.id, "resuming a purge");
                            tokio::spawn(run(purges.clone(), job));
                        }
                        Ok(None) => {}
                        Err(e) => tracing::warn!(id = job.id, error = %e, "could not claim a purge job"),
                    }
                }
            }
            Err(StoreError::Backend(b)) if b.kind == FailureKind::Stopped => return,
            Err(e) => tracing::warn!(error = %e, "could not list purge jobs"),
        }
        tokio::time::sleep(RESCAN).await;
    }
}

/// Starts new job `id`, which [`Purges::add`] claimed for this node.
pub(crate) async fn start(purges: Arc<Purges>, id: &str) -> Result<Option<Job>, StoreError> {
    let job = purges.take(id).await?;
    if let Some(job) = &job {
        tokio::spawn(run(purges.clone(), job.clone()));
    }
    Ok(job)
}

/// Why a job stopped before its end.
enum Stop {
    /// The store is shutting down: the job stays `running`, to resume at the next start.
    Paused,
    /// Another node took the job over (this one had stopped renewing its claim).
    Lost,
    Failed(String),
}

impl Stop {
    fn store(doing: &str, e: StoreError) -> Stop {
        match e {
            StoreError::Backend(b) if b.kind == FailureKind::Stopped => Stop::Paused,
            e => Stop::Failed(format!("{doing}: {e}")),
        }
    }
}

/// Consecutive passing failures ([`passing`]) a job waits out (about 25 s in
/// all) before it fails.
const BUSY_RETRIES: u32 = 50;

/// A failure that may pass: conflicts, a database out of reach.
fn passing(e: &StoreError) -> bool {
    match e {
        StoreError::Busy(_) => true,
        StoreError::Backend(b) => b.kind == FailureKind::Unavailable,
        _ => false,
    }
}

/// Runs `job` to its end, from its recorded cursor, while this node holds it.
async fn run(purges: Arc<Purges>, job: Job) {
    let id = job.id.clone();
    let outcome = run_batches(&purges, &job).await;
    let finished = now_nanos() / 1_000_000_000;
    match outcome {
        Err(Stop::Paused) => tracing::info!(id, "purge paused: the store is stopping; it resumes at the next start"),
        Err(Stop::Lost) => tracing::info!(id, "purge taken over by another node"),
        Ok(()) => {
            purges
                .update(&id, |j| {
                    j.state = JobState::Done;
                    j.finished = Some(finished);
                })
                .await;
            if let Some(j) = purges.lock().get(&id) {
                tracing::info!(
                    id,
                    account = j.account,
                    table = j.table,
                    deleted = j.deleted,
                    "purge done"
                );
            }
        }
        Err(Stop::Failed(e)) => {
            tracing::warn!(id, error = %e, "purge failed");
            purges
                .update(&id, |j| {
                    j.state = JobState::Failed(e);
                    j.finished = Some(finished);
                })
                .await;
        }
    }
    purges.lock().remove(&id);
}

async fn run_batches(purges: &Purges, job: &Job) -> Result<(), Stop> {
    let (store, id) = (purges.store.as_ref(), job.id.as_str());
    let compiled = match job.filter_text() {
        Some(text) => (purges.compile)(&text).map_err(Stop::Failed)?,
        None => Compiled {
            ranges: vec![KeyRange::all()],
            filter: None,
        },
    };
    let mut ranges = match &job.cursor {
        Some(c) => KeyRange::resume(compiled.ranges, c),
        None => compiled.ranges,
    };
    let batch = job.batch.clamp(1, MAX_BATCH);
    let mut busy = 0;
    while !ranges.is_empty() {
        match purges.renew(id).await {
            Ok(true) => {}
            Ok(false) => return Err(Stop::Lost),
            Err(e) if passing(&e) && busy < BUSY_RETRIES => {
                busy += 1;
                tokio::time::sleep(Duration::from_millis(20 * u64::from(busy))).await;
                continue;
            }
            Err(e) => return Err(Stop::store("claiming the job", e)),
        }
        let mut keys = Keys(Vec::new());
        let request = ScanRequest {
            ranges: ranges.clone(),
            limit: batch,
            filter: compiled.filter.clone(),
            deadline: None,
        };
        let scanned = store.scan_into(&job.account, &job.table, request, &mut keys).await;
        let done = match scanned {
            Ok(end) if keys.0.is_empty() => Ok((end, 0)),
            Ok(end) => delete(store, &job.account, &job.table, keys.0, compiled.filter.clone())
                .await
                .map(|n| (end, n))
                .map_err(|e| ("deleting", e)),
            Err(e) => Err(("scanning", e)),
        };
        let (end, deleted) = match done {
            Ok(done) => done,
            // A shared database's conflicts, or a lost connection: the same batch
            // again, after a pause.
            Err((_, e)) if busy < BUSY_RETRIES && passing(&e) => {
                busy += 1;
                tokio::time::sleep(Duration::from_millis(20 * u64::from(busy))).await;
                continue;
            }
            Err((doing, e)) => return Err(Stop::store(doing, e)),
        };
        busy = 0;
        let next = end.next.map(|k| k.as_bytes().to_vec());
        purges
            .update(id, |j| {
                j.deleted += deleted;
                j.cursor.clone_from(&next);
            })
            .await;
        match next {
            Some(next) => ranges = KeyRange::resume(ranges, &next),
            None => break,
        }
    }
    Ok(())
}

/// Deletes those of `keys` still there and still matching, in one write; how many.
async fn delete(
    store: &dyn Store,
    account: &str,
    table: &str,
    keys: Vec<EntityKey>,
    filter: Option<RowFilter>,
) -> Result<u64, StoreError> {
    let seen = keys.clone();
    write_with(store, account, table, keys, Expect::Any, move |current| {
        let mut n = 0u64;
        let mutations = current
            .iter()
            .zip(&seen)
            .map(|(row, key)| match row {
                Some(v) if filter.as_ref().is_none_or(|f| f(key.view(), v)) => {
                    n += 1;
                    Mutation::Delete
                }
                _ => Mutation::Keep,
            })
            .collect();
        (mutations, n)
    })
    .await
}

/// The keys a scan finds.
struct Keys(Vec<EntityKey>);

impl RowSink for Keys {
    fn push(&mut self, key: KeyRef<'_>, _: &[u8]) -> ControlFlow<()> {
        self.0.push(key.to_owned());
        ControlFlow::Continue(())
    }
}

fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

pub(crate) fn now_secs() -> u64 {
    now_nanos() / 1_000_000_000
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Finished jobs' records were never deleted, and every node lists them
    /// all every two seconds.
    #[test]
    fn a_finished_jobs_record_outlives_its_week_and_no_more() {
        let day = 24 * 3600;
        let mut job = Job::from_json(&json!({"id": "1", "account": "a", "table": "t", "batch": 1,
            "state": "done", "deleted": 0, "started": 0, "finished": 10 * day}))
        .expect("a job");
        assert!(!job.outlived(17 * day));
        assert!(job.outlived(17 * day + 1));
        job.state = JobState::Failed("e".into());
        assert!(job.outlived(17 * day + 1));
        job.state = JobState::Running;
        assert!(!job.outlived(100 * day));
    }

    #[test]
    fn a_job_record_reads_back_as_written() {
        let job = Job {
            id: "00ff".into(),
            account: "a".into(),
            table: "t".into(),
            filter: Some("n gt 3".into()),
            partition: Some("it's".into()),
            batch: 7,
            state: JobState::Running,
            deleted: 12,
            cursor: Some(vec![0, 1, 254, 255]),
            started: 5,
            finished: None,
        };
        let back = Job::from_json(&job.to_json()).map(|j| j.to_json());
        assert_eq!(back, Some(job.to_json()));
        assert_eq!(
            job.filter_text().as_deref(),
            Some("PartitionKey eq 'it''s' and (n gt 3)")
        );
    }
}
