//! `$batch` multipart/mixed codec (spec batch.md): parsing the request body into
//! sub-requests and writing the response body in Azure's byte layout. Executing
//! the operations is not done here.
//!
//! Typical use by the executor:
//!
//! ```ignore
//! let batch = parse_batch(content_type, &body)?;          // 400 InvalidInput on error
//! // validate: operations.len() <= 100, one partition, no duplicates, verbs …
//! let (bb, cb) = new_boundaries();
//! let parts: Vec<SubResponse> = /* one per op, or the single failing op */;
//! let body = match batch.kind {
//!     BatchKind::Changeset => write_changeset_response(&bb, &cb, &parts),
//!     BatchKind::Query => write_query_response(&bb, &parts[0]),
//! };
//! // 202 Accepted, Content-Type: response_content_type(&bb)
//! ```
//!
//! What clients send (see the captured bodies in `fixtures/`):
//! * azure-data-tables (Python): full URL targets, MIME-level `Content-ID: 0..n-1`
//!   numbered across the batch, a `Content-Length` sub-header, `PATCH` for merge
//!   (`POST` + `X-HTTP-Method: MERGE` for Cosmos-like endpoints), no `Prefer` on
//!   inserts (expects `201` + body).
//! * @azure/data-tables (JS): full URL targets, no `Content-ID`, lower-case MIME
//!   header names, `Prefer: return-no-content` on inserts, an extra CRLF before
//!   each body.

mod multipart;
mod request;
mod response;

#[cfg(test)]
mod tests;

pub use request::{parse_batch, parse_batch_shared, BatchKind, BatchRequest, SubRequest, MAX_PARTS};
pub(crate) use response::response_content_type;
pub use response::{new_boundaries, write_changeset_response, write_query_response, SubResponse};
