//! Expiry (TTL) policies and the test clock on the admin listener
//! (docs/lifecycle.md, "Expiry (TTL)"):
//!
//! - `GET /accounts/A/tables/T/ttl`: the table's policy, `{"seconds": N,
//!   "property": P}` (either may be `null`); both `null` when it has none.
//! - `PUT /accounts/A/tables/T/ttl` with `{"seconds": N}` and/or
//!   `{"property": P}`: sets it (a bad one is 400 naming what is wrong, and
//!   changes nothing). `DELETE`: clears it (204).
//! - `GET /clock`, `PUT /clock` with `{"offset-seconds": N}`, `DELETE /clock`:
//!   the test clock's offset (0 unless set), which moves what expiry sees and
//!   new entities' Timestamps. Test-only, like the fault rules.
//!
//! The listener's token rules apply. Errors are JSON: `{"error": code, "message": text}`.

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Limited};
use serde_json::{json, Value};
use tafel_service::{Service, TtlPolicy};

use crate::listener::{error, json_response, not_allowed, text, unauthorized, AdminState, Resp};

/// A policy's JSON is a few bytes.
const MAX_BODY: usize = 64 << 10;

/// Whether `path` is one of this module's.
pub(crate) fn owns(path: &str) -> bool {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    matches!(parts.as_slice(), ["clock"] | ["accounts", _, "tables", _, "ttl"])
}

pub(crate) async fn route(state: &AdminState, req: hyper::Request<hyper::body::Incoming>) -> Resp {
    if !state.authorized(&req) {
        return unauthorized();
    }
    let Some(service) = state.service.clone() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "NotServed",
            "this listener serves no Table API".into(),
        );
    };
    let path = req.uri().path().to_owned();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["clock"] => clock(&service, req).await,
        ["accounts", account, "tables", table, "ttl"] => {
            if !state.accounts.iter().any(|a| a == account) {
                return error(
                    StatusCode::NOT_FOUND,
                    "AccountNotFound",
                    format!("this server has no account named {account:?}"),
                );
            }
            policy(&service, account, table, req).await
        }
        _ => error(StatusCode::NOT_FOUND, "NotFound", "not found".into()),
    }
}

async fn body(req: hyper::Request<hyper::body::Incoming>) -> Result<Value, Resp> {
    let bytes: Bytes = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Err(bad("InvalidInput", format!("could not read the body: {e}"))),
    };
    serde_json::from_slice(&bytes).map_err(|e| bad("InvalidInput", format!("the body is not JSON: {e}")))
}

fn bad(code: &str, message: String) -> Resp {
    error(StatusCode::BAD_REQUEST, code, message)
}

/// The service's error as the listener's JSON error.
fn failed(e: tafel_service::Error) -> Resp {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if status.is_server_error() {
        tracing::error!(error = %e.message, "TTL policy operation failed");
    }
    error(status, e.code.as_str(), e.message.into_owned())
}

fn shown(p: Option<&TtlPolicy>) -> Value {
    json!({
        "seconds": p.and_then(|p| p.seconds),
        "property": p.and_then(|p| p.property.clone()),
    })
}

async fn policy(service: &Service, account: &str, table: &str, req: hyper::Request<hyper::body::Incoming>) -> Resp {
    match *req.method() {
        Method::GET | Method::HEAD => match service.table_ttl(account, table).await {
            Ok(p) => {
                let mut v = shown(p.as_ref());
                v["table"] = json!(table);
                json_response(StatusCode::OK, &v)
            }
            Err(e) => failed(e),
        },
        Method::DELETE => match service.set_table_ttl(account, table, None).await {
            Ok(()) => {
                tracing::info!(account, table, "TTL policy cleared");
                text(StatusCode::NO_CONTENT, "")
            }
            Err(e) => failed(e),
        },
        Method::PUT => {
            let v = match body(req).await {
                Ok(v) => v,
                Err(r) => return r,
            };
            let p = match parse(&v) {
                Ok(p) => p,
                Err(message) => return bad("InvalidInput", message),
            };
            match service.set_table_ttl(account, table, Some(p.clone())).await {
                Ok(()) => {
                    tracing::info!(account, table, seconds = ?p.seconds, property = ?p.property, "TTL policy set");
                    let mut v = shown(Some(&p));
                    v["table"] = json!(table);
                    json_response(StatusCode::OK, &v)
                }
                Err(e) => failed(e),
            }
        }
        _ => not_allowed("GET, PUT, DELETE"),
    }
}

/// `{"seconds": N}` and/or `{"property": P}`, nothing else; the service checks
/// the values.
fn parse(v: &Value) -> Result<TtlPolicy, String> {
    let Some(o) = v.as_object() else {
        return Err("the body must be a JSON object: {\"seconds\": N} and/or {\"property\": \"P\"}".into());
    };
    if let Some(k) = o.keys().find(|k| *k != "seconds" && *k != "property") {
        return Err(format!(
            "unknown member {k:?}: a TTL policy has \"seconds\" and/or \"property\""
        ));
    }
    let seconds = match o.get("seconds") {
        None | Some(Value::Null) => None,
        Some(s) => match s.as_u64() {
            Some(n) => Some(n),
            None => {
                return Err(format!(
                    "\"seconds\" must be a whole number of seconds from 1 up; got {s}"
                ))
            }
        },
    };
    let property = match o.get("property") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) => Some(p.clone()),
        Some(p) => return Err(format!("\"property\" must be a property name (a string); got {p}")),
    };
    Ok(TtlPolicy { seconds, property })
}

async fn clock(service: &Service, req: hyper::Request<hyper::body::Incoming>) -> Resp {
    let shown = |s: &Service| json_response(StatusCode::OK, &json!({"offset-seconds": s.clock_offset_seconds()}));
    match *req.method() {
        Method::GET | Method::HEAD => shown(service),
        Method::DELETE => {
            service.set_clock_offset_seconds(0);
            tracing::info!("test clock reset");
            shown(service)
        }
        Method::PUT => {
            let v = match body(req).await {
                Ok(v) => v,
                Err(r) => return r,
            };
            // Within ±100 years: past that, Timestamps leave Azure's range.
            const MAX: i64 = 100 * 366 * 86_400;
            match v.get("offset-seconds").and_then(Value::as_i64) {
                Some(n) if n.abs() <= MAX => {
                    service.set_clock_offset_seconds(n);
                    tracing::warn!(offset_seconds = n, "test clock moved");
                    shown(service)
                }
                _ => bad(
                    "InvalidInput",
                    format!("the body must be {{\"offset-seconds\": N}} with N a whole number within ±{MAX}"),
                ),
            }
        }
        _ => not_allowed("GET, PUT, DELETE"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_paths_are_told_from_others() {
        assert!(owns("/clock"));
        assert!(owns("/accounts/devstoreaccount1/tables/T/ttl"));
        assert!(!owns("/accounts/devstoreaccount1/tables/T/stats"));
    }

    #[test]
    fn a_policy_body_takes_seconds_and_property_only() {
        let p = parse(&json!({"seconds": 60})).unwrap_or(TtlPolicy {
            seconds: None,
            property: None,
        });
        assert_eq!(p.seconds, Some(60));
        assert!(parse(&json!({"seconds": -1})).is_err());
        assert!(parse(&json!({"seconds": "60"})).is_err());
        assert!(parse(&json!({"ttl": 60})).is_err());
        assert!(parse(&json!([60])).is_err());
        let p = parse(&json!({"property": "ExpiresAt"})).unwrap_or(TtlPolicy {
            seconds: None,
            property: None,
        });
        assert_eq!(p.property.as_deref(), Some("ExpiresAt"));
    }
}
