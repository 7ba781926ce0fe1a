//! Authentication: every request except CORS preflight proves it holds an
//! account key (Shared Key, Shared Key Lite), a shared access signature made
//! with one, or (with `--oauth`) a bearer token, before anything else runs. The
//! outcome is the [`Access`] the service layer enforces per operation.

pub mod bearer;
pub mod jwks;
pub mod roles;
mod sas;
mod shared_key;

use std::net::IpAddr;

use hmac::Mac;
use http::HeaderMap;
use tafel_service::{Access, Error, ErrorCode, Result, Service};

use crate::accounts::{AccountKey, Accounts};

/// What the auth layer needs to know of a request.
pub(crate) struct Signed<'a> {
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
    /// Answered as Cosmos DB for Table: bearer tokens are Cosmos's, not Storage's.
    pub cosmos: bool,
}

/// A bearer token when `oauth` is on and the `Authorization` header says
/// `Bearer`, Shared Key for any other `Authorization` header, else a SAS when the
/// query has `sig`; stored access policies are looked up through `service`.
pub(crate) async fn authenticate(
    accounts: &Accounts,
    service: &Service,
    oauth: Option<&bearer::OAuth>,
    req: &Signed<'_>,
) -> Result<Access> {
    let auth = req
        .headers
        .get(http::header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or(""));
    // An unknown account is checked against no keys, so it fails exactly as a
    // wrong signature for a real one does: the answer tells no one which exist.
    let keys = accounts.keys(req.account).unwrap_or_default();
    let bearer = auth.and_then(|h| {
        let (scheme, token) = h.trim().split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
    });
    match (auth, bearer, oauth) {
        (_, Some(token), Some(oauth)) => {
            let access = oauth.verify(req, token).await?;
            match accounts.contains(req.account) {
                true => Ok(access),
                false => Err(Error::new(ErrorCode::AuthenticationFailed)
                    .with_detail("Server failed to authenticate the request.")),
            }
        }
        (Some(header), _, _) => shared_key::verify(keys, req, header).map(|()| Access::Full),
        (None, _, _) if req.query.iter().any(|(k, _)| k == "sig") => sas::verify(keys, service, req).await,
        // With tokens accepted, Azure answers 401 and a challenge that names the tenant.
        (None, _, Some(_)) => Err(Error::new(ErrorCode::NoAuthenticationInformation)),
        (None, _, None) => Err(Error::new(ErrorCode::AuthenticationFailed)
            .with_detail("The request carries no Authorization header and no shared access signature.")),
    }
}

/// Whether `signature` is the HMAC-SHA256 of `string_to_sign` under any of `keys`,
/// compared in constant time: the check every Shared Key and SAS credential ends in.
fn signed_by_any(keys: &[AccountKey], string_to_sign: &str, signature: &[u8]) -> bool {
    keys.iter().any(|key| {
        let mut mac = key.mac();
        mac.update(string_to_sign.as_bytes());
        mac.verify_slice(signature).is_ok()
    })
}
