//! HTTP layer of Tafel: the server, account addressing, authentication (Shared
//! Key, Shared Key Lite, shared access signatures), CORS and the common response
//! headers. Everything below it is the protocol layer.

pub mod accounts;
pub mod addressing;
pub mod admin;
mod auth;
mod body;
pub mod cors;
pub mod pipeline;
pub mod server;

pub use accounts::Accounts;
pub use pipeline::AppState;
pub use server::serve;
