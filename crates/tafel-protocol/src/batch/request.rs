//! Parsing a `$batch` request body into its sub-requests.

use std::borrow::Cow;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;
use tafel_service::Error;

use super::multipart::{
    essence_is, header, multipart_boundary, parse_header_block, split_line, split_parts, truncate_for_message, Headers,
    MediaType,
};

/// Hard cap on the number of multipart parts (outer parts plus changeset parts)
/// one `$batch` body may contain. Azure allows 100 operations per changeset; the
/// caller enforces that limit with its own error. This cap only keeps hostile
/// bodies from making the parser allocate without bound.
pub const MAX_PARTS: usize = 1000;

/// A parsed `$batch` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRequest {
    pub kind: BatchKind,
    /// The sub-requests in body order. For [`BatchKind::Query`] exactly one (a
    /// `GET`). For [`BatchKind::Changeset`] the changeset's operations, possibly
    /// none (an empty changeset parses; Azure answers it with 400, the caller
    /// decides).
    pub operations: Vec<SubRequest>,
}

/// What the batch contains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchKind {
    /// One changeset (entity group transaction).
    Changeset,
    /// Exactly one lone `GET` directly under the batch boundary.
    Query,
}

/// One `application/http` sub-request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubRequest {
    /// The verb as sent, upper-cased (`POST`, `PUT`, `MERGE`, `PATCH`, `DELETE`,
    /// `GET`, …). Which verbs are allowed is the caller's decision.
    pub method: String,
    /// The request target as on the request line: a full URL
    /// (`http://127.0.0.1:10002/devstoreaccount1/t(…)`), an absolute path
    /// (`/devstoreaccount1/t`), or a path without the account (`/t`). See
    /// [`SubRequest::path_and_query`].
    pub url: String,
    /// The sub-request's own headers (not the MIME part headers).
    pub headers: HeaderMap,
    /// The body: everything after the blank line that ends the headers, up to
    /// the line break before the next delimiter. Not trimmed: the JS SDK puts an
    /// extra CRLF in front of the JSON, which JSON parsers skip as whitespace.
    pub body: Bytes,
    /// `Content-ID` from the MIME part headers (azure-core: `0`, `1`, … across
    /// the batch), else from the sub-request headers, else `None` (the JS SDK
    /// sends none).
    pub content_id: Option<String>,
}

impl SubRequest {
    /// The first value of a sub-request header as text, if present and visible
    /// ASCII.
    pub(crate) fn header_str(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The request target without `scheme://authority`: `/account/table(…)?…`
    /// for a full URL, the target unchanged otherwise. Stripping the account
    /// segment (path-style) is up to the caller, who knows the account.
    pub fn path_and_query(&self) -> &str {
        strip_scheme_and_authority(&self.url)
    }
}

fn strip_scheme_and_authority(url: &str) -> &str {
    // The scheme is the longest prefix of scheme characters; a URL has `://`
    // right after it. (Byte scans: `str::find` of a string sets up a searcher
    // costing more than the whole target of a typical operation.)
    let scheme_end = url
        .bytes()
        .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))
        .unwrap_or(url.len());
    if scheme_end == 0 || !url.get(scheme_end..).is_some_and(|r| r.starts_with("://")) {
        return url;
    }
    let after = url.get(scheme_end + 3..).unwrap_or("");
    // `http://host?x=1`: an empty path, the query right after the authority.
    match after.bytes().position(|b| matches!(b, b'/' | b'?' | b'#')) {
        Some(i) => after.get(i..).unwrap_or("/"),
        None => "/",
    }
}

/// Parses a `$batch` request body.
///
/// `content_type` is the outer request's `Content-Type`; it must be
/// `multipart/mixed` with a `boundary` parameter (quoted or not). The body must
/// hold either exactly one changeset (`multipart/mixed` part whose parts are all
/// `application/http`) or exactly one lone `GET` (`application/http` part).
///
/// Every failure is `400 InvalidInput`. Limits that need the parsed operations
/// (100 operations, one partition, one table, duplicate rows, allowed verbs) are
/// the caller's to check.
pub fn parse_batch(content_type: &str, body: &[u8]) -> Result<BatchRequest, Error> {
    parse(content_type, body, &Bytes::copy_from_slice)
}

/// [`parse_batch`] of a body held in `Bytes`: each sub-request's body and header
/// values are then slices of it, not copies.
pub fn parse_batch_shared(content_type: &str, body: &Bytes) -> Result<BatchRequest, Error> {
    // Every slice handed to it was cut from `body` itself, as `slice_ref` needs.
    parse(content_type, body, &|part| body.slice_ref(part))
}

