//! The workloads. Each runs `concurrency` workers, one keep-alive connection each, until
//! its time budget or its operation budget is spent, then the tallies are merged.

use std::fmt::Write as _;
use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http::{Method, StatusCode};
use serde_json::Value;

use crate::client::{encode_query, Conn, Endpoint, Resp, ACCEPT, JSON};
use crate::data::{self, Rng, Values, BATCH_SIZE, PARTITION_SIZE};
use crate::report::{new_hist, Row};

/// Version marker of a data-set entity whose last merge failed (state unknown).
const UNKNOWN: u32 = u32::MAX;
/// At most this many pages per query (a guard against a server looping on continuations).
const MAX_PAGES: u32 = 100_000;

pub const ALL: [&str; 7] = [
    "insert",
    "point-read",
    "point-query",
    "merge-upsert",
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
}

pub struct Bench {
    pub ep: Endpoint,
    pub cfg: Config,
    pub data_table: String,
    pub ins_table: String,
    versions: Vec<AtomicU32>,
}

/// A read-back check to do after a workload.
struct Sample {
    insert_table: bool,
    pk: String,
    id: u64,
}

/// What one worker did.
struct Tally {
    hist: Histogram<u64>,
    /// Per full scan (scan-filter only).
    scan_hist: Histogram<u64>,
    ops: u64,
    entities: u64,
    matched: u64,
    scans: u64,
    errors: u64,
    verified: u64,
    mismatches: u64,
    messages: Vec<String>,
    samples: Vec<Sample>,
    connects: u64,
}

impl Tally {
    fn new() -> Self {
        Self {
            hist: new_hist(),
            scan_hist: new_hist(),
            ops: 0,
            entities: 0,
            matched: 0,
            scans: 0,
            errors: 0,
            verified: 0,
            mismatches: 0,
            messages: Vec::new(),
            samples: Vec::new(),
            connects: 0,
        }
    }

    fn error(&mut self, what: &str, msg: String) {
        self.errors += 1;
        if self.messages.len() < 3 {
            self.messages.push(format!("{what}: {msg}"));
        }
    }

    fn check(&mut self, what: &str, result: Result<(), String>) {
        self.verified += 1;
        if let Err(e) = result {
            self.mismatches += 1;
            if self.messages.len() < 6 {
                self.messages.push(format!("MISMATCH {what}: {e}"));
            }
        }
    }

    fn latency(&mut self, t0: Instant) {
        let us = t0.elapsed().as_micros().max(1) as u64;
        let _ = self.hist.record(us.min(self.hist.high()));
    }

    fn merge(&mut self, o: Tally) {
        let _ = self.hist.add(&o.hist);
        let _ = self.scan_hist.add(&o.scan_hist);
        self.ops += o.ops;
        self.entities += o.entities;
        self.matched += o.matched;
        self.scans += o.scans;
        self.errors += o.errors;
        self.verified += o.verified;
        self.mismatches += o.mismatches;
        self.connects += o.connects;
        for m in o.messages {
            if self.messages.len() < 8 {
                self.messages.push(m);
            }
        }
        self.samples.extend(o.samples);
    }
}

fn entity_path(table: &str, pk: &str, rk: &str) -> String {
    format!("/{table}(PartitionKey='{pk}',RowKey='{rk}')")
}

