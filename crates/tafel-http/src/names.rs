//! Header names the serving path uses on every request, made at compile time:
//! a `HeaderMap` lookup by `&str` parses and checks the name each time, ten
//! times per request (benchmark-history §23). The protocol's, and the few only
//! this layer reads.

use http::HeaderName;

pub(crate) use tafel_protocol::names::*;

pub(crate) const X_MS_DATE: HeaderName = HeaderName::from_static("x-ms-date");
pub(crate) const X_MS_CLIENT_REQUEST_ID: HeaderName = HeaderName::from_static("x-ms-client-request-id");
pub(crate) const CONTENT_MD5: HeaderName = HeaderName::from_static("content-md5");
