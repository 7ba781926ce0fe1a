//! `tafel-bench ceiling-server`: the do-nothing reference server. It answers every
//! request of every workload with a fixed, valid-looking reply built at startup — no
//! authentication, no parsing past the request line, no storage — so the rate the
//! bench reaches against it is what this loader and this machine allow at most, and a
//! server's rate can be read as a fraction of it.
//!
//! The replies have the shape and size of real ones (the same headers a Table server
//! sends, ~1 KiB entities, 1000-entity scan pages with continuations, a multipart reply
//! with one part per operation of a `$batch`), so the loader does the same work per
//! reply as against a real server. They are not right for any one request: the bench
//! does not verify against the ceiling.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::data::{self, Shape, Values, PARTITION_SIZE};

/// Matches per query page, as Azure (and Tafel) cap them.
const PAGE: usize = 1000;
/// Partitions whose query page is built at startup; partition `p` gets page `p % PAGES`.
const PARTITION_PAGES: u64 = 16;
/// Largest data set whose scan pages are built at startup (~110 MB of replies).
pub const MAX_SCAN_ENTITIES: u64 = 2_000_000;
const ETAG: &str = "W/\"datetime'2026-11-26T05%3A18%3A46.4647037Z'\"";
const TIMESTAMP: &str = "2026-11-26T05:18:46.4647037Z";
const JSON_TYPE: &str = "application/json;odata=minimalmetadata;streaming=true;charset=utf-8";

/// Every reply, built once.
struct Replies {
    entity: Bytes,
    point_query: Bytes,
    partition_pages: Vec<Bytes>,
    /// Scan pages and the NextRowKey that leads to each one after the first.
    scan_pages: Vec<(Bytes, Option<(String, String)>)>,
    scan_next: std::collections::HashMap<String, usize>,
    /// `$batch` replies by operation count (index = count).
    batches: Vec<Bytes>,
    table_created: Bytes,
}

/// An entity as a query or read returns it (etag and Timestamp first, then the values).
fn entity_reply(shape: Shape, id: u64) -> String {
    let body = Values::new(shape, id, 0).entity_json(&data::data_pk(id), &data::rk(id));
    format!(
        "{{\"odata.etag\":{},\"Timestamp\":\"{TIMESTAMP}\",{}",
        serde_json::Value::from(ETAG),
        &body[1..]
    )
}

fn page(shape: Shape, ids: impl Iterator<Item = u64>) -> Bytes {
    let items: Vec<String> = ids.map(|id| entity_reply(shape, id)).collect();
    Bytes::from(format!(
        "{{\"odata.metadata\":\"http://127.0.0.1/devstoreaccount1/$metadata#bench\",\"value\":[{}]}}",
        items.join(",")
    ))
}

fn batch_reply(n: usize) -> Bytes {
    const B: &str = "batchresponse_6b4d2f3c-1c0e-4a52-9b8e-2f3f4c5d6e7f";
    const CS: &str = "changesetresponse_0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
    let mut s = format!("--{B}\r\nContent-Type: multipart/mixed; boundary={CS}\r\n\r\n");
    for i in 0..n {
        s.push_str(&format!(
            "--{CS}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n\
             HTTP/1.1 204 No Content\r\nContent-ID: {i}\r\nX-Content-Type-Options: nosniff\r\n\
             Cache-Control: no-cache\r\nPreference-Applied: return-no-content\r\nDataServiceVersion: 3.0;\r\n\
             Location: http://127.0.0.1/devstoreaccount1/bench(PartitionKey='b0000000000000',RowKey='{i:013}')\r\n\
             DataServiceId: http://127.0.0.1/devstoreaccount1/bench(PartitionKey='b0000000000000',RowKey='{i:013}')\r\n\
             ETag: {ETAG}\r\n\r\n"
        ));
    }
    s.push_str(&format!("--{CS}--\r\n--{B}--\r\n"));
    Bytes::from(s)
}

