//! Deleted tables kept restorable (`serve --table-soft-delete`, docs/lifecycle.md):
//!
//! - `GET /accounts/A/deleted-tables`: the account's deleted tables still
//!   restorable, most recently deleted first, as JSON, with `keepSeconds`: how
//!   long a table deleted now is kept (`null`: soft delete is off).
//! - `POST /accounts/A/deleted-tables/ID/restore`, optional body `{"as": "NEW"}`:
//!   restores table ID under its own name or NEW (200). A taken name is 409
//!   TableAlreadyExists; a NEW that is no table name 400; an ID not kept (never
//!   deleted, restored, past its time) 404 DeletedTableNotFound.
//!
//! The listener's token rules apply. Errors are JSON: `{"error": code, "message": text}`.

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Limited};
use serde_json::{json, Value};
use tafel_store::{DeletedTable, UndeleteError};

use crate::listener::{error, json_response, not_allowed, store_failure, unauthorized, AdminState, Resp};

/// A restore's body is a name at most.
const MAX_BODY: usize = 4096;

/// Whether `path` is one of this module's.
pub(crate) fn owns(path: &str) -> bool {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    matches!(parts.as_slice(), ["accounts", _, "deleted-tables", ..])
}

pub(crate) async fn route(state: &AdminState, req: hyper::Request<hyper::body::Incoming>) -> Resp {
    if !state.authorized(&req) {
        return unauthorized();
    }
    let path = req.uri().path().to_owned();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let account = match parts.get(1) {
        Some(a) if state.accounts.iter().any(|x| x == a) => a.to_string(),
        Some(a) => {
            return error(
                StatusCode::NOT_FOUND,
                "AccountNotFound",
                format!("this server has no account named {a:?}"),
            )
        }
        None => return error(StatusCode::NOT_FOUND, "NotFound", "not found".into()),
    };
    match parts.as_slice() {
        [_, _, _] if req.method() == Method::GET || req.method() == Method::HEAD => list(state, &account).await,
        [_, _, _] => not_allowed("GET"),
        [_, _, _, id, "restore"] if req.method() == Method::POST => {
            let Ok(id) = id.parse::<u64>() else {
                return not_kept(id);
            };
            let body: Bytes = match Limited::new(req.into_body(), MAX_BODY).collect().await {
                Ok(b) => b.to_bytes(),
                Err(e) => return bad_request(format!("could not read the body: {e}")),
            };
            let name = match as_name(&body) {
                Ok(name) => name,
                Err((code, message)) => return error(StatusCode::BAD_REQUEST, code, message),
            };
            restore(state, &account, id, name.as_deref()).await
        }
        [_, _, _, _, "restore"] => not_allowed("POST"),
        _ => error(StatusCode::NOT_FOUND, "NotFound", "not found".into()),
    }
}

fn rfc3339(ns: u64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ns))
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default()
}

fn describe(t: &DeletedTable) -> Value {
    json!({
        "id": t.id.to_string(),
        "name": t.name,
        "deletedAt": rfc3339(t.deleted_ns),
        "restorableUntil": rfc3339(t.until_ns),
        "entities": t.entities,
        "bytes": t.bytes,
    })
}

async fn list(state: &AdminState, account: &str) -> Resp {
    match state.store.deleted_tables(account).await {
        Ok(list) => {
            let tables: Vec<Value> = list.iter().map(describe).collect();
            // Whether deleting keeps a table now, so a client can tell "none
            // deleted" from "none kept" (the explorer says which).
            let keep = state.store.table_soft_delete().map(|d| d.as_secs());
            json_response(
                StatusCode::OK,
                &json!({"account": account, "keepSeconds": keep, "deletedTables": tables}),
            )
        }
        Err(e) => failed(e),
    }
}

async fn restore(state: &AdminState, account: &str, id: u64, name: Option<&str>) -> Resp {
    match state.store.restore_table(account, id, name).await {
        Ok(name) => {
            tracing::info!(account, id, table = %name, "deleted table restored");
            json_response(
                StatusCode::OK,
                &json!({"account": account, "id": id.to_string(), "table": name}),
            )
        }
        Err(UndeleteError::NotFound) => not_kept(&id.to_string()),
        Err(e) => failed(e),
    }
}

/// The body's `as`, checked as Azure checks a table name; none for no body.
/// A 400's code and message if it is wrong.
fn as_name(body: &[u8]) -> Result<Option<String>, (&'static str, String)> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ("InvalidInput", format!("the body is not JSON {{\"as\": NAME}}: {e}")))?;
    let name = match v.get("as") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(("InvalidInput", "\"as\" must be a table name (a string)".into())),
    };
    if !table_name_ok(&name) {
        return Err((
            "InvalidResourceName",
            format!(
                "{name:?} is not a table name: 3 to 63 ASCII letters and digits, \
                 starting with a letter, and not \"tables\""
            ),
        ));
    }
    Ok(Some(name))
}

/// Azure's rule for table names (`tafel_service::validate::table_name`).
fn table_name_ok(name: &str) -> bool {
    let b = name.as_bytes();
    b.first().is_some_and(u8::is_ascii_alphabetic)
        && b.iter().all(u8::is_ascii_alphanumeric)
        && (3..=63).contains(&b.len())
        && !name.eq_ignore_ascii_case("tables")
}

fn bad_request(message: String) -> Resp {
    error(StatusCode::BAD_REQUEST, "InvalidInput", message)
}

fn not_kept(id: &str) -> Resp {
    error(
        StatusCode::NOT_FOUND,
        "DeletedTableNotFound",
        format!("no deleted table with id {id:?} is restorable (never deleted, restored already, or past its time)"),
    )
}

fn failed(e: UndeleteError) -> Resp {
    match &e {
        UndeleteError::NotFound => not_kept("?"),
        UndeleteError::NameTaken(name) => error(
            StatusCode::CONFLICT,
            "TableAlreadyExists",
            format!("a table named {name:?} exists: restore under another name (\"as\", or `tafel undelete --as`)"),
        ),
        UndeleteError::Unsupported(_) => error(StatusCode::NOT_IMPLEMENTED, "NotSupportedByBackend", e.to_string()),
        UndeleteError::Store(s) => store_failure(s, "deleted tables", e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deleted_table_paths_are_told_from_others() {
        assert!(owns("/accounts/devstoreaccount1/deleted-tables"));
        assert!(owns("/accounts/devstoreaccount1/deleted-tables/7/restore"));
        assert!(!owns("/accounts/devstoreaccount1/tables/T/stats"));
    }

    #[test]
    fn a_restore_takes_only_a_table_name() {
        assert!(matches!(as_name(b""), Ok(None)));
        assert!(matches!(as_name(b"{}"), Ok(None)));
        assert!(matches!(as_name(br#"{"as": "Orders2"}"#), Ok(Some(n)) if n == "Orders2"));
        for bad in [
            &br#"{"as": "1abc"}"#[..],
            br#"{"as": "ab"}"#,
            br#"{"as": "tables"}"#,
            br#"{"as": 3}"#,
            b"nope",
        ] {
            assert!(as_name(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
