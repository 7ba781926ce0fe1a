//! `tafel health`: asks a running server's admin listener whether it is ready
//! (`/ready`) and exits 0 if so, 1 if not — a container's HEALTHCHECK, where
//! there is no shell or curl. It reads the serve command's own variables, so
//! in a container configured by `TAFEL_ADMIN_*` it finds the listener as is.

use std::net::IpAddr;

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
    let host = match args.admin_host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) if ip.is_unspecified() => "127.0.0.1".to_owned(),
        Ok(IpAddr::V6(ip)) if ip.is_unspecified() => "[::1]".to_owned(),
        Ok(IpAddr::V6(ip)) => format!("[{ip}]"),
        _ => args.admin_host.clone(),
    };
    let url = format!("http://{host}:{}/ready", args.admin_port);
    let (status, body) =
        crate::admin_call::call(http::Method::GET, &url, args.admin_token.as_deref(), args.timeout).await?;
    if !status.is_success() {
        anyhow::bail!("{url}: {status} {}", String::from_utf8_lossy(&body).trim());
    }
    Ok(())
}
