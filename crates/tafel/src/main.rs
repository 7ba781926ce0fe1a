//! `tafel`: an Azure Table Storage–compatible server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use tafel_http::server::Threads;
use tafel_http::{Accounts, AppState};
use tafel_service::Service;
use tafel_store::embedded::{EmbeddedOptions, EmbeddedStore};
use tafel_store::postgres::{PostgresOptions, PostgresStore};
use tafel_store::Store;

// Request handling allocates many short-lived buffers from every runtime thread,
// and glibc's malloc was a large share of the workers' time under load
// (BENCHMARKS.md, "Numbers formerly in code comments": mimalloc).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "tafel", version, about = "An Azure Table Storage–compatible server")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (the default).
    Serve(ServeArgs),
}

#[derive(Args, Clone)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "TAFEL_HOST", default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on (Azurite's table port by default).
    #[arg(long, env = "TAFEL_PORT", default_value_t = 10002)]
    port: u16,
    /// Directory holding the data.
    #[arg(long, env = "TAFEL_DATA_DIR", default_value = "./tafel-data")]
    data_dir: PathBuf,
    /// An account as NAME:BASE64KEY[:BASE64KEY2]; repeatable. Default: the
    /// emulator account devstoreaccount1 with its well-known key.
    #[arg(long = "account", env = "TAFEL_ACCOUNTS", value_delimiter = ';')]
    accounts: Vec<String>,
    /// A file of accounts, one NAME:BASE64KEY[:BASE64KEY2] per line (`#` starts a
    /// comment line); combined with --account.
    #[arg(long = "accounts-file", env = "TAFEL_ACCOUNTS_FILE")]
    accounts_file: Option<PathBuf>,
    /// Log filter (error, warn, info, debug, trace, or a tracing directive).
    #[arg(long, env = "TAFEL_LOG", default_value = "info")]
    log: String,
    /// Page cache of the embedded store, in MiB.
    #[arg(long, env = "TAFEL_CACHE_MB", default_value_t = 256)]
    cache_mb: usize,
    /// Where data lives: the embedded store in --data-dir, or a PostgreSQL-wire
    /// database shared by any number of nodes.
    #[arg(long, env = "TAFEL_BACKEND", value_enum, default_value_t = Backend::Embedded)]
    backend: Backend,
    /// The database of the postgres backend, as a libpq-style URL or conninfo
    /// (`postgresql://user@host:5432/db`, `host=… dbname=…`).
    #[arg(long, env = "TAFEL_POSTGRES_URL", required_if_eq("backend", "postgres"))]
    postgres_url: Option<String>,
    /// Connections to the database this node keeps at most.
    #[arg(long, env = "TAFEL_POSTGRES_POOL", default_value_t = 16)]
    postgres_pool: usize,
    /// Threads serving HTTP connections (default: one per CPU but one, at least
    /// one: a core is left to clients on the same machine).
    #[arg(long, env = "TAFEL_THREADS")]
    threads: Option<usize>,
    /// Threads of each of the two runtimes for long requests, one for queries and one
    /// for batches (default: one per CPU).
    #[arg(long, env = "TAFEL_LONG_THREADS")]
    long_threads: Option<usize>,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Embedded,
    Postgres,
}

/// Turns transparent huge pages off for this process. The allocator hands the
/// store's writer thread fresh memory as redb's dirty pages come and go, and the
/// kernel zeroed it a huge page at a time on first touch, stalling group commits
/// and with them the writes' p99 (BENCHMARKS.md, "Numbers formerly in code comments":
/// Transparent huge pages). mimalloc's `MIMALLOC_ALLOW_THP=0` does the same.
#[cfg(target_os = "linux")]
fn disable_transparent_huge_pages() {
    // SAFETY: prctl with PR_SET_THP_DISABLE takes only integers and changes only
    // this process's memory policy.
    let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if rc != 0 {
        // Only a latency tweak: carry on with the kernel's default.
        eprintln!(
            "tafel: could not disable transparent huge pages: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn disable_transparent_huge_pages() {}

fn main() -> anyhow::Result<()> {
    disable_transparent_huge_pages();
    let cli = Cli::parse();
    let args = match cli.command {
        Some(Command::Serve(a)) => a,
        None => cli.serve,
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&args.log).unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    // This runtime only accepts connections and runs the store's background
    // work; serving threads and long requests run on their own (tafel_http::serve).
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(serve(args))
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let mut specs = args.accounts.clone();
    if let Some(path) = &args.accounts_file {
        specs.extend(Accounts::specs_from_file(path).map_err(anyhow::Error::msg)?);
    }
    let accounts = if specs.is_empty() {
        Accounts::dev()
    } else {
        Accounts::from_specs(&specs).map_err(anyhow::Error::msg)?
    };
    let store: Arc<dyn Store> = match (args.backend, &args.postgres_url) {
        (Backend::Postgres, Some(url)) => Arc::new(
            PostgresStore::connect(
                url,
                PostgresOptions {
                    pool_size: args.postgres_pool,
                },
            )
            .await
            .context("connecting to the postgres backend")?,
        ),
        (Backend::Postgres, None) => anyhow::bail!("--backend postgres needs --postgres-url"),
        (Backend::Embedded, _) => Arc::new(
            EmbeddedStore::open(
                &args.data_dir,
                EmbeddedOptions {
                    cache_size: args.cache_mb << 20,
                },
            )
            .with_context(|| format!("opening the store in {}", args.data_dir.display()))?,
        ),
    };
    let state = Arc::new(AppState {
        service: Service::new(store.clone()),
        accounts,
    });
    let addr: SocketAddr = format!("{}:{}", args.host, args.port)
        .parse()
        .context("bad --host/--port")?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let names: Vec<&str> = state.accounts.names().collect();
    match args.backend {
        Backend::Embedded => {
            tracing::info!(data_dir = %args.data_dir.display(), accounts = ?names, "listening on {}", listener.local_addr()?)
        }
        Backend::Postgres => {
            tracing::info!(backend = "postgres", accounts = ?names, "listening on {}", listener.local_addr()?)
        }
    }
    let defaults = Threads::for_cores(std::thread::available_parallelism().map_or(1, |n| n.get()));
    let threads = Threads {
        serving: args.threads.unwrap_or(defaults.serving),
        long: args.long_threads.unwrap_or(defaults.long),
    };
    tafel_http::serve(listener, state, threads, shutdown_signal()).await?;
    tracing::info!("draining the store");
    store.shutdown().await?;
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
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
        () = ctrl_c => {}
        () = term => {}
    }
    tracing::info!("shutdown requested");
}
