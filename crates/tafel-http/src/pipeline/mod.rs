//! One request's path through the HTTP layer: address → the head's checks
//! (version, credential, permission) → body (`admit`) → fault rules
//! (`injected`) → protocol handler → common response headers. Every failure
//! becomes Azure's error response here, in one place.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use tafel_protocol::json::MetadataLevel;
use tafel_protocol::operation::Operation;
use tafel_protocol::{error_body, parse_query, Context, Request, Response, Route};
use tafel_service::{Ctx, Error, ErrorCode, Service};

mod admit;
mod injected;

use crate::accounts::Accounts;
use crate::addressing;
use crate::auth::bearer::OAuth;
use crate::body;
use crate::cors;
use crate::limits::Limits;
use crate::names::{
    CACHE_CONTROL, CONNECTION, DATASERVICEVERSION, SERVER, WWW_AUTHENTICATE, X_CONTENT_TYPE_OPTIONS,
    X_MS_CLIENT_REQUEST_ID, X_MS_ERROR_CODE, X_MS_REQUEST_ID, X_MS_VERSION,
};
use crate::ops::{self, Credential, Ops};
use crate::throttle::Throttle;

/// The version we answer with when the client sent none.
pub(crate) const DEFAULT_VERSION: &str = "2019-02-02";

pub struct AppState {
    pub(crate) service: Service,
    pub(crate) accounts: Accounts,
    /// Metrics, access log and drain state (`ops/`).
    pub(crate) ops: Arc<Ops>,
    /// Bearer tokens, when `--oauth` accepts them.
    pub(crate) oauth: Option<Arc<OAuth>>,
    /// What a browser opening the bare root gets (the binary hands the
    /// explorer's redirect in); `None`: the root is the Table API's like any path.
    pub(crate) root_page: Option<RootPage>,
    /// Connections, body memory, timeouts.
    pub(crate) limits: Limits,
    /// Azure's scalability targets, when `--azure-limits` is on.
    pub(crate) throttle: Option<Throttle>,
}

/// The answer to a request for the Table API port's bare root, if it is not the
/// Table API's (`None`): given the request and the peer's address.
pub type RootPage =
    Arc<dyn Fn(&hyper::Request<Incoming>, SocketAddr) -> Option<hyper::Response<Full<Bytes>>> + Send + Sync>;

impl AppState {
    pub fn new(service: Service, accounts: Accounts, ops: Arc<Ops>, limits: Limits) -> Self {
        AppState {
            service,
            accounts,
            ops,
            oauth: None,
            root_page: None,
            limits,
            throttle: None,
        }
    }

    /// Accepts bearer tokens (`--oauth`).
    pub fn with_oauth(mut self, oauth: Option<Arc<OAuth>>) -> Self {
        self.oauth = oauth;
        self
    }

    /// Throttles to Azure's scalability targets (`--azure-limits`).
    pub fn with_throttle(mut self, throttle: Option<Throttle>) -> Self {
        self.throttle = throttle;
        self
    }

    /// Answers the bare root with `page` where it gives an answer.
    pub fn with_root_page(mut self, page: Option<RootPage>) -> Self {
        self.root_page = page;
        self
    }

    /// The accounts served.
    pub fn accounts(&self) -> &Accounts {
        &self.accounts
    }
}

/// Where a request came from: the client's address, and whether its connection
/// is TLS. Handed along with the request, not in its extensions: a first insert
/// there allocates a map and a box per request (benchmark-history §24).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer {
    pub addr: SocketAddr,
    pub https: bool,
}

struct Meta {
    request_id: String,
    version: HeaderValue,
    /// Why the request's `x-ms-version` is refused, if it is (answered before
    /// authentication, after a preflight).
    version_refused: Option<Error>,
    client_request_id: Option<HeaderValue>,
    /// Error body format: `None` = XML.
    error_level: Option<MetadataLevel>,
    /// Cosmos answers its errors in its own form (`error_body::cosmos_json`).
    dialect: tafel_protocol::cosmos::Dialect,
    /// The addressed account, once known (for CORS).
    account: Option<String>,
    /// `Origin` of a cross-origin request, and the request's verb.
    origin: Option<String>,
    method: Method,
    /// For metrics and the access log: the operation, the error answered, and
    /// the table named (only gathered while the access log is on).
    operation: Operation,
    error: Option<ErrorCode>,
    table: String,
    /// Bytes of the request body read.
    bytes_in: u64,
    /// A fault rule's doing (`faults/`): its kind, the status its error is
    /// answered with, and whether the answer is dropped with the connection.
    fault: &'static str,
    fault_status: Option<u16>,
    lose_answer: bool,
}

