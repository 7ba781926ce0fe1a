//! `tafel-bench`: drives any Azure Table endpoint (Tafel, Azurite, …) over HTTP/1.1
//! keep-alive with Shared Key auth and reports throughput, latency percentiles, errors
//! and (with `--verify`) read-back mismatches for each workload.
//!
//! ```text
//! tafel-bench --endpoint http://127.0.0.1:10002/devstoreaccount1 --concurrency 32 --duration 10s
//! tafel-bench --smoke --verify
//! tafel-bench --ceiling            # each workload also against a do-nothing server
//! tafel-bench compare tafel.json azurite.json
//! tafel-bench memory-rate --row-bytes 760   # the machine's memory-read rate, in rows
//! tafel-bench memory-rate --row-bytes 760 --checked   # … each row's CRC-32 computed
//! ```

mod ceiling;
mod client;
mod data;
mod memory_rate;
mod report;
mod workloads;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use http::Method;
use serde_json::json;

use crate::client::Endpoint;
use crate::data::Shape;
use crate::workloads::{Bench, Config, ALL};

// The load generator shares the machine with the server it measures: a cheaper
// allocator leaves more of the CPU to the server (the same for every target).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DEV_KEY: &str = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

#[derive(Parser)]
#[command(name = "tafel-bench", version, about = "Benchmark an Azure Table endpoint")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Print a side-by-side table of `--json` result files: the first against each of the
    /// others (ratio = first / other).
    Compare {
        first: String,
        #[arg(required = true)]
        others: Vec<String>,
    },
    /// Run the do-nothing reference server: fixed, valid-looking replies to every workload,
    /// no auth, no parsing, no storage. `--ceiling` starts one by itself.
    CeilingServer {
        /// Address to listen on (port 0: any free port; the bound address is printed).
        #[arg(long, default_value = "127.0.0.1:10302")]
        listen: std::net::SocketAddr,
        /// Data-set size the scan replies are built for (as the bench's --entities).
        #[arg(long, default_value_t = 100_000)]
        entities: u64,
        /// Entity shape of the replies (as the bench's --shape).
        #[arg(long, value_enum, default_value_t)]
        shape: Shape,
        /// Runtime worker threads [default: one per core].
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Measure this machine's memory-read rate (buffers far larger than the CPU cache,
    /// read sequentially on each thread) and print it in bytes/s and in rows/s of
    /// `--row-bytes`: the physical limit of a scan of the same bytes.
    MemoryRate {
        /// Bytes per row (e.g. the stored bytes per entity that `tafel check` reports).
        #[arg(long)]
        row_bytes: u64,
        /// Rows per thread's buffer (it is at least 256 MiB all the same).
        #[arg(long, default_value_t = 100_000)]
        rows: u64,
        /// Threads reading at once [default: one per core].
        #[arg(long)]
        threads: Option<usize>,
        /// How long to read.
        #[arg(long, default_value = "2s", value_parser = parse_duration)]
        duration: Duration,
        /// Compute each row's CRC-32 as it is read, as a verified scan of the
        /// on-disk store does (the most rows such a scan can read).
        #[arg(long)]
        checked: bool,
        /// Print the result as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
struct RunArgs {
    /// Table endpoint; path-style (`http://host:port/account`) or host-only with --account;
    /// `https://` with --ca.
    #[arg(long, default_value = "http://127.0.0.1:10002/devstoreaccount1")]
    endpoint: String,
    /// CA certificate (PEM) an `https://` endpoint's certificate must chain to (`tafel cert`
    /// writes one).
    #[arg(long)]
    ca: Option<std::path::PathBuf>,
    /// Account name (default: the first path segment of the endpoint).
    #[arg(long)]
    account: Option<String>,
    /// Base64 account key (default: the well-known devstoreaccount1 key).
    #[arg(long, default_value = DEV_KEY)]
    key: String,
    /// Requests in flight (one keep-alive connection each) [default: 32; 8 with --smoke].
    #[arg(long)]
    concurrency: Option<usize>,
    /// Time budget of each workload, e.g. 10s, 500ms, 2m [default: 10s; 1s with --smoke].
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Size of the preloaded data set for the read/merge/query/scan workloads
    /// [default: 100000; 2000 with --smoke]. Rounded up to a multiple of 100.
    #[arg(long)]
    entities: Option<u64>,
    /// Comma-separated workloads (default: all): insert, point-read, point-query, merge-upsert,
    /// read-while-merging (point reads, merges alongside), partition-query, scan-filter,
    /// batch-insert.
    #[arg(long, value_delimiter = ',')]
    workloads: Vec<String>,
    /// What the entities look like: `typed` (two strings and eight typed properties, the
    /// scan filtering on an Int32, 5% match) or `strings` (four medium strings and six
    /// typed properties, the scan filtering on a string, 1% match); both about 1 KiB.
    #[arg(long, value_enum, default_value_t)]
    shape: Shape,
    /// Read back samples and compare every property; any mismatch or error → exit 1.
    #[arg(long)]
    verify: bool,
    /// Print results as JSON on stdout (the table goes to stderr).
    #[arg(long)]
    json: bool,
    /// Tiny sizes and ~1 s per workload (CI smoke test).
    #[arg(long)]
    smoke: bool,
    /// Label of the target in the results (e.g. Tafel, Azurite).
    #[arg(long, default_value = "target")]
    name: String,
    /// Upper bound on operations per workload (requests, queries or batches).
    #[arg(long, default_value_t = 50_000_000)]
    max_ops: u64,
    /// Per-request timeout.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    timeout: Duration,
    /// Time budget of the preload phase.
    #[arg(long, default_value = "1800s", value_parser = parse_duration)]
    preload_timeout: Duration,
    /// Verb of merge-upsert: MERGE (classic) or PATCH (what newer SDKs send).
    #[arg(long, default_value = "MERGE")]
    merge_verb: String,
    /// Prefix of the two tables the run creates.
    #[arg(long, default_value = "bench")]
    table_prefix: String,
    /// Keep the tables after the run (default: delete them).
    #[arg(long)]
    keep_tables: bool,
    /// Runtime worker threads of the bench itself [default: 1 up to 4 cores, else cores/4].
    #[arg(long)]
    threads: Option<usize>,
    /// Seed of key choice and table names (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Skip the preload: the data set is there from an earlier run with the same --seed,
    /// --entities and --table-prefix and --keep-tables (and no merge-upsert since, or
    /// --verify will see newer versions).
    #[arg(long)]
    no_preload: bool,
    /// Also run each workload, right before the target's, against a do-nothing reference
    /// server (`ceiling-server`, started here) and report the target's rate as a fraction
    /// of it: what this loader on this machine reaches at most.
    #[arg(long)]
    ceiling: bool,
    /// Worker threads of the reference server [default: one per core].
    #[arg(long)]
    ceiling_threads: Option<usize>,
    /// Write each operation slower than --slow-ms to this file, a line each: the workload,
    /// when it began (Unix seconds) and its latency (ms). Shows when in a run the slow
    /// ones came, to set beside the server's log (the target's operations only).
    #[arg(long, value_name = "FILE")]
    slow_log: Option<std::path::PathBuf>,
    /// What --slow-log counts as slow, in milliseconds.
    #[arg(long, default_value_t = 2.0, value_name = "MS")]
    slow_ms: f64,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("invalid duration {s:?}"))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("invalid duration {s:?}"));
    }
    Ok(Duration::from_secs_f64(v * mult))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    match cli.command {
        Some(Command::Compare { first, others }) => return compare(&first, &others),
        Some(Command::CeilingServer {
            listen,
            entities,
            shape,
            threads,
        }) => {
            return match ceiling::serve(listen, entities, shape, threads.unwrap_or(cores)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("tafel-bench ceiling-server: {e}");
                    ExitCode::from(2)
                }
            };
        }
        Some(Command::MemoryRate {
            row_bytes,
            rows,
            threads,
            duration,
            checked,
            json,
        }) => {
            let read = match checked {
                true => memory_rate::Read::Checked,
                false => memory_rate::Read::Summed,
            };
            let r = memory_rate::measure(row_bytes, rows, threads.unwrap_or(cores), duration, read);
            if json {
                println!(
                    "{}",
                    json!({"threads": r.threads, "bytes_per_s": r.bytes_per_s.round(), "checked": checked,
                           "row_bytes": r.row_bytes, "rows_per_s": r.rows_per_s().round()})
                );
            } else {
                let how = match r.read {
                    memory_rate::Read::Summed => "memory read",
                    memory_rate::Read::Checked => "memory read, each row's CRC-32 checked",
                };
                println!(
                    "{how}: {:.2} GB/s on {} threads = {:.2} M rows/s of {} bytes",
                    r.bytes_per_s / 1e9,
                    r.threads,
                    r.rows_per_s() / 1e6,
                    r.row_bytes
                );
            }
            return ExitCode::SUCCESS;
        }
        None => {}
    }
    let args = cli.run;
    let threads = args.threads.unwrap_or(if cores <= 4 { 1 } else { cores / 4 }).max(1);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tafel-bench: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(run(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tafel-bench: {e}");
            ExitCode::from(2)
        }
    }
}

