//! One request to a running server's admin listener, as `tafel health` and
//! `tafel snapshot` make it: an optional bearer token, a time limit, the
//! status and body back.

use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};

pub async fn call(
    method: http::Method,
    url: &str,
    token: Option<&str>,
    timeout: u64,
) -> anyhow::Result<(http::StatusCode, Bytes)> {
    let uri: http::Uri = url.parse().with_context(|| format!("bad admin URL {url}"))?;
    let client =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http::<Empty<Bytes>>();
    // Not a content type a web form can send: the listener refuses a POST without
    // one (it could be a cross-site page's), and this body is empty JSON's place.
    let mut req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Empty::new())?;
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
