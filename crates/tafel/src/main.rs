//! `tafel`: an Azure Table Storage–compatible server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

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
mod serve_args;
mod snapshot;
mod stats;
mod table_config;
mod transfer;
mod ttl;
mod undelete;

use serve_args::{Backend, LogFormatArg, ServeArgs};

use anyhow::Context as _;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use tafel_admin::{self as admin, AdminState};
use tafel_http::ops::Ops;
use tafel_http::tls;
use tafel_http::{Accounts, AppState, LimitSettings, Limits, Threads, Throttle};
use tafel_service::Service;

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
        .block_on(serve(args))
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

/// The expiry sweep (docs/lifecycle.md, "Expiry (TTL)"): a round every
/// `SWEEP_EVERY`, reading every table's policy every `DISCOVER_EVERY`.
async fn expire(service: Service) {
    let mut discovered: Option<std::time::Instant> = None;
    loop {
        tokio::time::sleep(tafel_service::SWEEP_EVERY).await;
        let discover = discovered.is_none_or(|d| d.elapsed() >= tafel_service::DISCOVER_EVERY);
        if discover {
            discovered = Some(std::time::Instant::now());
        }
        service.expiry_round(discover).await;
    }
}

/// The Table API's listener, with a listen backlog that holds a burst of new
/// connections: with the usual 128, clients opening a few hundred at once saw
/// some of their SYNs dropped, and waited a second to retry each.
fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    // The kernel caps it at net.core.somaxconn.
    socket.listen(4096)
}

