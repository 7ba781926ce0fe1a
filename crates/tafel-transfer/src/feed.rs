//! Reading a Tafel source's change feed (`GET /$changes`, docs/change-feed.md): one
//! page of changes at a time, each line kept as the service sent it (for `tafel
//! watch`) beside what applying it needs (for `tafel copy --follow`).

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::{TableClient, TransferError};

/// Where a read of the feed starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum From {
    /// Changes after this position (`after=POS`).
    After(String),
    /// Changes committed at or after this time (`since=RFC3339`).
    Since(String),
    /// None of the existing ones: from the head on (`after=latest`).
    Latest,
    /// From the oldest change the source retains.
    Oldest,
}

/// What a read asks for.
pub struct Request<'a> {
    pub table: Option<&'a str>,
    pub from: &'a From,
    pub limit: Option<u32>,
    /// Long poll: hold the request up to this long when there is nothing to return.
    pub wait: Option<Duration>,
}

/// One change as the feed describes it (the fields applying it needs).
#[derive(Debug, Clone, Deserialize)]
pub struct Change {
    pub position: String,
    #[serde(default)]
    pub txn: String,
    #[serde(default)]
    pub time: String,
    pub op: String,
    #[serde(default)]
    pub table: String,
    #[serde(rename = "PartitionKey", default)]
    pub partition_key: Option<String>,
    #[serde(rename = "RowKey", default)]
    pub row_key: Option<String>,
    /// The entity after the change; absent for deletes and table changes.
    #[serde(default)]
    pub entity: Option<Value>,
}

/// One page of the feed.
pub struct Page {
    /// Each change with its line as sent.
    pub changes: Vec<(Change, String)>,
    /// What to pass as `after` for the next page.
    pub next_after: String,
    /// The newest committed position of the account (for lag).
    pub head: String,
}

impl Page {
    /// Changes between what this page brings us to and the head.
    pub fn behind(&self) -> u64 {
        match (self.head.parse::<u64>(), self.next_after.parse::<u64>()) {
            (Ok(h), Ok(n)) => h.saturating_sub(n),
            _ => 0,
        }
    }
}

/// Reads one page; a transient failure (timeout, lost connection, 503) is retried
/// with backoff, as pages of a query are.
pub async fn read(client: &TableClient, req: &Request<'_>) -> Result<Page, TransferError> {
    let mut attempt = 0;
    loop {
        match read_once(client, req).await {
            Err(TransferError::Transient(why)) if attempt < crate::import::RETRIES => {
                attempt += 1;
                eprintln!("retrying a read of the change feed (attempt {attempt}): {why}");
                tokio::time::sleep(crate::import::backoff(attempt)).await;
            }
            Err(e) => return Err(explain(e)),
            other => return other,
        }
    }
}

async fn read_once(client: &TableClient, req: &Request<'_>) -> Result<Page, TransferError> {
    let (limit, wait) = (
        req.limit.map(|n| n.to_string()).unwrap_or_default(),
        req.wait.map(|w| w.as_secs().to_string()).unwrap_or_default(),
    );
    let mut query = vec![("table", req.table.unwrap_or("")), ("limit", &limit), ("wait", &wait)];
    match req.from {
        From::After(p) => query.push(("after", p)),
        From::Since(t) => query.push(("since", t)),
        From::Latest => query.push(("after", "latest")),
        From::Oldest => {}
    }
    let (headers, body) = client.changes(&query).await?;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let next_after = header("x-tafel-next-after")
        .ok_or_else(|| TransferError::Protocol("the change feed answered without x-tafel-next-after".into()))?;
    let head = header("x-tafel-head").unwrap_or_else(|| next_after.clone());
    let text = std::str::from_utf8(&body)
        .map_err(|_| TransferError::Protocol("the change feed answered with text that is not UTF-8".into()))?;
    let mut changes = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let change: Change = serde_json::from_str(line)
            .map_err(|e| TransferError::Protocol(format!("a change the feed sent: {e}: {line}")))?;
        changes.push((change, line.to_owned()));
    }
    Ok(Page {
        changes,
        next_after,
        head,
    })
}

/// The feed's own refusals, said in terms of what to do next.
fn explain(e: TransferError) -> TransferError {
    match e {
        TransferError::Service { code, message, .. } if code == "ChangeFeedNotEnabled" => {
            TransferError::NoFeed(message)
        }
        // Azure and Azurite know no `$changes`: they take it for a resource that is
        // not there, or a name that is not allowed.
        // (Azurite refuses the Accept of JSON lines first: 415.)
        TransferError::Service { status, code, .. }
            if matches!(status, 404 | 405 | 415 | 501) || (status == 400 && code != "InvalidQueryParameterValue") =>
        {
            TransferError::NoFeed(format!("the source has no change feed (it answered {status} {code})"))
        }
        other => other,
    }
}
