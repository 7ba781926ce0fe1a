//! The workloads, one module each. Each runs `concurrency` workers, one
//! keep-alive connection each, until its time budget or its operation budget is
//! spent, then the tallies are merged.

mod batch;
mod batch_insert;
mod insert;
mod merge_upsert;
mod partition_query;
mod point_read;
mod preload;
mod query;
mod read_while_merging;
mod scan_filter;
mod tally;
mod verify;

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Method, StatusCode};

use self::tally::Tally;
use crate::client::{Conn, Endpoint, Resp, JSON};
use crate::data::{self, PARTITION_SIZE};
use crate::report::Row;

/// Version marker of a data-set entity whose last merge failed (state unknown).
const UNKNOWN: u32 = u32::MAX;
/// At most this many pages per query (a guard against a server looping on continuations).
const MAX_PAGES: u32 = 100_000;

pub const ALL: [&str; 8] = [
    "insert",
    "point-read",
    "point-query",
    "merge-upsert",
    "read-while-merging",
    "partition-query",
    "scan-filter",
    "batch-insert",
];

pub struct Config {
    pub concurrency: usize,
    pub duration: Duration,
    pub entities: u64,
    pub verify: bool,
    pub max_ops: u64,
    pub preload_timeout: Duration,
    pub merge_verb: Method,
    pub seed: u64,
    pub shape: data::Shape,
    /// Where to write the operations slower than the given time (`--slow-log`).
    pub slow_log: Option<(PathBuf, Duration)>,
}

pub struct Bench {
    pub ep: Endpoint,
    pub cfg: Config,
    pub data_table: String,
    pub ins_table: String,
    versions: Vec<AtomicU32>,
    /// A moment on both clocks: slow operations are logged in wall-clock time.
    clock: (Instant, SystemTime),
}

fn entity_path(table: &str, pk: &str, rk: &str) -> String {
    format!("/{table}(PartitionKey='{pk}',RowKey='{rk}')")
}

impl Bench {
    pub fn new(ep: Endpoint, cfg: Config, prefix: &str) -> Self {
        let run = data::splitmix(cfg.seed) % 0xFF_FFFF;
        let versions = (0..cfg.entities).map(|_| AtomicU32::new(0)).collect();
        Self {
            ep,
            data_table: format!("{prefix}{run:06x}d"),
            ins_table: format!("{prefix}{run:06x}i"),
            cfg,
            versions,
            clock: (Instant::now(), SystemTime::now()),
        }
    }

    /// A worker's tally, keeping its slow operations when they are logged.
    fn tally(&self) -> Tally {
        Tally::watching(self.cfg.slow_log.as_ref().map(|(_, over)| *over))
    }

    /// Appends `slow` to the slow log: a line each, in the order they began, of
    /// the workload, when it began (Unix seconds) and its latency (ms).
    fn log_slow(&self, path: &Path, workload: &str, slow: &[(Instant, u64)]) -> std::io::Result<()> {
        let (at, wall) = self.clock;
        let unix = wall.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64();
        let mut lines: Vec<_> = slow.to_vec();
        lines.sort_unstable();
        let mut out = std::io::BufWriter::new(std::fs::OpenOptions::new().append(true).create(true).open(path)?);
        for (began, us) in lines {
            let when = unix + began.saturating_duration_since(at).as_secs_f64();
            writeln!(out, "{workload}\t{when:.6}\t{:.3}", us as f64 / 1e3)?;
        }
        out.flush()
    }

    fn partitions(&self) -> u64 {
        self.cfg.entities.div_ceil(PARTITION_SIZE)
    }

    fn version(&self, id: u64) -> u32 {
        self.versions
            .get(id as usize)
            .map_or(UNKNOWN, |v| v.load(Ordering::Relaxed))
    }

    fn per_worker_ops(&self) -> u64 {
        (self.cfg.max_ops / self.cfg.concurrency as u64).max(1)
    }

    async fn simple(
        &self,
        conn: &mut Conn,
        method: Method,
        path: &str,
        ct: Option<&str>,
        body: String,
    ) -> Result<Resp, String> {
        let req = self.ep.request(&method, path, ct, Bytes::from(body), &[])?;
        conn.send(req).await
    }

