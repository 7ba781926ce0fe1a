//! `tafel purge --account A --table T [--filter F] [--partition P]`: deletes
//! every matching entity of a running server's table, server-side, as a job of
//! its admin listener (`POST /accounts/A/tables/T/purge`, then
//! `GET /purge-jobs/ID` until it ends; docs/lifecycle.md). Also the filter
//! compiler the server hands its admin listener for those jobs.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use clap::Args;
use tafel_admin::purge_job::{Compiled, FilterCompiler};
use tafel_store::{KeyRef, RowFilter};

#[derive(Args)]
pub(crate) struct PurgeArgs {
    /// The account that holds the table.
    #[arg(long, default_value = "devstoreaccount1")]
    account: String,
    /// The table.
    #[arg(long)]
    table: String,
    /// Delete the entities this OData `$filter` matches (as a query's).
    #[arg(long)]
    filter: Option<String>,
    /// Delete only in this partition (with --filter: the entities of it that match).
    #[arg(long)]
    partition: Option<String>,
    /// Keys deleted per transaction (1–1000).
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=1000))]
    batch: u64,
    /// Do not ask for confirmation (needed when stdin is not a terminal).
    #[arg(long, short = 'y')]
    yes: bool,
    /// Start the job and print its id without waiting for it.
    #[arg(long)]
    no_wait: bool,
    /// No progress display.
    #[arg(long, short = 'q')]
    quiet: bool,
    #[command(flatten)]
    admin: crate::admin_call::AdminConn,
    /// Seconds to wait for each answer of the admin listener.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
}

pub(crate) fn run(args: PurgeArgs) -> anyhow::Result<()> {
    crate::admin_call::run("purge", call(&args))
}

/// What the purge deletes, said for the prompt.
fn what(args: &PurgeArgs) -> String {
    let mut s = format!("entities of {}/{}", args.account, args.table);
    if let Some(p) = &args.partition {
        s += &format!(" in partition {p:?}");
    }
    match &args.filter {
        Some(f) => s += &format!(" matching {f:?}"),
        None if args.partition.is_none() => s = format!("EVERY entity of {}/{}", args.account, args.table),
        None => {}
    }
    s
}

fn confirmed(args: &PurgeArgs) -> anyhow::Result<()> {
    if args.yes {
        return Ok(());
    }
    anyhow::ensure!(
        std::io::stdin().is_terminal(),
        "stdin is not a terminal to confirm on: pass --yes to delete {}",
        what(args)
    );
    eprint!("delete {}? [y/N] ", what(args));
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    anyhow::ensure!(
        matches!(line.trim(), "y" | "Y" | "yes"),
        "not confirmed: nothing deleted"
    );
    Ok(())
}

async fn call(args: &PurgeArgs) -> anyhow::Result<()> {
    confirmed(args)?;
    let body = serde_json::json!({
        "filter": args.filter,
        "partition": args.partition,
        "batch": args.batch,
    });
    let path = format!("/accounts/{}/tables/{}/purge", args.account, args.table);
    let token = args.admin.token.as_deref();
    let started = crate::admin_call::ask_with(
        http::Method::POST,
        &args.admin.url,
        &path,
        token,
        args.timeout,
        Bytes::from(body.to_string()),
    )
    .await?
    .context("the server's answer is not JSON")?;
    let id = started
        .get("id")
        .and_then(|i| i.as_str())
        .context("the server's answer names no job")?
        .to_owned();
    if args.no_wait {
        println!("{id}");
        return Ok(());
    }
    let progress = crate::progress::Progress::new(format!("purging {}", args.table), None, args.quiet);
    let mut shown = 0u64;
    loop {
        let job = crate::admin_call::ask(
            http::Method::GET,
            &args.admin.url,
            &format!("/purge-jobs/{id}"),
            token,
            args.timeout,
        )
        .await?
        .context("the server's answer is not JSON")?;
        let deleted = job.get("deleted").and_then(|d| d.as_u64()).unwrap_or(0);
        progress.add(deleted.saturating_sub(shown), 0);
        shown = shown.max(deleted);
        match job.get("state").and_then(|s| s.as_str()) {
            Some("done") => {
                progress.finish(&format!("; purged {deleted} entities"));
                return Ok(());
            }
            Some("failed") => {
                let why = job.get("error").and_then(|e| e.as_str()).unwrap_or("no reason given");
                anyhow::bail!("job {id} failed after deleting {deleted} entities: {why}");
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// The Table API's `$filter` parser and planner, for the admin listener's
/// purge jobs (tafel-admin does not depend on tafel-protocol).
pub(crate) fn filter_compiler() -> FilterCompiler {
    Arc::new(|text: &str| {
        let expr = tafel_protocol::filter::parse_filter(text).map_err(|e| e.message.into_owned())?;
        let plan = tafel_service::query::plan_entities(Some(&expr));
        let filter = plan.residual.map(|expr| {
            let expr = Arc::new(expr);
            Arc::new(move |k: KeyRef<'_>, v: &[u8]| tafel_service::query::eval_stored(&expr, k, v)) as RowFilter
        });
        Ok(Compiled {
            ranges: plan.ranges,
            filter,
        })
    })
}
