//! The Shared Key signature a client puts on a Table service request: the one
//! signer of the workspace's clients (this crate's [`client`](crate::client) and
//! tafel-bench). The server's side, which checks signatures, is tafel-http's
//! `auth/`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// HMAC refused the key (it takes keys of any length, so this does not happen).
#[derive(Debug, thiserror::Error)]
#[error("the account key cannot key HMAC-SHA256")]
pub struct UnusableKey;

/// The `Authorization` header of a request: `SharedKey ACCOUNT:SIGNATURE`, the
/// signature the HMAC-SHA256 under the account key of the Table service's
/// string to sign: the verb, an empty Content-MD5, the Content-Type, the date
/// sent as `x-ms-date`, and the canonicalized resource (`/ACCOUNT/PATH`, with
/// `?comp=…` when the request has one; path-style URLs name the account twice).
pub fn authorization(
    account: &str,
    key: &[u8],
    method: &str,
    content_type: &str,
    date: &str,
    resource: &str,
) -> Result<String, UnusableKey> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).map_err(|_| UnusableKey)?;
    mac.update(format!("{method}\n\n{content_type}\n{date}\n{resource}").as_bytes());
    let signature = STANDARD.encode(mac.finalize().into_bytes());
    Ok(format!("SharedKey {account}:{signature}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_as_the_service_checks() {
        // The development account's well-known key; the signature computed
        // independently (Python's hmac over the same string to sign).
        let key = STANDARD
            .decode("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==")
            .unwrap();
        let auth = authorization(
            "devstoreaccount1",
            &key,
            "GET",
            "application/json",
            "Mon, 02 Jan 2006 15:04:05 GMT",
            "/devstoreaccount1/devstoreaccount1/Tables",
        )
        .unwrap();
        assert_eq!(
            auth,
            "SharedKey devstoreaccount1:N7CQuk330wUJhTAHytgH+SmIgrQ4bDM8H8yQ0pXzchk="
        );
    }
}
