//! `tafel stats [--account A] [--table T]`: tables' entities, partitions and bytes,
//! from a running server's admin listener (`/stats`, `/accounts/A/tables/T/stats`;
//! docs/lifecycle.md), read from the counters the store keeps with every write.

use anyhow::Context as _;
use clap::Args;

#[derive(Args)]
pub(crate) struct StatsArgs {
    /// Only this account's tables (required with --table).
    #[arg(long)]
    account: Option<String>,
    /// One table: its partitions too.
    #[arg(long, requires = "account")]
    table: Option<String>,
    /// Print the server's JSON answer as it is.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    admin: crate::admin_call::AdminConn,
    /// Seconds to wait for the answer.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
}

pub(crate) fn run(args: StatsArgs) -> anyhow::Result<()> {
    crate::admin_call::run("stats", call(&args))
}

async fn call(args: &StatsArgs) -> anyhow::Result<()> {
    let path = match (&args.account, &args.table) {
        (Some(a), Some(t)) => format!("/accounts/{a}/tables/{t}/stats"),
        (Some(a), None) => format!("/stats?account={a}"),
        _ => "/stats".to_owned(),
    };
    let json = crate::admin_call::ask(
        http::Method::GET,
        &args.admin.url,
        &path,
        args.admin.token.as_deref(),
        args.timeout,
    )
    .await?;
    let json = json.context("the server's answer is not JSON")?;
    if args.json {
        println!("{json}");
        return Ok(());
    }
    let num = |v: &serde_json::Value, k: &str| v.get(k).and_then(serde_json::Value::as_u64);
    let text = |v: &serde_json::Value, k: &str| v.get(k).and_then(|s| s.as_str()).unwrap_or_default().to_owned();
    if args.table.is_some() {
        println!("account\t{}", text(&json, "account"));
        println!("table\t{}", text(&json, "table"));
        println!("entities\t{}", num(&json, "entities").unwrap_or(0));
        match num(&json, "partitions") {
            Some(p) => println!("partitions\t{p}"),
            None => println!("partitions\t(not counted by this backend)"),
        }
        println!("bytes\t{}", num(&json, "bytes").unwrap_or(0));
        return Ok(());
    }
    let tables = json
        .get("tables")
        .and_then(|t| t.as_array())
        .context("the server's answer has no table list")?;
    println!("account\ttable\tentities\tbytes");
    for t in tables {
        println!(
            "{}\t{}\t{}\t{}",
            text(t, "account"),
            text(t, "table"),
            num(t, "entities").unwrap_or(0),
            num(t, "bytes").unwrap_or(0)
        );
    }
    Ok(())
}
