//! The explorer's way to the Table API: `/api/…` on the admin listener goes to
//! the same pipeline the Table API port runs ([`tafel_http::handle`]), and the
//! Table API port sends a browser opening its bare root here (the page the
//! binary hands tafel-http as its [`RootPage`]).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Method, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;

use tafel_http::{handle, is_path_style, AppState, RootPage};

/// Where the explorer's calls to the Table API go on the admin listener.
pub const API_PREFIX: &str = "/api/";

type Resp = hyper::Response<Full<Bytes>>;

/// Serves `/api/<account>/…` as the Table API would serve `/<account>/…`.
///
/// A call from the admin listener's own machine counts as HTTPS for the
/// transport rules (bearer tokens, SAS `spr=https`): it never crosses a network,
/// which is what those rules guard against, as browsers treat loopback as a
/// secure context.
pub async fn forward(app: Arc<AppState>, mut req: hyper::Request<Incoming>, peer: SocketAddr) -> Resp {
    let rest = req
        .uri()
        .path()
        .strip_prefix(API_PREFIX.trim_end_matches('/'))
        .unwrap_or("/");
    let path_and_query = match req.uri().query() {
        Some(q) => format!("{rest}?{q}"),
        None => rest.to_owned(),
    };
    match path_and_query.parse::<http::Uri>() {
        Ok(uri) => *req.uri_mut() = uri,
        // Cannot happen: a tail of a URI that parsed is one.
        Err(_) => {
            let mut r = hyper::Response::new(Full::new(Bytes::from_static(b"bad request URI\n")));
            *r.status_mut() = StatusCode::BAD_REQUEST;
            return r;
        }
    }
    // Always path-style: the explorer's own host name says nothing of the account.
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !is_path_style(host) {
        let port = host
            .rsplit_once(':')
            .map(|(_, p)| p)
            .filter(|p| p.bytes().all(|b| b.is_ascii_digit()));
        let local = match port {
            Some(p) => format!("localhost:{p}"),
            None => "localhost".to_owned(),
        };
        if let Ok(v) = HeaderValue::from_str(&local) {
            req.headers_mut().insert(header::HOST, v);
        }
    }
    let https = peer.ip().is_loopback();
    handle(app, req, peer, https).await.unwrap_or_else(|lost| {
        let mut r = hyper::Response::new(Full::new(Bytes::from(format!("{lost}\n"))));
        *r.status_mut() = StatusCode::BAD_GATEWAY;
        r
    })
}

/// The Table API port's bare root for an explorer at `explorer`: see
/// [`redirect_to_explorer`].
pub fn root_page(explorer: SocketAddr) -> RootPage {
    Arc::new(move |req: &hyper::Request<Incoming>, peer: SocketAddr| redirect_to_explorer(explorer, req, peer))
}

/// On the Table API port, a browser that opens the bare root (no credential, no
/// query) is sent to the explorer; every other request is the Table API's.
///
/// An explorer on a loopback address is reachable only from the machine (or
/// container) the server runs on. A browser that came from elsewhere — a
/// container's published port, another machine — would be sent to its own
/// loopback, where nothing answers: it gets a page saying how to reach the
/// explorer instead.
fn redirect_to_explorer(explorer: SocketAddr, req: &hyper::Request<Incoming>, peer: SocketAddr) -> Option<Resp> {
    if req.method() != Method::GET
        || req.uri().path() != "/"
        || req.uri().query().is_some()
        || req.headers().contains_key(header::AUTHORIZATION)
    {
        return None;
    }
    let accept = req.headers().get(header::ACCEPT)?.to_str().ok()?;
    if !accept.split(',').any(|t| t.trim().starts_with("text/html")) {
        return None;
    }
    if explorer.ip().is_loopback() && !peer.ip().to_canonical().is_loopback() {
        return Some(how_to_reach(explorer));
    }
    // An admin listener on every address is reached by the name the browser used.
    let host = if explorer.ip().is_unspecified() {
        let sent = req.headers().get(header::HOST).and_then(|h| h.to_str().ok())?;
        tafel_http::hostname(sent).to_owned()
    } else {
        match explorer {
            SocketAddr::V4(a) => a.ip().to_string(),
            SocketAddr::V6(a) => format!("[{}]", a.ip()),
        }
    };
    let location = format!("http://{host}:{}/", explorer.port());
    let mut r = hyper::Response::new(Full::new(Bytes::new()));
    *r.status_mut() = StatusCode::FOUND;
    r.headers_mut()
        .insert(header::LOCATION, HeaderValue::from_str(&location).ok()?);
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Some(r)
}

/// The page a browser that cannot reach a loopback explorer gets.
fn how_to_reach(explorer: SocketAddr) -> Resp {
    let port = explorer.port();
    let page = format!(
        "<!doctype html>\n<meta charset=\"utf-8\">\n<title>Tafel</title>\n\
         <h1>Tafel: the Azure Table API</h1>\n\
         <p>This port serves the Table API to SDKs and tools. The web explorer is on Tafel's admin listener, \
         <code>http://{explorer}/</code>: a loopback address of the machine or container Tafel runs in, \
         which this browser cannot reach.</p>\n\
         <p>To open it from here, have the admin listener listen on every address (it then asks for a token) \
         and publish its port, then open <code>http://HOST:{port}/</code>:</p>\n\
         <pre>docker run -p 10002:10002 -p {port}:{port} -e TAFEL_ADMIN_HOST=0.0.0.0 -e TAFEL_ADMIN_TOKEN=choose-one tafel:dev\n\
         tafel serve --admin-host 0.0.0.0 --admin-token choose-one</pre>\n"
    );
    let mut r = hyper::Response::new(Full::new(Bytes::from(page)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}
