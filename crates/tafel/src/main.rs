//! `tafel`: an Azure Table Storage–compatible server.

mod admin_call;
mod azurite;
mod backup;
mod cert;
mod change_feed_args;
#[cfg(feature = "embedded")]
mod check;
mod config;
mod health;
mod index;
mod listeners;
mod progress;
mod purge;
mod serve;
mod serve_args;
mod snapshot;
mod stats;
mod table_config;
mod transfer;
mod ttl;
mod undelete;

use serve_args::{LogFormatArg, ServeArgs};

use anyhow::Context as _;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

// Request handling allocates many short-lived buffers from every runtime thread,
// and glibc's malloc was a large share of the workers' time under load
// (BENCHMARKS.md, "mimalloc against glibc malloc").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The backends compiled in (cargo features), for `--version`.
#[cfg(all(feature = "embedded", feature = "postgres"))]
macro_rules! backends {
    () => {
        "embedded, postgres"
    };
}
#[cfg(all(feature = "embedded", not(feature = "postgres")))]
macro_rules! backends {
    () => {
        "embedded"
    };
}
#[cfg(all(not(feature = "embedded"), feature = "postgres"))]
macro_rules! backends {
    () => {
        "postgres"
    };
}
#[cfg(not(any(feature = "embedded", feature = "postgres")))]
macro_rules! backends {
    () => {
        "none"
    };
}

/// `tafel --version`: the version, the commit it was built from, and the
/// backends compiled in.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TAFEL_COMMIT"),
    "; backends: ",
    backends!(),
    ")"
);

#[derive(Parser)]
#[command(name = "tafel", version = VERSION, about = "An Azure Table Storage–compatible server")]
// `tafel serve …` is judged by its own flags: the top level's (plain `tafel`), which read
// the same environment, must not demand a --postgres-url given to the subcommand.
#[command(subcommand_negates_reqs = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (the default).
    // Azurite's program names, hidden: a compose file or CI job that runs
    // `azurite-table --tableHost 0.0.0.0 …` in the image runs Tafel unchanged.
    // Its own --version/-V (and Azurite's -v): `azurite-table --version` is a script's check.
    #[command(alias = "azurite-table", alias = "azurite", version = VERSION)]
    Serve(ServeArgs),
    /// Make a local development CA and a certificate it signs for localhost,
    /// 127.0.0.1 and ::1, for `serve --cert/--key`; print how to trust the CA.
    Cert(cert::CertArgs),
    /// Write a table's entities (or a query's) to a JSONL or CSV file, from any Table
    /// endpoint (Azure, Azurite, Tafel).
    Export(transfer::ExportArgs),
    /// Write a JSONL or CSV file's entities into a table of any Table endpoint, in
    /// batches, with retries, a rejects file and a checkpoint to resume from.
    Import(transfer::ImportArgs),
    /// Copy a table from one Table endpoint to another, without a file.
    Copy(transfer::CopyArgs),
    /// Print a Tafel's change feed (an account's or a table's) as JSON lines, from a
    /// position, a time or now, following it until Ctrl-C (--once: what is there).
    Watch(transfer::WatchArgs),
    /// Back up every account's tables, entities, access policies and service
    /// properties, as of one instant, into one checked, compressed file; from a
    /// running server (--from its admin listener) or a store no server has open.
    Backup(backup::BackupArgs),
    /// Restore a backup into an empty store, of either backend (checks the whole
    /// file first; --check only checks it).
    Restore(backup::RestoreArgs),
    /// Verify a whole embedded store offline (every page and every value's
    /// checksum, the log's records), changing nothing; list what is damaged.
    #[cfg(feature = "embedded")]
    Check(check::CheckArgs),
    /// Probe a running server's readiness (`/ready` on its admin listener):
    /// exit 0 if ready, 1 if not (a container HEALTHCHECK; the image has no shell).
    Health(health::HealthArgs),
    /// Save, restore, list or delete named snapshots of a running server's whole
    /// store (its admin listener), to reset it between tests in milliseconds.
    Snapshot(snapshot::SnapshotArgs),
    /// Show tables' entities, partitions and bytes (a running server's admin
    /// listener), from the counters kept with every write.
    Stats(stats::StatsArgs),
    /// Create, list or drop secondary indexes of a running server's tables (its
    /// admin listener): a `$filter` on an indexed property reads no table scan.
    Index(index::IndexArgs),
    /// Set, show or clear a running server's tables' expiry (TTL) policies (its
    /// admin listener): expired entities vanish at once and are removed within seconds.
    Ttl(ttl::TtlArgs),
    /// Restore a deleted table, or list those kept restorable, of a running
    /// server started with --table-soft-delete (its admin listener).
    Undelete(undelete::UndeleteArgs),
    /// Delete every entity of a running server's table that a filter (and/or a
    /// partition) matches, server-side, as a job that survives a restart.
    Purge(purge::PurgeArgs),
    /// The configuration.
    Config {
        #[command(subcommand)]
        action: ConfigCommand,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Print the effective configuration (flag > env > file > default) as a
    /// file --config takes, with secrets masked.
    #[command(version = VERSION)]
    Print(ServeArgs),
}

