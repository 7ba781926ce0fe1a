//! `tafel`: an Azure Table Storage–compatible server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

mod cert;
mod config;

use anyhow::Context as _;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use tafel_http::admin::{self, AccessLog, AdminState, Destination, LogFormat, Ops};
use tafel_http::auth::bearer::{self, OAuth};
use tafel_http::auth::jwks::{KeySource, Keys, REFRESH};
use tafel_http::auth::roles::Roles;
use tafel_http::server::Threads;
use tafel_http::tls;
use tafel_http::{Accounts, AppState};
use tafel_service::Service;
use tafel_store::Store;

// Request handling allocates many short-lived buffers from every runtime thread,
// and glibc's malloc was a large share of the workers' time under load
// (BENCHMARKS.md, "Numbers formerly in code comments": mimalloc).
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
    /// Make a local development CA and a certificate it signs for localhost,
    /// 127.0.0.1 and ::1, for `serve --cert/--key`; print how to trust the CA.
    Cert(cert::CertArgs),
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
    Print(ServeArgs),
}

#[derive(Args, Clone)]
struct ServeArgs {
    /// A TOML file setting any of these flags under its own name (`port = 10002`);
    /// flags and environment variables take precedence over it.
    #[arg(long, env = "TAFEL_CONFIG")]
    config: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, env = "TAFEL_HOST", default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on (Azurite's table port by default).
    #[arg(long, env = "TAFEL_PORT", default_value_t = 10002)]
    port: u16,
    /// Directory holding the data.
    #[arg(long, env = "TAFEL_DATA_DIR", default_value = "./tafel-data")]
    data_dir: PathBuf,
    /// Serve HTTPS with this PEM certificate chain (leaf first), with --key.
    /// `tafel cert` makes one for local development. SIGHUP reloads it.
    #[arg(long, env = "TAFEL_TLS_CERT", requires = "key", conflicts_with = "pfx")]
    cert: Option<PathBuf>,
    /// The PEM private key of --cert.
    #[arg(long, env = "TAFEL_TLS_KEY", requires = "cert")]
    key: Option<PathBuf>,
    /// Serve HTTPS with the key and certificate chain in this PKCS#12 (.pfx) file.
    #[arg(long, env = "TAFEL_TLS_PFX")]
    pfx: Option<PathBuf>,
    /// The password of --pfx.
    #[arg(long, env = "TAFEL_TLS_PFX_PASSWORD", hide_env_values = true, requires = "pfx")]
    pwd: Option<String>,
    /// Accept Microsoft Entra ID bearer tokens (HTTPS only): `basic` checks audience,
    /// issuer and lifetime but not the signature (local development only); `strict`
    /// also verifies the signature (--oauth-jwks or --oauth-issuer).
    #[arg(long, env = "TAFEL_OAUTH", value_enum)]
    oauth: Option<OAuthMode>,
    /// A JWKS file of the keys strict mode verifies signatures with.
    #[arg(long, env = "TAFEL_OAUTH_JWKS", requires = "oauth")]
    oauth_jwks: Option<PathBuf>,
    /// An issuer to accept besides Entra's (`https://sts.windows.net/<tenant>/`,
    /// `https://login.microsoftonline.com/<tenant>/v2.0`); repeatable. In strict mode
    /// without --oauth-jwks, its OpenID discovery document names the keys.
    #[arg(
        long = "oauth-issuer",
        env = "TAFEL_OAUTH_ISSUERS",
        value_delimiter = ';',
        requires = "oauth"
    )]
    oauth_issuers: Vec<String>,
    /// Role file mapping token principals to table roles (docs/oauth.md); required
    /// by strict mode; without one, basic mode lets every accepted token do everything.
    #[arg(long, env = "TAFEL_OAUTH_ROLES", requires = "oauth")]
    oauth_roles: Option<PathBuf>,
    /// The Entra ID tenant: the only one whose issuers are accepted (unless `common`
    /// or `organizations`: any), and the one named in the WWW-Authenticate challenge.
    #[arg(long, env = "TAFEL_OAUTH_TENANT", default_value = "common")]
    oauth_tenant: String,
    /// An account as NAME:BASE64KEY[:BASE64KEY2]; repeatable. Default: the
    /// emulator account devstoreaccount1 with its well-known key.
    #[arg(
        long = "account",
        env = "TAFEL_ACCOUNTS",
        value_delimiter = ';',
        hide_env_values = true
    )]
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
    #[arg(
        long,
        env = "TAFEL_POSTGRES_URL",
        required_if_eq("backend", "postgres"),
        hide_env_values = true
    )]
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
    /// Address of the admin listener (/health, /ready, /metrics).
    #[arg(long, env = "TAFEL_ADMIN_HOST", default_value = "127.0.0.1")]
    admin_host: String,
    /// Port of the admin listener.
    #[arg(long, env = "TAFEL_ADMIN_PORT", default_value_t = 10012)]
    admin_port: u16,
    /// Run no admin listener.
    #[arg(long, env = "TAFEL_NO_ADMIN", value_parser = clap::builder::BoolishValueParser::new())]
    no_admin: bool,
    /// Bearer token the admin listener asks for (/metrics, and /ready's reason);
    /// required when it listens on a non-loopback address.
    #[arg(long, env = "TAFEL_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Where the access log goes: off, stdout, or a file to append to.
    #[arg(long, env = "TAFEL_ACCESS_LOG", default_value = "off")]
    access_log: String,
    /// Format of the access log and of the server's own log lines.
    #[arg(long, env = "TAFEL_LOG_FORMAT", value_enum, default_value_t = LogFormatArg::Text)]
    log_format: LogFormatArg,
    /// On SIGTERM, seconds to keep serving with /ready at 503 (so load balancers
    /// stop sending here) before shutting down.
    #[arg(long, env = "TAFEL_DRAIN_SECONDS", default_value_t = 5)]
    drain_seconds: u64,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
