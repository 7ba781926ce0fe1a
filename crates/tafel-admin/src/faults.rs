//! `/faults` on the admin listener: the fault rules in force (docs/testing.md).
//!
//! - `GET /faults`: `{"rules": [...]}`, each rule as written with how often it
//!   `matched` and `fired`.
//! - `PUT /faults` with `{"rules": [...]}`: replaces the set (an empty list
//!   clears it); a bad set is refused whole with 400 and a message naming the
//!   rule and key, and the set in force stays.
//! - `DELETE /faults`: clears the set.
//!
//! The admin token guards it as it does `/metrics`.

use bytes::Bytes;
use http::{header, Method, StatusCode};
use http_body_util::{BodyExt, Limited};

use crate::listener::{json_response, text, unauthorized, AdminState, Resp};
use tafel_http::faults::SetBody;

/// A rule set's JSON is small; this bounds what a caller can make us hold.
const MAX_BODY: usize = 1 << 20;

fn refused(message: impl Into<String>) -> Resp {
    json_response(StatusCode::BAD_REQUEST, &serde_json::json!({ "error": message.into() }))
}

pub(crate) async fn route(state: &AdminState, req: hyper::Request<hyper::body::Incoming>) -> Resp {
    if !state.authorized(&req) {
        return unauthorized();
    }
    let faults = &state.ops.faults;
    match *req.method() {
        Method::GET | Method::HEAD => json_response(StatusCode::OK, &faults.describe()),
        Method::DELETE => {
            faults.clear();
            tracing::info!("fault rules cleared");
            json_response(StatusCode::OK, &faults.describe())
        }
        Method::PUT => {
            let body: Bytes = match Limited::new(req.into_body(), MAX_BODY).collect().await {
                Ok(b) => b.to_bytes(),
                Err(e) => return refused(format!("could not read the body: {e}")),
            };
            let set: SetBody = match serde_json::from_slice(&body) {
                Ok(s) => s,
                Err(e) => return refused(format!("the body is not {{\"rules\": [...]}} of fault rules: {e}")),
            };
            match faults.replace(set.rules) {
                Ok(n) => {
                    tracing::info!(rules = n, "fault rules replaced");
                    json_response(StatusCode::OK, &faults.describe())
                }
                Err(e) => refused(e),
            }
        }
        _ => {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
            r.headers_mut()
                .insert(header::ALLOW, http::HeaderValue::from_static("GET, HEAD, PUT, DELETE"));
            r
        }
    }
}
