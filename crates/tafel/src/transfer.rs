//! `tafel export`, `tafel import` and `tafel copy`: the data tools' command lines
//! (the work is in the `tafel-transfer` crate). They speak the Table REST API to
//! any endpoint, so no Tafel server is needed on either side.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::progress::Progress;
use anyhow::{bail, Context as _};
use tafel_transfer::format::{self, Format};
use tafel_transfer::import::{self, Mode, Options};
use tafel_transfer::read::{self, Query};
use tafel_transfer::{export, feed, follow, poll};
use tafel_transfer::{open_input, Endpoint, TableClient, TransferError};

/// Exit status when every row was read but some were refused (see the rejects file).
pub const EXIT_REJECTS: i32 = 3;
/// Exit status after Ctrl-C (a checkpoint was saved; `--resume` goes on).
pub const EXIT_INTERRUPTED: i32 = 130;

#[derive(clap::Args)]
pub struct ExportArgs {
    /// Where to read: a connection string, or an endpoint URL with a SAS.
    #[arg(long, env = "TAFEL_FROM", hide_env_values = true)]
    from: String,
    /// The table (with --all-tables: none).
    #[arg(long, required_unless_present = "all_tables")]
    table: Option<String>,
    /// Only the entities this $filter matches.
    #[arg(long)]
    filter: Option<String>,
    /// Only these properties (comma-separated; the keys always come).
    #[arg(long)]
    select: Option<String>,
    /// The file (`-`: standard output; `.zst`: zstd-compressed). With --all-tables, a directory.
    #[arg(long, default_value = "-")]
    out: String,
    /// jsonl or csv (default: from --out's name, else jsonl).
    #[arg(long)]
    format: Option<String>,
    /// Every table of the account, each to `<out>/<table>.jsonl` (or .csv, --format).
    #[arg(long)]
    all_tables: bool,
    #[command(flatten)]
    read: ReadArgs,
    /// No progress bar or summary.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(clap::Args)]
pub struct ImportArgs {
    /// Where to write: a connection string, or an endpoint URL with a SAS.
    #[arg(long, env = "TAFEL_TO", hide_env_values = true)]
    to: String,
    #[arg(long)]
    table: String,
    /// The file (`-`: standard input; `.zst`: zstd-compressed).
    #[arg(long = "in")]
    input: String,
    /// jsonl or csv (default: from --in's name, else jsonl).
    #[arg(long)]
    format: Option<String>,
    #[command(flatten)]
    write: WriteArgs,
    /// Refused rows go here (default: `<in>.rejects.jsonl`).
    #[arg(long)]
    rejects: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct CopyArgs {
    /// Where to read: a connection string, or an endpoint URL with a SAS.
    #[arg(long, env = "TAFEL_FROM", hide_env_values = true)]
    from: String,
    #[arg(long)]
    table: String,
    /// Only the entities this $filter matches.
    #[arg(long)]
    filter: Option<String>,
    /// Where to write: a connection string, or an endpoint URL with a SAS.
    #[arg(long, env = "TAFEL_TO", hide_env_values = true)]
    to: String,
    /// The target table (default: the same name).
    #[arg(long)]
    to_table: Option<String>,
    #[command(flatten)]
    read: ReadArgs,
    #[command(flatten)]
    write: WriteArgs,
    /// Refused rows go here (default: `copy-<table>.rejects.jsonl`).
    #[arg(long)]
    rejects: Option<PathBuf>,
    /// Only entities changed at or after this time (their Timestamp; RFC 3339).
    #[arg(long)]
    since: Option<String>,
    /// After the copy, keep the target in step: apply the source's change feed (a
    /// Tafel with --change-retention) until Ctrl-C; --resume goes on from where it stopped.
    #[arg(long)]
    follow: bool,
    /// With --follow: poll the source for entities with newer Timestamps instead of
    /// reading a change feed (Azure, Azurite); deletes are then NOT seen.
    #[arg(long, requires = "follow")]
    poll: bool,
    /// With --poll: seconds between rounds.
    #[arg(long, default_value_t = 2.0, requires = "poll")]
    poll_interval: f64,
}

#[derive(clap::Args)]
pub struct WatchArgs {
    /// Where to read: a connection string, or an endpoint URL with a SAS (a Tafel
    /// started with --change-retention).
    #[arg(long, env = "TAFEL_FROM", hide_env_values = true)]
    from: String,
    /// Only this table's changes (default: every table of the account).
    #[arg(long)]
    table: Option<String>,
    /// Changes after this position (a change's "position"; x-tafel-next-after).
    #[arg(long, conflicts_with_all = ["since", "now"])]
    after: Option<String>,
    /// Changes committed at or after this time (RFC 3339).
    #[arg(long, conflicts_with = "now")]
    since: Option<String>,
    /// Only changes committed from now on (default: from the oldest one kept).
    #[arg(long)]
    now: bool,
    /// Print the changes there are and exit, instead of following.
    #[arg(long)]
    once: bool,
}

#[derive(clap::Args)]
struct ReadArgs {
    /// Read this many PartitionKey ranges at once (split as the reading goes). Above 1,
    /// pages of different ranges interleave: each page is in key order, the whole is
    /// not, and a copy cannot --resume.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    parallel: u16,
}

#[derive(clap::Args, Clone)]
struct WriteArgs {
    /// insert (an existing entity is a rejected row), merge or replace (both upserts).
    #[arg(long, value_enum, default_value_t = ModeArg::Insert)]
    mode: ModeArg,
    /// Create the target table if it does not exist.
    #[arg(long)]
    create_table: bool,
    /// Go on after the checkpoint a stopped run left.
    #[arg(long)]
    resume: bool,
    /// Changesets in flight at once.
    #[arg(long, default_value_t = 16)]
    in_flight: usize,
    /// No progress bar or summary.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
enum ModeArg {
    Insert,
    Merge,
    Replace,
}

fn client(spec: &str) -> anyhow::Result<Arc<TableClient>> {
    let endpoint = Endpoint::parse(spec)?;
    Ok(Arc::new(TableClient::new(endpoint)?))
}

/// The runtime the data tools' commands run on (`tafel backup|restore` too).
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

pub fn export(a: ExportArgs) -> anyhow::Result<()> {
    let source = client(&a.from)?;
    runtime()?.block_on(async {
        let tables = match (&a.table, a.all_tables) {
            (_, true) => {
                std::fs::create_dir_all(&a.out).with_context(|| format!("creating the directory {}", a.out))?;
                source.list_tables().await?
            }
            (Some(t), false) => vec![t.clone()],
            (None, false) => bail!("--table or --all-tables"),
        };
        for table in &tables {
            let (out, format) = if a.all_tables {
                let format = Format::pick(a.format.as_deref(), "")?;
                let ext = if format == Format::Csv { "csv" } else { "jsonl" };
                (
                    Path::new(&a.out).join(format!("{table}.{ext}")).display().to_string(),
                    format,
                )
            } else {
                (a.out.clone(), Format::pick(a.format.as_deref(), &a.out)?)
            };
            let progress = Progress::new(format!("export {table}"), None, a.quiet || out == "-");
            let q = Query {
                table,
                filter: a.filter.as_deref(),
                select: a.select.as_deref(),
            };
            let done = export::export(&source, &q, a.read.parallel.into(), &out, format, &progress)
                .await
                .with_context(|| format!("exporting {table}"))?;
            if !a.quiet {
                let ranges = match done.ranges {
                    1 => String::new(),
                    n => format!(", read as {n} key ranges"),
                };
                progress.finish(&format!(" to {out}{ranges}"));
            }
        }
        Ok(())
    })
}

fn options(table: &str, w: &WriteArgs, rejects: PathBuf, checkpoint: Option<PathBuf>) -> Options {
    Options {
        table: table.to_owned(),
        mode: match w.mode {
            ModeArg::Insert => Mode::Insert,
            ModeArg::Merge => Mode::Merge,
            ModeArg::Replace => Mode::Replace,
        },
        in_flight: w.in_flight.max(1),
        rejects,
        checkpoint,
        resume: w.resume,
    }
}

/// Reports the summary; the exit status says whether rows were refused.
fn finish(
    result: Result<import::Summary, TransferError>,
    rejects: &Path,
    progress: &Progress,
    quiet: bool,
    resumable: bool,
) -> anyhow::Result<()> {
    match result {
        Ok(s) => {
            if !quiet {
                progress.finish(&format!(", {} written, {} rejected", s.written, s.rejected));
            }
            if s.rejected > 0 {
                eprintln!(
                    "{} rows were refused; they are in {} with Azure's errors",
                    s.rejected,
                    rejects.display()
                );
                std::process::exit(EXIT_REJECTS);
            }
            Ok(())
        }
        Err(TransferError::Interrupted) if !resumable => {
            eprintln!(
                "interrupted: a parallel copy does not resume; run it again (--mode replace rewrites what is there)"
            );
            std::process::exit(EXIT_INTERRUPTED);
        }
        Err(TransferError::Interrupted) => interrupted(),
        Err(e) => Err(e.into()),
    }
}

/// Creates the target table with --create-table; without it, stops before a row is
/// read if the table is missing (else every row would come back rejected).
async fn target_table(target: &TableClient, table: &str, to: &str, create: bool) -> anyhow::Result<()> {
    if create {
        target.create_table(table).await?;
    } else if target.table_missing(table).await? {
        bail!(
            "the table '{table}' does not exist at {}: create it first, or add --create-table",
            redacted(to)
        );
    }
    Ok(())
}

/// Where an endpoint is, without its key or signature.
fn redacted(spec: &str) -> String {
    Endpoint::parse(spec).map_or_else(|_| "the target".to_owned(), |e| e.base)
}

pub fn import(a: ImportArgs) -> anyhow::Result<()> {
    let target = client(&a.to)?;
    let format = Format::pick(a.format.as_deref(), &a.input)?;
    let stem = if a.input == "-" {
        "import".to_owned()
    } else {
        a.input.clone()
    };
    let rejects = a
        .rejects
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{stem}.rejects.jsonl")));
    let checkpoint = PathBuf::from(format!("{stem}.checkpoint"));
    let input = open_input(&a.input)?;
    runtime()?.block_on(async {
        target_table(&target, &a.table, &a.to, a.write.create_table).await?;
        let opts = options(&a.table, &a.write, rejects.clone(), Some(checkpoint));
        let progress = Progress::new(format!("import {}", a.table), None, a.write.quiet);
        let result = match format {
            Format::Jsonl => import::import(target, format::read_jsonl(input), &opts, &progress).await,
            Format::Csv => import::import(target, format::read_csv(input), &opts, &progress).await,
        };
        finish(result, &rejects, &progress, a.write.quiet, true)
    })
}

pub fn copy(a: CopyArgs) -> anyhow::Result<()> {
    let (source, target) = (client(&a.from)?, client(&a.to)?);
    let to_table = a.to_table.clone().unwrap_or_else(|| a.table.clone());
    let filter = match &a.since {
        Some(t) => Some(poll::since_filter(a.filter.as_deref(), t)?),
        None => a.filter.clone(),
    };
    if usize::from(a.read.parallel) > 1 && a.write.resume && !a.follow {
        // A checkpoint counts rows in the order they were read, which only one
        // reader repeats.
        bail!("--resume needs --parallel 1: a parallel copy reads in no fixed order");
    }
    runtime()?.block_on(async {
        target_table(&target, &to_table, &a.to, a.write.create_table).await?;
        if a.follow {
            return copy_following(&a, &source, &target, &to_table, filter).await;
        }
        let (result, progress, rejects) =
            full_copy(&a, &source, &target, &to_table, filter, a.write.mode, a.write.resume).await?;
        finish(result, &rejects, &progress, a.write.quiet, a.read.parallel == 1)
    })
}

/// The table copied as export and import joined: what `copy` does, and how
/// `copy --follow` starts.
async fn full_copy(
    a: &CopyArgs,
    source: &Arc<TableClient>,
    target: &Arc<TableClient>,
    to_table: &str,
    filter: Option<String>,
    mode: ModeArg,
    resume: bool,
) -> anyhow::Result<(Result<import::Summary, TransferError>, Progress, PathBuf)> {
    let rejects = a
        .rejects
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("copy-{}.rejects.jsonl", a.table)));
    let checkpoint = PathBuf::from(format!("copy-{}.checkpoint", a.table));
    let parallel = usize::from(a.read.parallel);
    // The source's rows in key order, numbered as lines: the checkpoint counts them.
    let (tx, rx) = std::sync::mpsc::sync_channel::<(u64, Result<format::Row, String>)>(4096);
    let reading = {
        let (source, table) = (source.clone(), a.table.clone());
        tokio::spawn(async move {
            let mut n = 0u64;
            let q = Query {
                table: &table,
                filter: filter.as_deref(),
                select: None,
            };
            let parse = |body: bytes::Bytes| format::import_page(&body);
            read::pages(&source, &q, parallel, parse, |rows| {
                for row in rows {
                    n += 1;
                    // A closed channel: the import stopped (Ctrl-C); stop reading too.
                    if tx.send((n, row)).is_err() {
                        return Err(TransferError::Interrupted);
                    }
                }
                Ok(())
            })
            .await
            .map(|_ranges| n)
        })
    };
    let w = WriteArgs {
        mode,
        resume,
        ..a.write.clone()
    };
    let opts = options(to_table, &w, rejects.clone(), (parallel == 1).then_some(checkpoint));
    let progress = Progress::new(format!("copy {} → {to_table}", a.table), None, a.write.quiet);
    let result = import::import(target.clone(), rx.into_iter(), &opts, &progress).await;
    let read = match reading.await {
        Ok(Ok(n)) => Some(n),
        Ok(Err(TransferError::Interrupted)) => None,
        Ok(Err(e)) => return Err(anyhow::Error::from(e).context(format!("reading {}", a.table))),
        Err(e) => bail!("the reader stopped: {e}"),
    };
    if let (Ok(s), Some(read)) = (&result, read) {
        // Every source row read was written (a resumed run's counts include rows the
        // stopped run had written past its checkpoint, so only a fresh run is checked).
        if s.rejected == 0 && !resume && s.written != read {
            bail!("read {read} entities from {} but wrote {}", a.table, s.written);
        }
    }
    Ok((result, progress, rejects))
}

/// `copy --follow`: the head of the source's feed noted, the table copied, then the
/// feed applied from that head until Ctrl-C (or, with --poll, rounds by Timestamp).
/// Its state (`copy-<table>.follow`) says which of these it was in, for --resume.
async fn copy_following(
    a: &CopyArgs,
    source: &Arc<TableClient>,
    target: &Arc<TableClient>,
    to_table: &str,
    filter: Option<String>,
) -> anyhow::Result<()> {
    let path = PathBuf::from(format!("copy-{}.follow", a.table));
    let resuming = a.write.resume && path.exists();
    let mut state = if resuming {
        follow::State::load(&path)?
    } else {
        follow::State::default()
    };
    let applier = follow::Applier {
        target: target.clone(),
        table: to_table.to_owned(),
        in_flight: a.write.in_flight.max(1),
    };
    let what = format!("follow {} → {to_table}", a.table);
    if a.poll {
        if !resuming {
            state.since = a.since.clone();
        }
        return follow_by_polling(a, source, &applier, &mut state, &path, what).await;
    }
    if resuming && state.after.is_none() {
        bail!(
            "{} was left by a --poll copy: add --poll, or start again without --resume",
            path.display()
        );
    }
    if !resuming {
        // Noted before the copy: every change from here on is applied after it, and
        // those the copy already saw are applied again, harmlessly (after-images).
        state.after = Some(feed_head(source, &a.table).await?);
        state.save(&path)?;
    }
    if !state.copied {
        initial_copy(a, source, target, to_table, filter, resuming).await?;
        state.copied = true;
        state.save(&path)?;
    }
    let progress = Progress::new(what, None, a.write.quiet);
    let lag = follow::follow(source, &a.table, &applier, &mut state, &path, &progress).await?;
    if !a.write.quiet {
        progress.finish(&format!(
            ", {} changes applied in all, at position {}, {lag}",
            state.applied,
            state.after.as_deref().unwrap_or("?")
        ));
    }
    interrupted()
}

/// `copy --follow --poll`: rounds of the rows whose Timestamp moved, until Ctrl-C.
async fn follow_by_polling(
    a: &CopyArgs,
    source: &Arc<TableClient>,
    applier: &follow::Applier,
    state: &mut follow::State,
    path: &std::path::Path,
    what: String,
) -> anyhow::Result<()> {
    let progress = Progress::new(what, None, a.write.quiet);
    let interval = std::time::Duration::from_secs_f64(a.poll_interval.clamp(0.05, 3600.0));
    let polled = poll::Polled {
        source,
        table: &a.table,
        filter: a.filter.as_deref(),
        interval,
    };
    poll::follow(&polled, applier, state, path, &progress).await?;
    if !a.write.quiet {
        let since = state.since.as_deref().unwrap_or("the start");
        progress.finish(&format!(", up to Timestamp {since}"));
    }
    interrupted()
}

/// The position of the source's change feed now, or why it has none.
async fn feed_head(source: &Arc<TableClient>, table: &str) -> anyhow::Result<String> {
    match follow::head(source, table).await {
        Ok(head) => Ok(head),
        Err(TransferError::NoFeed(why)) => bail!(
            "{why}\n--follow reads the source's change feed: start that Tafel with --change-retention, \
             or add --poll to follow by Timestamps (deletes are then not seen)"
        ),
        Err(e) => Err(anyhow::Error::from(e).context("reading the source's change feed")),
    }
}

/// `copy --follow`'s first step: the whole table, written over whatever is there
/// (following upserts anyway). Refused rows are reported and following goes on.
async fn initial_copy(
    a: &CopyArgs,
    source: &Arc<TableClient>,
    target: &Arc<TableClient>,
    to_table: &str,
    filter: Option<String>,
    resuming: bool,
) -> anyhow::Result<()> {
    let (result, progress, rejects) =
        full_copy(a, source, target, to_table, filter, ModeArg::Replace, resuming).await?;
    match result {
        Ok(s) => {
            if !a.write.quiet {
                progress.finish(&format!(", {} written, {} rejected", s.written, s.rejected));
            }
            if s.rejected > 0 {
                eprintln!(
                    "{} rows were refused; they are in {} with Azure's errors (following goes on)",
                    s.rejected,
                    rejects.display()
                );
            }
            Ok(())
        }
        Err(TransferError::Interrupted) => interrupted(),
        Err(e) => Err(e.into()),
    }
}

/// Ctrl-C ended the work: the exit that tells a script to run the command again with --resume.
fn interrupted() -> ! {
    eprintln!("interrupted: run the same command with --resume to go on");
    std::process::exit(EXIT_INTERRUPTED);
}

/// `tafel watch`: the feed as JSON lines on standard output.
pub fn watch(a: WatchArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let source = client(&a.from)?;
    if let Some(t) = &a.since {
        poll::odata_time(t)?; // said plainly here, before the service says it
    }
    let mut from = match (&a.after, &a.since, a.now) {
        (Some(p), _, _) => feed::From::After(p.clone()),
        (_, Some(t), _) => feed::From::Since(t.clone()),
        (_, _, true) => feed::From::Latest,
        _ => feed::From::Oldest,
    };
    runtime()?.block_on(async {
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        let mut at = None::<String>;
        loop {
            let req = feed::Request {
                table: a.table.as_deref(),
                from: &from,
                limit: None,
                wait: (!a.once).then_some(std::time::Duration::from_secs(20)),
            };
            let page = tokio::select! {
                p = feed::read(&source, &req) => match p {
                    Ok(p) => p,
                    Err(TransferError::NoFeed(why)) => bail!("{why}: tafel watch reads a Tafel started with --change-retention"),
                    Err(e) => return Err(anyhow::Error::from(e).context("reading the change feed")),
                },
                _ = &mut ctrl_c => break,
            };
            let mut out = std::io::stdout().lock();
            for (_, line) in &page.changes {
                if writeln!(out, "{line}").is_err() {
                    return Ok(()); // the reader went away (`| head`)
                }
            }
            if out.flush().is_err() {
                return Ok(());
            }
            // A page short of the limit: nothing more was there when it was read.
            let done = a.once && page.changes.len() < 1000;
            at = Some(page.next_after.clone());
            from = feed::From::After(page.next_after);
            if done {
                break;
            }
        }
        if let Some(at) = at {
            eprintln!("stopped after position {at} (--after {at} goes on from there)");
        }
        Ok(())
    })
}
