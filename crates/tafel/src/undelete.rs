//! `tafel undelete --account A --table T [--as NEW] [--id ID]` and `--list`:
//! deleted tables kept restorable by `serve --table-soft-delete`, through a
//! running server's admin listener (`/accounts/A/deleted-tables`; docs/lifecycle.md).

use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::Args;
use serde_json::{json, Value};

#[derive(Args)]
pub(crate) struct UndeleteArgs {
    /// The account the table belonged to.
    #[arg(long)]
    account: String,
    /// The deleted table's name: its most recent deletion is restored.
    #[arg(long, required_unless_present_any = ["list", "id"])]
    table: Option<String>,
    /// Restore under this name instead (needed when a table took the name since).
    #[arg(long = "as", value_name = "NEW")]
    as_name: Option<String>,
    /// Restore this deleted table (an id from --list) rather than the most recent of --table.
    #[arg(long)]
    id: Option<u64>,
    /// List the account's deleted tables still restorable, and restore nothing.
    #[arg(long, conflicts_with_all = ["as_name", "id"])]
    list: bool,
    /// Print the server's JSON answer as it is.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    admin: crate::admin_call::AdminConn,
    /// Seconds to wait for the answer.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
}

/// `--table-soft-delete`'s value: as `--change-retention`'s, more than 0.
pub(crate) fn parse_keep(s: &str) -> Result<Duration, String> {
    if s.trim().trim_end_matches(['s', 'm', 'h', 'd']).parse::<u64>() == Ok(0) {
        return Err("0 keeps nothing; leave the flag out to delete tables at once".into());
    }
    crate::change_feed_args::parse_duration(s)
}

pub(crate) fn run(args: UndeleteArgs) -> anyhow::Result<()> {
    crate::admin_call::run("undelete", call(&args))
}

async fn call(args: &UndeleteArgs) -> anyhow::Result<()> {
    let (url, token, timeout) = (&args.admin.url, args.admin.token.as_deref(), args.timeout);
    let list_path = format!("/accounts/{}/deleted-tables", args.account);
    let listed = crate::admin_call::ask(http::Method::GET, url, &list_path, token, timeout)
        .await?
        .context("the server's answer is not JSON")?;
    let tables = listed
        .get("deletedTables")
        .and_then(Value::as_array)
        .context("the server's answer has no deletedTables")?;
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    if args.list {
        if args.json {
            println!("{listed}");
            return Ok(());
        }
        println!("id\tname\tdeleted\trestorable until\tentities\tbytes");
        for t in tables {
            let num = |k: &str| t.get(k).and_then(Value::as_u64).unwrap_or(0);
            println!(
                "{}\t{}\t{}\t{}\t{}\t{}",
                text(t, "id"),
                text(t, "name"),
                text(t, "deletedAt"),
                text(t, "restorableUntil"),
                num("entities"),
                num("bytes")
            );
        }
        return Ok(());
    }
    // The list is most recently deleted first.
    let chosen = tables.iter().find(|t| {
        let id_ok = args.id.is_none_or(|id| text(t, "id") == id.to_string());
        let name_ok = args
            .table
            .as_ref()
            .is_none_or(|n| text(t, "name").eq_ignore_ascii_case(n));
        id_ok && name_ok
    });
    let Some(chosen) = chosen else {
        match (&args.table, args.id) {
            (Some(t), None) => bail!(
                "account {} has no deleted table named {t:?} still restorable (`tafel undelete --account {} --list` lists them)",
                args.account,
                args.account
            ),
            _ => bail!("account {} has no such deleted table still restorable", args.account),
        }
    };
    let id = text(chosen, "id");
    let body = match &args.as_name {
        Some(name) => json!({ "as": name }),
        None => json!({}),
    };
    let path = format!("{list_path}/{id}/restore");
    let body = bytes::Bytes::from(body.to_string());
    let restored = crate::admin_call::ask_with(http::Method::POST, url, &path, token, timeout, body)
        .await?
        .context("the server's answer is not JSON")?;
    if args.json {
        println!("{restored}");
    } else {
        println!(
            "restored {} (id {id}) as {}",
            text(chosen, "name"),
            text(&restored, "table")
        );
    }
    Ok(())
}
