//! Authentication: every request except CORS preflight proves it holds an
//! account key (Shared Key, Shared Key Lite) or a shared access signature made
//! with one, before anything else runs. The outcome is the [`Access`] the
//! service layer enforces per operation.

mod sas;
mod shared_key;

use std::net::IpAddr;

use http::HeaderMap;
use tafel_service::{Access, Error, ErrorCode, Result, Service};

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
    /// The client's address, for SAS `sip` ranges.
    pub peer: Option<IpAddr>,
    /// The connection is TLS (SAS `spr=https`).
    pub https: bool,
}

/// Shared Key when an `Authorization` header is present, else a SAS when the
/// query has `sig`; stored access policies are looked up through `service`.
pub async fn authenticate(accounts: &Accounts, service: &Service, req: &Signed<'_>) -> Result<Access> {
    let auth = req.headers.get("authorization").map(|v| v.to_str().unwrap_or(""));
    let Some(keys) = accounts.keys(req.account) else {
        return Err(Error::new(ErrorCode::AuthenticationFailed)
            .with_detail(format!("The account '{}' does not exist.", req.account)));
    };
    match auth {
        Some(header) => shared_key::verify(keys, req, header).map(|()| Access::Full),
        None if req.query.iter().any(|(k, _)| k == "sig") => sas::verify(keys, service, req).await,
        None => Err(Error::new(ErrorCode::AuthenticationFailed)
            .with_detail("The request carries no Authorization header and no shared access signature.")),
    }
}