/// Appends the continuation of `resp` to `base`; `None` when the result is complete.
fn next_page(base: &str, resp: &Resp) -> Option<String> {
    let npk = resp.header("x-ms-continuation-nextpartitionkey")?;
    let mut url = format!("{base}&NextPartitionKey={}", encode_query(npk));
    if let Some(nrk) = resp.header("x-ms-continuation-nextrowkey") {
        let _ = write!(url, "&NextRowKey={}", encode_query(nrk));
    }
    Some(url)
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
        }
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
        let t0 = Instant::now();
        let handles: Vec<_> = (0..self.cfg.concurrency as u64)
            .map(|w| tokio::spawn(worker(self.clone(), w)))
            .collect();
        let mut total = Tally::new();
        for h in handles {
            match h.await {
                Ok(t) => total.merge(t),
                Err(e) => total.error("worker", format!("task failed: {e}")),
            }
        }
        (total, t0.elapsed().as_secs_f64())
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
        for m in &t.messages {
            eprintln!("  {name}: {m}");
        }
        if t.connects > self.cfg.concurrency as u64 {
            r.note = format!("{} connects; ", t.connects);
        }
        r
    }

    // ---------------------------------------------------------------- preload

    /// Loads the data set with 100-entity batches. Returns its row (entities/s).
    pub async fn preload(self: &Arc<Self>) -> Row {
        let next = Arc::new(AtomicU64::new(0));
        let deadline = Instant::now() + self.cfg.preload_timeout;
        let (t, elapsed) = self
            .run(move |b, w| {
                let next = next.clone();
                async move { b.preload_worker(w, next, deadline).await }
            })
            .await;
        let mut row = self.row("preload", "entities/s", &t, elapsed);
        row.rate = crate::report::per_s(t.entities, elapsed);
        let _ = write!(row.note, "{} entities in {elapsed:.1} s, {} batches", t.entities, t.ops);
        if t.entities < self.cfg.entities {
            let _ = write!(row.note, "; INCOMPLETE ({} of {})", t.entities, self.cfg.entities);
        }
        row
    }

    async fn preload_worker(self: Arc<Self>, _w: u64, next: Arc<AtomicU64>, deadline: Instant) -> Tally {
        let mut t = Tally::new();
        let mut conn = Conn::new(&self.ep);
        let batches = self.cfg.entities.div_ceil(BATCH_SIZE);
        loop {
            let b = next.fetch_add(1, Ordering::Relaxed);
            if b >= batches || Instant::now() >= deadline {
                break;
            }
            let first = b * BATCH_SIZE;
            let ids: Vec<u64> = (first..(first + BATCH_SIZE).min(self.cfg.entities)).collect();
            let pk = data::data_pk(first);
            let boundary = format!("batch_p{b:x}");
            let body = self.batch_body(&boundary, &self.data_table, &pk, &ids);
            // A failed batch is retried (a preload must be complete to be useful).
            for attempt in 0..3 {
                let t0 = Instant::now();
                match self.send_batch(&mut conn, &boundary, body.clone(), ids.len()).await {
                    Ok(()) => {
                        t.latency(t0);
                        t.ops += 1;
                        t.entities += ids.len() as u64;
                        break;
                    }
                    Err(e) => t.error(&format!("batch {b} attempt {attempt}"), e),
                }
            }
        }
        t.connects = conn.connects;
        t
    }

    fn batch_body(&self, boundary: &str, table: &str, pk: &str, ids: &[u64]) -> Bytes {
        let cs = format!("changeset_{}", &boundary[6..]);
        let url = self.ep.absolute(&format!("/{table}"));
        let mut s = String::with_capacity(ids.len() * 1400 + 200);
        let _ = write!(
            s,
            "--{boundary}\r\nContent-Type: multipart/mixed; boundary={cs}\r\n\r\n"
        );
        for (i, &id) in ids.iter().enumerate() {
            let v = Values::new(id, 0);
            let _ = write!(
                s,
                "--{cs}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\nContent-ID: {i}\r\n\r\n\
                 POST {url} HTTP/1.1\r\nContent-Type: application/json\r\nAccept: {ACCEPT}\r\n\
                 Prefer: return-no-content\r\nDataServiceVersion: 3.0;\r\n\r\n{}\r\n",
                v.entity_json(pk, &data::rk(id))
            );
        }
        let _ = write!(s, "--{cs}--\r\n\r\n--{boundary}--\r\n");
        Bytes::from(s)
    }

    /// Sends a `$batch` and checks that every operation succeeded.
    async fn send_batch(&self, conn: &mut Conn, boundary: &str, body: Bytes, n: usize) -> Result<(), String> {
        let ct = format!("multipart/mixed; boundary={boundary}");
        let req = self.ep.request(&Method::POST, "/$batch", Some(&ct), body, &[])?;
        let r = conn.send(req).await?;
        if r.status != StatusCode::ACCEPTED {
            return Err(r.describe());
        }
        let ok = count(&r.body, b"HTTP/1.1 204") + count(&r.body, b"HTTP/1.1 201");
        if ok != n {
            return Err(format!("{ok} of {n} operations succeeded: {}", r.describe()));
        }
        Ok(())
    }

    // ---------------------------------------------------------------- workloads

    /// Runs one workload by name.
    pub async fn workload(self: &Arc<Self>, name: &str) -> Result<Row, String> {
        let mut row = match name {
            "insert" => {
                let (t, el) = self.run(|b, w| b.insert_worker(w)).await;
                let mut row = self.row(name, "ops/s", &t, el);
                row.rate = crate::report::per_s(t.ops, el);
                self.verify_samples(&mut row, t.samples).await;
                row
            }
            "point-read" | "point-query" => {
                let as_query = name == "point-query";
                let (t, el) = self.run(move |b, w| b.point_read_worker(w, as_query)).await;
                let mut row = self.row(name, "ops/s", &t, el);
                row.rate = crate::report::per_s(t.ops, el);
                row
            }
            "merge-upsert" => {
                let (t, el) = self.run(|b, w| b.merge_worker(w)).await;
                let mut row = self.row(name, "ops/s", &t, el);
                row.rate = crate::report::per_s(t.ops, el);
                let _ = write!(row.note, "verb {}", self.cfg.merge_verb);
                self.verify_samples(&mut row, t.samples).await;
                row
            }
            "partition-query" => {
                let (t, el) = self.run(|b, w| b.partition_query_worker(w)).await;
                let mut row = self.row(name, "queries/s", &t, el);
                row.rate = crate::report::per_s(t.ops, el);
                let _ = write!(
                    row.note,
                    "{:.0} entities/s returned; filter PartitionKey eq 'p…' and Int32Prop gt {}",
                    crate::report::per_s(t.entities, el),
                    data::PARTITION_PREDICATE_MIN
                );
                row
            }
            "scan-filter" => {
                let (t, el) = self.run(|b, w| b.scan_worker(w)).await;
                let mut row = self.row(name, "entities/s", &t, el);
                row.rate = crate::report::per_s(t.entities, el);
                let scan = if t.scan_hist.is_empty() {
                    "no full scan completed".to_string()
                } else {
                    format!(
                        "{} full scans, p50 {:.2} s each",
                        t.scans,
                        t.scan_hist.value_at_quantile(0.5) as f64 / 1e6
                    )
                };
                let _ = write!(
                    row.note,
                    "scanned (latency per page); {:.0} matched/s; {scan}; filter Int32Prop lt {}",
                    crate::report::per_s(t.matched, el),
                    data::SCAN_PREDICATE_MAX
                );
                row
            }
            "batch-insert" => {
                let (t, el) = self.run(|b, w| b.batch_insert_worker(w)).await;
                let mut row = self.row(name, "entities/s", &t, el);
                row.rate = crate::report::per_s(t.entities, el);
                let _ = write!(
                    row.note,
                    "{:.1} batches/s of {BATCH_SIZE} (latency per batch)",
                    crate::report::per_s(t.ops, el)
                );
                self.verify_samples(&mut row, t.samples).await;
                row
            }
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

    async fn insert_worker(self: Arc<Self>, w: u64) -> Tally {
        let mut t = Tally::new();
        let mut conn = Conn::new(&self.ep);
        let (deadline, max) = (self.deadline(), self.per_worker_ops());
        let path = format!("/{}", self.ins_table);
        let mut seq = 0;
        while Instant::now() < deadline && seq < max {
            let id = data::insert_id(w, seq);
            let pk = data::insert_pk(w, seq);
            let body = Values::new(id, 0).entity_json(&pk, &data::rk(id));
            let req = match self.ep.request(
                &Method::POST,
                &path,
                Some(JSON),
                Bytes::from(body),
                &[("Prefer", "return-no-content")],
            ) {
                Ok(r) => r,
                Err(e) => {
                    t.error("insert", e);
                    break;
                }
            };
            let t0 = Instant::now();
            match conn.send(req).await {
                Ok(r) if r.status == StatusCode::NO_CONTENT || r.status == StatusCode::CREATED => {
                    t.latency(t0);
                    t.ops += 1;
                    t.entities += 1;
                    if self.cfg.verify && seq.is_multiple_of(100) {
                        t.samples.push(Sample {
                            insert_table: true,
                            pk,
                            id,
                        });
                    }
                }
                Ok(r) => t.error("insert", r.describe()),
                Err(e) => t.error("insert", e),
            }
            seq += 1;
        }
        t.connects = conn.connects;
        t
    }

    /// A point read, by key (`as_query` false) or as the query `PartitionKey eq … and
    /// RowKey eq …`, which the planner must make cost the same.
    async fn point_read_worker(self: Arc<Self>, w: u64, as_query: bool) -> Tally {
        let mut t = Tally::new();
        let mut conn = Conn::new(&self.ep);
        let (deadline, max) = (self.deadline(), self.per_worker_ops());
        let mut rng = Rng::new(self.cfg.seed ^ (w << 20) ^ 0x2EAD);
        while Instant::now() < deadline && t.ops + t.errors < max {
            let id = rng.below(self.cfg.entities);
            let (pk, rk) = (data::data_pk(id), data::rk(id));
            let path = if as_query {
                let filter = format!("PartitionKey eq '{pk}' and RowKey eq '{rk}'");
                format!("/{}()?$filter={}", self.data_table, encode_query(&filter))
            } else {
                entity_path(&self.data_table, &pk, &rk)
            };
            let req = match self.ep.request(&Method::GET, &path, None, Bytes::new(), &[]) {
                Ok(r) => r,
                Err(e) => {
                    t.error("point-read", e);
                    break;
                }
            };
            let t0 = Instant::now();
            match conn.send(req).await {
                Ok(r) if r.status == StatusCode::OK => {
                    t.latency(t0);
                    t.ops += 1;
                    t.entities += 1;
                    // Verify one read in 16 in full (keys, every value, every type).
                    let version = self.version(id);
                    if self.cfg.verify && t.ops % 16 == 1 && version != UNKNOWN {
                        let res = if as_query {
                            // Exactly one entity, and the right one.
                            match serde_json::from_slice::<Value>(&r.body) {
                                Ok(v) => match v["value"].as_array().map(Vec::as_slice) {
                                    Some([one]) => match one.as_object() {
                                        Some(obj) => data::verify_entity(obj, &pk, &rk, &Values::new(id, version)),
                                        None => Err("query result is not an object".into()),
                                    },
                                    _ => Err("point query did not return exactly one entity".into()),
                                },
                                Err(e) => Err(format!("invalid JSON: {e}")),
                            }
                        } else {
                            data::verify_body(&r.body, &pk, &rk, &Values::new(id, version))
                        };
                        t.check(&format!("point-read {pk}/{rk}"), res);
                    }
                }
                Ok(r) => t.error(&format!("point-read {pk}/{rk}"), r.describe()),
                Err(e) => t.error("point-read", e),
            }
        }
        t.connects = conn.connects;
        t
    }

    async fn merge_worker(self: Arc<Self>, w: u64) -> Tally {
        let mut t = Tally::new();
        let mut conn = Conn::new(&self.ep);
        let (deadline, max) = (self.deadline(), self.per_worker_ops());
        let c = self.cfg.concurrency as u64;
        // Worker w owns the ids ≡ w (mod concurrency): no two merges of one entity overlap,
        // so the version recorded after a success is the stored one.
        let owned = self.cfg.entities.saturating_sub(w).div_ceil(c);
        if owned == 0 {
            return t;
        }
        let mut rng = Rng::new(self.cfg.seed ^ (w << 20) ^ 0x3E26E);
        while Instant::now() < deadline && t.ops + t.errors < max {
            let id = w + rng.below(owned) * c;
            let Some(slot) = self.versions.get(id as usize) else {
                break;
            };
            let cur = slot.load(Ordering::Relaxed);
            let next = if cur == UNKNOWN || cur >= i32::MAX as u32 {
                1
            } else {
                cur + 1
            };
            let (pk, rk) = (data::data_pk(id), data::rk(id));
            let body = Values::new(id, next).merge_json(&pk, &rk);
            let path = entity_path(&self.data_table, &pk, &rk);
            let req = match self
                .ep
                .request(&self.cfg.merge_verb, &path, Some(JSON), Bytes::from(body), &[])
            {
                Ok(r) => r,
                Err(e) => {
                    t.error("merge", e);
                    break;
                }
            };
            let t0 = Instant::now();
            match conn.send(req).await {
                Ok(r) if r.status == StatusCode::NO_CONTENT => {
                    t.latency(t0);
                    t.ops += 1;
                    t.entities += 1;
                    slot.store(next, Ordering::Relaxed);
                    if self.cfg.verify && t.ops % 16 == 1 {
                        t.samples.push(Sample {
                            insert_table: false,
                            pk,
                            id,
                        });
                    }
                }
                Ok(r) => {
                    slot.store(UNKNOWN, Ordering::Relaxed);
                    t.error(&format!("merge {pk}/{rk}"), r.describe());
                }
                Err(e) => {
                    slot.store(UNKNOWN, Ordering::Relaxed);
                    t.error("merge", e);
                }
            }
        }
        t.connects = conn.connects;
        t
    }

    /// Runs a query to completion (following continuations); returns (pages, entities).
    /// `check` is called with each page body.
    async fn query_all(
        &self,
        conn: &mut Conn,
        base: &str,
        deadline: Option<Instant>,
        mut on_page: impl FnMut(&Resp, Instant),
    ) -> Result<bool, String> {
        let mut url = base.to_string();
        for _ in 0..MAX_PAGES {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(false);
            }
            let req = self.ep.request(&Method::GET, &url, None, Bytes::new(), &[])?;
            let t0 = Instant::now();
            let r = conn.send(req).await?;
            if r.status != StatusCode::OK {
                return Err(r.describe());
            }
            on_page(&r, t0);
            match next_page(base, &r) {
                Some(u) => url = u,
                None => return Ok(true),
            }
        }
        Err(format!("more than {MAX_PAGES} pages"))
    }

    fn verify_page(&self, body: &[u8]) -> Vec<Result<(), String>> {
        let parsed: Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => return vec![Err(format!("invalid JSON page: {e}"))],
        };
        let Some(items) = parsed["value"].as_array() else {
            return vec![Err("page without a value array".into())];
        };
        items
            .iter()
            .filter_map(|item| {
                let obj = item.as_object()?;
                let rk = obj.get("RowKey").and_then(Value::as_str).unwrap_or("");
                let id: u64 = match rk.parse() {
                    Ok(id) => id,
                    Err(_) => return Some(Err(format!("unexpected RowKey {rk:?}"))),
                };
                let version = self.version(id);
                if version == UNKNOWN {
                    return None;
                }
                Some(data::verify_entity(
                    obj,
                    &data::data_pk(id),
                    rk,
                    &Values::new(id, version),
                ))
            })
            .collect()
    }

    async fn partition_query_worker(self: Arc<Self>, w: u64) -> Tally {
        let mut t = Tally::new();
        let mut conn = Conn::new(&self.ep);
        let (deadline, max) = (self.deadline(), self.per_worker_ops());
        let mut rng = Rng::new(self.cfg.seed ^ (w << 20) ^ 0x9A27);
        while Instant::now() < deadline && t.ops + t.errors < max {
            let p = rng.below(self.partitions());
            let filter = format!(
                "PartitionKey eq '{}' and Int32Prop gt {}",
                data::partition_pk(p),
                data::PARTITION_PREDICATE_MIN
            );
            let base = format!("/{}()?$filter={}", self.data_table, encode_query(&filter));
            let full_check = self.cfg.verify && t.ops.is_multiple_of(8);
            let mut matched = 0;
            let mut checks = Vec::new();
            let t0 = Instant::now();
            let res = self
                .query_all(&mut conn, &base, None, |r, _| {
                    matched += data::count_entities(&r.body);
                    if full_check {
                        checks.extend(self.verify_page(&r.body));
                    }
                })
                .await;
            match res {
                Ok(_) => {
                    t.latency(t0);
                    t.ops += 1;
                    t.entities += matched;
                    t.matched += matched;
                    if self.cfg.verify {
                        let want = data::partition_expected(p, self.cfg.entities);
                        let res = if matched == want {
                            Ok(())
                        } else {
                            Err(format!("{matched} entities, expected {want}"))
                        };
                        t.check(&format!("partition-query p{p}"), res);
                    }
                    for c in checks {
                        t.check(&format!("partition-query p{p}"), c);
                    }
                }
                Err(e) => t.error(&format!("partition-query p{p}"), e),
            }
        }
        t.connects = conn.connects;
        t
    }

    async fn scan_worker(self: Arc<Self>, w: u64) -> Tally {
        let mut t = Tally::new();
        let mut conn = Conn::new(&self.ep);
        let (deadline, max) = (self.deadline(), self.per_worker_ops());
        let filter = format!("Int32Prop lt {}", data::SCAN_PREDICATE_MAX);
        let base = format!("/{}()?$filter={}", self.data_table, encode_query(&filter));
        let expected = data::scan_expected(self.cfg.entities);
        let mut first = true;
        while Instant::now() < deadline && t.ops + t.errors < max {
            // Worker 0 checks every entity of its first scan in full.
            let full_check = self.cfg.verify && w == 0 && first;
            first = false;
            let (mut matched, mut progress, mut pages) = (0u64, 0u64, 0u64);
            let mut checks = Vec::new();
            let hist = &mut t.hist;
            let t0 = Instant::now();
            let res = self
                .query_all(&mut conn, &base, Some(deadline), |r, page_t0| {
                    let us = page_t0.elapsed().as_micros().max(1) as u64;
                    let _ = hist.record(us.min(hist.high()));
                    pages += 1;
                    matched += data::count_entities(&r.body);
                    if let Some(id) = data::last_row_id(&r.body) {
                        progress = progress.max(id + 1);
                    }
                    if full_check {
                        checks.extend(self.verify_page(&r.body));
                    }
                })
                .await;
            t.ops += pages;
            t.matched += matched;
            match res {
                Ok(true) => {
                    let us = t0.elapsed().as_micros().max(1) as u64;
                    let _ = t.scan_hist.record(us.min(t.scan_hist.high()));
                    t.scans += 1;
                    t.entities += self.cfg.entities;
                    if self.cfg.verify {
                        let res = if matched == expected {
                            Ok(())
                        } else {
                            Err(format!("{matched} entities matched, expected {expected}"))
                        };
                        t.check("scan-filter full scan", res);
                    }
                }
                // Stopped at the deadline: count what was scanned so far.
                Ok(false) => t.entities += progress.min(self.cfg.entities),
                Err(e) => {
                    t.entities += progress.min(self.cfg.entities);
                    t.error("scan-filter", e);
                }
            }
            for c in checks {
                t.check("scan-filter", c);
            }
        }
        t.connects = conn.connects;
        t
    }

    async fn batch_insert_worker(self: Arc<Self>, w: u64) -> Tally {
        let mut t = Tally::new();
        let mut conn = Conn::new(&self.ep);
        let (deadline, max) = (self.deadline(), self.per_worker_ops());
        let mut b = 0;
        while Instant::now() < deadline && b < max {
            let pk = data::batch_pk(w, b);
            let ids: Vec<u64> = (0..BATCH_SIZE).map(|i| data::batch_id(w, b, i)).collect();
            let boundary = format!("batch_{w:x}x{b:x}");
            let body = self.batch_body(&boundary, &self.ins_table, &pk, &ids);
            let t0 = Instant::now();
            match self.send_batch(&mut conn, &boundary, body, ids.len()).await {
                Ok(()) => {
                    t.latency(t0);
                    t.ops += 1;
                    t.entities += BATCH_SIZE;
                    if self.cfg.verify {
                        // One entity of each batch: 1% of the written entities.
                        let id = ids[(b % BATCH_SIZE) as usize];
                        t.samples.push(Sample {
                            insert_table: true,
                            pk,
                            id,
                        });
                    }
                }
                Err(e) => t.error("batch-insert", e),
            }
            b += 1;
        }
        t.connects = conn.connects;
        t
    }

    // ---------------------------------------------------------------- verification

    /// Reads back `samples` (at most 20 000) and compares them; adds to the row's counts.
    async fn verify_samples(self: &Arc<Self>, row: &mut Row, mut samples: Vec<Sample>) {
        if !self.cfg.verify || samples.is_empty() {
            return;
        }
        samples.truncate(20_000);
        let samples = Arc::new(samples);
        let next = Arc::new(AtomicU64::new(0));
        let (t, _) = self
            .run(move |b, _w| {
                let (samples, next) = (samples.clone(), next.clone());
                async move {
                    let mut t = Tally::new();
                    let mut conn = Conn::new(&b.ep);
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                        let Some(s) = samples.get(i) else { break };
                        let table = if s.insert_table { &b.ins_table } else { &b.data_table };
                        let version = if s.insert_table { 0 } else { b.version(s.id) };
                        if version == UNKNOWN {
                            continue;
                        }
                        let rk = data::rk(s.id);
                        let path = entity_path(table, &s.pk, &rk);
                        let what = format!("read-back {}/{rk}", s.pk);
                        match b.ep.request(&Method::GET, &path, None, Bytes::new(), &[]) {
                            Ok(req) => match conn.send(req).await {
                                Ok(r) if r.status == StatusCode::OK => {
                                    let res = data::verify_body(&r.body, &s.pk, &rk, &Values::new(s.id, version));
                                    t.check(&what, res);
                                }
                                Ok(r) => t.check(&what, Err(r.describe())),
                                Err(e) => t.error(&what, e),
                            },
                            Err(e) => t.error(&what, e),
                        }
                    }
                    t
                }
            })
            .await;
        for m in &t.messages {
            eprintln!("  {}: {m}", row.workload);
        }
        row.errors += t.errors;
        row.verified += t.verified;
        row.mismatches += t.mismatches;
    }
}

fn count(hay: &[u8], needle: &[u8]) -> usize {
    memchr::memmem::find_iter(hay, needle).count()
}
