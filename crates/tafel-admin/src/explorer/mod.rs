//! The web explorer, served by the admin listener: static assets compiled into
//! the binary, and `/api/…`, which [`forward`] hands to the Table API pipeline
//! unchanged but for the prefix; the Table API port's bare root sends a browser
//! here ([`root_page`]).
//!
//! The explorer holds no credential of its own: the browser signs each call
//! (Shared Key) or carries the caller's SAS or bearer token, exactly as an SDK
//! would, and the pipeline authenticates it as it would on the Table API port.
//! So the explorer can do what the credential may, and no more, and there is no
//! server-side session, cookie or CSRF surface (SECURITY.md, "Web explorer").

use bytes::Bytes;
use http::{header, HeaderValue};
use http_body_util::Full;

mod api;

pub use api::{forward, root_page, API_PREFIX};

type Resp = hyper::Response<Full<Bytes>>;

/// One embedded file: its path on the admin listener, type and bytes.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $file:literal, $ct:expr) => {
        Asset {
            path: $path,
            content_type: $ct,
            body: include_bytes!(concat!("assets/", $file)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

static ASSETS: &[Asset] = &[
    asset!("/", "index.html", "text/html; charset=utf-8"),
    asset!("/explorer.css", "explorer.css", "text/css; charset=utf-8"),
    asset!("/favicon.svg", "favicon.svg", "image/svg+xml"),
    asset!("/js/app.js", "js/app.js", JS),
    asset!("/js/api.js", "js/api.js", JS),
    asset!("/js/sign.js", "js/sign.js", JS),
    asset!("/js/edm.js", "js/edm.js", JS),
    asset!("/js/ui.js", "js/ui.js", JS),
    asset!("/js/tables.js", "js/tables.js", JS),
    asset!("/js/entities.js", "js/entities.js", JS),
    asset!("/js/editor.js", "js/editor.js", JS),
    asset!("/js/transfer.js", "js/transfer.js", JS),
    asset!("/js/changes.js", "js/changes.js", JS),
    asset!("/js/status.js", "js/status.js", JS),
    asset!("/js/faults.js", "js/faults.js", JS),
    asset!("/js/admin.js", "js/admin.js", JS),
    asset!("/js/manage.js", "js/manage.js", JS),
    asset!("/js/deleted.js", "js/deleted.js", JS),
];

/// Every embedded asset's bytes, for the size check in the tests.
pub fn asset_sizes() -> impl Iterator<Item = (&'static str, usize)> {
    ASSETS.iter().map(|a| (a.path, a.body.len()))
}

/// An embedded asset, with headers that keep the page to its own origin.
pub fn asset(path: &str) -> Option<Resp> {
    let a = ASSETS.iter().find(|a| a.path == path)?;
    let mut r = hyper::Response::new(Full::new(Bytes::from_static(a.body)));
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(a.content_type));
    // Assets change with the binary; a reload after an upgrade must not mix versions.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
             connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_the_page_loads_is_embedded() {
        let index = std::str::from_utf8(ASSETS[0].body).unwrap();
        for a in ASSETS {
            assert!(!a.body.is_empty(), "{}", a.path);
        }
        // Every module one of them imports is served.
        for a in ASSETS.iter().filter(|a| a.path.ends_with(".js")) {
            let text = std::str::from_utf8(a.body).unwrap();
            for line in text.lines().filter(|l| l.starts_with("import ")) {
                let name = line.rsplit_once("from \"./").map(|(_, n)| n.trim_end_matches("\";"));
                let name = name.unwrap_or_else(|| panic!("{}: unparsed import {line}", a.path));
                let path = format!("/js/{name}");
                assert!(ASSETS.iter().any(|b| b.path == path), "{} imports {path}", a.path);
            }
        }
        assert!(index.contains("/js/app.js") && index.contains("/explorer.css"));
    }
}