fn compare(first: &str, others: &[String]) -> ExitCode {
    let load = |p: &str| -> Result<serde_json::Value, String> {
        let text = std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"))?;
        serde_json::from_str(&text).map_err(|e| format!("{p}: {e}"))
    };
    let loaded = load(first).and_then(|a| {
        let bs = others.iter().map(|p| load(p)).collect::<Result<Vec<_>, _>>()?;
        report::compare(&a, &bs)
    });
    match loaded {
        Ok(table) => {
            print!("{table}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tafel-bench compare: {e}");
            ExitCode::from(2)
        }
    }
}

/// What a run's flags come to once their defaults (smaller with `--smoke`) apply.
struct Settings {
    concurrency: usize,
    duration: Duration,
    entities: u64,
    selected: Vec<String>,
    merge_verb: Method,
    seed: u64,
}

impl Settings {
    fn of(args: &RunArgs) -> Result<Self, String> {
        let smoke = args.smoke;
        let entities = args
            .entities
            .unwrap_or(if smoke { 2000 } else { 100_000 })
            .max(100)
            .div_ceil(100)
            * 100;
        let merge_verb = match args.merge_verb.to_ascii_uppercase().as_str() {
            "MERGE" => Method::from_bytes(b"MERGE").map_err(|e| e.to_string())?,
            "PATCH" => Method::PATCH,
            other => return Err(format!("--merge-verb must be MERGE or PATCH, not {other}")),
        };
        let seed = args.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
        Ok(Settings {
            concurrency: args.concurrency.unwrap_or(if smoke { 8 } else { 32 }).max(1),
            duration: args.duration.unwrap_or(Duration::from_secs(if smoke { 1 } else { 10 })),
            entities,
            selected: selected_workloads(&args.workloads)?,
            merge_verb,
            seed,
        })
    }

