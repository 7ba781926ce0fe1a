//! `tafel import`: rows from a file into a table as `$batch` changesets of up to
//! 100 rows of one partition, many in flight.
//!
//! - Retries: a timeout, a lost connection, 503 or 500 is retried with backoff. A
//!   changeset whose answer was lost may have been applied: in insert mode its retry
//!   then meets its own rows, so an `EntityAlreadyExists` after such a loss is checked
//!   against the stored entity, and a row stored exactly as sent counts as written —
//!   never a reject for the import's own earlier success, never written twice.
//! - Rejects: a row the service refuses (4xx) is taken out of its changeset and the rest
//!   retried; it goes to the rejects file (one JSON object per line, with Azure's error).
//! - Checkpoint: every line up to the checkpoint's is written or rejected; `--resume`
//!   goes on after it, and meets rows the stopped run wrote past it as its own earlier
//!   success (checked as above). Ctrl-C stops taking new changesets, lets those in
//!   flight finish, and saves it. A run that finishes removes it (and an empty rejects
//!   file).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::client::BatchOp;
use crate::format::Row;
use crate::progress::Progress;
use crate::{TableClient, TransferError};

/// Attempts of one request before its rows are given up on.
pub const RETRIES: u32 = 8;
/// A changeset's body stays under the service's 4 MiB request limit.
const MAX_BATCH_BYTES: usize = 3 << 20;
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// The wait before attempt `attempt + 1`: doubling from 100 ms to 10 s, with jitter.
pub fn backoff(attempt: u32) -> Duration {
    let base = 100u64.saturating_mul(1 << attempt.min(7)).min(10_000);
    Duration::from_millis(base / 2 + fastrand::u64(..=base / 2))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// An existing entity is a rejected row.
    Insert,
    /// Insert or merge.
    Merge,
    /// Insert or replace.
    Replace,
}

impl Mode {
    fn method(self) -> &'static str {
        match self {
            Mode::Insert => "POST",
            Mode::Merge => "MERGE",
            Mode::Replace => "PUT",
        }
    }
}

pub struct Options {
    pub table: String,
    pub mode: Mode,
    pub in_flight: usize,
    /// Where refused rows go, and where the checkpoint is kept.
    pub rejects: PathBuf,
    /// `None`: the rows come in no fixed order (a parallel copy), nothing to resume.
    pub checkpoint: Option<PathBuf>,
    pub resume: bool,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub written: u64,
    pub rejected: u64,
}

/// Rows of one partition written as one changeset (one request).
struct Chunk {
    seq: u64,
    last_line: u64,
    rows: Vec<(u64, Row)>,
    /// Lines that could not be read as rows, reported in order with the chunk.
    unreadable: Vec<Value>,
}

struct Done {
    seq: u64,
    last_line: u64,
    written: u64,
    rejects: Vec<Value>,
}

/// Where a previous run stopped: every line up to `line` is done.
fn read_checkpoint(path: &Path) -> Result<(u64, Summary), TransferError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| TransferError::Usage(format!("--resume: reading the checkpoint {}: {e}", path.display())))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| TransferError::Usage(format!("--resume: the checkpoint {} is damaged: {e}", path.display())))?;
    let n = |k: &str| v[k].as_u64().unwrap_or(0);
    Ok((
        n("line"),
        Summary {
            written: n("written"),
            rejected: n("rejected"),
        },
    ))
}

