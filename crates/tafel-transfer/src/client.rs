//! A Table REST client for the data tools: Shared Key or SAS, over HTTP or HTTPS,
//! to any Table endpoint (Azure, Azurite, Cosmos DB's Table API, Tafel).

use std::fmt::Write as _;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::Value;

use crate::endpoint::{Credential, Endpoint};
use crate::TransferError;

const VERSION: &str = "2019-02-02";
const FULL_METADATA: &str = "application/json;odata=fullmetadata";
const NO_METADATA: &str = "application/json;odata=nometadata";
/// A request that takes longer failed (and may be retried).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// What a query value or key may keep unescaped.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// A key inside `(PartitionKey='…')`: `'` doubled, then percent-encoded.
pub fn key_literal(k: &str) -> String {
    utf8_percent_encode(&k.replace('\'', "''"), COMPONENT).to_string()
}

/// Where the next page of a query starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Continuation {
    pub partition_key: String,
    pub row_key: String,
}

/// One write of a batch: the verb says its kind (POST insert, PUT insert-or-replace,
/// MERGE insert-or-merge); `body` is the entity in the wire form.
pub struct BatchOp<'a> {
    pub method: &'static str,
    pub partition_key: &'a str,
    pub row_key: &'a str,
    pub body: &'a str,
}

pub struct TableClient {
    http: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    endpoint: Endpoint,
}