enum OAuthMode {
    Basic,
    Strict,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
enum LogFormatArg {
    Text,
    Json,
}

impl ServeArgs {
    /// Bearer-token checking, if --oauth is on; loads the keys and the role file.
    async fn oauth(&self) -> anyhow::Result<Option<Arc<OAuth>>> {
        let Some(mode) = self.oauth else { return Ok(None) };
        let roles = match &self.oauth_roles {
            Some(path) => Some(Roles::load(path).map_err(anyhow::Error::msg)?),
            None => None,
        };
        // Verified signatures say who a principal is, not what it may do: strict mode
        // grants only what the role file says (Entra ID signs every tenant's tokens
        // with the same keys).
        if mode == OAuthMode::Strict && roles.is_none() {
            anyhow::bail!("--oauth strict needs --oauth-roles (which principals may do what)");
        }
        let keys = match (mode, &self.oauth_jwks) {
            (OAuthMode::Basic, _) => {
                tracing::warn!("--oauth basic: token signatures are NOT checked; anyone can mint an accepted token. For local development only.");
                None
            }
            (OAuthMode::Strict, Some(path)) => Some(KeySource::File(path.clone())),
            (OAuthMode::Strict, None) if !self.oauth_issuers.is_empty() => {
                Some(KeySource::Issuers(self.oauth_issuers.clone()))
            }
            (OAuthMode::Strict, None) => {
                anyhow::bail!("--oauth strict needs --oauth-jwks or --oauth-issuer (the keys to verify tokens with)")
            }
        };
        let keys = match keys {
            Some(source) => {
                let keys = Arc::new(
                    Keys::load(source)
                        .await
                        .map_err(anyhow::Error::msg)
                        .context("loading the OAuth signing keys")?,
                );
                tokio::spawn(refresh_keys(keys.clone()));
                Some(keys)
            }
            None => None,
        };
        let mode = match mode {
            OAuthMode::Basic => bearer::Mode::Basic,
            OAuthMode::Strict => bearer::Mode::Strict,
        };
        Ok(Some(Arc::new(OAuth::new(
            mode,
            keys,
            self.oauth_issuers.clone(),
            roles,
            &self.oauth_tenant,
        ))))
    }