impl Meta {
    /// What the answer and the log take from the request's head, before it runs.
    fn of(req: &hyper::Request<Incoming>, dialect: tafel_protocol::cosmos::Dialect) -> Self {
        let headers = req.headers();
        let version = headers.get(&X_MS_VERSION);
        Meta {
            request_id: uuid::Uuid::new_v4().to_string(),
            // The request's own value (shares its buffer, no copy) when it is text.
            version: version
                .filter(|v| v.to_str().is_ok())
                .cloned()
                .unwrap_or(HeaderValue::from_static(DEFAULT_VERSION)),
            version_refused: admit::check_version(version).err(),
            client_request_id: headers.get(&X_MS_CLIENT_REQUEST_ID).cloned(),
            error_level: Some(MetadataLevel::Minimal),
            dialect,
            account: None,
            origin: headers
                .get(http::header::ORIGIN)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            method: req.method().clone(),
            operation: Operation::Unknown,
            error: None,
            table: String::new(),
            bytes_in: 0,
            fault: "",
            fault_status: None,
            lose_answer: false,
        }
    }
}

/// A response withheld by a fault rule: the server closes the connection
/// instead of sending it.
#[derive(Debug)]
pub struct LostAnswer;

impl std::fmt::Display for LostAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the answer was lost by a fault rule")
    }
}

impl std::error::Error for LostAnswer {}

/// A request's query parameters and route, classified once from its head
/// before it runs (`server.rs` runs it where the route's lane says).
pub(crate) struct Routed {
    query: Vec<(String, String)>,
    /// The account and the path below it, from the host or the path (`None`: the
    /// request names no account), resolved once here.
    address: Option<addressing::Address>,
    /// Table Storage's answers, or Cosmos DB for Table's (from the host name).
    dialect: tafel_protocol::cosmos::Dialect,
    pub route: Route<'static>,
    peer: Peer,
}

impl Routed {
    pub(crate) fn of(req: &hyper::Request<Incoming>, peer: Peer) -> Self {
        let query = parse_query(req.uri().query());
        let host = addressing::host(req.headers(), req.uri());
        let address = addressing::resolve(host, req.uri().path(), peer.https);
        let dialect = tafel_protocol::cosmos::Dialect::of_host(addressing::hostname(host));
        // Without an account the request is refused before its route counts.
        let path = address.as_ref().map_or("", |a| a.path.as_str());
        // Owned, as it goes with the request, perhaps to another runtime: it copies
        // the names and keys the handler's own parse of the path copied before.
        let route = Route::of(req.method(), path, &query, req.headers()).into_owned();
        Routed {
            query,
            address,
            dialect,
            route,
            peer,
        }
    }
}

/// The response to `req` from `peer` (over TLS or as safe: `https`), as the
/// Table API port would answer it, or [`LostAnswer`] when a fault rule withholds
/// it (the request was served all the same): the explorer's way in.
pub async fn handle(
    state: Arc<AppState>,
    req: hyper::Request<Incoming>,
    peer: SocketAddr,
    https: bool,
) -> Result<hyper::Response<Full<Bytes>>, LostAnswer> {
    let routed = Routed::of(&req, Peer { addr: peer, https });
    handle_routed(state, req, routed).await.map(into_hyper)
}

/// [`handle`] for a request already classified.
pub(crate) async fn handle_routed(
    state: Arc<AppState>,
    req: hyper::Request<Incoming>,
    routed: Routed,
) -> Result<Response, LostAnswer> {
    let started = Instant::now();
    let _in_flight = state.ops.in_flight();
    // What only the access log needs is gathered only while it is on.
    let (credential, peer, user_agent) = match state.ops.logs_access() {
        true => (
            Credential::of(
                req.headers()
                    .get(http::header::AUTHORIZATION)
                    .map(HeaderValue::as_bytes),
                req.uri().query(),
            ),
            Some(routed.peer.addr),
            req.headers().get(http::header::USER_AGENT).cloned(),
        ),
        false => (Credential::Anonymous, None, None),
    };
    let mut meta = Meta::of(&req, routed.dialect);
    // The filter a `--scan-warn-rows` warning quotes (only while it is on).
    let filter = match state.ops.warns_of_scans() && routed.route.operation() == Operation::QueryEntities {
        true => routed
            .query
            .iter()
            .find(|(k, _)| k == "$filter")
            .map(|(_, v)| v.clone()),
        false => None,
    };
    let head_request = req.method() == Method::HEAD;
    let mut resp = match run(&state, req, routed, &mut meta).await {
        Ok(r) => r,
        Err(e) => {
            meta.error = Some(e.code);
            let mut resp = error_response(&e, &meta, state.oauth.as_deref());
            if let Some(s) = meta.fault_status.and_then(|s| StatusCode::from_u16(s).ok()) {
                resp.status = s;
            }
            resp
        }
    };
    if let (Some(origin), Some(account)) = (&meta.origin, &meta.account) {
        if meta.method != Method::OPTIONS {
            cors::decorate(&state.service, account, origin, meta.method.as_str(), &mut resp).await;
        }
    }
    finish(&mut resp, &meta);
    if head_request {
        resp.body = Bytes::new();
    }
    if state.ops.draining() {
        // The client opens its next request's connection anew, so none is left
        // idle here to be cut when the drain ends.
        resp.set_static(CONNECTION, "close");
    }
    let query = match meta.operation {
        Operation::QueryEntities => ops::QueryPlan::of(&resp.headers),
        _ => None,
    };
    state.ops.finish(&ops::Request {
        started,
        operation: meta.operation,
        error: meta.error,
        status: resp.status.as_u16(),
        bytes_in: meta.bytes_in,
        bytes_out: resp.body.len() as u64,
        request_id: &meta.request_id,
        account: meta.account.as_deref().unwrap_or_default(),
        table: &meta.table,
        credential,
        peer,
        user_agent: user_agent.as_ref().and_then(|v| v.to_str().ok()).unwrap_or_default(),
        fault: meta.fault,
        query,
        filter: filter.as_deref().unwrap_or_default(),
    });
    if meta.lose_answer {
        return Err(LostAnswer);
    }
    Ok(resp)
}