    /// Creates the two tables (an existing table is fine).
    pub async fn setup(&self) -> Result<(), String> {
        let mut conn = Conn::new(&self.ep);
        for t in [&self.data_table, &self.ins_table] {
            let body = format!("{{\"TableName\":\"{t}\"}}");
            let r = self
                .simple(&mut conn, Method::POST, "/Tables", Some(JSON), body)
                .await?;
            if !(r.status.is_success() || r.status == StatusCode::CONFLICT) {
                return Err(format!("creating table {t}: {}", r.describe()));
            }
        }
        Ok(())
    }

    /// Deletes the two tables (best effort).
    pub async fn teardown(&self) {
        let mut conn = Conn::new(&self.ep);
        for t in [&self.data_table, &self.ins_table] {
            let path = format!("/Tables('{t}')");
            if let Err(e) = self.simple(&mut conn, Method::DELETE, &path, None, String::new()).await {
                eprintln!("warning: deleting table {t}: {e}");
            }
        }
    }

    /// Runs `worker(w)` on `concurrency` tasks and merges their tallies.
    async fn run<F, Fut>(self: &Arc<Self>, worker: F) -> (Tally, f64)
    where
        F: Fn(Arc<Self>, u64) -> Fut,
        Fut: Future<Output = Tally> + Send + 'static,
    {
        let (tallies, elapsed) = self.run_each(worker).await;
        let mut total = Tally::new();
        tallies.into_iter().for_each(|(_, t)| total.merge(t));
        (total, elapsed)
    }

    /// Runs `worker(w)` on `concurrency` tasks; each worker's tally, by `w`.
    async fn run_each<F, Fut>(self: &Arc<Self>, worker: F) -> (Vec<(u64, Tally)>, f64)
    where
        F: Fn(Arc<Self>, u64) -> Fut,
        Fut: Future<Output = Tally> + Send + 'static,
    {
        let t0 = Instant::now();
        let handles: Vec<_> = (0..self.cfg.concurrency as u64)
            .map(|w| (w, tokio::spawn(worker(self.clone(), w))))
            .collect();
        let mut tallies = Vec::with_capacity(handles.len());
        for (w, h) in handles {
            let t = h.await.unwrap_or_else(|e| {
                let mut t = Tally::new();
                t.error("worker", format!("task failed: {e}"));
                t
            });
            tallies.push((w, t));
        }
        (tallies, t0.elapsed().as_secs_f64())
    }

    fn row(&self, name: &str, unit: &'static str, t: &Tally, elapsed: f64) -> Row {
        let mut r = Row {
            workload: name.to_string(),
            unit,
            ops: t.ops,
            entities: t.entities,
            matched: t.matched,
            elapsed_s: elapsed,
            errors: t.errors,
            verified: t.verified,
            mismatches: t.mismatches,
            ..Row::default()
        };
        r.set_latency(&t.hist);
        if let Some((path, _)) = &self.cfg.slow_log {
            if let Err(e) = self.log_slow(path, name, &t.slow) {
                eprintln!("warning: --slow-log {}: {e}", path.display());
            }
        }
        for m in &t.messages {
            eprintln!("  {name}: {m}");
        }
        if t.connects > self.cfg.concurrency as u64 {
            r.note = format!("{} connects; ", t.connects);
        }
        r
    }

    /// Runs one workload by name.
    pub async fn workload(self: &Arc<Self>, name: &str) -> Result<Row, String> {
        let mut row = match name {
            "insert" => self.insert(name).await,
            "point-read" | "point-query" => self.point_read(name).await,
            "merge-upsert" => self.merge_upsert(name).await,
            "read-while-merging" => self.read_while_merging(name).await,
            "partition-query" => self.partition_query(name).await,
            "scan-filter" => self.scan_filter(name).await,
            "batch-insert" => self.batch_insert(name).await,
            other => return Err(format!("unknown workload {other}")),
        };
        if row.note.ends_with("; ") {
            row.note.truncate(row.note.len() - 2);
        }
        Ok(row)
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.cfg.duration
    }
}
