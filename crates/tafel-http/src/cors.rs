//! CORS (operations.md §8) from the account's stored rules: `OPTIONS` preflight
//! (unauthenticated) and the `Access-Control-*` headers on actual requests whose
//! `Origin` matches a rule. The first matching rule wins, as in Azure.

use http::{HeaderMap, StatusCode};
use tafel_protocol::Response;
use tafel_service::properties::CorsRule;
use tafel_service::{Error, ErrorCode, Result, Service};

use crate::accounts::Accounts;

fn origin_allowed(rule: &CorsRule, origin: &str) -> bool {
    rule.allowed_origins
        .iter()
        .any(|o| o == "*" || o.eq_ignore_ascii_case(origin))
}

fn method_allowed(rule: &CorsRule, method: &str) -> bool {
    rule.allowed_methods.iter().any(|m| m.eq_ignore_ascii_case(method))
}

/// A requested header is covered by `*`, by an exact name (any case) or by a
/// prefix such as `x-ms-meta*`.
fn header_allowed(rule: &CorsRule, header: &str) -> bool {
    rule.allowed_headers.iter().any(|a| match a.strip_suffix('*') {
        Some(prefix) => header
            .get(..prefix.len())
            .is_some_and(|h| h.eq_ignore_ascii_case(prefix)),
        None => a.eq_ignore_ascii_case(header),
    })
}

fn allow_origin(rule: &CorsRule, origin: &str) -> String {
    if rule.allowed_origins.iter().any(|o| o == "*") {
        "*".to_owned()
    } else {
        origin.to_owned()
    }
}

/// The preflight response headers of the first rule allowing `origin`, `method`
/// and every header of `request_headers` (a comma list); `None` if none does.
pub(crate) fn preflight_headers(
    rules: &[CorsRule],
    origin: &str,
    method: &str,
    request_headers: &str,
) -> Option<Vec<(&'static str, String)>> {
    let requested: Vec<&str> = request_headers
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .collect();
    let rule = rules.iter().find(|r| {
        origin_allowed(r, origin) && method_allowed(r, method) && requested.iter().all(|h| header_allowed(r, h))
    })?;
    let allow = allow_origin(rule, origin);
    let mut out = vec![
        ("access-control-allow-methods", method.to_owned()),
        ("access-control-max-age", rule.max_age_seconds.to_string()),
    ];
    if !requested.is_empty() {
        out.push(("access-control-allow-headers", requested.join(",")));
    }
    if allow != "*" {
        out.push(("access-control-allow-credentials", "true".to_owned()));
    }
    out.push(("access-control-allow-origin", allow));
    out.push(("vary", "Origin".to_owned()));
    Some(out)
}