/// Bytes for a slice of the body: a copy, or a slice of the shared body.
type ToBytes<'b> = dyn Fn(&[u8]) -> Bytes + 'b;

fn parse(content_type: &str, body: &[u8], to_bytes: &ToBytes<'_>) -> Result<BatchRequest, Error> {
    let boundary = multipart_boundary(&MediaType::parse(content_type), "batch request")?;
    let mut budget = MAX_PARTS;
    let outer = split_parts(body, &boundary, &mut budget)?;

    let mut changeset: Option<Vec<SubRequest>> = None;
    let mut query: Option<SubRequest> = None;
    for raw in outer {
        let (part_headers, content) = parse_header_block(raw)?;
        let Some(content_type) = header(&part_headers, "content-type") else {
            return Err(Error::invalid_input("A batch part has no Content-Type header."));
        };
        let media = MediaType::parse(content_type);
        match media.essence.as_str() {
            "multipart/mixed" => {
                if query.is_some() {
                    return Err(mixed_error());
                }
                if changeset.is_some() {
                    return Err(Error::invalid_input("A batch request may contain only one changeset."));
                }
                let cs_boundary = multipart_boundary(&media, "changeset")?;
                let cs_parts = split_parts(content, &cs_boundary, &mut budget)?;
                let mut ops = Vec::with_capacity(cs_parts.len());
                for cs_raw in cs_parts {
                    let (op_headers, op_content) = parse_header_block(cs_raw)?;
                    let is_http =
                        header(&op_headers, "content-type").is_some_and(|ct| essence_is(ct, "application/http"));
                    if !is_http {
                        return Err(Error::invalid_input(
                            "Each changeset part must have Content-Type application/http.",
                        ));
                    }
                    ops.push(parse_sub_request(&op_headers, op_content, to_bytes)?);
                }
                changeset = Some(ops);
            }
            "application/http" => {
                if changeset.is_some() {
                    return Err(mixed_error());
                }
                if query.is_some() {
                    return Err(Error::invalid_input(
                        "A batch request may contain only one operation outside a changeset.",
                    ));
                }
                let op = parse_sub_request(&part_headers, content, to_bytes)?;
                if op.method != "GET" {
                    return Err(Error::invalid_input(
                        "Only a single GET may appear outside a changeset; write operations must be in a changeset.",
                    ));
                }
                query = Some(op);
            }
            _ => {
                return Err(Error::invalid_input(format!(
                    "Unsupported batch part Content-Type '{}'.",
                    truncate_for_message(content_type.as_bytes())
                )));
            }
        }
    }

    match (changeset, query) {
        (Some(operations), None) => Ok(BatchRequest {
            kind: BatchKind::Changeset,
            operations,
        }),
        (None, Some(op)) => Ok(BatchRequest {
            kind: BatchKind::Query,
            operations: vec![op],
        }),
        (None, None) => Err(Error::invalid_input(
            "The batch request contains no changeset and no operation.",
        )),
        (Some(_), Some(_)) => Err(mixed_error()),
    }
}

fn mixed_error() -> Error {
    Error::invalid_input("A batch request may not mix a query (GET) with a changeset.")
}

/// Parses the `application/http` content of one part: request line, headers,
/// blank line, body.
fn parse_sub_request(
    part_headers: &Headers<'_>,
    mut content: &[u8],
    to_bytes: &ToBytes<'_>,
) -> Result<SubRequest, Error> {
    // Tolerate blank lines before the request line (RFC 9112 §2.2).
    let mut line;
    loop {
        if content.is_empty() {
            return Err(Error::invalid_input("A batch part contains no HTTP request line."));
        }
        let (l, rest) = split_line(content);
        line = l;
        content = rest;
        if !line.iter().all(|b| *b == b' ' || *b == b'\t') {
            break;
        }
    }
    let (method, url) = parse_request_line(line)?;

    let (raw_headers, body) = parse_header_block(content)?;
    let mut headers = HeaderMap::with_capacity(raw_headers.len());
    for (name, value) in &raw_headers {
        let invalid = || {
            Error::invalid_input(format!(
                "Invalid sub-request header '{}'.",
                truncate_for_message(name.as_bytes())
            ))
        };
        let name = match known_name(name) {
            Some(known) => known,
            None => HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid())?,
        };
        // A value as sent is a slice of the body; a folded one was joined anew.
        let value = match value {
            Cow::Borrowed(v) => HeaderValue::from_maybe_shared(to_bytes(v.as_bytes())),
            Cow::Owned(v) => HeaderValue::from_bytes(v.as_bytes()),
        }
        .map_err(|_| invalid())?;
        headers
            .try_append(name, value)
            .map_err(|_| Error::invalid_input("Too many headers in a batch part."))?;
    }

    let content_id = header(part_headers, "content-id")
        .or_else(|| header(&raw_headers, "content-id"))
        .map(str::to_string);

    Ok(SubRequest {
        method,
        url,
        headers,
        body: to_bytes(body),
        content_id,
    })
}

