//! HTTP layer of Tafel: the server (plain or TLS), account addressing, authentication (Shared
//! Key, Shared Key Lite, shared access signatures), CORS and the common response
//! headers, and what the pipeline reports each request to (metrics, access log,
//! fault rules: [`ops`]). Everything below it is the protocol layer; the admin
//! listener and the explorer that read and reach it are tafel-admin's.

mod accounts;
mod addressing;
pub mod auth;
mod body;
mod cors;
pub mod faults;
mod head_budget;
mod limits;
mod names;
pub mod ops;
mod pipeline;
mod server;
mod throttle;
pub mod tls;

pub use accounts::Accounts;
pub use addressing::{hostname, is_path_style, set_path_style_only, set_root_account};
pub use head_budget::MAX_HEAD;
pub use limits::{Limits, Settings as LimitSettings};
pub use pipeline::{handle, AppState, LostAnswer, RootPage};
pub use server::{serve, Threads};
pub use throttle::{Throttle, AZURE_ACCOUNT_LIMIT, AZURE_PARTITION_LIMIT};