impl TableClient {
    pub fn new(endpoint: Endpoint) -> Result<Self, TransferError> {
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()
            .map_err(|e| TransferError::Usage(format!("loading the system's root certificates: {e}")))?
            .https_or_http()
            .enable_http1()
            .build();
        let http = Client::builder(hyper_util::rt::TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Ok(TableClient { http, endpoint })
    }

    pub fn account(&self) -> &str {
        &self.endpoint.account
    }

    /// One request below the endpoint's root; `path` is percent-encoded as it is sent.
    async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        headers: &[(&'static str, String)],
        body: Bytes,
    ) -> Result<(HeaderMap, Bytes), TransferError> {
        let mut parts: Vec<String> = query
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k}={}", utf8_percent_encode(v, COMPONENT)))
            .collect();
        if let Credential::Sas(sas) = &self.endpoint.credential {
            parts.push(sas.clone());
        }
        let mut url = format!("{}{path}", self.endpoint.base);
        if !parts.is_empty() {
            url.push('?');
            url.push_str(&parts.join("&"));
        }
        let date = httpdate::fmt_http_date(std::time::SystemTime::now());
        let mut req = Request::builder().method(method.clone()).uri(&url);
        let content_type = headers
            .iter()
            .find(|(k, _)| *k == "content-type")
            .map(|(_, v)| v.as_str());
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        req = req
            .header("x-ms-date", &date)
            .header("x-ms-version", VERSION)
            .header("dataserviceversion", "3.0;NetFx")
            .header("maxdataserviceversion", "3.0;NetFx");
        if let Credential::Key(key) = &self.endpoint.credential {
            let comp = query.iter().find(|(k, _)| *k == "comp").map(|(_, v)| *v);
            let mut resource = format!("/{}{}{path}", self.endpoint.account, self.endpoint.path_prefix);
            if let Some(comp) = comp {
                resource.push_str("?comp=");
                resource.push_str(comp);
            }
            let auth = crate::shared_key::authorization(
                &self.endpoint.account,
                key,
                method.as_str(),
                content_type.unwrap_or(""),
                &date,
                &resource,
            )
            .map_err(|e| TransferError::Usage(e.to_string()))?;
            req = req.header("authorization", auth);
        }
        let req = req
            .body(Full::new(body))
            .map_err(|e| TransferError::Usage(format!("a request to {url} cannot be built: {e}")))?;
        let sent = tokio::time::timeout(REQUEST_TIMEOUT, async {
            let resp = self.http.request(req).await?;
            let (parts, body) = resp.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((parts, body))
        })
        .await;
        let (parts, body) = match sent {
            Err(_) => {
                return Err(TransferError::Transient(format!(
                    "{method} {path}: no answer in {REQUEST_TIMEOUT:?}"
                )))
            }
            Ok(Err(e)) => return Err(TransferError::Transient(format!("{method} {path}: {e}"))),
            Ok(Ok(r)) => r,
        };
        if !parts.status.is_success() {
            return Err(service_error(parts.status, &parts.headers, &body));
        }
        Ok((parts.headers, body))
    }

    /// One page of a table's entities as the service sent it (full metadata, so
    /// every type is named), and where the next page starts.
    pub async fn query_page(
        &self,
        table: &str,
        filter: Option<&str>,
        select: Option<&str>,
        next: Option<&Continuation>,
    ) -> Result<(Bytes, Option<Continuation>), TransferError> {
        let mut query = vec![("$filter", filter.unwrap_or("")), ("$select", select.unwrap_or(""))];
        if let Some(n) = next {
            query.push(("NextPartitionKey", &n.partition_key));
            query.push(("NextRowKey", &n.row_key));
        }
        let path = format!("/{table}()");
        let accept = [("accept", FULL_METADATA.to_owned())];
        let (headers, body) = self.send(Method::GET, &path, &query, &accept, Bytes::new()).await?;
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let next = header("x-ms-continuation-nextpartitionkey").map(|pk| Continuation {
            partition_key: pk,
            row_key: header("x-ms-continuation-nextrowkey").unwrap_or_default(),
        });
        Ok((body, next))
    }

    /// Every table of the account, in the service's order.
    pub async fn list_tables(&self) -> Result<Vec<String>, TransferError> {
        let mut names = Vec::new();
        let mut next = String::new();
        loop {
            let query = [("NextTableName", next.as_str())];
            let accept = [("accept", NO_METADATA.to_owned())];
            let (headers, body) = self.send(Method::GET, "/Tables", &query, &accept, Bytes::new()).await?;
            let page: Value =
                serde_json::from_slice(&body).map_err(|e| TransferError::Protocol(format!("listing tables: {e}")))?;
            for t in page["value"].as_array().into_iter().flatten() {
                if let Some(name) = t["TableName"].as_str() {
                    names.push(name.to_owned());
                }
            }
            match headers
                .get("x-ms-continuation-nexttablename")
                .and_then(|v| v.to_str().ok())
            {
                Some(n) if !n.is_empty() => next = n.to_owned(),
                _ => return Ok(names),
            }
        }
    }

    /// Whether the service says `table` does not exist (TableNotFound), asked by
    /// reading one key of it: what a write-only SAS may not read is not called missing.
    pub async fn table_missing(&self, table: &str) -> Result<bool, TransferError> {
        let query = [("$top", "1"), ("$select", "PartitionKey")];
        let accept = [("accept", NO_METADATA.to_owned())];
        match self
            .send(Method::GET, &format!("/{table}()"), &query, &accept, Bytes::new())
            .await
        {
            Err(TransferError::Service { code, .. }) if code == "TableNotFound" => Ok(true),
            Ok(_) | Err(TransferError::Service { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Creates `table`; `false` when it existed already.
    pub async fn create_table(&self, table: &str) -> Result<bool, TransferError> {
        let body = Bytes::from(serde_json::json!({ "TableName": table }).to_string());
        let headers = [
            ("content-type", "application/json".to_owned()),
            ("accept", NO_METADATA.to_owned()),
            ("prefer", "return-no-content".to_owned()),
        ];
        match self.send(Method::POST, "/Tables", &[], &headers, body).await {
            Ok(_) => Ok(true),
            Err(TransferError::Service { code, .. }) if code == "TableAlreadyExists" => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// One entity as the service has it (full metadata), or `None`.
    pub async fn get_entity(&self, table: &str, pk: &str, rk: &str) -> Result<Option<Value>, TransferError> {
        let accept = [("accept", FULL_METADATA.to_owned())];
        match self
            .send(Method::GET, &entity_path(table, pk, rk), &[], &accept, Bytes::new())
            .await
        {
            Ok((_, body)) => serde_json::from_slice(&body)
                .map(Some)
                .map_err(|e| TransferError::Protocol(format!("reading an entity: {e}"))),
            Err(TransferError::Service { status: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// One page of the account's change feed (`GET /$changes`, a Tafel extension):
    /// its headers (positions) and its NDJSON body.
    pub async fn changes(&self, query: &[(&str, &str)]) -> Result<(HeaderMap, Bytes), TransferError> {
        let accept = [("accept", "application/x-ndjson".to_owned())];
        self.send(Method::GET, "/$changes", query, &accept, Bytes::new()).await
    }

    /// Deletes an entity whatever its ETag; `false` when it was not there.
    pub async fn delete_entity(&self, table: &str, pk: &str, rk: &str) -> Result<bool, TransferError> {
        let headers = [("if-match", "*".to_owned()), ("accept", NO_METADATA.to_owned())];
        match self
            .send(Method::DELETE, &entity_path(table, pk, rk), &[], &headers, Bytes::new())
            .await
        {
            Ok(_) => Ok(true),
            Err(TransferError::Service { status: 404, .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Deletes `table`; `false` when it was not there.
    pub async fn delete_table(&self, table: &str) -> Result<bool, TransferError> {
        let headers = [("accept", NO_METADATA.to_owned())];
        let path = format!("/Tables('{}')", key_literal(table));
        match self.send(Method::DELETE, &path, &[], &headers, Bytes::new()).await {
            Ok(_) => Ok(true),
            Err(TransferError::Service { status: 404, .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// One changeset, atomic: every write applies or none does. A refusal names
    /// the operation that failed (`BatchRefused::index`).
    pub async fn batch(&self, table: &str, ops: &[BatchOp<'_>]) -> Result<(), TransferError> {
        let boundary = format!("batch_{:016x}", fastrand::u64(..));
        let changeset = format!("changeset_{:016x}", fastrand::u64(..));
        // One buffer, sized once: the entity bodies are most of it.
        let size = ops.iter().map(|op| op.body.len() + 400).sum::<usize>() + 200;
        let mut body = String::with_capacity(size);
        // Writing into a String cannot fail.
        let _ = write!(
            body,
            "--{boundary}\r\nContent-Type: multipart/mixed; boundary={changeset}\r\n\r\n"
        );
        for (i, op) in ops.iter().enumerate() {
            let _ = write!(
                body,
                "--{changeset}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n\
                 {} {}",
                op.method, self.endpoint.base
            );
            match op.method {
                "POST" => {
                    let _ = write!(body, "/{table}");
                }
                _ => body.push_str(&entity_path(table, op.partition_key, op.row_key)),
            }
            let _ = write!(
                body,
                " HTTP/1.1\r\nContent-ID: {}\r\nAccept: {NO_METADATA}\r\nPrefer: return-no-content\r\n\
                 Content-Type: application/json\r\n\r\n",
                i + 1
            );
            body.push_str(op.body);
            body.push_str("\r\n");
        }
        let _ = write!(body, "--{changeset}--\r\n--{boundary}--\r\n");
        let headers = [
            ("content-type", format!("multipart/mixed; boundary={boundary}")),
            ("accept", NO_METADATA.to_owned()),
        ];
        let (_, answer) = self
            .send(Method::POST, "/$batch", &[], &headers, Bytes::from(body))
            .await?;
        batch_outcome(&answer)
    }
}

pub fn entity_path(table: &str, pk: &str, rk: &str) -> String {
    format!(
        "/{table}(PartitionKey='{}',RowKey='{}')",
        key_literal(pk),
        key_literal(rk)
    )
}

/// Azure's error from a response: its code and message (JSON or XML body).
fn service_error(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> TransferError {
    let mut code = headers
        .get("x-ms-error-code")
        .and_then(|v: &HeaderValue| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let message;
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        if let Some(c) = v["odata.error"]["code"].as_str() {
            code = c.to_owned();
        }
        message = v["odata.error"]["message"]["value"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
    } else {
        let text = String::from_utf8_lossy(body);
        let between = |open: &str, close: &str| {
            let start = text.find(open)? + open.len();
            Some(text[start..].split(close).next()?.to_owned())
        };
        code = between("<Code>", "</Code>").unwrap_or(code);
        message = between("<Message>", "</Message>").unwrap_or_default();
    }
    let message = message.lines().next().unwrap_or_default().to_owned();
    if status == StatusCode::SERVICE_UNAVAILABLE
        || status == StatusCode::INTERNAL_SERVER_ERROR
        || status.as_u16() == 429
    {
        return TransferError::Transient(format!("{} {code}: {message}", status.as_u16()));
    }
    TransferError::Service {
        status: status.as_u16(),
        code,
        message,
        index: None,
    }
}

/// A changeset's answer: all of it applied, or the one failing operation's error.
fn batch_outcome(answer: &[u8]) -> Result<(), TransferError> {
    // A changeset answers with its first failure, or with every success: the first
    // status line decides, and only a failure's part is read as text.
    let Some(at) = answer.windows(9).position(|w| w == b"HTTP/1.1 ") else {
        return Err(TransferError::Protocol(
            "a batch answered with no operation response".into(),
        ));
    };
    if answer.get(at + 9) == Some(&b'2') {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&answer[at..]);
    let status: u16 = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
    let body = body.split("\r\n--").next().unwrap_or(body);
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    match service_error(status, &HeaderMap::new(), body.as_bytes()) {
        TransferError::Service {
            status, code, message, ..
        } => {
            // Azure prefixes the message with the failing operation's index ("2:…").
            let (index, message) = match message.split_once(':') {
                Some((i, rest)) if i.bytes().all(|b| b.is_ascii_digit()) && !i.is_empty() => {
                    (i.parse::<usize>().ok(), rest.to_owned())
                }
                _ => (None, message),
            };
            Err(TransferError::Service {
                status,
                code,
                message,
                index,
            })
        }
        other => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_changeset_names_its_operation() {
        let answer = "--batchresponse_1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_2\r\n\r\n\
            --changesetresponse_2\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n\
            HTTP/1.1 409 Conflict\r\nContent-Type: application/json;odata=nometadata\r\n\r\n\
            {\"odata.error\":{\"code\":\"EntityAlreadyExists\",\"message\":{\"lang\":\"en-US\",\"value\":\"1:The specified entity already exists.\\nRequestId:x\"}}}\r\n\
            --changesetresponse_2--\r\n--batchresponse_1--\r\n";
        match batch_outcome(answer.as_bytes()) {
            Err(TransferError::Service {
                status,
                code,
                index,
                message,
            }) => {
                assert_eq!((status, code.as_str(), index), (409, "EntityAlreadyExists", Some(1)));
                assert_eq!(message, "The specified entity already exists.");
            }
            other => panic!("{other:?}"),
        }
        let ok =
            "--b\r\n--c\r\nContent-Type: application/http\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n\r\n--c--\r\n--b--";
        assert!(batch_outcome(ok.as_bytes()).is_ok());
    }

    #[test]
    fn keys_are_quoted_and_escaped_for_the_path() {
        assert_eq!(
            entity_path("t", "a'b", "c d/é"),
            "/t(PartitionKey='a%27%27b',RowKey='c%20d%2F%C3%A9')"
        );
    }
}
