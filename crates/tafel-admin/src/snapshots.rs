//! Instant resets for test suites, on the admin listener (docs/testing.md):
//!
//! - `GET /snapshots`: the named snapshots, oldest first, as JSON.
//! - `PUT /snapshots/NAME`: saves the whole store under NAME (201; 409 if taken).
//! - `POST /snapshots/NAME/restore`: brings the whole store back to it; snapshots
//!   saved after it are gone.
//! - `DELETE /snapshots/NAME`: forgets it (204).
//! - `DELETE /accounts/NAME/data`: empties one account at once.
//!
//! The store does the work (`Store::save_savepoint` and the rest); a backend
//! without snapshots answers 501 with its reason. Errors are JSON:
//! `{"error": code, "message": text}`. The listener's token rules apply.

use std::time::{Duration, Instant, UNIX_EPOCH};

use http::{Method, StatusCode};
use serde_json::{json, Value};
use tafel_store::ResetError;

use crate::listener::{error, json_response, not_allowed, store_failure, text, unauthorized, AdminState, Resp};

/// Longest snapshot name.
const MAX_NAME: usize = 64;

/// Whether `path` is one of this module's.
pub(crate) fn owns(path: &str) -> bool {
    path == "/snapshots" || path.starts_with("/snapshots/") || path.starts_with("/accounts/")
}

pub(crate) async fn route(state: &AdminState, req: &hyper::Request<hyper::body::Incoming>) -> Resp {
    if !state.authorized(req) {
        return unauthorized();
    }
    let path = req.uri().path();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let method = req.method();
    match parts.as_slice() {
        ["snapshots"] if method == Method::GET => list(state).await,
        ["snapshots"] => not_allowed("GET"),
        ["snapshots", name] => {
            if let Some(r) = bad_name(name) {
                return r;
            }
            match *method {
                Method::PUT => save(state, name).await,
                Method::DELETE => delete(state, name).await,
                _ => not_allowed("PUT, DELETE"),
            }
        }
        ["snapshots", name, "restore"] => {
            if let Some(r) = bad_name(name) {
                return r;
            }
            match *method {
                Method::POST => restore(state, name).await,
                _ => not_allowed("POST"),
            }
        }
        ["accounts", account, "data"] => match *method {
            Method::DELETE => clear(state, account).await,
            _ => not_allowed("DELETE"),
        },
        _ => error(StatusCode::NOT_FOUND, "NotFound", "not found".into()),
    }
}

async fn list(state: &AdminState) -> Resp {
    match state.store.list_savepoints().await {
        Ok(list) => {
            let snapshots: Vec<Value> = list
                .into_iter()
                .map(|s| {
                    let at = UNIX_EPOCH + Duration::from_millis(s.created_ms);
                    json!({"name": s.name, "created": httpdate::fmt_http_date(at), "created_ms": s.created_ms})
                })
                .collect();
            json_response(StatusCode::OK, &json!({ "snapshots": snapshots }))
        }
        Err(e) => failed(e),
    }
}

async fn save(state: &AdminState, name: &str) -> Resp {
    let started = Instant::now();
    match state.store.save_savepoint(name).await {
        Ok(()) => {
            tracing::info!(name, "snapshot saved");
            json_response(StatusCode::CREATED, &json!({"name": name, "ms": ms(started)}))
        }
        Err(e) => failed(e),
    }
}

async fn restore(state: &AdminState, name: &str) -> Resp {
    let started = Instant::now();
    match state.store.restore_savepoint(name).await {
        Ok(()) => {
            tracing::info!(name, ms = ms(started), "snapshot restored");
            json_response(
                StatusCode::OK,
                &json!({"name": name, "restored": true, "ms": ms(started)}),
            )
        }
        Err(e) => failed(e),
    }
}

async fn delete(state: &AdminState, name: &str) -> Resp {
    match state.store.delete_savepoint(name).await {
        Ok(()) => text(StatusCode::NO_CONTENT, ""),
        Err(e) => failed(e),
    }
}

async fn clear(state: &AdminState, account: &str) -> Resp {
    if !state.accounts.iter().any(|a| a == account) {
        return error(
            StatusCode::NOT_FOUND,
            "AccountNotFound",
            format!("this server has no account named {account:?}"),
        );
    }
    match state.store.clear_account(account).await {
        Ok(tables) => {
            tracing::info!(account, tables, "account emptied");
            json_response(StatusCode::OK, &json!({"account": account, "tables_deleted": tables}))
        }
        Err(e) => failed(e),
    }
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// The 400 for `name` unless it is a snapshot name: 1 to 64 of `A-Z a-z 0-9 . _ -`,
/// not starting with `.`.
fn bad_name(name: &str) -> Option<Resp> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        return None;
    }
    Some(error(
        StatusCode::BAD_REQUEST,
        "InvalidSnapshotName",
        format!(
            "a snapshot name is 1 to {MAX_NAME} letters, digits, '.', '_' or '-', not starting with '.' \
             (got {name:?})"
        ),
    ))
}

fn failed(e: ResetError) -> Resp {
    match &e {
        ResetError::NotFound(_) => error(StatusCode::NOT_FOUND, "SnapshotNotFound", e.to_string()),
        ResetError::Exists(_) => error(StatusCode::CONFLICT, "SnapshotAlreadyExists", e.to_string()),
        ResetError::Unsupported(_) => error(StatusCode::NOT_IMPLEMENTED, "NotSupportedByBackend", e.to_string()),
        ResetError::Store(s) => store_failure(s, "snapshot operation", e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_names_are_checked() {
        for good in ["base", "a", "before-test_1.2", &"x".repeat(MAX_NAME)] {
            assert!(bad_name(good).is_none(), "{good}");
        }
        for bad in ["", ".hidden", "a b", "a%2Fb", "ü", &"x".repeat(MAX_NAME + 1)] {
            assert!(bad_name(bad).is_some(), "{bad}");
        }
    }
}
