//! Which account a request is for, and the resource path below it (README §1):
//! path-style (`http://127.0.0.1:10002/acct/Tables`) when the host is an IP
//! address, `localhost` or has no dot; otherwise host-style, the account being the
//! first DNS label (`acct.table.localhost:10002/Tables`).

use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    pub account: String,
    /// The path below the account root, percent-encoded as sent.
    pub path: String,
    /// `scheme://host[/account]`, the root that `odata.*` URLs and `Location` use.
    pub base_url: String,
    /// Addressed through the `-secondary` host.
    pub secondary: bool,
}

/// The host name of a `Host` header, without its port (an IPv6 literal keeps
/// its brackets).
pub fn hostname(host: &str) -> &str {
    if host.starts_with('[') {
        return host.split_inclusive(']').next().unwrap_or(host);
    }
    host.rsplit_once(':').map_or(host, |(h, port)| {
        if port.bytes().all(|b| b.is_ascii_digit()) {
            h
        } else {
            host
        }
    })
}

/// Set by `--disableProductStyleUrl` (Azurite's flag): every request is
/// path-style, whatever its host, as behind a proxy or compose service whose
/// name has dots. Process-wide: it is set once, before serving.
static PATH_STYLE_ONLY: AtomicBool = AtomicBool::new(false);

/// Takes the account from the path only, never from the host name.
pub fn set_path_style_only(on: bool) {
    PATH_STYLE_ONLY.store(on, Ordering::Relaxed);
}

/// Set by `--cosmos`: the account a path-style request is for when its first
/// segment names none of the served accounts, and those accounts. The Cosmos
/// emulator's endpoint is a root (`http://localhost:8902/Tables`), not
/// `/account/Tables`. Process-wide: set once, before serving.
static ROOT_ACCOUNT: std::sync::OnceLock<(String, Vec<String>)> = std::sync::OnceLock::new();

/// Serves `account` at the root of a path-style endpoint; `accounts` keep their
/// `/account/…` paths.
pub fn set_root_account(account: &str, accounts: Vec<String>) {
    let _ = ROOT_ACCOUNT.set((account.to_owned(), accounts));
}

/// The root account, when the first path segment (`account`) names no served one.
fn root_account(account: &str) -> Option<&'static str> {
    let (root, accounts) = ROOT_ACCOUNT.get()?;
    let named = split_secondary(account).0;
    (!accounts.iter().any(|a| a == named)).then_some(root.as_str())
}

/// Whether a request to `host` (a `Host` header) names its account in the path.
pub fn is_path_style(host: &str) -> bool {
    if PATH_STYLE_ONLY.load(Ordering::Relaxed) {
        return true;
    }
    if let Some(rest) = host.strip_prefix('[') {
        // IPv6 literal.
        return rest.contains(']');
    }
    let hostname = hostname(host);
    hostname.eq_ignore_ascii_case("localhost")
        || !hostname.contains('.')
        || hostname.parse::<std::net::Ipv4Addr>().is_ok()
}

/// The host a request names: its `Host` header, else its URI's authority.
pub(crate) fn host<'a>(headers: &'a http::HeaderMap, uri: &'a http::Uri) -> &'a str {
    headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| uri.authority().map(http::uri::Authority::as_str))
        .unwrap_or("127.0.0.1")
}

/// A request's account (as addressed: a host-style one is not yet lowercased),
/// its resource path below the account root, and whether it came through the
/// `-secondary` endpoint, borrowed from `host` and `raw_path`.
pub(crate) struct Split<'a> {
    pub account: &'a str,
    pub path: &'a str,
    pub secondary: bool,
    path_style: bool,
}

