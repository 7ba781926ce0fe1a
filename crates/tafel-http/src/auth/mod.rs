//! Authentication: every request except CORS preflight proves it holds an
//! account key (Shared Key, Shared Key Lite) before anything else runs. The
//! outcome is the [`Access`] the service layer enforces per operation.

mod shared_key;

use http::HeaderMap;
use tafel_service::{Access, Error, ErrorCode, Result};

use crate::accounts::Accounts;

/// What the auth layer needs to know of a request.
pub struct Signed<'a> {
    pub method: &'a str,
    pub account: &'a str,
    /// The URI path as sent (percent-encoded), including a path-style account.
    pub raw_path: &'a str,
    /// Query parameters, percent-decoded.
    pub query: &'a [(String, String)],
    pub headers: &'a HeaderMap,
}

pub fn authenticate(accounts: &Accounts, req: &Signed<'_>) -> Result<Access> {
    let auth = req.headers.get("authorization").map(|v| v.to_str().unwrap_or(""));
    let Some(keys) = accounts.keys(req.account) else {
        return Err(Error::new(ErrorCode::AuthenticationFailed)
            .with_detail(format!("The account '{}' does not exist.", req.account)));
    };
    match auth {
        Some(header) => shared_key::verify(keys, req, header).map(|()| Access::Full),
        None => Err(Error::new(ErrorCode::AuthenticationFailed)
            .with_detail("The request carries no Authorization header and no shared access signature.")),
    }
}
