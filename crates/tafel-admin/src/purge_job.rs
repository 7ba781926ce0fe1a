//! Purge jobs: what one is (a table, a filter, how far it got), how it runs
//! (scan a batch of matching keys, delete them in one write, move on) and how
//! it survives a crash (its record, rewritten after every batch, in a file of
//! the data directory that a restarted server reads to resume it).
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
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

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

/// Every purge job this server knows, and where their records live.
pub struct Purges {
    pub(crate) compile: FilterCompiler,
    /// `None`: jobs are not recorded (an in-memory store), so not resumed.
    dir: Option<PathBuf>,
    jobs: Mutex<BTreeMap<String, Job>>,
}

impl Purges {
    /// Reads the jobs recorded in `dir` (those a crash interrupted are resumed
    /// by `AdminState::with_purge`).
    pub fn new(compile: FilterCompiler, dir: Option<PathBuf>) -> Self {
        let mut jobs = BTreeMap::new();
        if let Some(entries) = dir.as_ref().and_then(|d| std::fs::read_dir(d).ok()) {
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().is_none_or(|e| e != "json") {
                    continue;
                }
                let job = std::fs::read(&path)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                    .and_then(|v| Job::from_json(&v));
                match job {
                    Some(job) => {
                        jobs.insert(job.id.clone(), job);
                    }
                    None => tracing::warn!(path = %path.display(), "unreadable purge job record skipped"),
                }
            }
        }
        Purges {
            compile,
            dir,
            jobs: Mutex::new(jobs),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Job>> {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn get(&self, id: &str) -> Option<Job> {
        self.lock().get(id).cloned()
    }

    pub(crate) fn all(&self) -> Vec<Job> {
        self.lock().values().cloned().collect()
    }

    pub(crate) fn running(&self) -> Vec<String> {
        self.lock()
            .values()
            .filter(|j| j.state == JobState::Running)
            .map(|j| j.id.clone())
            .collect()
    }

    /// Records a new job; its id.
    pub(crate) fn add(&self, mut job: Job) -> Result<String, String> {
        let mut jobs = self.lock();
        let mut n = now_nanos();
        while jobs.contains_key(&format!("{n:016x}")) {
            n += 1;
        }
        job.id = format!("{n:016x}");
        self.save(&job)?;
        let id = job.id.clone();
        jobs.insert(id.clone(), job);
        Ok(id)
    }

    /// Changes job `id` with `f` and records it.
    fn update(&self, id: &str, f: impl FnOnce(&mut Job)) {
        let mut jobs = self.lock();
        let Some(job) = jobs.get_mut(id) else { return };
        f(job);
        if let Err(e) = self.save(job) {
            tracing::warn!(id, error = %e, "could not record a purge job's progress");
        }
    }

    fn save(&self, job: &Job) -> Result<(), String> {
        let Some(dir) = &self.dir else { return Ok(()) };
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(dir)?;
            let tmp = dir.join(format!("{}.json.tmp", job.id));
            std::fs::write(&tmp, job.to_json().to_string())?;
            std::fs::rename(&tmp, dir.join(format!("{}.json", job.id)))
        };
        write().map_err(|e| format!("recording the job in {}: {e}", dir.display()))
    }
}

/// Why a job stopped before its end.
enum Stop {
    /// The store is shutting down: the job stays `running`, to resume at the next start.
    Paused,
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

/// Runs job `id` to its end, from its recorded cursor.
pub(crate) async fn run(purges: Arc<Purges>, store: Arc<dyn Store>, id: String) {
    let outcome = run_batches(&purges, store.as_ref(), &id).await;
    let finished = now_nanos() / 1_000_000_000;
    match outcome {
        Err(Stop::Paused) => tracing::info!(id, "purge paused: the store is stopping; it resumes at the next start"),
        Ok(()) => {
            purges.update(&id, |j| {
                j.state = JobState::Done;
                j.finished = Some(finished);
            });
            if let Some(j) = purges.get(&id) {
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
            purges.update(&id, |j| {
                j.state = JobState::Failed(e);
                j.finished = Some(finished);
            });
        }
    }
}

async fn run_batches(purges: &Purges, store: &dyn Store, id: &str) -> Result<(), Stop> {
    let job = purges.get(id).ok_or_else(|| Stop::Failed("the job is gone".into()))?;
    let compiled = match job.filter_text() {
        Some(text) => (purges.compile)(&text).map_err(Stop::Failed)?,
        None => Compiled {
            ranges: vec![KeyRange::all()],
            filter: None,
        },
    };
    let mut ranges = match &job.cursor {
        Some(c) => resume_ranges(compiled.ranges, c),
        None => compiled.ranges,
    };
    let batch = job.batch.clamp(1, MAX_BATCH);
    let mut busy = 0;
    while !ranges.is_empty() {
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
                tokio::time::sleep(std::time::Duration::from_millis(20 * u64::from(busy))).await;
                continue;
            }
            Err((doing, e)) => return Err(Stop::store(doing, e)),
        };
        busy = 0;
        let next = end.next.map(|k| k.as_bytes().to_vec());
        purges.update(id, |j| {
            j.deleted += deleted;
            j.cursor.clone_from(&next);
        });
        match next {
            Some(next) => ranges = resume_ranges(ranges, &next),
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

/// The part of `ranges` at or after `from`.
fn resume_ranges(ranges: Vec<KeyRange>, from: &[u8]) -> Vec<KeyRange> {
    ranges
        .into_iter()
        .filter_map(|mut r| {
            if r.start.as_slice() < from {
                r.start = from.to_vec();
            }
            (!r.is_empty()).then_some(r)
        })
        .collect()
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