/// Turns transparent huge pages off for this process. The allocator hands the
/// store's writer thread fresh memory as redb's dirty pages come and go, and the
/// kernel zeroed it a huge page at a time on first touch, stalling group commits
/// and with them the writes' p99 (BENCHMARKS.md, "Transparent huge pages on and
/// off"). mimalloc's `MIMALLOC_ALLOW_THP=0` does the same.
#[cfg(target_os = "linux")]
fn disable_transparent_huge_pages() {
    // Called before any other thread starts: threads inherit the flag.
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        // Only a latency tweak: carry on with the kernel's default.
        eprintln!("tafel: could not disable transparent huge pages: {e}");
    }
}

#[cfg(not(target_os = "linux"))]
fn disable_transparent_huge_pages() {}

/// `mi_option_purge_delay` in mimalloc v2's `mimalloc.h` (the `v2` feature of
/// the `mimalloc` crate). libmimalloc-sys declares `mi_option_set` but names only
/// some options, not this one (0.1.49), so its number is written here; the test
/// below checks it is the option whose default is v2's 10 ms purge delay.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Has mimalloc keep freed memory a second before handing it back to the
/// kernel, not 10 ms. Under batches the embedded store's write buffer grows by
/// tens of MiB between checkpoints and is freed at each: handed back at once,
/// every refill faulted fresh pages in again, to be zeroed by the kernel on the
/// writer's and the batch workers' time (with a 256 MiB cache in memory 0.35
/// page faults per batch entity on the writer against 0.13, and 7-10% of the
/// batch rate: benchmark-history §24). `MIMALLOC_PURGE_DELAY` still decides
/// when it is set.
fn keep_freed_memory_longer() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: `mi_option_set` is mimalloc's own, linked in with the global
    // allocator; it stores a value for a valid option index, from any thread.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 1000) };
}

#[cfg(test)]
mod purge_delay_tests {
    use libmimalloc_sys::mi_option_get;