/// The header names batch operations carry that `http` does not know: made
/// from these, they need no allocation of their own (`HeaderName::from_bytes`
/// copies a name it does not know, lower-cased).
fn known_name(name: &str) -> Option<HeaderName> {
    const KNOWN: [&str; 6] = [
        "prefer",
        "dataserviceversion",
        "maxdataserviceversion",
        "content-id",
        "x-http-method",
        "x-ms-version",
    ];
    let known = KNOWN.iter().find(|k| k.eq_ignore_ascii_case(name))?;
    Some(HeaderName::from_static(known))
}

/// `VERB SP target [SP HTTP/x.y]`. The target may contain spaces (sloppy
/// clients); the version is optional.
fn parse_request_line(line: &[u8]) -> Result<(String, String), Error> {
    let malformed = || {
        Error::invalid_input(format!(
            "Malformed request line '{}' in a batch part.",
            truncate_for_message(line)
        ))
    };
    let text = std::str::from_utf8(line).map_err(|_| malformed())?.trim();
    let (method, rest) = text.split_once([' ', '\t']).ok_or_else(malformed)?;
    let is_token = !method.is_empty()
        && method
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b == b'-' || b == b'_');
    if !is_token {
        return Err(malformed());
    }
    let rest = rest.trim();
    let target = match rest.rsplit_once([' ', '\t']) {
        Some((target, version)) if is_http_version(version) => target.trim(),
        _ if is_http_version(rest) => "",
        _ => rest,
    };
    if target.is_empty() {
        return Err(malformed());
    }
    Ok((method.to_ascii_uppercase(), target.to_string()))
}

fn is_http_version(token: &str) -> bool {
    token.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("HTTP/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines() {
        let ok = |l: &str| parse_request_line(l.as_bytes()).unwrap();
        assert_eq!(
            ok("POST https://a.table.core.windows.net/t HTTP/1.1"),
            ("POST".into(), "https://a.table.core.windows.net/t".into())
        );
        assert_eq!(
            ok("merge /t(PartitionKey='a',RowKey='b') http/1.0"),
            ("MERGE".into(), "/t(PartitionKey='a',RowKey='b')".into())
        );
        assert_eq!(ok("DELETE t"), ("DELETE".into(), "t".into()));
        assert_eq!(
            ok("  GET   /t(PartitionKey='a b',RowKey='c')   HTTP/1.1  "),
            ("GET".into(), "/t(PartitionKey='a b',RowKey='c')".into())
        );
        for bad in ["", "POST", "POST HTTP/1.1", "P@ST /t HTTP/1.1", "/t HTTP/1.1"] {
            assert!(parse_request_line(bad.as_bytes()).is_err(), "{bad:?}");
        }
        assert!(parse_request_line(b"POST /t\xff HTTP/1.1").is_err());
    }

    #[test]
    fn path_and_query_forms() {
        assert_eq!(
            strip_scheme_and_authority("http://127.0.0.1:10002/devstoreaccount1/t(PartitionKey='a')"),
            "/devstoreaccount1/t(PartitionKey='a')"
        );
        assert_eq!(
            strip_scheme_and_authority("https://a.table.core.windows.net/t?$select=x"),
            "/t?$select=x"
        );
        assert_eq!(strip_scheme_and_authority("https://host"), "/");
        assert_eq!(strip_scheme_and_authority("https://host?x=1"), "?x=1");
        assert_eq!(strip_scheme_and_authority("/acct/t"), "/acct/t");
        assert_eq!(strip_scheme_and_authority("t()"), "t()");
        assert_eq!(strip_scheme_and_authority("://x/t"), "://x/t");
        assert_eq!(strip_scheme_and_authority("h t://x/t"), "h t://x/t");
        assert_eq!(strip_scheme_and_authority("é://x/t"), "é://x/t");
        assert_eq!(strip_scheme_and_authority("svn+ssh://x/t"), "/t");
        assert_eq!(
            strip_scheme_and_authority("/t(PartitionKey='://x')"),
            "/t(PartitionKey='://x')"
        );
    }
}
