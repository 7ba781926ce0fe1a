//! A lean HTTP/1.1 keep-alive client for a Table endpoint with Shared Key auth.
//!
//! Every worker owns one [`Conn`] (one TCP connection, reconnected lazily after an
//! error), so `--concurrency N` means exactly N requests in flight on N connections.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tafel_transfer::shared_key;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// The Accept header of every request: minimal metadata (what the Azure SDKs send), so
/// typed properties come back with their `@odata.type` annotations and can be verified.
pub const ACCEPT: &str = "application/json;odata=minimalmetadata";
pub const JSON: &str = "application/json";
const VERSION: &str = "2019-02-02";

/// Where to send requests and how to sign them.
pub struct Endpoint {
    addr: SocketAddr,
    host: HeaderValue,
    /// Path prefix of the account, e.g. `/devstoreaccount1` (path-style) or empty.
    base_path: String,
    /// `/account` as it starts every canonicalized resource.
    canon_prefix: String,
    account: String,
    key: Vec<u8>,
    timeout: Duration,
    /// For `https://` endpoints: the connector and the name the certificate must carry.
    tls: Option<(TlsConnector, ServerName<'static>)>,
}

/// A TLS client trusting only the CA certificates in `ca` (PEM).
fn tls_connector(ca: &Path) -> Result<TlsConnector, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).map_err(|e| format!("--ca {}: {e}", ca.display()))? {
        let cert = cert.map_err(|e| format!("--ca {}: {e}", ca.display()))?;
        roots.add(cert).map_err(|e| format!("--ca {}: {e}", ca.display()))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(TlsConnector::from(Arc::new(config)))
}

/// A finished response: status, headers, whole body.
pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The status plus the start of the body, for error reports.
    pub fn describe(&self) -> String {
        let body = String::from_utf8_lossy(&self.body[..self.body.len().min(300)]).replace(['\r', '\n'], " ");
        format!("HTTP {} {}", self.status.as_u16(), body)
    }
}

impl Endpoint {
    /// Parses `http[s]://host:port[/account]`. `account` defaults to the first path
    /// segment; an `https://` endpoint needs `ca`, the CA certificate(s) to trust.
    pub fn new(
        url: &str,
        account: Option<&str>,
        key_b64: &str,
        timeout: Duration,
        ca: Option<&Path>,
    ) -> Result<Self, String> {
        let (rest, https) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (rest, false),
            (_, Some(rest)) => (rest, true),
            _ => return Err(format!("endpoint must start with http:// or https://: {url}")),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        let addr = resolve(authority)?;
        let path_account = path.trim_start_matches('/');
        let account = match account {
            Some(a) => a.to_string(),
            None if !path_account.is_empty() => path_account.to_string(),
            None => return Err("no account: give --account or put it in the endpoint path".into()),
        };
        let key = STANDARD
            .decode(key_b64.trim())
            .map_err(|e| format!("--key is not valid base64: {e}"))?;
        let host = HeaderValue::from_str(authority).map_err(|e| format!("bad host {authority}: {e}"))?;
        let tls = match (https, ca) {
            (false, _) => None,
            (true, None) => return Err("an https:// endpoint needs --ca (the CA certificate to trust)".into()),
            (true, Some(ca)) => {
                let name = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
                let name = name.trim_start_matches('[').trim_end_matches(']');
                let name = ServerName::try_from(name.to_owned()).map_err(|e| format!("bad host {name}: {e}"))?;
                Some((tls_connector(ca)?, name))
            }
        };
        Ok(Self {
            addr,
            host,
            base_path: path.to_string(),
            canon_prefix: format!("/{account}"),
            account,
            key,
            timeout,
            tls,
        })
    }

    /// Absolute URL of a path below the account (used inside `$batch` bodies).
    pub fn account(&self) -> &str {
        &self.account
    }

    pub fn absolute(&self, path: &str) -> String {
        format!(
            "{}://{}{}{}",
            if self.tls.is_some() { "https" } else { "http" },
            self.host.to_str().unwrap_or("localhost"),
            self.base_path,
            path
        )
    }

