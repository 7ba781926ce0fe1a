//! `tafel snapshot save|restore|list|delete`: named snapshots of a running
//! server's whole store, through its admin listener (`/snapshots`, see
//! docs/testing.md), for test suites that reset the store between tests.

use anyhow::Context as _;
use clap::{Args, Subcommand};

#[derive(Args)]
pub(crate) struct SnapshotArgs {
    #[command(subcommand)]
    action: Action,
    #[command(flatten)]
    admin: crate::admin_call::AdminConn,
    /// Seconds to wait for the answer.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..), global = true)]
    timeout: u64,
}

#[derive(Subcommand)]
enum Action {
    /// Save the whole store under NAME (copy-on-write: instant, whatever its size).
    Save { name: String },
    /// Bring the whole store back to the snapshot NAME; snapshots saved after it are gone.
    Restore { name: String },
    /// List the snapshots, oldest first.
    List,
    /// Delete the snapshot NAME (the room its data holds is freed by later writes).
    Delete { name: String },
    /// Empty one account at once: its tables, entities, ACLs and service properties.
    EmptyAccount { account: String },
}

pub(crate) fn run(args: SnapshotArgs) -> anyhow::Result<()> {
    crate::admin_call::run("snapshot", call(&args))
}

async fn call(args: &SnapshotArgs) -> anyhow::Result<()> {
    let (method, path) = match &args.action {
        Action::Save { name } => (http::Method::PUT, format!("/snapshots/{name}")),
        Action::Restore { name } => (http::Method::POST, format!("/snapshots/{name}/restore")),
        Action::List => (http::Method::GET, "/snapshots".to_owned()),
        Action::Delete { name } => (http::Method::DELETE, format!("/snapshots/{name}")),
        Action::EmptyAccount { account } => (http::Method::DELETE, format!("/accounts/{account}/data")),
    };
    let json = crate::admin_call::ask(
        method,
        &args.admin.url,
        &path,
        args.admin.token.as_deref(),
        args.timeout,
    )
    .await?;
    let ms = || {
        json.as_ref()
            .and_then(|j| j.get("ms"))
            .and_then(|m| m.as_f64())
            .unwrap_or(0.0)
    };
    match &args.action {
        Action::Save { name } => println!("saved snapshot {name} ({:.1} ms)", ms()),
        Action::Restore { name } => println!("restored snapshot {name} ({:.1} ms)", ms()),
        Action::Delete { name } => println!("deleted snapshot {name}"),
        Action::EmptyAccount { account } => println!("emptied account {account}"),
        Action::List => {
            let list = json
                .as_ref()
                .and_then(|j| j.get("snapshots"))
                .and_then(|s| s.as_array())
                .context("the server's answer has no snapshot list")?;
            for s in list {
                let field = |k: &str| s.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_owned();
                println!("{}\t{}", field("name"), field("created"));
            }
        }
    }
    Ok(())
}
