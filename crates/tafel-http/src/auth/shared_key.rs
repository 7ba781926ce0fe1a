//! Shared Key and Shared Key Lite for the Table service (spec/auth.md §2–3).

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use http::header::{HeaderName, CONTENT_TYPE, DATE};
use percent_encoding::percent_decode_str;
use tafel_service::{Error, ErrorCode, Result};

use super::Signed;
use crate::accounts::AccountKey;
use crate::names::{CONTENT_MD5, X_MS_DATE};

/// Azure refuses requests dated more than this far from its clock.
const MAX_SKEW: Duration = Duration::from_secs(15 * 60);

fn header<'a>(req: &'a Signed<'_>, name: &HeaderName) -> &'a str {
    req.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

fn failed(detail: impl Into<String>) -> Error {
    Error::new(ErrorCode::AuthenticationFailed).with_detail(detail)
}

/// Checks `SharedKey acct:sig` / `SharedKeyLite acct:sig` against every key of
/// the account, in constant time per comparison.
pub fn verify(keys: &[AccountKey], req: &Signed<'_>, authorization: &str) -> Result<()> {
    let (scheme, credential) = authorization
        .trim()
        .split_once(' ')
        .ok_or_else(|| Error::new(ErrorCode::InvalidAuthenticationInfo))?;
    let lite = match scheme {
        "SharedKey" => false,
        "SharedKeyLite" => true,
        _ => return Err(Error::new(ErrorCode::InvalidAuthenticationInfo)),
    };
    let (account, signature) = credential
        .trim()
        .split_once(':')
        .ok_or_else(|| Error::new(ErrorCode::InvalidAuthenticationInfo))?;
    if account != req.account {
        return Err(failed(
            "The account in the Authorization header does not match the request's account.",
        ));
    }
    let signature = STANDARD
        .decode(signature.trim())
        .map_err(|_| failed("The signature is not valid base64."))?;

    // Azure signs (and checks the skew of) x-ms-date when the request has one,
    // `Date` only when it has not. Never both: a fresh x-ms-date beside an old
    // signed `Date` would make a captured signature valid again.
    let date = match header(req, &X_MS_DATE) {
        "" => header(req, &DATE),
        d => d,
    };
    if date.is_empty() {
        return Err(failed("Request date header not specified."));
    }
    check_skew(date)?;

    let comp = req.query.iter().find(|(k, _)| k == "comp").map(|(_, v)| v.as_str());
    let mut paths = vec![Cow::Borrowed(req.raw_path)];
    // Clients sign the path they put on the wire; tolerate ones that sign it
    // decoded, unless decoding leaves a `%`: then the decoded form is the wire form
    // of another path, and a signature captured for that one would pass here.
    if let Ok(decoded) = percent_decode_str(req.raw_path).decode_utf8() {
        if decoded != req.raw_path && !decoded.contains('%') {
            paths.push(decoded);
        }
    }
    // Requests to the path-style secondary (`/acct-secondary/acct/…`, as the SDKs
    // build it) are signed with the primary path.
    let secondary = req.raw_path.strip_prefix('/').and_then(|p| p.strip_prefix(req.account));
    if let Some(rest) = secondary.and_then(|p| p.strip_prefix("-secondary")) {
        if rest.is_empty() || rest.starts_with('/') {
            paths.push(Cow::Borrowed(rest));
        }
    }
    // The string to sign, built in one buffer (not a `format!` per part):
    // everything but the canonical resource is the same for every path tried.
    let mut to_sign = String::with_capacity(160 + req.raw_path.len());
    if !lite {
        for part in [req.method, header(req, &CONTENT_MD5), header(req, &CONTENT_TYPE)] {
            to_sign.push_str(part);
            to_sign.push('\n');
        }
    }
    to_sign.push_str(date);
    to_sign.push('\n');
    let common = to_sign.len();
    for path in &paths {
        to_sign.truncate(common);
        push_canonical_resource(&mut to_sign, req.account, path, comp);
        if super::signed_by_any(keys, &to_sign, &signature) {
            return Ok(());
        }
    }
    Err(failed(
        "The MAC signature found in the HTTP request is not the same as any computed signature.",
    ))
}

fn push_canonical_resource(out: &mut String, account: &str, path: &str, comp: Option<&str>) {
    out.push('/');
    out.push_str(account);
    out.push_str(path);
    if let Some(c) = comp {
        out.push_str("?comp=");
        out.push_str(c);
    }
}

fn check_skew(date: &str) -> Result<()> {
    let when =
        httpdate::parse_http_date(date).map_err(|_| failed("The request date header is not a valid RFC 1123 date."))?;
    let now = SystemTime::now();
    let skew = now
        .duration_since(when)
        .or_else(|_| when.duration_since(now))
        .unwrap_or_default();
    if skew > MAX_SKEW {
        return Err(failed(
            "The request date is more than 15 minutes from the server's clock.",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hmac::{Hmac, KeyInit, Mac};
    use http::HeaderMap;
    use sha2::Sha256;

    fn sign(key: &[u8], s: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
        mac.update(s.as_bytes());
        STANDARD.encode(mac.finalize().into_bytes())
    }

    #[test]
    fn verifies_shared_key_and_lite() {
        let key = STANDARD.decode(crate::accounts::DEV_KEY).expect("base64");
        let date = httpdate::fmt_http_date(SystemTime::now());
        let mut headers = HeaderMap::new();
        headers.insert("x-ms-date", date.parse().expect("header"));
        let req = Signed {
            method: "GET",
            account: "devstoreaccount1",
            raw_path: "/devstoreaccount1/Tables",
            query: &[],
            headers: &headers,
            peer: None,
            https: false,
            cosmos: false,
        };
        let sig = sign(
            &key,
            &format!("GET\n\n\n{date}\n/devstoreaccount1/devstoreaccount1/Tables"),
        );
        let keys = [AccountKey::new(key.clone())];
        assert!(verify(&keys, &req, &format!("SharedKey devstoreaccount1:{sig}")).is_ok());
        let lite = sign(&key, &format!("{date}\n/devstoreaccount1/devstoreaccount1/Tables"));
        assert!(verify(&keys, &req, &format!("SharedKeyLite devstoreaccount1:{lite}")).is_ok());
        let err = verify(&keys, &req, &format!("SharedKey devstoreaccount1:{lite}")).map_err(|e| e.code);
        assert_eq!(err, Err(ErrorCode::AuthenticationFailed));
    }

    #[test]
    fn refuses_stale_dates() {
        let old = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(16 * 60));
        assert!(check_skew(&old).is_err());
        assert!(check_skew(&httpdate::fmt_http_date(SystemTime::now())).is_ok());
    }
}
