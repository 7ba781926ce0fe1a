//! The admin listener: a small HTTP/1.1 server on a port of its own.
//!
//! - `GET /health`: 200 while the process serves (liveness).
//! - `GET /ready`: 200 while the store is usable and the node is not draining;
//!   503 with the reason otherwise (readiness).
//! - `GET /metrics`: Prometheus text format.
//! - `GET|PUT|DELETE /faults`: the fault rules in force ([`crate::faults`]).
//! - `GET /backup`: a backup of the whole store, with the admin token only
//!   ([`crate::backup`]).
//! - `/accounts/A/tables/T/indexes…`: secondary indexes ([`crate::indexes`]).
//! - `/snapshots…` and `DELETE /accounts/NAME/data`: instant resets for test
//!   suites ([`crate::snapshots`]).
//! - `/accounts/A/deleted-tables…`: deleted tables kept restorable
//!   ([`crate::deleted_tables`]).
//! - `GET /stats` and `GET /accounts/NAME/tables/TABLE/stats`: tables' entities,
//!   partitions and bytes ([`crate::table_stats`]).
//! - `POST /accounts/NAME/tables/TABLE/purge` and `GET /purge-jobs…`: purge by
//!   filter, as jobs that survive a restart ([`crate::purge`]).
//! - the web explorer (`GET /` and its assets) and `/api/…`, its way to the
//!   Table API ([`crate::explorer`]), unless turned off.
//!
//! With `--admin-token`, `/metrics` needs `Authorization: Bearer <token>`, and
//! `/ready` gives its reason only to a caller that sends it; `/health` and
//! `/ready`'s status stay open, since load balancers' health checks seldom send
//! credentials. A listener on a non-loopback address must have a token.
//!
//! Without a token, everything but `/health` and `/ready` answers only a `Host`
//! that names this machine (`localhost`, a loopback address): a web page whose
//! name an attacker rebinds to 127.0.0.1 (DNS rebinding) gets 403, not the
//! metrics' account and table names. A request that changes state must show it
//! was not sent by another site's page ([`crate::cross_site`]). At most
//! [`MAX_CONNECTIONS`] are served at once, apart from the Table API port's, and a
//! few spare ones beyond them answer health checks only.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{header, Method, StatusCode};
use http_body_util::{Either, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use subtle::ConstantTimeEq;
use tafel_http::ops::Ops;
use tafel_http::AppState;
use tafel_store::{FailureKind, NotReady, Store, StoreError};
use tokio::net::TcpListener;

use crate::explorer;
use crate::scrape::Scrape;

pub struct AdminState {
    pub ops: Arc<Ops>,
    pub store: Arc<dyn Store>,
    /// Accounts whose tables `/metrics` counts.
    pub accounts: Vec<String>,
    pub token: Option<String>,
    pub backend: &'static str,
    /// The Table API the explorer's `/api/…` calls reach; `None`: no explorer.
    pub explorer: Option<Arc<AppState>>,
    /// The service, for expiry policies and the test clock (`ttl.rs`); `None`:
    /// those routes answer 503.
    pub service: Option<tafel_service::Service>,
    /// Purge jobs; `None`: purges are refused (501).
    pub purge: Option<Arc<crate::purge_job::Purges>>,
    /// The Table API's own URL, for links the explorer shows (a SAS URL).
    table_endpoint: String,
    started: SystemTime,
    /// The last readiness reported, to log its changes once.
    was_ready: AtomicBool,
}

impl AdminState {
    pub fn new(
        ops: Arc<Ops>,
        store: Arc<dyn Store>,
        accounts: Vec<String>,
        token: Option<String>,
        backend: &'static str,
    ) -> Self {
        AdminState {
            ops,
            store,
            accounts,
            token,
            backend,
            explorer: None,
            service: None,
            purge: None,
            table_endpoint: String::new(),
            started: SystemTime::now(),
            was_ready: AtomicBool::new(true),
        }
    }

    /// Serves the web explorer, whose calls reach `app`, itself served at
    /// `table_endpoint` (`http://127.0.0.1:10002`).
    pub fn with_explorer(mut self, app: Arc<AppState>, table_endpoint: String) -> Self {
        self.explorer = Some(app);
        self.table_endpoint = table_endpoint;
        self
    }

    /// Serves expiry policies and the test clock (`ttl.rs`) through `service`.
    pub fn with_service(mut self, service: tafel_service::Service) -> Self {
        self.service = Some(service);
        self
    }

    /// Serves purge jobs, and resumes those a stop interrupted or another
    /// node left (on the current Tokio runtime).
    pub fn with_purge(mut self, purges: crate::purge_job::Purges) -> Self {
        let purges = Arc::new(purges);
        tokio::spawn(crate::purge_job::watch(purges.clone()));
        self.purge = Some(purges);
        self
    }

    /// Readiness now: not draining, and the store answers.
    async fn readiness(&self) -> Result<(), Unready> {
        let now = if self.ops.draining() {
            Err(Unready::Draining)
        } else {
            self.store.ready().await.map_err(Unready::Store)
        };
        let ready = now.is_ok();
        if self.was_ready.swap(ready, Ordering::Relaxed) != ready {
            match &now {
                Ok(()) => tracing::info!("ready again"),
                Err(reason) => tracing::warn!(%reason, "not ready"),
            }
        }
        now
    }

    pub(crate) fn authorized(&self, req: &hyper::Request<hyper::body::Incoming>) -> bool {
        let Some(token) = &self.token else { return true };
        let sent = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
        sent.is_some_and(|s| bool::from(s.ct_eq(token.as_bytes())))
    }
}

/// Why `/ready` answers 503; its text is the answer's reason.
#[derive(Debug, thiserror::Error)]
enum Unready {
    #[error("draining: the node is shutting down")]
    Draining,
    #[error(transparent)]
    Store(NotReady),
}

/// Refuses an admin listener open to the network without a token.
pub fn check_exposure(addr: &SocketAddr, token: Option<&str>) -> Result<(), String> {
    if !addr.ip().is_loopback() && token.is_none_or(str::is_empty) {
        return Err(format!(
            "the admin listener on {addr} is not on a loopback address: set --admin-token (TAFEL_ADMIN_TOKEN)"
        ));
    }
    Ok(())
}

pub(crate) type Resp = hyper::Response<Full<Bytes>>;
/// An answer from memory, or a backup's stream.
type AnyResp = hyper::Response<Either<Full<Bytes>, crate::backup::BackupBody>>;

pub(crate) fn text(status: StatusCode, body: impl Into<Bytes>) -> Resp {
    let mut r = hyper::Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    r
}

/// A JSON answer (the faults' and snapshots' routes, the explorer's config).
pub(crate) fn json_response(status: StatusCode, value: &serde_json::Value) -> Resp {
    let mut r = text(status, value.to_string());
    r.headers_mut()
        .insert(header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    r
}

/// The answer to a request that needed the admin token and did not carry it.
/// An admin API refusal: `{"error": CODE, "message": …}`.
pub(crate) fn error(status: StatusCode, code: &str, message: String) -> Resp {
    json_response(status, &serde_json::json!({"error": code, "message": message}))
}

/// 405, with the verbs the path takes.
pub(crate) fn not_allowed(allow: &'static str) -> Resp {
    let mut r = error(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        format!("allowed: {allow}"),
    );
    r.headers_mut()
        .insert(header::ALLOW, http::HeaderValue::from_static(allow));
    r
}

/// A store's failure under `what`, said as `message`: busy or stopped (shutting
/// down, or failing every write) is 503 ServerBusy, to try again; anything else
/// is logged and 500.
pub(crate) fn store_failure(e: &StoreError, what: &str, message: String) -> Resp {
    let (status, code) = match e {
        StoreError::Busy(_) => (StatusCode::SERVICE_UNAVAILABLE, "ServerBusy"),
        StoreError::Backend(b) if b.kind == FailureKind::Stopped => (StatusCode::SERVICE_UNAVAILABLE, "ServerBusy"),
        _ => {
            tracing::error!(error = %e, "{what} failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "InternalError")
        }
    };
    error(status, code, message)
}

pub(crate) fn unauthorized() -> Resp {
    let mut r = text(StatusCode::UNAUTHORIZED, "a bearer token is required\n");
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer"));
    r
}

/// Connections the admin listener serves at once; more wait to be accepted.
/// Within the files the Table API port leaves over (`tafel`'s `OTHER_FILES`).
pub const MAX_CONNECTIONS: usize = 64;

/// Connections beyond [`MAX_CONNECTIONS`] that answer only `/health` and
/// `/ready`, each for one request whose head arrives within [`SPARE_HEAD_TIME`]:
/// connections that hold every slot with unfinished heads (or long backups)
/// leave a load balancer's health check answered.
const SPARE_CONNECTIONS: usize = 8;
const SPARE_HEAD_TIME: Duration = Duration::from_secs(1);

/// Whether `host` (a `Host` header) names this machine: `localhost` or a name
/// under it, or a loopback address, with any port.
fn local_host(host: &str) -> bool {
    let name = tafel_http::hostname(host);
    let name = name.trim_start_matches('[').trim_end_matches(']');
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The refusal of a request no route may see: one addressed by another name
/// than this machine's without a token (DNS rebinding), or one that changes
/// state and could come from another site's page. Every path passes here first.
fn guard(state: &AdminState, req: &hyper::Request<hyper::body::Incoming>) -> Option<Resp> {
    let path = req.uri().path();
    let host = req.headers().get(header::HOST).and_then(|h| h.to_str().ok());
    if state.token.is_none() && path != "/health" && path != "/ready" && !host.is_some_and(local_host) {
        return Some(text(
            StatusCode::FORBIDDEN,
            "the admin listener answers only requests addressed to localhost (or set --admin-token)\n",
        ));
    }
    crate::cross_site::refusal(req.method(), req.headers())
}

/// Every route of the admin listener, in one place; `guard` has passed.
async fn route(state: &AdminState, req: hyper::Request<hyper::body::Incoming>, peer: SocketAddr) -> AnyResp {
    let path = req.uri().path();
    if let Some(app) = &state.explorer {
        if path.starts_with(explorer::API_PREFIX) {
            return explorer::forward(app.clone(), req, peer).await.map(Either::Left);
        }
        if req.method() == Method::GET || req.method() == Method::HEAD {
            if let Some(r) = explorer::asset(path) {
                return r.map(Either::Left);
            }
            if path == "/explorer.json" {
                let config = serde_json::json!({
                    "tableEndpoint": state.table_endpoint,
                    "version": env!("CARGO_PKG_VERSION"),
                    "backend": state.backend,
                });
                return json_response(StatusCode::OK, &config).map(Either::Left);
            }
        }
    }
    if crate::table_stats::owns(path) {
        return crate::table_stats::route(state, &req).await.map(Either::Left);
    }
    if crate::deleted_tables::owns(path) {
        return crate::deleted_tables::route(state, req).await.map(Either::Left);
    }
    if crate::indexes::owns(path) {
        return crate::indexes::route(state, &req).await.map(Either::Left);
    }
    if crate::ttl::owns(path) {
        return crate::ttl::route(state, req).await.map(Either::Left);
    }
    if crate::purge::owns(path) {
        return crate::purge::route(state, req).await.map(Either::Left);
    }
    if crate::snapshots::owns(path) {
        return crate::snapshots::route(state, &req).await.map(Either::Left);
    }
    if path == "/faults" {
        return crate::faults::route(state, req).await.map(Either::Left);
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        r.headers_mut()
            .insert(header::ALLOW, http::HeaderValue::from_static("GET, HEAD"));
        return r.map(Either::Left);
    }
    let r = match path {
        "/health" => text(StatusCode::OK, "ok\n"),
        "/ready" => match state.readiness().await {
            Ok(()) => text(StatusCode::OK, "ready\n"),
            Err(reason) if state.authorized(&req) => {
                text(StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {reason}\n"))
            }
            Err(_) => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n"),
        },
        "/metrics" if !state.authorized(&req) => unauthorized(),
        "/metrics" => metrics(state).await,
        // The one route whose answer streams.
        "/backup" if req.method() == Method::GET => {
            return match crate::backup::backup(state, &req).await {
                Ok(r) => r.map(Either::Right),
                Err(r) => r.map(Either::Left),
            }
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    };
    r.map(Either::Left)
}

async fn metrics(state: &AdminState) -> Resp {
    let ready = state.readiness().await.is_ok();
    let mut tables = Vec::with_capacity(state.accounts.len());
    for account in &state.accounts {
        match state.store.count_tables(account).await {
            Ok(n) => tables.push((account.clone(), n)),
            Err(e) => tracing::debug!(error = %e, account, "could not count tables"),
        }
    }
    let table_sizes = match state.store.table_sizes().await {
        Ok(mut sizes) => {
            sizes.retain(|t| state.accounts.contains(&t.account));
            crate::table_stats::largest_first(&mut sizes);
            sizes.truncate(crate::table_stats::TOP_TABLES);
            sizes
        }
        Err(e) => {
            tracing::debug!(error = %e, "could not read the tables' counters");
            Vec::new()
        }
    };
    let scrape = Scrape {
        ready,
        draining: state.ops.draining(),
        backend: state.backend,
        start_time: state
            .started
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
        store: state.store.metrics(),
        tables,
        table_sizes,
        expired: state.service.as_ref().map_or(0, |s| s.expired_total()),
    };
    match state.ops.metrics.render(Box::new(scrape)) {
        Ok(body) => {
            let mut r = text(StatusCode::OK, body);
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static(prometheus_client::encoding::prometheus_text::CONTENT_TYPE),
            );
            r
        }
        Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "could not encode the metrics\n"),
    }
}

/// Serves the admin endpoints on `listener` until `shutdown` completes.
pub async fn serve_admin(
    listener: TcpListener,
    state: Arc<AdminState>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    tokio::pin!(shutdown);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let spares = Arc::new(tokio::sync::Semaphore::new(SPARE_CONNECTIONS));
    loop {
        // A full slot when there is one; else a spare, which answers only health.
        let (slot, spare) = match slots.clone().try_acquire_owned() {
            Ok(s) => (s, false),
            Err(_) => tokio::select! {
                biased;
                slot = slots.clone().acquire_owned() => match slot {
                    Ok(s) => (s, false),
                    Err(_) => return Ok(()),
                },
                slot = spares.clone().acquire_owned() => match slot {
                    Ok(s) => (s, true),
                    Err(_) => return Ok(()),
                },
                () = &mut shutdown => return Ok(()),
            },
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "admin accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        let state = state.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let state = state.clone();
                async move {
                    if spare && !matches!(req.uri().path(), "/health" | "/ready") {
                        return Ok(text(
                            StatusCode::SERVICE_UNAVAILABLE,
                            "the admin listener is serving as many connections as it may; try again\n",
                        )
                        .map(Either::Left));
                    }
                    if let Some(refused) = guard(&state, &req) {
                        return Ok(refused.map(Either::Left));
                    }
                    Ok::<_, Infallible>(route(&state, req, peer).await)
                }
            });
            // A spare connection is for one health check: its head must come at once.
            let (head_time, keep_alive) = match spare {
                false => (Duration::from_secs(10), true),
                true => (SPARE_HEAD_TIME, false),
            };
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(head_time)
                .keep_alive(keep_alive)
                .max_buf_size(tafel_http::MAX_HEAD)
                .serve_connection(TokioIo::new(stream), svc);
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "admin connection ended with an error");
            }
            drop(slot);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_loopback_listener_needs_a_token() {
        let public: SocketAddr = "0.0.0.0:10012".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:10012".parse().unwrap();
        assert!(check_exposure(&public, None).is_err());
        assert!(check_exposure(&public, Some("")).is_err());
        assert!(check_exposure(&public, Some("s3cret")).is_ok());
        assert!(check_exposure(&local, None).is_ok());
        assert!(check_exposure(&"[::1]:1".parse().unwrap(), None).is_ok());
    }

    #[test]
    fn only_names_of_this_machine_are_local_hosts() {
        for h in [
            "localhost",
            "localhost:10012",
            "LOCALHOST.",
            "a.localhost:1",
            "127.0.0.1:10012",
            "127.9.9.9",
            "[::1]:10012",
            "[::1]",
        ] {
            assert!(local_host(h), "{h}");
        }
        for h in [
            "evil.example:10012",
            "localhost.evil.example",
            "10.0.0.1:10012",
            "0.0.0.0",
            "[::]:1",
            "",
        ] {
            assert!(!local_host(h), "{h}");
        }
    }
}
