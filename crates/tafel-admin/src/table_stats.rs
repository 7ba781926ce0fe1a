//! Tables' statistics on the admin listener, from the counters the store keeps
//! with every write (docs/lifecycle.md):
//!
//! - `GET /accounts/ACCOUNT/tables/TABLE/stats`: one table's entities, partitions
//!   and bytes, as JSON (`partitions` is `null` where a backend does not count
//!   them; both count them now).
//! - `GET /stats[?account=ACCOUNT]`: every table's entities and bytes, largest
//!   first.
//!
//! The listener's token rules apply. Errors are JSON: `{"error": code, "message": text}`.

use http::{Method, StatusCode};
use serde_json::json;
use tafel_store::{StoreError, TableSize};

use crate::listener::{error, json_response, not_allowed, store_failure, unauthorized, AdminState, Resp};

/// Tables `/metrics` reports a size for: the largest by bytes, so the label
/// count stays bounded whatever the number of tables (docs/lifecycle.md).
pub const TOP_TABLES: usize = 20;

/// Whether `path` is one of this module's.
pub(crate) fn owns(path: &str) -> bool {
    path == "/stats" || (path.starts_with("/accounts/") && path.ends_with("/stats"))
}

pub(crate) async fn route(state: &AdminState, req: &hyper::Request<hyper::body::Incoming>) -> Resp {
    if !state.authorized(req) {
        return unauthorized();
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return not_allowed("GET");
    }
    let path = req.uri().path();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["stats"] => {
            let account = req
                .uri()
                .query()
                .and_then(|q| q.split('&').find_map(|p| p.strip_prefix("account=")));
            all(state, account).await
        }
        ["accounts", account, "tables", table, "stats"] => one(state, account, table).await,
        _ => error(StatusCode::NOT_FOUND, "NotFound", "not found".into()),
    }
}

async fn one(state: &AdminState, account: &str, table: &str) -> Resp {
    if let Some(r) = unknown_account(state, account) {
        return r;
    }
    match state.store.table_stats(account, table).await {
        Ok(Some(s)) => json_response(
            StatusCode::OK,
            &json!({
                "account": account,
                "table": table,
                "entities": s.entities,
                "partitions": s.partitions,
                "bytes": s.bytes,
            }),
        ),
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            "TableNotFound",
            format!("account {account:?} has no table named {table:?}"),
        ),
        Err(e) => failed(e),
    }
}

async fn all(state: &AdminState, account: Option<&str>) -> Resp {
    if let Some(r) = account.and_then(|a| unknown_account(state, a)) {
        return r;
    }
    match state.store.table_sizes().await {
        Ok(mut sizes) => {
            sizes.retain(|t| account.is_none_or(|a| t.account == a));
            largest_first(&mut sizes);
            let tables: Vec<_> = sizes
                .iter()
                .map(|t| json!({"account": t.account, "table": t.table, "entities": t.entities, "bytes": t.bytes}))
                .collect();
            json_response(StatusCode::OK, &json!({ "tables": tables }))
        }
        Err(e) => failed(e),
    }
}

/// Largest by bytes first; ties by name, so the order is stable.
pub(crate) fn largest_first(sizes: &mut [TableSize]) {
    sizes.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then_with(|| (&a.account, &a.table).cmp(&(&b.account, &b.table)))
    });
}

fn unknown_account(state: &AdminState, account: &str) -> Option<Resp> {
    (!state.accounts.iter().any(|a| a == account)).then(|| {
        error(
            StatusCode::NOT_FOUND,
            "AccountNotFound",
            format!("this server has no account named {account:?}"),
        )
    })
}

fn failed(e: StoreError) -> Resp {
    store_failure(&e, "reading table statistics", e.to_string())
}