    fn config(&self, args: &RunArgs, verify: bool) -> Config {
        Config {
            concurrency: self.concurrency,
            duration: self.duration,
            entities: self.entities,
            verify,
            max_ops: args.max_ops,
            preload_timeout: args.preload_timeout,
            merge_verb: self.merge_verb.clone(),
            seed: self.seed,
            shape: args.shape,
            slow_log: None,
        }
    }
}

async fn run(args: RunArgs) -> Result<ExitCode, String> {
    let set = Settings::of(&args)?;
    let (concurrency, duration, entities) = (set.concurrency, set.duration, set.entities);
    let ep = Endpoint::new(
        &args.endpoint,
        args.account.as_deref(),
        &args.key,
        args.timeout,
        args.ca.as_deref(),
    )?;
    let account = ep.account().to_string();
    let mut config = set.config(&args, args.verify);
    if let Some(path) = &args.slow_log {
        // One run's operations a file: an earlier run's are dropped.
        std::fs::File::create(path).map_err(|e| format!("--slow-log {}: {e}", path.display()))?;
        if !(args.slow_ms.is_finite() && args.slow_ms >= 0.0) {
            return Err(format!(
                "--slow-ms must be a number of milliseconds, not {}",
                args.slow_ms
            ));
        }
        config.slow_log = Some((path.clone(), Duration::from_secs_f64(args.slow_ms / 1e3)));
    }
    let bench = Arc::new(Bench::new(ep, config, &args.table_prefix));
    eprintln!(
        "tafel-bench: {} ({}) concurrency {concurrency}, {duration:?} per workload, data set {entities} {} entities, \
         tables {}/{}{}",
        args.endpoint,
        args.name,
        args.shape.name(),
        bench.data_table,
        bench.ins_table,
        if args.verify { ", verifying" } else { "" }
    );
    // The reference server is not verified against: its replies are fixed.
    let ceiling = match args.ceiling {
        true => Some(start_ceiling(&args, &account, set.config(&args, false)).await?),
        false => None,
    };
    bench.setup().await?;
    let (rows, preload_ok) = run_workloads(&args, &set, &bench, ceiling.as_ref().map(|(_, c)| c)).await?;
    drop(ceiling);
    if !args.keep_tables {
        bench.teardown().await;
    }
    print_results(&args, &set, &rows);
    Ok(verdict(&rows, preload_ok, args.verify))
}

/// Preloads the data set if a selected workload reads it, then runs each selected
/// workload (on the ceiling server first, when there is one); the rows, and
/// whether the preload loaded every entity.
async fn run_workloads(
    args: &RunArgs,
    set: &Settings,
    bench: &Arc<Bench>,
    ceiling: Option<&Arc<Bench>>,
) -> Result<(Vec<report::Row>, bool), String> {
    let mut rows = Vec::new();
    let needs_data = set.selected.iter().any(|w| {
        matches!(
            w.as_str(),
            "point-read" | "point-query" | "merge-upsert" | "read-while-merging" | "partition-query" | "scan-filter"
        )
    });
    let mut preload_ok = true;
    if needs_data && !args.no_preload {
        eprintln!("preload: {} entities in batches of 100…", set.entities);
        let row = bench.preload().await;
        preload_ok = row.entities >= set.entities;
        eprintln!("preload: {}", row.note);
        rows.push(row);
    }
    let duration = set.duration;
    for w in ALL.iter().filter(|w| set.selected.iter().any(|s| s == *w)) {
        let ceiling_rate = match ceiling {
            Some(c) => {
                eprintln!("{w}: the ceiling server for {duration:?}…");
                let row = c.workload(w).await?;
                eprintln!("{w}: ceiling {:.1} {} ({} errors)", row.rate, row.unit, row.errors);
                Some(row.rate)
            }
            None => None,
        };
        eprintln!("{w}: running for {duration:?}…");
        let mut row = bench.workload(w).await?;
        row.ceiling = ceiling_rate;
        eprintln!("{w}: {}", summary(&row));
        rows.push(row);
    }
    Ok((rows, preload_ok))
}