impl Replies {
    fn build(entities: u64, shape: Shape) -> Self {
        let one = entity_reply(shape, 0);
        let partitions = entities.div_ceil(PARTITION_SIZE).clamp(1, PARTITION_PAGES);
        let partition_pages = (0..partitions)
            .map(|p| {
                let start = p * PARTITION_SIZE;
                let ids = start..start + PARTITION_SIZE;
                page(
                    shape,
                    ids.filter(|&id| data::int32_of(id) > data::PARTITION_PREDICATE_MIN),
                )
            })
            .collect();
        let matches: Vec<u64> = (0..entities.min(MAX_SCAN_ENTITIES))
            .filter(|&id| shape.scan_matches(id))
            .collect();
        let chunks: Vec<&[u64]> = matches.chunks(PAGE).collect();
        let mut scan_pages = Vec::with_capacity(chunks.len().max(1));
        let mut scan_next = std::collections::HashMap::new();
        for (i, chunk) in chunks.iter().enumerate() {
            let next = chunks.get(i + 1).map(|c| (data::data_pk(c[0]), data::rk(c[0])));
            if let Some((_, rk)) = &next {
                scan_next.insert(rk.clone(), i + 1);
            }
            scan_pages.push((page(shape, chunk.iter().copied()), next));
        }
        if scan_pages.is_empty() {
            scan_pages.push((page(shape, std::iter::empty()), None));
        }
        Self {
            entity: Bytes::from(format!(
                "{{\"odata.metadata\":\"http://127.0.0.1/devstoreaccount1/$metadata#bench/@Element\",{}",
                &one[1..]
            )),
            point_query: page(shape, std::iter::once(0)),
            partition_pages,
            scan_pages,
            scan_next,
            batches: (0..=100).map(batch_reply).collect(),
            table_created: Bytes::from_static(
                b"{\"odata.metadata\":\"http://127.0.0.1/devstoreaccount1/$metadata#Tables/@Element\",\"TableName\":\"bench\"}",
            ),
        }
    }

    /// The reply to one request: chosen by method and the shape of the path alone.
    fn answer(&self, method: &Method, path: &str, query: &str, body: &[u8]) -> Response<Full<Bytes>> {
        let last = path.rsplit('/').next().unwrap_or("");
        let keyed = last.ends_with("')");
        match *method {
            Method::GET if keyed => reply(StatusCode::OK, Some(self.entity.clone()), true),
            Method::GET => self.query(query),
            Method::POST if last == "$batch" => {
                let n = memchr::memmem::find_iter(body, b"Content-ID:").count();
                match self.batches.get(n) {
                    Some(b) => batch(b.clone()),
                    None => reply(StatusCode::BAD_REQUEST, None, false),
                }
            }
            Method::POST if last == "Tables" => reply(StatusCode::CREATED, Some(self.table_created.clone()), false),
            Method::POST => reply(StatusCode::NO_CONTENT, None, true),
            Method::DELETE => reply(StatusCode::NO_CONTENT, None, false),
            _ => reply(StatusCode::NO_CONTENT, None, true),
        }
    }

    fn query(&self, query: &str) -> Response<Full<Bytes>> {
        if query.contains("RowKey%20eq") || query.contains("RowKey+eq") {
            return reply(StatusCode::OK, Some(self.point_query.clone()), false);
        }
        if query.contains("PartitionKey%20eq") || query.contains("PartitionKey+eq") {
            // The partition number is the digits after `'p`; the page only needs to be
            // one of a partition's size.
            let p = query
                .split("%27p")
                .nth(1)
                .and_then(|s| s.get(..7))
                .and_then(|s| s.parse::<usize>().ok())
                .unwrap_or(0);
            let page = &self.partition_pages[p % self.partition_pages.len()];
            return reply(StatusCode::OK, Some(page.clone()), false);
        }
        let index = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("NextRowKey="))
            .map_or(Some(0), |rk| self.scan_next.get(rk).copied());
        let Some((body, next)) = index.and_then(|i| self.scan_pages.get(i)) else {
            return reply(StatusCode::BAD_REQUEST, None, false);
        };
        let mut resp = reply(StatusCode::OK, Some(body.clone()), false);
        if let Some((pk, rk)) = next {
            let h = resp.headers_mut();
            for (name, value) in [
                ("x-ms-continuation-nextpartitionkey", pk),
                ("x-ms-continuation-nextrowkey", rk),
            ] {
                if let Ok(v) = HeaderValue::from_str(value) {
                    h.insert(name, v);
                }
            }
        }
        resp
    }
}

