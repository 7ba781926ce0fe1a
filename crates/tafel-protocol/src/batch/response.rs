//! Writing a `$batch` response body in Azure's exact layout (spec batch.md §4/§5,
//! checked against recorded Azure responses):
//!
//! ```text
//! --batchresponse_<id>␍␊
//! Content-Type: multipart/mixed; boundary=changesetresponse_<id>␍␊
//! ␍␊
//! --changesetresponse_<id>␍␊
//! Content-Type: application/http␍␊
//! Content-Transfer-Encoding: binary␍␊
//! ␍␊
//! HTTP/1.1 204 No Content␍␊
//! <headers, in the given order>␍␊
//! ␍␊
//! <body, possibly empty>␍␊
//! --changesetresponse_<id>--␍␊
//! --batchresponse_<id>--␍␊
//! ```
//!
//! A part without a body therefore ends with three CRLFs before the next
//! delimiter, exactly as Azure sends it.

use std::borrow::Cow;

use bytes::Bytes;

/// One operation's response inside a batch response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubResponse {
    pub status: u16,
    /// Written in this order, after the status line. Put `Content-ID` first
    /// (Azure does). CR/LF inside names or values are written as spaces. Fixed
    /// names and values are not copied: a batch writes about six per operation.
    pub headers: Vec<(Cow<'static, str>, Cow<'static, str>)>,
    /// Empty means no body.
    pub body: Bytes,
}

impl SubResponse {
    pub fn new(status: u16) -> Self {
        SubResponse {
            status,
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    /// Appends a header (builder style).
    pub fn header(mut self, name: impl Into<Cow<'static, str>>, value: impl Into<Cow<'static, str>>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the body (builder style).
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }
}

/// The reason phrase Azure writes after a status code in batch parts.
pub(crate) fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Request Entity Too Large",
        415 => "Unsupported Media Type",
        416 => "Requested Range Not Satisfiable",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => http::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or(match status / 100 {
                1 => "Informational",
                2 => "Success",
                3 => "Redirection",
                4 => "Client Error",
                _ => "Server Error",
            }),
    }
}

/// A fresh pair of response boundaries:
/// (`batchresponse_<uuid>`, `changesetresponse_<uuid>`), as Azure makes them.
/// The `changesetresponse_` prefix matters: `@azure/data-tables` splits the
/// response body on the literal `--changesetresponse_`.
pub fn new_boundaries() -> (String, String) {
    (
        format!("batchresponse_{}", uuid::Uuid::new_v4()),
        format!("changesetresponse_{}", uuid::Uuid::new_v4()),
    )
}

/// The outer response `Content-Type`: `multipart/mixed; boundary=<batch_boundary>`.
pub(crate) fn response_content_type(batch_boundary: &str) -> String {
    format!("multipart/mixed; boundary={batch_boundary}")
}

/// The body of a changeset response: one part per entry of `parts`, in order
/// (all operations on success; the single failing operation on failure).
pub fn write_changeset_response(batch_boundary: &str, changeset_boundary: &str, parts: &[SubResponse]) -> Vec<u8> {
    let size: usize = parts.iter().map(estimated_part_len).sum();
    let mut out = Vec::with_capacity(size + 256);
    push_line(&mut out, &["--", batch_boundary]);
    push_line(
        &mut out,
        &["Content-Type: multipart/mixed; boundary=", changeset_boundary],
    );
    push_line(&mut out, &[]);
    for part in parts {
        push_line(&mut out, &["--", changeset_boundary]);
        write_http_part(&mut out, part);
    }
    push_line(&mut out, &["--", changeset_boundary, "--"]);
    push_line(&mut out, &["--", batch_boundary, "--"]);
    out
}

/// The body of a single-GET (query) batch response: the part sits directly
/// under the batch boundary, without a changeset.
pub fn write_query_response(batch_boundary: &str, part: &SubResponse) -> Vec<u8> {
    let mut out = Vec::with_capacity(estimated_part_len(part) + 128);
    push_line(&mut out, &["--", batch_boundary]);
    write_http_part(&mut out, part);
    push_line(&mut out, &["--", batch_boundary, "--"]);
    out
}

fn estimated_part_len(part: &SubResponse) -> usize {
    let headers: usize = part.headers.iter().map(|(n, v)| n.len() + v.len() + 4).sum();
    120 + headers + part.body.len()
}

/// MIME headers, blank line, status line, headers, blank line, body, CRLF (the
/// CRLF that precedes the next delimiter).
fn write_http_part(out: &mut Vec<u8>, part: &SubResponse) {
    push_line(out, &["Content-Type: application/http"]);
    push_line(out, &["Content-Transfer-Encoding: binary"]);
    push_line(out, &[]);
    let mut status = itoa::Buffer::new();
    push_line(
        out,
        &["HTTP/1.1 ", status.format(part.status), " ", reason_phrase(part.status)],
    );
    for (name, value) in &part.headers {
        push_sanitized(out, name);
        out.extend_from_slice(b": ");
        push_sanitized(out, value);
        out.extend_from_slice(b"\r\n");
    }
    push_line(out, &[]);
    out.extend_from_slice(&part.body);
    push_line(out, &[]);
}

fn push_line(out: &mut Vec<u8>, pieces: &[&str]) {
    for piece in pieces {
        out.extend_from_slice(piece.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

/// Header text with CR/LF replaced by spaces so a value can never break the
/// framing.
fn push_sanitized(out: &mut Vec<u8>, text: &str) {
    // Almost always there is none: then one copy, not a loop over the bytes.
    if memchr::memchr2(b'\r', b'\n', text.as_bytes()).is_none() {
        out.extend_from_slice(text.as_bytes());
        return;
    }
    out.extend(text.bytes().map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons() {
        assert_eq!(reason_phrase(204), "No Content");
        assert_eq!(reason_phrase(413), "Request Entity Too Large");
        assert_eq!(reason_phrase(412), "Precondition Failed");
        assert_eq!(reason_phrase(429), "Too Many Requests");
        assert_eq!(reason_phrase(299), "Success");
        assert_eq!(reason_phrase(599), "Server Error");
        assert_eq!(reason_phrase(0), "Server Error");
    }

    #[test]
    fn boundaries_are_fresh_and_prefixed() {
        let (b1, c1) = new_boundaries();
        let (b2, c2) = new_boundaries();
        assert!(b1.starts_with("batchresponse_") && b1.len() == 14 + 36);
        assert!(c1.starts_with("changesetresponse_") && c1.len() == 18 + 36);
        assert_ne!(b1, b2);
        assert_ne!(c1, c2);
        assert_ne!(
            b1.trim_start_matches("batchresponse_"),
            c1.trim_start_matches("changesetresponse_")
        );
        assert_eq!(response_content_type(&b1), format!("multipart/mixed; boundary={b1}"));
    }

    #[test]
    fn header_values_cannot_break_framing() {
        let part = SubResponse::new(204).header("X\r\nEvil", "a\r\n--b--\r\n");
        let out = write_query_response("b", &part);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("X  Evil: a  --b--  \r\n"));
        assert_eq!(text.matches("\r\n--b").count(), 1);
    }
}