/// The results as a table on stdout, or as JSON there (the table on stderr).
fn print_results(args: &RunArgs, set: &Settings, rows: &[report::Row]) {
    let table = report::results_table(rows);
    if args.json {
        eprint!("{table}");
        let out = json!({
            "target": args.name,
            "endpoint": args.endpoint,
            "concurrency": set.concurrency,
            "duration_s": set.duration.as_secs_f64(),
            "entities": set.entities,
            "shape": args.shape.name(),
            "verify": args.verify,
            "results": rows.iter().map(report::Row::to_json).collect::<Vec<_>>(),
        });
        println!("{out}");
    } else {
        print!("{table}");
    }
}

/// Starts the do-nothing reference server (`--ceiling`) and sets its tables up.
async fn start_ceiling(args: &RunArgs, account: &str, cfg: Config) -> Result<(ceiling::Child, Arc<Bench>), String> {
    let entities = cfg.entities;
    let child = ceiling::Child::spawn(entities, cfg.shape, args.ceiling_threads)?;
    let url = format!("http://{}/{account}", child.addr);
    let ep = Endpoint::new(&url, None, &args.key, args.timeout, None)?;
    eprintln!("tafel-bench: ceiling server on {url} (each workload runs there first)");
    if entities > ceiling::MAX_SCAN_ENTITIES {
        eprintln!(
            "tafel-bench: warning: the ceiling's scan covers the first {} entities only, so its \
             scan-filter rate is too high",
            ceiling::MAX_SCAN_ENTITIES
        );
    }
    let b = Arc::new(Bench::new(ep, cfg, &args.table_prefix));
    b.setup().await?;
    Ok((child, b))
}

/// The workloads `--workloads` names (all of them for none or `all`), checked.
fn selected_workloads(named: &[String]) -> Result<Vec<String>, String> {
    let mut selected: Vec<String> = named
        .iter()
        .map(|w| w.trim().to_ascii_lowercase())
        .filter(|w| !w.is_empty())
        .collect();
    if selected.is_empty() || selected.iter().any(|w| w == "all") {
        selected = ALL.iter().map(|s| s.to_string()).collect();
    }
    if let Some(bad) = selected.iter().find(|w| !ALL.contains(&w.as_str())) {
        return Err(format!("unknown workload {bad:?} (known: {})", ALL.join(", ")));
    }
    Ok(selected)
}

/// A workload's result in one line: rate, errors, failed checks, share of the ceiling.
fn summary(row: &report::Row) -> String {
    format!(
        "{:.1} {} ({} errors{}{})",
        row.rate,
        row.unit,
        row.errors,
        if row.verified > 0 {
            format!(", {} of {} checks failed", row.mismatches, row.verified)
        } else {
            String::new()
        },
        row.of_ceiling()
            .map_or(String::new(), |f| format!(", {:.0}% of the ceiling", f * 100.0))
    )
}

/// The run's exit status: a failure when the preload did not complete or, with
/// `--verify`, when anything failed or nothing was checked.
fn verdict(rows: &[report::Row], preload_ok: bool, verify: bool) -> ExitCode {
    let errors: u64 = rows.iter().map(|r| r.errors).sum();
    let mismatches: u64 = rows.iter().map(|r| r.mismatches).sum();
    let verified: u64 = rows.iter().map(|r| r.verified).sum();
    if !preload_ok {
        eprintln!("tafel-bench: the preload did not complete; read results are not meaningful");
        return ExitCode::FAILURE;
    }
    if verify {
        if errors > 0 || mismatches > 0 {
            eprintln!("tafel-bench: VERIFY FAILED: {mismatches} mismatches in {verified} checks, {errors} errors");
            return ExitCode::FAILURE;
        }
        if verified == 0 {
            eprintln!("tafel-bench: VERIFY FAILED: nothing was checked");
            return ExitCode::FAILURE;
        }
        eprintln!("tafel-bench: verify OK ({verified} checks)");
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("x").is_err());
    }
}