    /// The option set is the purge delay: mimalloc v2's default 10 ms, then ours;
    /// and `MIMALLOC_PURGE_DELAY`, when the environment sets it, is left to decide.
    /// Each run checks the branch its environment takes rather than skip one.
    #[test]
    fn the_option_set_is_the_purge_delay() {
        // SAFETY: mimalloc's own getter, for a valid option index.
        let before = unsafe { mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        let from_env = std::env::var_os("MIMALLOC_PURGE_DELAY").is_some();
        if !from_env {
            assert_eq!(before, 10);
        }
        super::keep_freed_memory_longer();
        // SAFETY: as above.
        let after = unsafe { mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert_eq!(after, if from_env { before } else { 1000 });
    }
}

fn main() -> anyhow::Result<()> {
    disable_transparent_huge_pages();
    keep_freed_memory_longer();
    let cmd = Cli::command();
    let (argv, from_file) = config::layered(&cmd, std::env::args_os().collect())?;
    let matches = cmd.clone().try_get_matches_from(&argv).unwrap_or_else(|e| e.exit());
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let args = match cli.command {
        None => cli.serve,
        Some(Command::Serve(a)) => a,
        Some(Command::Config {
            action: ConfigCommand::Print(_),
        }) => {
            print!("{}", config::print(&cmd, argv, &from_file)?);
            return Ok(());
        }
        Some(tool) => return run_tool(tool, &matches),
    };
    let serve_matches = matches.subcommand_matches("serve").unwrap_or(&matches);
    let (mut args, debug_file, log_given) = settle(args, serve_matches)?;
    init_logging(&args, debug_file, log_given);
    if let Some(mb) = args.azurite.extent_memory_limit {
        if !args.in_memory {
            tracing::info!("--extentMemoryLimit: ignored without --inMemoryPersistence, as in Azurite");
        } else if args.in_memory_max_mb.is_none() {
            args.in_memory_max_mb = Some(mb);
        }
    }
    tafel_http::set_path_style_only(args.azurite.disable_product_style_url);
    tafel_protocol::cosmos::set_server_cosmos(args.cosmos);
    // This runtime only accepts connections and runs the store's background
    // work; serving threads and long requests run on their own (tafel_http::serve).
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(serve::serve(args))
}

/// Runs a subcommand that is neither `serve` nor `config print` (which main
/// runs itself, and which this refuses).
fn run_tool(command: Command, matches: &clap::ArgMatches) -> anyhow::Result<()> {
    match command {
        Command::Cert(a) => cert::run(a),
        Command::Export(a) => transfer::export(a),
        Command::Import(a) => transfer::import(a),
        Command::Copy(a) => transfer::copy(a),
        Command::Watch(a) => transfer::watch(a),
        Command::Backup(a) => backup::backup(a),
        Command::Restore(a) => backup::restore(a),
        #[cfg(feature = "embedded")]
        Command::Check(a) => check::run(a),
        Command::Health(mut a) => {
            a.address_given = matches.subcommand_matches("health").is_some_and(|m| {
                ["admin_host", "admin_port"]
                    .iter()
                    .any(|id| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
            });
            health::run(a)
        }
        Command::Snapshot(a) => snapshot::run(a),
        Command::Stats(a) => stats::run(a),
        Command::Index(a) => index::run(a),
        Command::Ttl(a) => ttl::run(a),
        Command::Undelete(a) => undelete::run(a),
        Command::Purge(a) => purge::run(a),
        Command::Serve(_) | Command::Config { .. } => anyhow::bail!("serve and config print are not tools"),
    }
}

/// The serve flags settled before logging starts: the checks that refuse a
/// start, what was given rather than defaulted, and Azurite's `--debug FILE`
/// opened (the log goes there too, at debug level unless `--log` was given:
/// the `bool`).
fn settle(
    mut args: ServeArgs,
    serve_matches: &clap::ArgMatches,
) -> anyhow::Result<(ServeArgs, Option<std::fs::File>, bool)> {
    args.check_tls_flags()?;
    args.azurite.refused()?;
    let debug_file = match &args.azurite.debug {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("opening the --debug log {}", path.display()))?,
        ),
        None => None,
    };
    let given = |id: &str| {
        matches!(
            serve_matches.value_source(id),
            Some(clap::parser::ValueSource::CommandLine | clap::parser::ValueSource::EnvVariable)
        )
    };
    let log_given = given("log");
    args.admin_port_given = given("admin_port");
    if args.cosmos && !given("port") {
        args.port = tafel_protocol::cosmos::EMULATOR_PORT;
    }
    // Azurite's `--location` beside `--inMemoryPersistence` is said to be unused; the
    // image's TAFEL_DATA_DIR is not.
    if args.in_memory && serve_matches.value_source("data_dir") == Some(clap::parser::ValueSource::CommandLine) {
        eprintln!(
            "tafel: --in-memory: nothing is written to the data directory {} (--location/--data-dir)",
            args.store.data_dir.display()
        );
    }
    Ok((args, debug_file, log_given))
}

/// The server's log on stderr, filtered by `--log`; with Azurite's `--debug FILE`,
/// also to FILE, at debug level unless `--log` was given. The console keeps its
/// lines either way: container logs and scripts wait on "listening on" there.
fn init_logging(args: &ServeArgs, debug_file: Option<std::fs::File>, log_given: bool) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{EnvFilter, Layer};
    type Boxed = Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync>;
    let filter = |f: &str| EnvFilter::try_new(f).unwrap_or_else(|_| "info".into());
    let console: Boxed = match args.log_format {
        LogFormatArg::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .with_filter(filter(&args.log))
            .boxed(),
        LogFormatArg::Text => tracing_subscriber::fmt::layer()
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_writer(std::io::stderr)
            .with_filter(filter(&args.log))
            .boxed(),
    };
    let mut layers = vec![console];
    layers.extend(debug_file.map(|file| -> Boxed {
        let level = if log_given { args.log.as_str() } else { "debug" };
        let writer = std::sync::Mutex::new(file);
        match args.log_format {
            LogFormatArg::Json => tracing_subscriber::fmt::layer()
                .json()
                .with_writer(writer)
                .with_filter(filter(level))
                .boxed(),
            LogFormatArg::Text => tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(writer)
                .with_filter(filter(level))
                .boxed(),
        }
    }));
    tracing_subscriber::registry().with(layers).init();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Clap's own checks of the whole command line (names, shorts and aliases that clash,
    /// conflicts naming no argument), which it makes only in debug builds otherwise.
    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
