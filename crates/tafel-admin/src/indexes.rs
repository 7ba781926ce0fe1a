//! Secondary indexes on the admin listener (docs/indexes.md):
//!
//! - `GET /accounts/A/tables/T/indexes`: the table's indexes, as JSON.
//! - `PUT /accounts/A/tables/T/indexes/P`: declares an index on property P
//!   (201 when its entries are built, 202 while they are built online; 200 if
//!   it exists).
//! - `DELETE /accounts/A/tables/T/indexes/P`: drops it and its entries (204).
//!
//! The store does the work (`Store::create_index` and the rest); a backend
//! without indexes answers 501 with its reason. Errors are JSON, as the
//! snapshots' are: `{"error": code, "message": text}`.

use std::time::Instant;

use http::{Method, StatusCode};
use serde_json::{json, Value};
use tafel_store::{IndexError, IndexInfo};

use crate::listener::{error, json_response, not_allowed, store_failure, text, unauthorized, AdminState, Resp};

/// Whether `path` is one of this module's.
pub(crate) fn owns(path: &str) -> bool {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    matches!(parts.as_slice(), ["accounts", _, "tables", _, "indexes", ..])
}

pub(crate) async fn route(state: &AdminState, req: &hyper::Request<hyper::body::Incoming>) -> Resp {
    if !state.authorized(req) {
        return unauthorized();
    }
    let parts: Vec<&str> = req.uri().path().trim_start_matches('/').split('/').collect();
    let method = req.method();
    let (account, table, property) = match parts.as_slice() {
        ["accounts", a, "tables", t, "indexes"] => (*a, *t, None),
        ["accounts", a, "tables", t, "indexes", p] => (*a, *t, Some(*p)),
        _ => return error(StatusCode::NOT_FOUND, "NotFound", "not found".into()),
    };
    if !state.accounts.iter().any(|a| a == account) {
        return error(
            StatusCode::NOT_FOUND,
            "AccountNotFound",
            format!("this server has no account named {account:?}"),
        );
    }
    match property {
        None if method == Method::GET => list(state, account, table).await,
        None => not_allowed("GET"),
        Some(p) => {
            if let Some(r) = bad_property(p) {
                return r;
            }
            match *method {
                Method::PUT => create(state, account, table, p).await,
                Method::DELETE => drop_index(state, account, table, p).await,
                _ => not_allowed("PUT, DELETE"),
            }
        }
    }
}

fn info(i: &IndexInfo) -> Value {
    let mut v = json!({
        "property": i.property,
        "state": if i.ready { "ready" } else { "building" },
        "entries": i.entries,
    });
    if let Some(p) = i.progress {
        v["progress"] = json!({"done": p.done, "total": p.total});
    }
    v
}

async fn list(state: &AdminState, account: &str, table: &str) -> Resp {
    match state.store.list_indexes(account, table).await {
        Ok(list) => {
            let indexes: Vec<Value> = list.iter().map(info).collect();
            json_response(StatusCode::OK, &json!({"table": table, "indexes": indexes}))
        }
        Err(e) => failed(e),
    }
}

async fn create(state: &AdminState, account: &str, table: &str, property: &str) -> Resp {
    let started = Instant::now();
    let created = match state.store.create_index(account, table, property).await {
        Ok(created) => created,
        Err(e) => return failed(e),
    };
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let listed = match state.store.list_indexes(account, table).await {
        Ok(list) => list,
        Err(e) => return failed(e),
    };
    let found = listed.iter().find(|i| i.property == property);
    let building = found.is_some_and(|i| !i.ready);
    if created {
        tracing::info!(account, table, property, ms, building, "index created");
    }
    let mut body = match found {
        Some(i) => info(i),
        None => json!({"property": property}),
    };
    body["created"] = json!(created);
    body["ms"] = json!(ms);
    // 202 while the entries are still being built online; 201 when ready.
    let status = match (created, building) {
        (true, true) => StatusCode::ACCEPTED,
        (true, false) => StatusCode::CREATED,
        (false, _) => StatusCode::OK,
    };
    json_response(status, &body)
}

async fn drop_index(state: &AdminState, account: &str, table: &str, property: &str) -> Resp {
    match state.store.drop_index(account, table, property).await {
        Ok(true) => {
            tracing::info!(account, table, property, "index dropped");
            text(StatusCode::NO_CONTENT, "")
        }
        Ok(false) => error(
            StatusCode::NOT_FOUND,
            "IndexNotFound",
            format!("table {table:?} has no index on {property:?}"),
        ),
        Err(e) => failed(e),
    }
}

/// The 400 for `name` unless it can be an indexed property.
fn bad_property(name: &str) -> Option<Resp> {
    let message = tafel_service::index::property_problem(name)?;
    Some(error(StatusCode::BAD_REQUEST, "InvalidPropertyName", message))
}

fn failed(e: IndexError) -> Resp {
    match &e {
        IndexError::TableNotFound => error(StatusCode::NOT_FOUND, "TableNotFound", e.to_string()),
        IndexError::Unsupported(_) => error(StatusCode::NOT_IMPLEMENTED, "NotSupportedByBackend", e.to_string()),
        IndexError::Store(s) => store_failure(s, "index operation", e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_paths_are_told_from_account_data() {
        assert!(owns("/accounts/devstoreaccount1/tables/T/indexes"));
        assert!(owns("/accounts/devstoreaccount1/tables/T/indexes/Email"));
        assert!(!owns("/accounts/devstoreaccount1/data"));
    }

    #[test]
    fn key_properties_are_not_indexed() {
        for bad in [
            "",
            "PartitionKey",
            "RowKey",
            "Timestamp",
            "a b",
            "a%20b",
            &"x".repeat(256),
        ] {
            assert!(bad_property(bad).is_some(), "{bad}");
        }
        for good in ["Email", "age_2", &"x".repeat(255)] {
            assert!(bad_property(good).is_none(), "{good}");
        }
    }
}