/// The headers for an actual request from `origin` with `method`, if a rule
/// allows both.
pub(crate) fn actual_headers(rules: &[CorsRule], origin: &str, method: &str) -> Vec<(&'static str, String)> {
    let Some(rule) = rules
        .iter()
        .find(|r| origin_allowed(r, origin) && method_allowed(r, method))
    else {
        // CORS is on but refuses this origin or method: the response still depends
        // on Origin, which a cache must know. With no rules it does not.
        return if rules.is_empty() {
            Vec::new()
        } else {
            vec![("vary", "Origin".to_owned())]
        };
    };
    let allow = allow_origin(rule, origin);
    let mut out = Vec::with_capacity(4);
    if !rule.exposed_headers.is_empty() {
        out.push(("access-control-expose-headers", rule.exposed_headers.join(",")));
    }
    // A rule allowing every origin answers every origin alike: no credentials, no Vary.
    if allow != "*" {
        out.push(("access-control-allow-credentials", "true".to_owned()));
        out.push(("vary", "Origin".to_owned()));
    }
    out.push(("access-control-allow-origin", allow));
    out
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// Answers `OPTIONS` for `account`: 200 with the CORS headers, 403
/// `CorsPreflightFailure` when no rule matches (or the account is unknown), 400
/// `InvalidHeaderValue` without `Origin` / `Access-Control-Request-Method`.
pub async fn preflight(service: &Service, accounts: &Accounts, account: &str, headers: &HeaderMap) -> Result<Response> {
    let (Some(origin), Some(method)) = (
        header(headers, "origin"),
        header(headers, "access-control-request-method"),
    ) else {
        return Err(Error::with_message(
            ErrorCode::InvalidHeaderValue,
            "A required CORS header is not present.",
        ));
    };
    let request_headers = header(headers, "access-control-request-headers").unwrap_or("");
    let rules = if accounts.contains(account) {
        service.cors_rules(account).await?
    } else {
        Vec::new()
    };
    let found = preflight_headers(&rules, origin, method, request_headers)
        .ok_or_else(|| Error::new(ErrorCode::CorsPreflightFailure))?;
    let mut resp = Response::new(StatusCode::OK);
    for (name, value) in found {
        resp.set(http::HeaderName::from_static(name), &value)?;
    }
    Ok(resp)
}

/// Adds the CORS headers to a response (success or error) of an actual request
/// whose `Origin` matches one of the account's rules.
pub(crate) async fn decorate(service: &Service, account: &str, origin: &str, method: &str, resp: &mut Response) {
    let Ok(rules) = service.cors_rules(account).await else {
        return;
    };
    for (name, value) in actual_headers(&rules, origin, method) {
        // A value that is not header text was logged as an internal error by `set`;
        // the response itself stands without that header.
        let _ = resp.set(http::HeaderName::from_static(name), &value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(origins: &[&str], methods: &[&str], allowed: &[&str], exposed: &[&str]) -> CorsRule {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect();
        CorsRule {
            allowed_origins: v(origins),
            allowed_methods: v(methods),
            max_age_seconds: 600,
            exposed_headers: v(exposed),
            allowed_headers: v(allowed),
        }
    }

    fn get<'a>(h: &'a [(&'static str, String)], name: &str) -> Option<&'a str> {
        h.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn preflight_matching() {
        let rules = [
            rule(
                &["https://a.example"],
                &["GET", "PUT"],
                &["x-ms-meta*", "content-type"],
                &["x-ms-*"],
            ),
            rule(&["*"], &["DELETE"], &["*"], &[]),
        ];
        let h = preflight_headers(&rules, "https://A.example", "PUT", "x-ms-meta-a, Content-Type").expect("matches");
        assert_eq!(get(&h, "access-control-allow-origin"), Some("https://A.example"));
        assert_eq!(get(&h, "access-control-allow-methods"), Some("PUT"));
        assert_eq!(
            get(&h, "access-control-allow-headers"),
            Some("x-ms-meta-a,Content-Type")
        );
        assert_eq!(get(&h, "access-control-max-age"), Some("600"));
        assert_eq!(get(&h, "access-control-allow-credentials"), Some("true"));
        assert_eq!(get(&h, "vary"), Some("Origin"));
        assert!(preflight_headers(&rules, "https://a.example", "PUT", "x-ms-date").is_none());
        assert!(preflight_headers(&rules, "https://b.example", "PUT", "").is_none());
        let any = preflight_headers(&rules, "https://b.example", "DELETE", "anything").expect("wildcard rule");
        assert_eq!(get(&any, "access-control-allow-origin"), Some("*"));
        assert_eq!(get(&any, "access-control-allow-credentials"), None);
        assert!(preflight_headers(&[], "https://a.example", "GET", "").is_none());
    }

    #[test]
    fn actual_request_headers() {
        let rules = [rule(
            &["https://a.example"],
            &["GET"],
            &[],
            &["x-ms-request-id", "etag"],
        )];
        let h = actual_headers(&rules, "https://a.example", "GET");
        assert_eq!(get(&h, "access-control-allow-origin"), Some("https://a.example"));
        assert_eq!(get(&h, "access-control-expose-headers"), Some("x-ms-request-id,etag"));
        assert_eq!(get(&h, "vary"), Some("Origin"));
        // No rule matches (method, then origin): only Vary, since CORS is on.
        for refused in [
            actual_headers(&rules, "https://a.example", "POST"),
            actual_headers(&rules, "https://c.example", "GET"),
        ] {
            assert_eq!(refused, vec![("vary", "Origin".to_owned())]);
        }
        assert!(actual_headers(&[], "https://a.example", "GET").is_empty());
        // Matched through `*`: every origin gets the same answer, so no Vary.
        let any = [rule(&["*"], &["GET"], &[], &[])];
        let h = actual_headers(&any, "https://a.example", "GET");
        assert_eq!(get(&h, "access-control-allow-origin"), Some("*"));
        assert_eq!(get(&h, "vary"), None);
    }
}
