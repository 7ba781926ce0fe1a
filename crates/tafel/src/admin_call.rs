//! One request to a running server's admin listener, as `tafel health`,
//! `tafel snapshot`, `tafel index` and `tafel stats` make it: an optional bearer
//! token, a time limit, the status and body back.

use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};

/// How a command reaches a running server's admin listener (every admin
/// command takes the same two flags).
#[derive(clap::Args)]
pub(crate) struct AdminConn {
    /// The running server's admin listener.
    #[arg(
        long = "admin-url",
        env = "TAFEL_ADMIN_URL",
        default_value = "http://127.0.0.1:10012",
        global = true
    )]
    pub url: String,
    /// The admin token, if the listener asks for one.
    #[arg(
        long = "admin-token",
        env = "TAFEL_ADMIN_TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub token: Option<String>,
}

pub async fn call(
    method: http::Method,
    url: &str,
    token: Option<&str>,
    timeout: u64,
) -> anyhow::Result<(http::StatusCode, Bytes)> {
    send(method, url, token, timeout, Bytes::new()).await
}

/// [`call`] with a JSON body.
pub async fn send(
    method: http::Method,
    url: &str,
    token: Option<&str>,
    timeout: u64,
    body: Bytes,
) -> anyhow::Result<(http::StatusCode, Bytes)> {
    let uri: http::Uri = url.parse().with_context(|| format!("bad admin URL {url}"))?;
    let client =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http::<Full<Bytes>>();
    // Not a content type a web form can send: the listener refuses a POST without
    // one (it could be a cross-site page's), and this body is empty JSON's place.
    let mut req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(body))?;
    if let Some(token) = token.filter(|t| !t.is_empty()) {
        req.headers_mut()
            .insert(http::header::AUTHORIZATION, format!("Bearer {token}").parse()?);
    }
    let answer = async {
        let resp = client.request(req).await?;
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        anyhow::Ok((status, body))
    };
    tokio::time::timeout(Duration::from_secs(timeout), answer)
        .await
        .with_context(|| format!("{url} did not answer within {timeout} s"))?
        .with_context(|| format!("reaching {url}"))
}

/// [`call`] for a command that expects JSON: `path` below `admin_url`; a status
/// other than success fails with the server's message. The body as JSON, if it is.
pub async fn ask(
    method: http::Method,
    admin_url: &str,
    path: &str,
    token: Option<&str>,
    timeout: u64,
) -> anyhow::Result<Option<serde_json::Value>> {
    ask_with(method, admin_url, path, token, timeout, Bytes::new()).await
}

/// [`ask`] with a JSON body.
pub async fn ask_with(
    method: http::Method,
    admin_url: &str,
    path: &str,
    token: Option<&str>,
    timeout: u64,
    body: Bytes,
) -> anyhow::Result<Option<serde_json::Value>> {
    let url = format!("{}{path}", admin_url.trim_end_matches('/'));
    let (status, body) = send(method, &url, token, timeout, body).await?;
    let json: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
    if !status.is_success() {
        let message = json
            .as_ref()
            .and_then(|j| j.get("message"))
            .and_then(|m| m.as_str())
            .map_or_else(|| String::from_utf8_lossy(&body).trim().to_owned(), str::to_owned);
        anyhow::bail!("{status}: {message}");
    }
    Ok(json)
}

/// Runs a command's admin call on a runtime of its own: a failure is said as
/// `tafel NAME: why` and exits 1.
pub fn run(name: &str, call: impl std::future::Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    if let Err(e) = runtime.block_on(call) {
        eprintln!("tafel {name}: {e:#}");
        std::process::exit(1);
    }
    Ok(())
}