/// The limits `args` ask for, with as many connections as open files allow
/// (the soft limit raised to the hard one first: the usual 1024 would cap a
/// server far below its memory).
fn limit_settings(args: &ServeArgs) -> LimitSettings {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let mut files = getrlimit(Resource::Nofile);
    if files.current < files.maximum {
        let raised = Rlimit {
            current: files.maximum,
            maximum: files.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            files = raised;
        }
    }
    // Files besides connections: the store's, the log, listeners, the database pool.
    const OTHER_FILES: u64 = 256;
    let defaults = LimitSettings::default();
    let asked = args.max_connections.map(u64::from);
    let mut max_connections = asked.unwrap_or(defaults.max_connections as u64);
    if let Some(open_files) = files.current {
        let room = open_files.saturating_sub(OTHER_FILES).max(1);
        if max_connections > room {
            if asked.is_some() {
                tracing::warn!(
                    max_connections,
                    open_files,
                    "--max-connections is more than the open-file limit allows; serving {room} at once"
                );
            }
            max_connections = room;
        }
    }
    LimitSettings {
        max_connections: usize::try_from(max_connections).unwrap_or(usize::MAX),
        body_memory: (args.max_body_memory_mb as usize) << 20,
        head_memory: (args.max_header_memory_mb as usize) << 20,
        header_timeout: Duration::from_secs(args.header_timeout.into()),
        body_timeout: Duration::from_secs(args.body_timeout.into()),
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let accounts = accounts(&args)?;
    let account_names: Vec<String> = accounts.names().map(str::to_owned).collect();
    // The file's `[[table]]` entries are checked before the store opens, and
    // applied before any listener takes a request.
    let tables = table_config::read(args.config.as_deref())?;
    table_config::check_accounts(&tables, &account_names)?;
    let store = open_checked_store(&args).await?;
    let service = Service::new(store.clone());
    table_config::apply(&tables, &service).await?;
    let ops = Arc::new(Ops::new(args.access_log()?).with_scan_warn_rows(args.scan_warn_rows));
    args.install_faults(&ops)?;
    let admin_listener = if args.no_admin {
        None
    } else {
        Some(
            listeners::bind_admin(
                &args.admin_host,
                args.admin_port,
                args.admin_port_given,
                args.admin_token.as_deref(),
            )
            .await?,
        )
    };
    let explorer = match &admin_listener {
        Some(l) if !args.no_explorer => Some(l.local_addr()?),
        _ => None,
    };
    tokio::spawn(expire(service.clone()));
    let state = Arc::new(app_state(&args, service.clone(), accounts, ops.clone(), explorer).await?);
    let acceptor = tls_acceptor(&args)?;
    let scheme = if acceptor.is_some() { "https" } else { "http" };
    let addr: SocketAddr = format!("{}:{}", args.host, args.port)
        .parse()
        .context("bad --host/--port")?;
    let listener = bind(addr).with_context(|| format!("binding {addr}"))?;
    let admin_addr = admin_listener.as_ref().map(|l| l.local_addr()).transpose()?;
    let admin = match admin_listener {
        None => None,
        Some(admin_listener) => {
            tracing::info!("admin listener on {}", admin_listener.local_addr()?);
            let mut admin_state = admin_state(&args, &service, ops.clone(), account_names);
            if let Some(at) = explorer {
                let endpoint = format!("{scheme}://{}", listeners::reachable(listener.local_addr()?));
                admin_state = admin_state.with_explorer(state.clone(), endpoint);
                tracing::info!("explorer on http://{}/", listeners::reachable(at));
            }
            Some(AdminTask::spawn(admin_listener, admin_state))
        }
    };
    log_listening(&args, state.accounts(), scheme, listener.local_addr()?);
    let _listeners_file = args.listeners_file.as_deref().and_then(|path| {
        listeners::ListenersFile::write(
            path,
            &listeners::Listeners {
                table: listener.local_addr().ok()?,
                admin: admin_addr,
            },
        )
    });
    let drain = std::time::Duration::from_secs(args.drain_seconds);
    let stop = shutdown_signal(ops.clone(), drain);
    tafel_http::serve(listener, state, acceptor, threads(&args), stop).await?;
    tracing::info!("draining the store");
    store.shutdown().await?;
    ops.flush();
    if let Some(admin) = admin {
        admin.stop().await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// What the Table API's handlers share: the service, the accounts, bearer-token
/// checking (--oauth), the limits, the explorer's link at `/` and the throttle.
async fn app_state(
    args: &ServeArgs,
    service: Service,
    accounts: Accounts,
    ops: Arc<Ops>,
    explorer: Option<SocketAddr>,
) -> anyhow::Result<AppState> {
    let oauth = args.oauth().await?;
    if oauth.is_some() && args.tls_source().is_none() {
        tracing::warn!(
            "--oauth without --cert/--pfx: bearer tokens are accepted only over HTTPS, so every one will be refused"
        );
    }
    Ok(AppState::new(service, accounts, ops, Limits::new(limit_settings(args)))
        .with_oauth(oauth)
        .with_root_page(explorer.map(admin::explorer::root_page))
        .with_throttle(
            args.azure_limits
                .then(|| Throttle::new(args.partition_limit, args.account_limit)),
        ))
}

/// What the admin listener's handlers share (the explorer is added when served).
fn admin_state(args: &ServeArgs, service: &Service, ops: Arc<Ops>, accounts: Vec<String>) -> AdminState {
    let store = service.store().clone();
    AdminState::new(
        ops,
        store.clone(),
        accounts,
        args.admin_token.clone().filter(|t| !t.is_empty()),
        args.store.backend.name(),
    )
    .with_service(service.clone())
    .with_purge(admin::purge_job::Purges::new(purge::filter_compiler(), store))
}

/// The store `args` name, with the settings it takes at start, refused if it
/// holds a restore that did not finish.
async fn open_checked_store(args: &ServeArgs) -> anyhow::Result<Arc<dyn tafel_store::Store>> {
    let store = args.open_store().await?;
    args.change_feed.apply(store.as_ref())?;
    store
        .set_table_soft_delete(args.table_soft_delete)
        .map_err(|e| anyhow::anyhow!("--table-soft-delete: {e}"))?;
    if let Some(what) = tafel_backup::unfinished_restore(store.as_ref()).await? {
        anyhow::bail!(
            "this store holds a restore that did not finish ({what}): it is not served as if it were whole. \
             Start from an empty store (delete the data directory, or drop and recreate the database) and run `tafel restore` again"
        );
    }
    Ok(store)
}

/// The admin listener's server, running until told to stop.
struct AdminTask {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl AdminTask {
    fn spawn(listener: tokio::net::TcpListener, state: AdminState) -> AdminTask {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(admin::serve_admin(listener, Arc::new(state), async {
            let _ = stopped.await;
        }));
        AdminTask { stop, task }
    }

    /// Stops it (after the Table API: `/ready` answers through the drain).
    async fn stop(self) {
        let _ = self.stop.send(());
        if let Ok(Err(e)) = self.task.await {
            tracing::warn!(error = %e, "the admin listener failed");
        }
    }
}

/// The serving threads `--threads`/`--long-threads` ask for, else one per core's defaults.
fn threads(args: &ServeArgs) -> Threads {
    let defaults = Threads::for_cores(std::thread::available_parallelism().map_or(1, |n| n.get()));
    Threads {
        serving: args.threads.unwrap_or(defaults.serving),
        long: args.long_threads.unwrap_or(defaults.long),
    }
}

/// The accounts served: `--account`s and `--accounts-file`, else Azurite's
/// `AZURITE_ACCOUNTS`, else the development account.
fn accounts(args: &ServeArgs) -> anyhow::Result<Accounts> {
    let mut specs = args.accounts.clone();
    if let Some(path) = &args.accounts_file {
        specs.extend(Accounts::specs_from_file(path).map_err(anyhow::Error::msg)?);
    }
    if specs.is_empty() {
        specs = azurite::accounts_from_env();
        if !specs.is_empty() {
            tracing::info!("accounts from {}", azurite::ACCOUNTS_VAR);
        }
    }
    let mut accounts = if specs.is_empty() {
        Accounts::dev()
    } else {
        Accounts::from_specs(&specs).map_err(anyhow::Error::msg)?
    };
    if args.cosmos {
        // The Cosmos emulator's connection string, unchanged: its account at the root.
        use tafel_protocol::cosmos::{EMULATOR_ACCOUNT, EMULATOR_KEY};
        accounts
            .merge(Accounts::from_specs(&[format!("{EMULATOR_ACCOUNT}:{EMULATOR_KEY}")]).map_err(anyhow::Error::msg)?);
        tafel_http::set_root_account(EMULATOR_ACCOUNT, accounts.names().map(str::to_owned).collect());
    }
    Ok(accounts)
}

/// The TLS acceptor when `--cert`/`--pfx` is given, its certificate reloaded on SIGHUP.
fn tls_acceptor(args: &ServeArgs) -> anyhow::Result<Option<tls::TlsAcceptor>> {
    let certificate = match args.tls_source() {
        Some(source) => Some(tls::Certificate::open(source).context("loading the TLS certificate")?),
        None => None,
    };
    let acceptor = certificate
        .as_ref()
        .map(|c| c.acceptor())
        .transpose()
        .context("setting up TLS")?;
    if let Some(certificate) = certificate.clone() {
        tokio::spawn(reload_on_hangup(certificate));
    }
    Ok(acceptor)
}

/// Logs where the Table API listens, for which accounts, over which store.
fn log_listening(args: &ServeArgs, accounts: &Accounts, scheme: &str, addr: SocketAddr) {
    let names: Vec<&str> = accounts.names().collect();
    match args.store.backend {
        Backend::Embedded if args.in_memory => {
            tracing::info!(in_memory = true, accounts = ?names, scheme, "listening on {}", addr)
        }
        Backend::Embedded => {
            tracing::info!(data_dir = %args.store.data_dir.display(), accounts = ?names, scheme, "listening on {}", addr)
        }
        Backend::Postgres => {
            tracing::info!(backend = "postgres", accounts = ?names, scheme, "listening on {}", addr)
        }
    }
}

/// On each SIGHUP, loads the certificate files again: new handshakes get the new
/// certificate, open connections keep theirs. A file that does not load leaves
/// the one in use.
async fn reload_on_hangup(certificate: Arc<tls::Certificate>) {
    #[cfg(unix)]
    {
        let Ok(mut hangups) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP: the TLS certificate will not reload");
            return;
        };
        while hangups.recv().await.is_some() {
            match certificate.reload() {
                Ok(()) => tracing::info!("SIGHUP: TLS certificate reloaded"),
                Err(e) => {
                    tracing::error!(error = %e, "SIGHUP: the TLS certificate did not load; keeping the one in use")
                }
            }
        }
    }
    #[cfg(not(unix))]
    let _ = certificate;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signal {
    Interrupt,
    Terminate,
}

/// The next SIGINT or SIGTERM.
async fn next_signal() -> Signal {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => Signal::Interrupt,
        () = term => Signal::Terminate,
    }
}

/// Completes when the server should stop taking requests. SIGTERM (what
/// orchestrators and service managers send) drains first: `/ready` answers 503
/// and responses ask clients to close their connections while requests are
/// still served, until none is in flight or for `drain` at most, so a load
/// balancer moves traffic away before anything is refused. SIGINT (Ctrl-C at a terminal) stops without the wait,
/// as does a second signal during the drain. Either way, in-flight requests
/// then finish before the process exits.
async fn shutdown_signal(ops: Arc<Ops>, drain: std::time::Duration) {
    let first = next_signal().await;
    ops.start_draining();
    if first == Signal::Terminate && !drain.is_zero() {
        tracing::info!(
            seconds = drain.as_secs_f64(),
            "SIGTERM: not ready, draining before shutdown"
        );
        // Waiting out the whole drain with nothing in flight only delays every
        // stop (a test suite's teardown, `docker stop`): it ends once no request
        // has been in flight for a moment, or at the limit. The moment (not a
        // single idle sample) keeps a server under steady load draining: there
        // its clients are never all between two requests for that long.
        let idle = async {
            const QUIET: Duration = Duration::from_millis(200);
            const SAMPLE: Duration = Duration::from_millis(5);
            let mut quiet = Duration::ZERO;
            while quiet < QUIET {
                tokio::time::sleep(SAMPLE).await;
                quiet = match ops.metrics.requests_in_flight() {
                    0 => quiet + SAMPLE,
                    _ => Duration::ZERO,
                };
            }
        };
        tokio::select! {
            () = idle => tracing::info!("drained: no request in flight"),
            () = tokio::time::sleep(drain) => tracing::info!("drain limit reached"),
            s = next_signal() => tracing::info!(signal = ?s, "second signal: shutting down now"),
        }
    }
    tracing::info!("shutdown requested");
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
