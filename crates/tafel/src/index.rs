//! `tafel index create|list|drop`: secondary indexes of a running server's
//! tables, through its admin listener (`/accounts/A/tables/T/indexes`, see
//! docs/indexes.md).

use anyhow::Context as _;
use clap::{Args, Subcommand};

#[derive(Args)]
pub(crate) struct IndexArgs {
    #[command(subcommand)]
    action: Action,
    /// The account that holds the table.
    #[arg(long, default_value = "devstoreaccount1", global = true)]
    account: String,
    /// The table.
    #[arg(long, global = true)]
    table: Option<String>,
    #[command(flatten)]
    admin: crate::admin_call::AdminConn,
    /// Seconds to wait for the answer (a build on a large table takes a while).
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..), global = true)]
    timeout: u64,
}

#[derive(Subcommand)]
enum Action {
    /// Index PROPERTY of the table: build its entries from the entities there.
    Create { property: String },
    /// List the table's indexes: property, state, entries.
    List,
    /// Drop the index on PROPERTY and its entries.
    Drop { property: String },
}

pub(crate) fn run(args: IndexArgs) -> anyhow::Result<()> {
    crate::admin_call::run("index", call(&args))
}

async fn call(args: &IndexArgs) -> anyhow::Result<()> {
    let table = args.table.as_deref().context("--table is required")?;
    let base = format!("/accounts/{}/tables/{table}/indexes", args.account);
    let (method, path) = match &args.action {
        Action::Create { property } => (http::Method::PUT, format!("{base}/{property}")),
        Action::List => (http::Method::GET, base),
        Action::Drop { property } => (http::Method::DELETE, format!("{base}/{property}")),
    };
    let json = crate::admin_call::ask(
        method,
        &args.admin.url,
        &path,
        args.admin.token.as_deref(),
        args.timeout,
    )
    .await?;
    let field = |j: &serde_json::Value, k: &str| j.get(k).map(|v| v.to_string().trim_matches('"').to_owned());
    match &args.action {
        Action::Create { property } => {
            let j = json.context("the server's answer is not JSON")?;
            let entries = field(&j, "entries").unwrap_or_default();
            if j.get("created").and_then(|c| c.as_bool()) == Some(true) {
                let ms = j.get("ms").and_then(|m| m.as_f64()).unwrap_or(0.0);
                println!("indexed {table}.{property}: {entries} entries ({ms:.1} ms)");
            } else {
                println!("{table}.{property} is indexed already: {entries} entries");
            }
        }
        Action::Drop { property } => println!("dropped the index on {table}.{property}"),
        Action::List => {
            let list = json
                .as_ref()
                .and_then(|j| j.get("indexes"))
                .and_then(|s| s.as_array())
                .context("the server's answer has no index list")?;
            for i in list {
                let f = |k| field(i, k).unwrap_or_default();
                println!("{}\t{}\t{}", f("property"), f("state"), f("entries"));
            }
        }
    }
    Ok(())
}