    /// The TLS certificate to serve with, if any.
    fn tls_source(&self) -> Option<tls::Source> {
        match (&self.cert, &self.key, &self.pfx) {
            (Some(cert), Some(key), _) => Some(tls::Source::Pem {
                cert: cert.clone(),
                key: key.clone(),
            }),
            (_, _, Some(path)) => Some(tls::Source::Pfx {
                path: path.clone(),
                password: self.pwd.clone().unwrap_or_default(),
            }),
            _ => None,
        }
    }

    fn access_log(&self) -> anyhow::Result<Option<AccessLog>> {
        let destination = match self.access_log.as_str() {
            "off" | "" => return Ok(None),
            "stdout" | "-" => Destination::Stdout,
            path => Destination::File(PathBuf::from(path)),
        };
        let format = match self.log_format {
            LogFormatArg::Text => LogFormat::Text,
            LogFormatArg::Json => LogFormat::Json,
        };
        let log = AccessLog::open(&destination, format)
            .with_context(|| format!("opening the access log {}", self.access_log))?;
        Ok(Some(log))
    }
}

/// The backend `--backend` names, if this build has it (cargo features
/// `embedded` and `postgres`, both default).
async fn open_store(args: &ServeArgs) -> anyhow::Result<Arc<dyn Store>> {
    match (args.backend, &args.postgres_url) {
        #[cfg(feature = "postgres")]
        (Backend::Postgres, Some(url)) => Ok(Arc::new(
            tafel_store::postgres::PostgresStore::connect(
                url,
                tafel_store::postgres::PostgresOptions {
                    pool_size: args.postgres_pool,
                },
            )
            .await
            .context("connecting to the postgres backend")?,
        )),
        #[cfg(feature = "postgres")]
        (Backend::Postgres, None) => anyhow::bail!("--backend postgres needs --postgres-url"),
        #[cfg(feature = "embedded")]
        (Backend::Embedded, _) => Ok(Arc::new(
            tafel_store::embedded::EmbeddedStore::open(
                &args.data_dir,
                tafel_store::embedded::EmbeddedOptions {
                    cache_size: args.cache_mb << 20,
                },
            )
            .with_context(|| format!("opening the store in {}", args.data_dir.display()))?,
        )),
        #[allow(unreachable_patterns)]
        (backend, _) => anyhow::bail!(
            "this tafel was built without the {} backend (cargo feature `{}`)",
            backend.name(),
            backend.name()
        ),
    }
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Embedded,
    Postgres,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Embedded => "embedded",
            Backend::Postgres => "postgres",
        }
    }
}

/// Turns transparent huge pages off for this process. The allocator hands the
/// store's writer thread fresh memory as redb's dirty pages come and go, and the
/// kernel zeroed it a huge page at a time on first touch, stalling group commits
/// and with them the writes' p99 (BENCHMARKS.md, "Numbers formerly in code comments":
/// Transparent huge pages). mimalloc's `MIMALLOC_ALLOW_THP=0` does the same.
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

