//! `tafel index create|list|drop`: secondary indexes of a running server's
//! tables, through its admin listener (`/accounts/A/tables/T/indexes`, see
//! docs/indexes.md). `create` then polls the listing until the online build
//! is done, as `tafel purge` polls its job.

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
    /// Seconds to wait for each answer of the admin listener.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..), global = true)]
    timeout: u64,
}

#[derive(Subcommand)]
enum Action {
    /// Index PROPERTY of the table: its entries are built from the entities
    /// there, online; waits until the index is ready, showing the progress.
    /// PROPERTY `'*'` indexes every property (quote it from the shell).
    Create {
        property: String,
        /// Return once the index is declared, without waiting for its build.
        #[arg(long)]
        no_wait: bool,
        /// No progress display.
        #[arg(long, short = 'q')]
        quiet: bool,
    },
    /// List the table's indexes: property, state, entries.
    List,
    /// Drop the index on PROPERTY and its entries (`'*'`: the entries of every
    /// property without an index of its own).
    Drop { property: String },
}

pub(crate) fn run(args: IndexArgs) -> anyhow::Result<()> {
    crate::admin_call::run("index", call(&args))
}

async fn call(args: &IndexArgs) -> anyhow::Result<()> {
    let table = args.table.as_deref().context("--table is required")?;
    let base = format!("/accounts/{}/tables/{table}/indexes", args.account);
    let (method, path) = match &args.action {
        Action::Create { property, .. } => (http::Method::PUT, format!("{base}/{property}")),
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
        Action::Create {
            property,
            no_wait,
            quiet,
        } => {
            let j = json.context("the server's answer is not JSON")?;
            let created = j.get("created").and_then(|c| c.as_bool()) == Some(true);
            let already = if created { "" } else { " (it existed)" };
            let mut j = j;
            if j.get("state").and_then(|s| s.as_str()) == Some("building") {
                if *no_wait {
                    let (done, total) = progress(&j);
                    println!(
                        "{table}.{property} is building{already}: {done} of {total} entities; \
                         `tafel index list` shows when it is ready"
                    );
                    return Ok(());
                }
                j = wait_ready(args, table, property, *quiet).await?;
            }
            let entries = field(&j, "entries").unwrap_or_default();
            match created {
                true => println!("indexed {table}.{property}: {entries} entries"),
                false => println!("{table}.{property} is indexed already: {entries} entries"),
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

/// An index's `progress` as listed: (done, total).
fn progress(index: &serde_json::Value) -> (u64, u64) {
    let p = index.get("progress");
    let n = |k| p.and_then(|p| p.get(k)).and_then(|v| v.as_u64()).unwrap_or(0);
    (n("done"), n("total"))
}

/// Polls the table's indexes until `property`'s is ready (a bar on a terminal,
/// a line every few seconds otherwise); its listing then.
async fn wait_ready(args: &IndexArgs, table: &str, property: &str, quiet: bool) -> anyhow::Result<serde_json::Value> {
    let path = format!("/accounts/{}/tables/{table}/indexes", args.account);
    let token = args.admin.token.as_deref();
    let mut shown: Option<crate::progress::Progress> = None;
    loop {
        let listed = crate::admin_call::ask(http::Method::GET, &args.admin.url, &path, token, args.timeout)
            .await?
            .context("the server's answer is not JSON")?;
        let found = listed
            .get("indexes")
            .and_then(|l| l.as_array())
            .and_then(|l| {
                l.iter()
                    .find(|i| i.get("property").and_then(|p| p.as_str()) == Some(property))
            })
            .cloned();
        let Some(index) = found else {
            anyhow::bail!(
                "the index on {table}.{property} is gone (dropped, or its table deleted) before its build ended"
            );
        };
        let (done, total) = progress(&index);
        let bar = shown.get_or_insert_with(|| {
            crate::progress::Progress::new(format!("indexing {table}.{property}"), Some(total), quiet)
        });
        bar.set_total(total);
        bar.add(done.saturating_sub(bar.rows()), 0);
        if index.get("state").and_then(|s| s.as_str()) == Some("ready") {
            bar.finish("");
            return Ok(index);
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}