/// The headers every Table reply carries (and an ETag where an entity's would be).
fn reply(status: StatusCode, body: Option<Bytes>, etag: bool) -> Response<Full<Bytes>> {
    let mut b = Response::builder()
        .status(status)
        .header("x-ms-request-id", "0a517ad0-c449-4b94-b0d8-6e0424a2df6f")
        .header("x-ms-version", "2019-02-02")
        .header("cache-control", "no-cache")
        .header("x-content-type-options", "nosniff")
        .header("server", "Tafel-ceiling")
        .header("dataserviceversion", "3.0;");
    if etag {
        b = b.header("etag", ETAG);
    }
    if body.is_some() {
        b = b.header("content-type", JSON_TYPE);
    } else if status == StatusCode::NO_CONTENT {
        b = b.header("preference-applied", "return-no-content");
    }
    b.body(Full::new(body.unwrap_or_default()))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

fn batch(body: Bytes) -> Response<Full<Bytes>> {
    let mut r = reply(StatusCode::ACCEPTED, Some(body), false);
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("multipart/mixed; boundary=batchresponse_6b4d2f3c-1c0e-4a52-9b8e-2f3f4c5d6e7f"),
    );
    r
}

async fn handle(replies: Arc<Replies>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    // The body must be read for the connection to stay usable; only a $batch's is looked at.
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let query = parts.uri.query().unwrap_or("");
    Ok(replies.answer(&parts.method, parts.uri.path(), query, &body))
}

/// Serves on `listen` until killed; prints `listening on ADDR` once bound.
pub fn serve(listen: SocketAddr, entities: u64, shape: Shape, threads: usize) -> Result<(), String> {
    let replies = Arc::new(Replies::build(entities, shape));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    rt.block_on(async move {
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|e| format!("binding {listen}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        println!("listening on {addr}");
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let replies = replies.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| handle(replies.clone(), req));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

/// A reference server run as a child process of the bench (so it competes for the
/// cores as a real server does); killed when dropped.
pub struct Child {
    child: std::process::Child,
    pub addr: SocketAddr,
}

impl Child {
    /// Starts `tafel-bench ceiling-server` on a free loopback port.
    pub fn spawn(entities: u64, shape: Shape, threads: Option<usize>) -> Result<Self, String> {
        use std::io::BufRead as _;
        let exe = std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?;
        let mut cmd = std::process::Command::new(exe);
        cmd.args([
            "ceiling-server",
            "--listen",
            "127.0.0.1:0",
            "--entities",
            &entities.to_string(),
            "--shape",
            shape.name(),
        ]);
        if let Some(t) = threads {
            cmd.args(["--threads", &t.to_string()]);
        }
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting the ceiling server: {e}"))?;
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = std::io::BufReader::new(out).read_line(&mut line);
        }
        let addr = line.trim().strip_prefix("listening on ").and_then(|a| a.parse().ok());
        match addr {
            Some(addr) => Ok(Self { child, addr }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("the ceiling server did not start (it said {:?})", line.trim()))
            }
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(r: Response<Full<Bytes>>) -> (http::HeaderMap, Bytes) {
        let (parts, body) = r.into_parts();
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let bytes = rt.block_on(body.collect()).map(|c| c.to_bytes()).unwrap_or_default();
        (parts.headers, bytes)
    }

    /// The reference server's scan is followed to the end by the same continuations the
    /// bench sends, and returns exactly the matches of the real data set.
    #[test]
    fn scan_pages_chain_to_the_data_sets_matches() {
        let n = 30_000;
        for shape in [Shape::Typed, Shape::Strings] {
            let r = Replies::build(n, shape);
            let filter = crate::client::encode_query(&shape.scan_filter());
            let (mut matched, mut query, mut pages) = (0, format!("$filter={filter}"), 0);
            loop {
                let (headers, b) = body(r.answer(&Method::GET, "/devstoreaccount1/t()", &query, b""));
                matched += data::count_entities(&b);
                pages += 1;
                match headers.get("x-ms-continuation-nextrowkey") {
                    Some(rk) => query = format!("$filter=x&NextPartitionKey=p&NextRowKey={}", rk.to_str().unwrap()),
                    None => break,
                }
            }
            assert_eq!(matched, data::scan_expected(shape, n), "{shape:?}");
            assert_eq!(pages, data::scan_expected(shape, n).div_ceil(PAGE as u64), "{shape:?}");
        }
    }

    /// A `$batch` reply has one successful part per operation sent.
    #[test]
    fn batch_reply_has_a_part_per_operation() {
        let r = Replies::build(1000, Shape::Typed);
        let req: String = (0..37)
            .map(|i| format!("--cs\r\nContent-ID: {i}\r\n\r\nPOST x\r\n"))
            .collect();
        let resp = r.answer(&Method::POST, "/devstoreaccount1/$batch", "", req.as_bytes());
        assert_eq!(resp.status(), StatusCode::ACCEPTED);
        let (_, b) = body(resp);
        assert_eq!(memchr::memmem::find_iter(&b, b"HTTP/1.1 204").count(), 37);
    }
}