fn main() -> anyhow::Result<()> {
    disable_transparent_huge_pages();
    let cmd = Cli::command();
    let (argv, from_file) = config::layered(&cmd, std::env::args_os().collect())?;
    let matches = cmd.clone().try_get_matches_from(&argv).unwrap_or_else(|e| e.exit());
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let args = match cli.command {
        Some(Command::Serve(a)) => a,
        Some(Command::Config {
            action: ConfigCommand::Print(_),
        }) => {
            print!("{}", config::print(&cmd, argv, &from_file)?);
            return Ok(());
        }
        Some(Command::Cert(a)) => return cert::run(a),
        None => cli.serve,
    };
    let logs = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&args.log).unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormatArg::Json => logs.json().init(),
        LogFormatArg::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
    }
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
    let store = open_store(&args).await?;
    let ops = Arc::new(Ops::new(args.access_log()?));
    let account_names: Vec<String> = accounts.names().map(str::to_owned).collect();
    let oauth = args.oauth().await?;
    if oauth.is_some() && args.tls_source().is_none() {
        tracing::warn!(
            "--oauth without --cert/--pfx: bearer tokens are accepted only over HTTPS, so every one will be refused"
        );
    }
    let state = Arc::new(AppState {
        service: Service::new(store.clone()),
        accounts,
        ops: ops.clone(),
        oauth,
    });
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
    let scheme = if acceptor.is_some() { "https" } else { "http" };
    let addr: SocketAddr = format!("{}:{}", args.host, args.port)
        .parse()
        .context("bad --host/--port")?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let backend = args.backend.name();
    let (admin_stop, admin_stopped) = tokio::sync::oneshot::channel::<()>();
    let admin_task = if args.no_admin {
        None
    } else {
        let admin_addr: SocketAddr = format!("{}:{}", args.admin_host, args.admin_port)
            .parse()
            .context("bad --admin-host/--admin-port")?;
        admin::listener::check_exposure(&admin_addr, args.admin_token.as_deref()).map_err(anyhow::Error::msg)?;
        let admin_listener = tokio::net::TcpListener::bind(admin_addr)
            .await
            .with_context(|| format!("binding the admin listener {admin_addr}"))?;
        tracing::info!("admin listener on {}", admin_listener.local_addr()?);
        let admin_state = Arc::new(AdminState::new(
            ops.clone(),
            store.clone(),
            account_names,
            args.admin_token.clone().filter(|t| !t.is_empty()),
            backend,
        ));
        Some(tokio::spawn(admin::serve_admin(admin_listener, admin_state, async {
            let _ = admin_stopped.await;
        })))
    };
    let names: Vec<&str> = state.accounts.names().collect();
    match args.backend {
        Backend::Embedded => {
            tracing::info!(data_dir = %args.data_dir.display(), accounts = ?names, scheme, "listening on {}", listener.local_addr()?)
        }
        Backend::Postgres => {
            tracing::info!(backend = "postgres", accounts = ?names, scheme, "listening on {}", listener.local_addr()?)
        }
    }
    let defaults = Threads::for_cores(std::thread::available_parallelism().map_or(1, |n| n.get()));
    let threads = Threads {
        serving: args.threads.unwrap_or(defaults.serving),
        long: args.long_threads.unwrap_or(defaults.long),
    };
    let drain = std::time::Duration::from_secs(args.drain_seconds);
    tafel_http::serve(listener, state, acceptor, threads, shutdown_signal(ops.clone(), drain)).await?;
    tracing::info!("draining the store");
    store.shutdown().await?;
    ops.flush();
    let _ = admin_stop.send(());
    if let Some(task) = admin_task {
        if let Ok(Err(e)) = task.await {
            tracing::warn!(error = %e, "the admin listener failed");
        }
    }
    tracing::info!("stopped");
    Ok(())
}

/// Loads the OAuth signing keys again every hour (issuers rotate them).
async fn refresh_keys(keys: Arc<Keys>) {
    loop {
        tokio::time::sleep(REFRESH).await;
        if let Err(e) = keys.reload().await {
            tracing::warn!(error = %e, "reloading the OAuth signing keys failed; keeping the ones in use");
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
/// and responses ask clients to close their connections for `drain`, while
/// requests are still served, so a load balancer moves traffic away before
/// anything is refused. SIGINT (Ctrl-C at a terminal) stops without the wait,
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
        tokio::select! {
            () = tokio::time::sleep(drain) => {}
            s = next_signal() => tracing::info!(signal = ?s, "second signal: shutting down now"),
        }
    }
    tracing::info!("shutdown requested");
}
