//! Header names the serving path looks up on every request, made once: a
//! `HeaderMap` lookup by `&str` parses and checks the name each time, ten
//! times per request (benchmark-history §23).

use http::HeaderName;

pub(crate) static X_MS_DATE: HeaderName = HeaderName::from_static("x-ms-date");
pub(crate) static X_MS_VERSION: HeaderName = HeaderName::from_static("x-ms-version");
pub(crate) static X_MS_CLIENT_REQUEST_ID: HeaderName = HeaderName::from_static("x-ms-client-request-id");
pub(crate) static CONTENT_MD5: HeaderName = HeaderName::from_static("content-md5");