/// `ServerBusy` for a request the server could not run: it is shutting down.
pub fn busy() -> Response {
    let e = Error::new(ErrorCode::ServerBusy);
    let request_id = uuid::Uuid::new_v4().to_string();
    let (ct, body) = error_body::json(&e, MetadataLevel::Minimal, &request_id, None);
    let mut resp = Response::with_body(StatusCode::SERVICE_UNAVAILABLE, ct, body);
    resp.set_static(X_MS_ERROR_CODE, e.code.as_str());
    let _ = resp.set(X_MS_REQUEST_ID, &request_id); // a UUID: always header text
    resp
}

fn error_response(e: &Error, meta: &Meta, oauth: Option<&OAuth>) -> Response {
    if let Some(detail) = &e.detail {
        tracing::debug!(request_id = %meta.request_id, code = e.code.as_str(), detail = %detail, "refused");
    }
    let (ct, body) = match (meta.dialect, meta.error_level) {
        (tafel_protocol::cosmos::Dialect::Cosmos, _) => error_body::cosmos_json(e, &meta.request_id),
        (_, Some(level)) => error_body::json(e, level, &meta.request_id, None),
        (_, None) => error_body::xml(e, &meta.request_id),
    };
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = Response::with_body(status, ct, body);
    resp.set_static(X_MS_ERROR_CODE, e.code.as_str());
    if e.code == ErrorCode::TooManyRequests {
        resp.set_static(
            tafel_protocol::names::X_MS_RETRY_AFTER_MS,
            tafel_protocol::cosmos::RETRY_AFTER_MS,
        );
    }
    if let (Some(oauth), ErrorCode::InvalidBearerToken | ErrorCode::NoAuthenticationInformation) = (oauth, e.code) {
        // The tenant is configuration, always header text; a failure is logged by `set`.
        let _ = resp.set(WWW_AUTHENTICATE, oauth.challenge(meta.dialect.is_cosmos()));
    }
    resp
}

fn finish(resp: &mut Response, meta: &Meta) {
    // A UUID of ours, always header text; a failure would have been logged by `set`
    // as an internal error.
    let _ = resp.set(X_MS_REQUEST_ID, &meta.request_id);
    resp.headers.insert(X_MS_VERSION, meta.version.clone());
    // No `Date` here: hyper adds it, formatted once a second.
    // Values made at compile time: `set_static` checks each byte per response.
    resp.set_value(CACHE_CONTROL, const { HeaderValue::from_static("no-cache") });
    resp.set_value(X_CONTENT_TYPE_OPTIONS, const { HeaderValue::from_static("nosniff") });
    resp.set_value(
        SERVER,
        const { HeaderValue::from_static(concat!("Tafel/", env!("CARGO_PKG_VERSION"))) },
    );
    if resp
        .headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|c| c.as_bytes().starts_with(b"application/json"))
    {
        resp.set_value(DATASERVICEVERSION, const { HeaderValue::from_static("3.0;") });
    }
    if let Some(id) = &meta.client_request_id {
        resp.headers.insert(X_MS_CLIENT_REQUEST_ID, id.clone());
    }
}

