//! Protocol layer of Tafel: the Azure Table REST protocol on top of the service
//! layer. OData JSON entity and table payloads, the `$filter` parser, the `$batch`
//! multipart codec, resource paths and the per-operation request handling that the
//! HTTP layer calls (for top-level requests and for batch sub-requests alike).

pub mod batch;
pub mod charge;
mod continuation;
pub mod cosmos;
pub mod error_body;
pub mod filter;
mod handlers;
pub mod json;
pub mod names;
pub mod operation;
pub mod request;
mod resource;
pub mod route;
mod xml;

pub use handlers::handle;
pub use operation::Operation;
pub use request::{parse_query, Context, Request, Response};
pub use route::{Lane, Route};