fn save_checkpoint(path: &Path, line: u64, s: &Summary) -> Result<(), TransferError> {
    // Written aside and renamed over: a crash leaves the old checkpoint or the new one.
    let tmp = path.with_extension("tmp");
    std::fs::write(
        &tmp,
        json!({"line": line, "written": s.written, "rejected": s.rejected}).to_string(),
    )?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// Imports `rows` (line number, row or why not) into the table.
pub async fn import(
    client: Arc<TableClient>,
    rows: impl Iterator<Item = (u64, Result<Row, String>)> + Send + 'static,
    opts: &Options,
    progress: &dyn Progress,
) -> Result<Summary, TransferError> {
    let mut ledger = Ledger::open(opts)?;
    // The stopped run may have written rows past its checkpoint (chunks that finished
    // ahead of it): a resumed run finds them as its own earlier success.
    let resumed = opts.resume;
    let (tx, mut chunks) = mpsc::channel::<Chunk>(opts.in_flight.max(1));
    let start = ledger.watermark;
    let reader = tokio::task::spawn_blocking(move || make_chunks(rows, start, &tx));

    let mut running = JoinSet::new();
    let (mut reading, mut interrupted) = (true, false);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    while reading || !running.is_empty() {
        let room = running.len() < opts.in_flight.max(1);
        tokio::select! {
            chunk = chunks.recv(), if reading && room => match chunk {
                Some(chunk) => {
                    let (client, table, mode) = (client.clone(), opts.table.clone(), opts.mode);
                    running.spawn(async move { write_chunk(&client, &table, mode, resumed, chunk).await });
                }
                None => reading = false,
            },
            done = running.join_next(), if !running.is_empty() => {
                let Some(done) = done else { continue };
                let done = done.map_err(|e| TransferError::Protocol(format!("a writer stopped: {e}")))?;
                progress.add(done.written + done.rejects.len() as u64, 0);
                ledger.record(done)?;
                if ledger.last_save.elapsed() >= CHECKPOINT_EVERY {
                    ledger.save()?;
                }
            }
            _ = &mut ctrl_c, if reading => {
                eprintln!("stopping: letting the changesets in flight finish…");
                (reading, interrupted) = (false, true);
            }
        }
    }
    ledger.save()?;
    // A reader still sending finds the channel closed and stops.
    drop(chunks);
    reader
        .await
        .map_err(|e| TransferError::Protocol(format!("the reader stopped: {e}")))??;
    if interrupted {
        return Err(TransferError::Interrupted);
    }
    Ok(ledger.finish(opts))
}

/// What the import has done as of its checkpoint's line: the counts, the rejects
/// file, and the chunks done ahead of that line.
struct Ledger {
    summary: Summary,
    rejects_file: std::fs::File,
    checkpoint: Option<std::path::PathBuf>,
    /// Chunks done out of order, by sequence number, until those before them are.
    finished: BTreeMap<u64, Done>,
    next_seq: u64,
    /// What the done chunks of the window the checkpoint has not passed yet did.
    window_written: u64,
    window_rejects: Vec<Value>,
    /// The line the checkpoint stands at.
    watermark: u64,
    last_save: Instant,
}

impl Ledger {
    /// A fresh ledger, or the checkpoint's when resuming.
    fn open(opts: &Options) -> Result<Self, TransferError> {
        let (watermark, summary) = match &opts.checkpoint {
            Some(path) if opts.resume && path.exists() => read_checkpoint(path)?,
            _ => (0, Summary::default()),
        };
        let rejects_file = std::fs::OpenOptions::new()
            .create(true)
            .append(opts.resume)
            .write(true)
            .truncate(!opts.resume)
            .open(&opts.rejects)
            .map_err(|e| TransferError::Usage(format!("opening {}: {e}", opts.rejects.display())))?;
        Ok(Ledger {
            summary,
            rejects_file,
            checkpoint: opts.checkpoint.clone(),
            finished: BTreeMap::new(),
            next_seq: 0,
            window_written: 0,
            window_rejects: Vec::new(),
            watermark,
            last_save: Instant::now(),
        })
    }

    /// Counts and rejects are kept as of the checkpoint's line, a window's once
    /// all of it is done: a resumed run does what lies past that line again, and
    /// must not count or report it twice.
    fn record(&mut self, done: Done) -> Result<(), TransferError> {
        self.finished.insert(done.seq, done);
        while let Some(done) = self.finished.remove(&self.next_seq) {
            self.next_seq += 1;
            self.window_written += done.written;
            self.window_rejects.extend(done.rejects);
            if done.last_line != self.watermark {
                for r in self.window_rejects.drain(..) {
                    writeln!(self.rejects_file, "{r}")?;
                    self.summary.rejected += 1;
                }
                self.summary.written += std::mem::take(&mut self.window_written);
                self.watermark = done.last_line;
            }
        }
        Ok(())
    }

    fn save(&mut self) -> Result<(), TransferError> {
        self.rejects_file.flush()?;
        if let Some(path) = &self.checkpoint {
            save_checkpoint(path, self.watermark, &self.summary)?;
        }
        self.last_save = Instant::now();
        Ok(())
    }

    /// The import is done: nothing to resume, and no empty rejects file left behind.
    fn finish(self, opts: &Options) -> Summary {
        if let Some(path) = &self.checkpoint {
            let _ = std::fs::remove_file(path);
        }
        if self.summary.rejected == 0 {
            let _ = std::fs::remove_file(&opts.rejects);
        }
        self.summary
    }
}

/// Rows read at once and grouped by partition before they are cut into changesets,
/// so a file whose partitions interleave (unsorted, or a parallel export's pages)
/// still makes full changesets. Rows of one partition keep their order.
const WINDOW_ROWS: usize = 10_000;
const WINDOW_BYTES: usize = 64 << 20;

/// Reads rows into changesets: a window's rows by partition, up to 100 and 3 MiB
/// each, no RowKey twice. A window's chunks are numbered in order and only its last
/// one carries the window's last line, so the checkpoint passes a window only once
/// every chunk of it is done.
fn make_chunks(
    rows: impl Iterator<Item = (u64, Result<Row, String>)>,
    start: u64,
    tx: &mpsc::Sender<Chunk>,
) -> Result<(), TransferError> {
    let mut rows = rows.filter(|(line, _)| *line > start);
    let (mut seq, mut done_through) = (0u64, start);
    loop {
        let (mut window, mut unreadable, mut bytes, mut last_line) = (Vec::new(), Vec::new(), 0, done_through);
        let mut more = false;
        for (line, row) in rows.by_ref() {
            last_line = line;
            match row {
                Ok(row) => {
                    bytes += row.body.len();
                    window.push((line, row));
                }
                Err(why) => {
                    unreadable.push(json!({"line": line, "status": 400, "code": "InvalidInput", "message": why}))
                }
            }
            if window.len() >= WINDOW_ROWS || bytes >= WINDOW_BYTES {
                more = true;
                break;
            }
        }
        if window.is_empty() && unreadable.is_empty() {
            return Ok(());
        }
        let mut changesets = changesets(window).into_iter().peekable();
        let mut unreadable = Some(unreadable);
        loop {
            let rows = changesets.next().unwrap_or_default();
            let last = changesets.peek().is_none();
            let chunk = Chunk {
                seq,
                last_line: if last { last_line } else { done_through },
                rows,
                unreadable: unreadable.take().unwrap_or_default(),
            };
            seq += 1;
            if tx.blocking_send(chunk).is_err() {
                return Ok(()); // the import stopped taking chunks (Ctrl-C)
            }
            if last {
                break;
            }
        }
        done_through = last_line;
        if !more {
            return Ok(());
        }
    }
}

/// A window's rows as changesets: by partition in order of first appearance, each
/// partition's rows in their order, cut at 100 rows, 3 MiB or a RowKey seen again.
fn changesets(window: Vec<(u64, Row)>) -> Vec<Vec<(u64, Row)>> {
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut partitions: Vec<Vec<(u64, Row)>> = Vec::new();
    for (line, row) in window {
        let i = *index.entry(row.partition_key.clone()).or_insert_with(|| {
            partitions.push(Vec::new());
            partitions.len() - 1
        });
        partitions[i].push((line, row));
    }
    let mut out = Vec::new();
    for rows in partitions {
        let (mut current, mut keys, mut bytes) = (Vec::new(), std::collections::HashSet::new(), 0);
        for (line, row) in rows {
            let full = current.len() == 100 || bytes + row.body.len() > MAX_BATCH_BYTES;
            if !current.is_empty() && (full || keys.contains(&row.row_key)) {
                out.push(std::mem::take(&mut current));
                keys.clear();
                bytes = 0;
            }
            bytes += row.body.len();
            keys.insert(row.row_key.clone());
            current.push((line, row));
        }
        if !current.is_empty() {
            out.push(current);
        }
    }
    out
}

fn reject(line: u64, row: &Row, status: u16, code: &str, message: &str) -> Value {
    json!({
        "line": line, "PartitionKey": row.partition_key, "RowKey": row.row_key,
        "status": status, "code": code, "message": message,
    })
}

/// Writes one changeset, taking out the rows the service refuses, until the rest is in.
/// A changeset refused as a whole (malformed or oversized: no one operation's fault) is
/// split into one changeset per row, each retried and judged the same way.
async fn write_chunk(client: &TableClient, table: &str, mode: Mode, resumed: bool, chunk: Chunk) -> Done {
    let Chunk {
        seq,
        last_line,
        rows,
        unreadable,
    } = chunk;
    let mut rejects = unreadable;
    let mut written = 0;
    let mut pending = std::collections::VecDeque::from([rows]);
    while let Some(mut rows) = pending.pop_front() {
        let (mut attempt, mut maybe_applied) = (0, resumed);
        while !rows.is_empty() {
            let ops: Vec<BatchOp<'_>> = rows
                .iter()
                .map(|(_, r)| BatchOp {
                    method: mode.method(),
                    partition_key: &r.partition_key,
                    row_key: &r.row_key,
                    body: &r.body,
                })
                .collect();
            let outcome = client.batch(table, &ops).await;
            drop(ops);
            match outcome {
                Ok(()) => {
                    written += rows.len() as u64;
                    break;
                }
                Err(TransferError::Transient(why)) => {
                    attempt += 1;
                    maybe_applied = true;
                    if attempt > RETRIES {
                        let why = format!("gave up after {RETRIES} retries: {why}");
                        rejects.extend(rows.iter().map(|(l, r)| reject(*l, r, 503, "ServerBusy", &why)));
                        break;
                    }
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Err(TransferError::Service {
                    status,
                    code,
                    message,
                    index: Some(i),
                }) if i < rows.len() => {
                    let (line, row) = rows.remove(i);
                    if maybe_applied
                        && mode == Mode::Insert
                        && code == "EntityAlreadyExists"
                        && stored_as_sent(client, table, &row).await
                    {
                        written += 1;
                    } else {
                        rejects.push(reject(line, &row, status, &code, &message));
                    }
                }
                Err(_) if rows.len() > 1 => pending.extend(rows.drain(..).map(|row| vec![row])),
                Err(e) => {
                    let (line, row) = rows.remove(0);
                    rejects.push(match e {
                        TransferError::Service {
                            status, code, message, ..
                        } => reject(line, &row, status, &code, &message),
                        other => reject(line, &row, 0, "Failed", &other.to_string()),
                    });
                }
            }
        }
    }
    Done {
        seq,
        last_line,
        written,
        rejects,
    }
}

/// Whether the table holds `row` exactly as it was sent (types and values).
async fn stored_as_sent(client: &TableClient, table: &str, row: &Row) -> bool {
    let Ok(Some(stored)) = client.get_entity(table, &row.partition_key, &row.row_key).await else {
        return false;
    };
    let (Ok(stored), Ok(sent)) = (
        crate::format::import_value(stored),
        serde_json::from_str::<Value>(&row.body),
    ) else {
        return false;
    };
    serde_json::from_str::<Value>(&stored.body).is_ok_and(|s| s == sent)
}
