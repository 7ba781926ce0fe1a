//! Codec tests: SDK fixtures, each tolerance, each error, exact response bytes,
//! and a parse → write → read-back round trip. The helpers here build bodies
//! for the sections, one module each.

mod errors;
mod fixtures;
mod robustness;
mod sdk;
mod tolerances;
mod writer;

use super::*;
use tafel_service::ErrorCode;

fn parse(ct: &str, body: &str) -> BatchRequest {
    match parse_batch(ct, body.as_bytes()) {
        Ok(b) => b,
        Err(e) => panic!("parse failed: {e}\n{body}"),
    }
}

fn parse_err(ct: &str, body: &str) -> String {
    match parse_batch(ct, body.as_bytes()) {
        Ok(b) => panic!("expected an error, got {b:?}\n{body}"),
        Err(e) => {
            assert_eq!(e.code, ErrorCode::InvalidInput);
            assert_eq!(e.status(), 400);
            e.message.into_owned()
        }
    }
}

fn methods(b: &BatchRequest) -> Vec<&str> {
    b.operations.iter().map(|o| o.method.as_str()).collect()
}

fn body_str(op: &SubRequest) -> &str {
    std::str::from_utf8(&op.body).unwrap()
}

const CT: &str = "multipart/mixed; boundary=batch_1";

/// A batch with one changeset holding `parts` (each: MIME headers, blank line,
/// request), CRLF line endings.
fn changeset_body(parts: &[&str]) -> String {
    let mut s = String::from("--batch_1\r\nContent-Type: multipart/mixed; boundary=changeset_1\r\n\r\n");
    for p in parts {
        s.push_str("--changeset_1\r\n");
        s.push_str(p);
        s.push_str("\r\n");
    }
    s.push_str("--changeset_1--\r\n--batch_1--\r\n");
    s
}

const HTTP_PART: &str = "Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n";

fn op_part(request: &str) -> String {
    format!("{HTTP_PART}{request}")
}