async fn run(
    state: &Arc<AppState>,
    req: hyper::Request<Incoming>,
    routed: Routed,
    meta: &mut Meta,
) -> Result<Response, Error> {
    let (parts, body) = req.into_parts();
    let raw_path = parts.uri.path().to_owned();
    let Routed {
        query,
        address,
        dialect,
        mut route,
        peer,
    } = routed;
    let address = match classify(state, meta, address, &route) {
        Ok(address) => address,
        Err(e) => return Err(body::refuse(body, &state.limits, e)),
    };
    if parts.method == Method::OPTIONS {
        // CORS preflight: unauthenticated, answered from the stored rules.
        meta.error_level = None;
        return cors::preflight(&state.service, &state.accounts, &address.account, &parts.headers).await;
    }
    if let Some(e) = meta.version_refused.take() {
        return Err(body::refuse(body, &state.limits, e));
    }
    let caller = admit::Caller {
        method: parts.method.clone(),
        account: &address.account,
        raw_path: &raw_path,
        peer: Some(peer.addr.ip()),
        https: peer.https,
        cosmos: dialect.is_cosmos(),
    };
    let admit::Admitted {
        method,
        access,
        body,
        room: _room,
        revocable,
    } = admit::admit(state, &caller.head(&parts.headers, &query), &route, body).await?;
    meta.bytes_in = body.len() as u64;
    let request = Request {
        method,
        path: address.path.clone(),
        query,
        headers: parts.headers,
        body,
    };
    // An insert's PartitionKey is read from its body only for limits and fault
    // rules that name partitions (both off by default).
    let wants_partition =
        state.throttle.is_some() || state.ops.faults.active().is_some_and(|rules| rules.wants_partition());
    route.read_body(&request, wants_partition);
    if !route.xml_errors() {
        meta.error_level = Some(route.level().unwrap_or(MetadataLevel::Minimal));
    }
    let fired = injected::before(state, &address.account, &route, &request, meta).await?;
    // A feed's long poll checks its credential again before each delivery.
    let recheck = match (route.operation(), revocable) {
        (Operation::ReadChanges, true) => Some(admit::recheck(
            state.clone(),
            &caller.head(&request.headers, &request.query),
        )),
        _ => None,
    };
    let cx = Context {
        caller: Ctx {
            account: address.account,
            access,
            recheck,
        },
        base_url: address.base_url,
        request_id: meta.request_id.clone(),
        secondary: address.secondary,
        page_limit: fired.page_limit,
        dialect,
    };
    let answer = dispatch(state, &cx, &request, route).await;
    fired.after(answer, meta).await
}

/// Checks what the request's head says of itself and names what it addresses
/// in `meta`: the error format, the client's request id, the account.
fn classify(
    state: &AppState,
    meta: &mut Meta,
    address: Option<addressing::Address>,
    route: &Route<'_>,
) -> Result<addressing::Address, Error> {
    if route.xml_errors() {
        meta.error_level = None;
    }
    if meta.client_request_id.as_ref().is_some_and(|id| id.len() > 1024) {
        meta.client_request_id = None;
        return Err(Error::with_message(
            ErrorCode::InvalidHeaderValue,
            "x-ms-client-request-id exceeds 1024 characters.",
        ));
    }
    let address = address
        .ok_or_else(|| Error::with_message(ErrorCode::InvalidUri, "The request URI names no storage account."))?;
    meta.account = Some(address.account.clone());
    meta.operation = route.operation();
    // A query's table also names its table scans in the metrics.
    if state.ops.logs_access() || meta.operation == Operation::QueryEntities {
        meta.table = route.table().unwrap_or_default().to_owned();
    }
    Ok(address)
}

/// Runs the request in the protocol layer, throttled when `--azure-limits` is on.
async fn dispatch(state: &AppState, cx: &Context, request: &Request, route: Route<'static>) -> Result<Response, Error> {
    // Off by default: then this is the one check the request pays.
    let Some(throttle) = &state.throttle else {
        return tafel_protocol::handle(&state.service, cx, request, route).await;
    };
    let charge = tafel_protocol::charge::of(&cx.caller.account, &route);
    throttle
        .admit(&cx.caller.account, &charge)
        .map_err(|e| cx.dialect.throttled(e))?;
    let resp = tafel_protocol::handle(&state.service, cx, request, route).await;
    if let (true, Ok(r)) = (charge.query, &resp) {
        throttle.settle(&cx.caller.account, &charge, r.entities);
    }
    resp
}

/// Converts a protocol response into hyper's.
pub(crate) fn into_hyper(resp: Response) -> hyper::Response<Full<Bytes>> {
    let mut out = hyper::Response::new(Full::new(resp.body));
    *out.status_mut() = resp.status;
    *out.headers_mut() = resp.headers;
    out
}
