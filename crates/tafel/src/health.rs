//! `tafel health`: asks a running server's admin listener whether it is ready
//! (`/ready`) and exits 0 if so, 1 if not — a container's HEALTHCHECK, where
//! there is no shell or curl. It finds the server as the server was
//! configured, however that was: by the listeners file the server writes
//! (`TAFEL_LISTENERS_FILE`, set in the image), which follows `--admin-port`,
//! `--no-admin` and a fallback port given as arguments, which no variable
//! says; else by the serve command's own variables.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;

#[derive(Args)]
pub(crate) struct HealthArgs {
    /// Address of the admin listener (an unspecified one, 0.0.0.0 or ::, is
    /// probed on loopback).
    #[arg(long, env = "TAFEL_ADMIN_HOST", default_value = "127.0.0.1")]
    admin_host: String,
    /// Port of the admin listener.
    #[arg(long, env = "TAFEL_ADMIN_PORT", default_value_t = 10012)]
    admin_port: u16,
    /// The admin token, if the listener asks for one (then /ready says why it is not ready).
    #[arg(long, env = "TAFEL_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// The file a running server wrote its listeners to (serve's
    /// --listeners-file); read unless --admin-host/--admin-port are given.
    #[arg(long, env = "TAFEL_LISTENERS_FILE")]
    listeners_file: Option<PathBuf>,
    /// Whether --admin-host or --admin-port was given on the command line.
    #[arg(skip)]
    pub(crate) address_given: bool,
    /// Seconds to wait for the answer.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
}

pub(crate) fn run(args: HealthArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    match runtime.block_on(probe(&args)) {
        Ok(()) => {
            println!("ready");
            Ok(())
        }
        Err(e) => {
            eprintln!("tafel health: not ready: {e:#}");
            std::process::exit(1);
        }
    }
}

async fn probe(args: &HealthArgs) -> anyhow::Result<()> {
    let listeners =
        match &args.listeners_file {
            Some(path) if !args.address_given => Some(crate::listeners::Listeners::read(path).map_err(|e| {
                e.context("the server has not written where it listens (not started yet, or it failed)")
            })?),
            _ => None,
        };
    match listeners {
        Some(l) => match l.admin {
            Some(admin) => ready(&crate::listeners::reachable(admin).to_string(), args).await,
            None => table_port_accepts(l.table, args.timeout).await,
        },
        None => ready(&admin_address(args), args).await,
    }
}

/// A server run with --no-admin has no `/ready` to ask: the best a probe can
/// say is that its Table API port takes connections, and it says that much.
async fn table_port_accepts(table: SocketAddr, timeout: u64) -> anyhow::Result<()> {
    let at = crate::listeners::reachable(table);
    let connect = tokio::net::TcpStream::connect(at);
    tokio::time::timeout(std::time::Duration::from_secs(timeout), connect)
        .await
        .with_context(|| format!("the Table API port {at} did not accept a connection within {timeout} s"))?
        .with_context(|| format!("connecting to the Table API port {at}"))?;
    eprintln!(
        "tafel health: the server runs with no admin listener (--no-admin): its Table API port {at} accepts \
         connections, which is all that can be checked (readiness and draining need the admin listener)"
    );
    Ok(())
}

fn admin_address(args: &HealthArgs) -> String {
    let host = match args.admin_host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) if ip.is_unspecified() => "127.0.0.1".to_owned(),
        Ok(IpAddr::V6(ip)) if ip.is_unspecified() => "[::1]".to_owned(),
        Ok(IpAddr::V6(ip)) => format!("[{ip}]"),
        _ => args.admin_host.clone(),
    };
    format!("{host}:{}", args.admin_port)
}

async fn ready(admin: &str, args: &HealthArgs) -> anyhow::Result<()> {
    let url = format!("http://{admin}/ready");
    let (status, body) =
        crate::admin_call::call(http::Method::GET, &url, args.admin_token.as_deref(), args.timeout).await?;
    if !status.is_success() {
        anyhow::bail!("{url}: {status} {}", String::from_utf8_lossy(&body).trim());
    }
    Ok(())
}