    /// Builds a signed request. `path` is below the account (`/Tables`, `/t(PartitionKey='a',RowKey='b')`),
    /// optionally with a query string (already percent-encoded).
    pub fn request(
        &self,
        method: &Method,
        path: &str,
        content_type: Option<&str>,
        body: Bytes,
        extra: &[(&'static str, &str)],
    ) -> Result<Request<Full<Bytes>>, String> {
        let full_path = format!("{}{}", self.base_path, path);
        let resource_path = full_path.split('?').next().unwrap_or(&full_path);
        let date = httpdate::fmt_http_date(SystemTime::now());
        let ct = content_type.unwrap_or("");
        // Path-style: /account + /account/path, so the account appears twice.
        let resource = format!("{}{resource_path}", self.canon_prefix);
        let auth = shared_key::authorization(&self.account, &self.key, method.as_str(), ct, &date, &resource)
            .map_err(|e| e.to_string())?;
        let mut b = Request::builder()
            .method(method.clone())
            .uri(&full_path)
            .header(http::header::HOST, self.host.clone())
            .header("x-ms-date", date)
            .header("x-ms-version", VERSION)
            .header(http::header::ACCEPT, ACCEPT)
            .header("DataServiceVersion", "3.0;NetFx")
            .header("MaxDataServiceVersion", "3.0;NetFx")
            .header(http::header::AUTHORIZATION, auth);
        if let Some(ct) = content_type {
            b = b.header(http::header::CONTENT_TYPE, ct);
        }
        for (k, v) in extra {
            b = b.header(*k, *v);
        }
        b.body(Full::new(body))
            .map_err(|e| format!("building request {path}: {e}"))
    }
}

fn resolve(authority: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let with_port = if authority.contains(':') && !authority.ends_with(']') {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    with_port
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {authority}: {e}"))?
        .next()
        .ok_or_else(|| format!("cannot resolve {authority}"))
}

/// One keep-alive connection, reconnected on demand.
pub struct Conn {
    addr: SocketAddr,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    timeout: Duration,
    sender: Option<SendRequest<Full<Bytes>>>,
    /// How many times a connection was (re)opened.
    pub connects: u64,
}

impl Conn {
    pub fn new(ep: &Endpoint) -> Self {
        Self {
            addr: ep.addr,
            tls: ep.tls.clone(),
            timeout: ep.timeout,
            sender: None,
            connects: 0,
        }
    }

    async fn connect(&mut self) -> Result<SendRequest<Full<Bytes>>, String> {
        let stream = TcpStream::connect(self.addr)
            .await
            .map_err(|e| format!("connect {}: {e}", self.addr))?;
        let _ = stream.set_nodelay(true);
        let sender = match &self.tls {
            None => handshake(TokioIo::new(stream)).await?,
            Some((connector, name)) => {
                let tls = connector
                    .connect(name.clone(), stream)
                    .await
                    .map_err(|e| format!("TLS handshake: {e}"))?;
                handshake(TokioIo::new(tls)).await?
            }
        };
        self.connects += 1;
        Ok(sender)
    }

    /// Sends a request and reads the whole response, within the per-request timeout.
    /// Any transport error or timeout drops the connection (the next call reconnects).
    pub async fn send(&mut self, req: Request<Full<Bytes>>) -> Result<Resp, String> {
        let timeout = self.timeout;
        match tokio::time::timeout(timeout, self.send_inner(req)).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => {
                self.sender = None;
                Err(e)
            }
            Err(_) => {
                self.sender = None;
                Err(format!("timeout after {timeout:?}"))
            }
        }
    }

    async fn send_inner(&mut self, req: Request<Full<Bytes>>) -> Result<Resp, String> {
        let mut sender = match self.sender.take() {
            Some(s) if !s.is_closed() => s,
            _ => self.connect().await?,
        };
        sender.ready().await.map_err(|e| format!("connection: {e}"))?;
        let resp = sender.send_request(req).await.map_err(|e| format!("request: {e}"))?;
        let (parts, body) = resp.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| format!("reading body: {e}"))?
            .to_bytes();
        let close = parts
            .headers
            .get(http::header::CONNECTION)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
        if !close {
            self.sender = Some(sender);
        }
        Ok(Resp {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }
}

/// HTTP/1.1 over `io`, its connection driven by a task of its own.
async fn handshake<I>(io: I) -> Result<SendRequest<Full<Bytes>>, String>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// Percent-encodes a query-string value (everything but RFC 3986 unreserved characters).
pub fn encode_query(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3 / 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV_KEY: &str = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

    #[test]
    fn parses_path_style_endpoint() {
        let ep = Endpoint::new(
            "http://127.0.0.1:10002/devstoreaccount1",
            None,
            DEV_KEY,
            Duration::from_secs(1),
            None,
        )
        .expect("endpoint");
        assert_eq!(ep.account, "devstoreaccount1");
        assert_eq!(ep.base_path, "/devstoreaccount1");
        assert_eq!(ep.absolute("/t"), "http://127.0.0.1:10002/devstoreaccount1/t");
    }

    #[test]
    fn signs_like_the_spec_example() {
        // auth.md §2: the account appears twice in a path-style canonicalized resource.
        let ep = Endpoint::new(
            "http://127.0.0.1:10002/devstoreaccount1",
            None,
            DEV_KEY,
            Duration::from_secs(1),
            None,
        )
        .expect("endpoint");
        let req = ep
            .request(&Method::GET, "/Tables", None, Bytes::new(), &[])
            .expect("request");
        let date = req.headers()["x-ms-date"].to_str().expect("date");
        let expected = shared_key::authorization(
            "devstoreaccount1",
            &ep.key,
            "GET",
            "",
            date,
            "/devstoreaccount1/devstoreaccount1/Tables",
        )
        .expect("sign");
        assert_eq!(req.headers()["authorization"].to_str().expect("auth"), expected);
        assert_eq!(req.uri().path(), "/devstoreaccount1/Tables");
    }

    #[test]
    fn query_encoding() {
        assert_eq!(encode_query("PartitionKey eq 'p1'"), "PartitionKey%20eq%20%27p1%27");
    }
}
