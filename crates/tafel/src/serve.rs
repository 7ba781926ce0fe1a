//! `tafel serve`: the store opened, the Table API and admin listeners bound, and
//! the process kept serving until a signal (`main.rs` settles the flags first).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tafel_admin::{self as admin, AdminState};
use tafel_http::ops::Ops;
use tafel_http::tls;
use tafel_http::{Accounts, AppState, LimitSettings, Limits, Threads, Throttle};
use tafel_service::Service;

use crate::serve_args::{Backend, ServeArgs};
use crate::{azurite, listeners, purge, table_config};

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

pub(crate) async fn serve(args: ServeArgs) -> anyhow::Result<()> {
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
