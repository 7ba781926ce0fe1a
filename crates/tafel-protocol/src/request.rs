//! The protocol's view of a request and response, independent of the HTTP
//! server, so `$batch` sub-requests run through exactly the same handlers.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use tafel_service::{Ctx, Error, ErrorCode, Result};

/// Everything a handler needs to know besides the request itself.
#[derive(Debug, Clone)]
pub struct Context {
    /// Who asks: the account and what its credential may do.
    pub caller: Ctx,
    /// Scheme + host (+ `/account` in path-style), for `odata.*` URLs and `Location`.
    pub base_url: String,
    pub request_id: String,
    /// Addressed through the account's `-secondary` endpoint.
    pub secondary: bool,
    /// Ends an entity query's page after this many entities, with a
    /// continuation token, as Azure may (a fault rule's `end-page-early`).
    pub page_limit: Option<usize>,
    /// Table Storage's rules, or Cosmos DB's where it differs ([`crate::cosmos`]).
    pub dialect: crate::cosmos::Dialect,
}

impl Context {
    /// A table name in a request's path, checked by the dialect's rules.
    pub fn table_name(&self, name: &str) -> Result<()> {
        match self.dialect {
            crate::cosmos::Dialect::Storage => tafel_service::validate::table_name(name),
            crate::cosmos::Dialect::Cosmos => crate::cosmos::table_name_in_path(name),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Request {
    /// The effective verb (after `X-HTTP-Method` tunnelling); a `$batch`
    /// sub-request's as sent, its route following the header.
    pub method: Method,
    /// Path below the account root, percent-encoded as sent.
    pub path: String,
    /// Query parameters, names and values percent-decoded, in order.
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Request {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// By a prepared name ([`crate::names`]) on the hot paths: a `&str` is parsed
    /// per lookup.
    pub fn header(&self, name: impl http::header::AsHeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

#[derive(Debug, Clone)]
pub struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Entities a query returned, which count against Azure's scalability
    /// targets once it has run (`charge.rs`); 0 for every other operation.
    pub entities: u32,
}

impl Response {
    pub fn new(status: StatusCode) -> Self {
        Response {
            status,
            // Room for the ~10 headers every answer gets (`pipeline::finish`, an
            // entity's ETag and Location) at once: grown from empty, the map was
            // reallocated several times per response (benchmark-history §24).
            headers: HeaderMap::with_capacity(12),
            body: Bytes::new(),
            entities: 0,
        }
    }

    pub fn with_body(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Self {
        Response::with_body_typed(status, HeaderValue::from_static(content_type), body)
    }

    /// [`Response::with_body`] with a content type made at compile time.
    pub fn with_body_typed(status: StatusCode, content_type: HeaderValue, body: impl Into<Bytes>) -> Self {
        let mut r = Response::new(status);
        r.headers.insert(http::header::CONTENT_TYPE, content_type);
        r.body = body.into();
        r
    }

    /// Sets a header. A value that is not valid header text is an internal error
    /// the caller sees: our values come from validated input, so it is a bug.
    /// Names come from [`crate::names`], made at compile time.
    pub fn set(&mut self, name: HeaderName, value: &str) -> Result<()> {
        let v = HeaderValue::from_str(value)
            .map_err(|_| Error::internal(format!("the {name} header's value is not valid header text")))?;
        self.headers.insert(name, v);
        Ok(())
    }

    /// A header whose value was made at compile time (`const { HeaderValue::from_static(…) }`):
    /// neither copied nor checked per response, where `from_static` at run time
    /// checks every byte (benchmark-history §24).
    pub fn set_value(&mut self, name: HeaderName, value: HeaderValue) {
        self.headers.insert(name, value);
    }

    /// A header whose value is a constant: no copy per response.
    pub fn set_static(&mut self, name: HeaderName, value: &'static str) {
        self.set_value(name, HeaderValue::from_static(value));
    }
}

/// Query-string pairs, form-decoded as Azure does: `%XX` escapes, and `+` is a space
/// (the Rust SDK and the legacy Python SDK send `PartitionKey+eq+'a'`; a literal plus
/// arrives as `%2B`).
pub fn parse_query(raw: Option<&str>) -> Vec<(String, String)> {
    let Some(raw) = raw else { return Vec::new() };
    form_urlencoded::parse(raw.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// The verb a request means: `POST` with `X-HTTP-Method` is that verb.
pub fn effective_method(method: &Method, headers: &HeaderMap) -> Result<Method> {
    let mut values = headers.get_all(crate::names::X_HTTP_METHOD).iter();
    let Some(first) = values.next() else {
        return Ok(method.clone());
    };
    if values.next().is_some() {
        return Err(Error::new(ErrorCode::XMethodIncorrectCount));
    }
    if method != Method::POST {
        return Err(Error::new(ErrorCode::XMethodNotUsingPost));
    }
    match first.to_str().map(str::trim) {
        Ok(v) if v.eq_ignore_ascii_case("MERGE") => Method::from_bytes(b"MERGE").map_err(Error::internal),
        Ok(v) if v.eq_ignore_ascii_case("PUT") => Ok(Method::PUT),
        Ok(v) if v.eq_ignore_ascii_case("DELETE") => Ok(Method::DELETE),
        Ok(v) if v.eq_ignore_ascii_case("PATCH") => Ok(Method::PATCH),
        _ => Err(Error::new(ErrorCode::XMethodIncorrectValue)),
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_query, Response};
    use http::StatusCode;
    use tafel_service::ErrorCode;

    #[test]
    fn a_header_value_that_is_not_header_text_is_an_error_not_dropped() {
        let mut resp = Response::new(StatusCode::OK);
        let err = resp
            .set(crate::names::LOCATION, "http://x/a\nb")
            .map(|_| ())
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::InternalError);
        assert!(resp.headers.get("location").is_none());
        assert!(resp.set(crate::names::LOCATION, "http://x/a%0Ab").is_ok());
        assert_eq!(resp.headers["location"], "http://x/a%0Ab");
    }

    #[test]
    fn query_string_plus_is_a_space_and_percent_2b_a_plus() {
        let q = parse_query(Some("$filter=PartitionKey+eq+'a%2Bb'&&$top=5&flag"));
        let want = [("$filter", "PartitionKey eq 'a+b'"), ("$top", "5"), ("flag", "")];
        let got: Vec<(&str, &str)> = q.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, want);
    }
}
