//! HTTP layer of Tafel: the server (plain or TLS), account addressing, authentication (Shared
//! Key, Shared Key Lite, shared access signatures), CORS and the common response
//! headers. Everything below it is the protocol layer.

mod accounts;
mod addressing;
pub mod admin;
pub mod auth;
mod body;
mod cors;
pub mod explorer;
pub mod faults;
mod head_budget;
pub mod limits;
mod pipeline;
pub mod server;
pub mod throttle;
pub mod tls;

pub use accounts::Accounts;
pub use addressing::set_path_style_only;
pub use pipeline::AppState;
pub use server::serve;
