//! `tafel ttl set|get|clear`: a running server's tables' expiry (TTL) policies,
//! through its admin listener (`/accounts/A/tables/T/ttl`, see docs/lifecycle.md).

use anyhow::Context as _;
use clap::{Args, Subcommand};

#[derive(Args)]
pub(crate) struct TtlArgs {
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
    /// Seconds to wait for the answer.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..), global = true)]
    timeout: u64,
}

#[derive(Subcommand)]
enum Action {
    /// Expire the table's entities SECONDS after their last write, and/or at
    /// the Edm.DateTime value of PROPERTY.
    Set {
        /// Seconds after each entity's last write (its Timestamp).
        #[arg(long, required_unless_present = "property")]
        seconds: Option<u64>,
        /// An Edm.DateTime property holding each entity's expiry.
        #[arg(long)]
        property: Option<String>,
    },
    /// Print the table's policy.
    Get,
    /// Remove the table's policy: nothing expires any more.
    Clear,
}

pub(crate) fn run(args: TtlArgs) -> anyhow::Result<()> {
    crate::admin_call::run("ttl", call(&args))
}

async fn call(args: &TtlArgs) -> anyhow::Result<()> {
    let table = args.table.as_deref().context("--table is required")?;
    let path = format!("/accounts/{}/tables/{table}/ttl", args.account);
    let (method, body) = match &args.action {
        Action::Set { seconds, property } => {
            let mut body = serde_json::Map::new();
            if let Some(s) = seconds {
                body.insert("seconds".into(), (*s).into());
            }
            if let Some(p) = property {
                body.insert("property".into(), p.clone().into());
            }
            (http::Method::PUT, serde_json::Value::Object(body).to_string())
        }
        Action::Get => (http::Method::GET, String::new()),
        Action::Clear => (http::Method::DELETE, String::new()),
    };
    let json = crate::admin_call::ask_with(
        method,
        &args.admin.url,
        &path,
        args.admin.token.as_deref(),
        args.timeout,
        body.into(),
    )
    .await?;
    match &args.action {
        Action::Clear => println!("{table}: no TTL"),
        Action::Set { .. } | Action::Get => {
            let j = json.context("the server's answer is not JSON")?;
            let seconds = j.get("seconds").and_then(serde_json::Value::as_u64);
            let property = j.get("property").and_then(serde_json::Value::as_str);
            match (seconds, property) {
                (None, None) => println!("{table}: no TTL"),
                _ => {
                    println!("table     {table}");
                    println!("seconds   {}", seconds.map_or("-".into(), |s| s.to_string()));
                    println!("property  {}", property.unwrap_or("-"));
                }
            }
        }
    }
    Ok(())
}