/// Splits a request into account and resource path. `None` if no account can be
/// found (empty path in path-style).
pub(crate) fn split<'a>(host: &'a str, raw_path: &'a str) -> Option<Split<'a>> {
    if is_path_style(host) {
        let trimmed = raw_path.strip_prefix('/').unwrap_or(raw_path);
        let (account, rest) = match trimmed.find('/') {
            Some(i) => (&trimmed[..i], &trimmed[i..]),
            None => (trimmed, ""),
        };
        if let Some(root) = root_account(account) {
            return Some(Split {
                account: root,
                path: raw_path,
                secondary: false,
                path_style: false,
            });
        }
        if account.is_empty() {
            return None;
        }
        let (account, secondary) = split_secondary(account);
        // The SDKs address a path-style secondary as `/acct-secondary/acct/…`.
        let rest = match rest.strip_prefix('/').and_then(|r| r.strip_prefix(account)) {
            Some(after) if secondary && (after.is_empty() || after.starts_with('/')) => after,
            _ => rest,
        };
        Some(Split {
            account,
            path: rest,
            secondary,
            path_style: true,
        })
    } else {
        let label = host.split('.').next()?;
        let (account, secondary) = split_secondary(label);
        Some(Split {
            account,
            path: raw_path,
            secondary,
            path_style: false,
        })
    }
}

/// Splits a request into account and resource path. `None` if no account can be
/// found (empty path in path-style). `https`: the request came over TLS, so the
/// URLs in its response (`odata.metadata`, `odata.id`, `Location`) are `https://`.
pub fn resolve(host: &str, raw_path: &str, https: bool) -> Option<Address> {
    let scheme = if https { "https" } else { "http" };
    let s = split(host, raw_path)?;
    Some(match s.path_style {
        true => Address {
            account: s.account.to_owned(),
            path: s.path.to_owned(),
            // `concat`, not `format!`: this runs per request, and the formatting
            // machinery cost ~1,000 instructions (benchmark-history §24).
            base_url: [scheme, "://", host, "/", s.account].concat(),
            secondary: s.secondary,
        },
        false => Address {
            account: s.account.to_ascii_lowercase(),
            path: s.path.to_owned(),
            base_url: [scheme, "://", host].concat(),
            secondary: s.secondary,
        },
    })
}

fn split_secondary(account: &str) -> (&str, bool) {
    match account.strip_suffix("-secondary") {
        Some(a) => (a, true),
        None => (account, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_style() {
        let a = resolve("127.0.0.1:10002", "/devstoreaccount1/Tables", false).expect("resolves");
        assert_eq!((a.account.as_str(), a.path.as_str()), ("devstoreaccount1", "/Tables"));
        assert_eq!(a.base_url, "http://127.0.0.1:10002/devstoreaccount1");
        let a = resolve("localhost:10002", "/devstoreaccount1", false).expect("resolves");
        assert_eq!(a.path, "");
        assert!(resolve("127.0.0.1:10002", "/", false).is_none());
        let a = resolve("localhost:10002", "/devstoreaccount1/Tables", true).expect("resolves");
        assert_eq!(a.base_url, "https://localhost:10002/devstoreaccount1");
        let a = resolve("acct.table.localhost:10002", "/Tables", true).expect("resolves");
        assert_eq!(a.base_url, "https://acct.table.localhost:10002");
    }

    #[test]
    fn host_style() {
        let a = resolve("devstoreaccount1.table.localhost:10002", "/Tables", false).expect("resolves");
        assert_eq!((a.account.as_str(), a.path.as_str()), ("devstoreaccount1", "/Tables"));
        let a = resolve("127.0.0.1:10002", "/acct-secondary/acct/", false).expect("resolves");
        assert_eq!((a.account.as_str(), a.path.as_str(), a.secondary), ("acct", "/", true));
        let a = resolve("127.0.0.1:10002", "/acct-secondary/Tables", false).expect("resolves");
        assert_eq!((a.account.as_str(), a.path.as_str()), ("acct", "/Tables"));
        let a = resolve("127.0.0.1:10002", "/acct/acct", false).expect("resolves");
        assert_eq!(a.path, "/acct");
        let a = resolve("acct-secondary.table.core.windows.net", "/t()", false).expect("resolves");
        assert_eq!(a.account, "acct");
        assert!(a.secondary);
    }
}
