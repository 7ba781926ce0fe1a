//! HTTP layer of Tafel: the server, account addressing, authentication (Shared
//! Key, Shared Key Lite, shared access signatures, bearer tokens), CORS and the common response
//! headers. Everything below it is the protocol layer.

mod accounts;
mod addressing;
pub mod admin;
mod auth;
mod body;
mod cors;
mod pipeline;
pub mod server;

pub use accounts::Accounts;
pub use auth::oauth::{Mode as OAuthMode, OAuth, OAuthConfig};
pub use pipeline::AppState;
pub use server::serve;
