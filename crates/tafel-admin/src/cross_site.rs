//! What a web page may make a browser send the admin listener. Without
//! `--admin-token` the listener's guard is that `Host` names this machine, and a
//! page on any site can make the browser send exactly that: a form's `POST`
//! (`application/x-www-form-urlencoded`, `multipart/form-data`, `text/plain`),
//! or a `fetch` in `no-cors` mode, reach the listener without a CORS preflight
//! and are acted on even though the page never reads the answer. So a request
//! that changes anything must show it was not sent cross-site:
//!
//! - `Sec-Fetch-Site`, when sent (every current browser sends it), must be
//!   `same-origin` (the explorer's own calls) or `none` (typed by the user);
//! - `Origin`, when sent, must be this listener's own (never `null`);
//! - a `POST` must not carry a `Content-Type` a page can make a browser send
//!   unasked (a form's, a ping's, a report's), unless it carries `Authorization`,
//!   which no page can add without a preflight. One with no content type at all
//!   (`curl -X POST`, the CLI, a test fixture) comes from no browser: every
//!   current browser sends `Origin` with a `POST`, checked above.
//!
//! `PUT`, `DELETE` and any other verb already need a preflight, which this
//! listener never grants (it answers no CORS). Reads (`GET`, `HEAD`) change
//! nothing, and a cross-site page cannot read their answers.

use http::{header, HeaderMap, Method, StatusCode};

use crate::listener::{text, Resp};

/// Content types a page can make a browser `POST` with and no preflight: a
/// form's three, a hyperlink's ping, and the reports a page can point anywhere.
const BROWSER_SENDABLE: [&str; 7] = [
    "application/x-www-form-urlencoded",
    "multipart/form-data",
    "text/plain",
    "text/ping",
    "application/csp-report",
    "application/reports+json",
    "application/expect-ct-report+json",
];

/// The refusal of a state-changing request a web page could have sent; `None`
/// when it may go on.
pub(crate) fn refusal(method: &Method, headers: &HeaderMap) -> Option<Resp> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return None;
    }
    let get = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = get(header::HeaderName::from_static("sec-fetch-site")) {
        if !site.eq_ignore_ascii_case("same-origin") && !site.eq_ignore_ascii_case("none") {
            return Some(refused("it was sent by another site's page (Sec-Fetch-Site)"));
        }
    }
    if let Some(origin) = get(header::ORIGIN) {
        let host = get(header::HOST).unwrap_or("");
        let own = ["http://", "https://"].iter().any(|scheme| {
            origin
                .strip_prefix(scheme)
                .is_some_and(|o| o.eq_ignore_ascii_case(host))
        });
        if !own {
            return Some(refused("it was sent by another site's page (Origin)"));
        }
    }
    if method == Method::POST && !headers.contains_key(header::AUTHORIZATION) {
        let essence = get(header::CONTENT_TYPE).map(|ct| ct.split(';').next().unwrap_or("").trim());
        if essence.is_some_and(|e| BROWSER_SENDABLE.iter().any(|s| e.eq_ignore_ascii_case(s))) {
            return Some(refused(
                "its Content-Type is one a web page can make a browser send without asking \
                 (send none, or application/json)",
            ));
        }
    }
    None
}

fn refused(why: &str) -> Resp {
    text(
        StatusCode::FORBIDDEN,
        format!("refused: {why}; see SECURITY.md, \"What a web page can do\"\n"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, http::HeaderValue::from_static("127.0.0.1:10012"));
        for (k, v) in pairs {
            h.insert(*k, http::HeaderValue::from_static(v));
        }
        h
    }

    fn refused(method: Method, pairs: &[(&'static str, &'static str)]) -> bool {
        refusal(&method, &headers(pairs)).is_some()
    }

    #[test]
    fn a_cross_site_form_post_is_refused() {
        for ct in [
            "application/x-www-form-urlencoded",
            "text/plain;charset=UTF-8",
            "multipart/form-data; boundary=x",
        ] {
            assert!(refused(Method::POST, &[("content-type", ct)]), "{ct}");
            assert!(refused(
                Method::POST,
                &[
                    ("content-type", ct),
                    ("origin", "https://evil.example"),
                    ("sec-fetch-site", "cross-site")
                ]
            ));
        }
        assert!(
            refused(Method::POST, &[("content-type", "text/ping")]),
            "a hyperlink's ping"
        );
        assert!(refused(Method::POST, &[("content-type", "application/csp-report")]));
        assert!(
            refused(Method::POST, &[("origin", "https://evil.example")]),
            "a fetch with no body from another site"
        );
        assert!(refused(
            Method::POST,
            &[("content-type", "application/json"), ("origin", "null")]
        ));
        assert!(refused(Method::DELETE, &[("sec-fetch-site", "same-site")]));
        assert!(
            refused(Method::PUT, &[("origin", "http://127.0.0.1:10002")]),
            "another port is another origin"
        );
    }

    #[test]
    fn the_explorer_the_cli_and_curl_with_a_content_type_go_on() {
        assert!(!refused(Method::POST, &[("content-type", "application/json")]));
        assert!(!refused(Method::POST, &[]), "curl -X POST, requests.post: no browser");
        assert!(!refused(Method::POST, &[("authorization", "Bearer t")]));
        assert!(!refused(
            Method::PUT,
            &[("origin", "http://127.0.0.1:10012"), ("sec-fetch-site", "same-origin")]
        ));
        assert!(!refused(Method::DELETE, &[("sec-fetch-site", "none")]));
        assert!(
            !refused(Method::GET, &[("sec-fetch-site", "cross-site")]),
            "a link to the explorer still opens"
        );
    }
}
