//! Header names, made at compile time: `HeaderName::from_static` called
//! at run time with a name passed in checks and classifies it on every call, ~8
//! times per response, and a lookup by `&str` parses the name each time (benchmark-history §24).

use http::HeaderName;

pub use http::header::{
    CACHE_CONTROL, CONNECTION, CONTENT_TYPE, ETAG, LOCATION, SERVER, WWW_AUTHENTICATE, X_CONTENT_TYPE_OPTIONS,
};

pub const DATASERVICEID: HeaderName = HeaderName::from_static("dataserviceid");
pub const DATASERVICEVERSION: HeaderName = HeaderName::from_static("dataserviceversion");
pub const PREFER: HeaderName = HeaderName::from_static("prefer");
pub const PREFERENCE_APPLIED: HeaderName = HeaderName::from_static("preference-applied");
pub const X_MS_REQUEST_ID: HeaderName = HeaderName::from_static("x-ms-request-id");
pub const X_MS_VERSION: HeaderName = HeaderName::from_static("x-ms-version");
pub const X_HTTP_METHOD: HeaderName = HeaderName::from_static("x-http-method");
pub const X_MS_RETRY_AFTER_MS: HeaderName = HeaderName::from_static("x-ms-retry-after-ms");
pub const X_MS_ERROR_CODE: HeaderName = HeaderName::from_static("x-ms-error-code");
pub const X_MS_CONTINUATION_NEXTPARTITIONKEY: HeaderName =
    HeaderName::from_static("x-ms-continuation-nextpartitionkey");
/// How an entity query's page was found (`QueryPlan::header`), and how many
/// entities it read: Tafel's own, not Azure's.
pub const X_TAFEL_QUERY_PLAN: HeaderName = HeaderName::from_static("x-tafel-query-plan");
pub const X_TAFEL_ROWS_EXAMINED: HeaderName = HeaderName::from_static("x-tafel-rows-examined");
pub const X_MS_CONTINUATION_NEXTROWKEY: HeaderName = HeaderName::from_static("x-ms-continuation-nextrowkey");
pub const X_MS_CONTINUATION_NEXTTABLENAME: HeaderName = HeaderName::from_static("x-ms-continuation-nexttablename");
pub const X_TAFEL_NEXT_AFTER: HeaderName = HeaderName::from_static("x-tafel-next-after");
pub const X_TAFEL_HEAD: HeaderName = HeaderName::from_static("x-tafel-head");
