//! Entity group transactions (`POST /$batch`, batch.md): parse the multipart
//! body, check the changeset rules, run every operation as one atomic service
//! write, and answer per operation — or with the single failing operation.

use std::collections::HashSet;
use std::hash::BuildHasher;

use http::{Method, StatusCode};
use tafel_service::model::{etag_for, Entity};
use tafel_service::{Error, ErrorCode, Result, Service, WriteKind, WriteOp};

use super::entities::{decode_write, entity_response_body, get, write_kind};
use super::prefer;
use crate::batch::{
    new_boundaries, parse_batch_shared, response_content_type, write_changeset_response, write_query_response,
    BatchKind, BatchRequest, SubRequest, SubResponse,
};
use crate::error_body;
use crate::json::{content_type, negotiate, MetadataLevel};
use crate::operation::Operation;
use crate::request::{parse_query, Context, Request, Response};
use crate::resource::{entity_url, Resource};
use crate::route::{Decided, Parts, Route};

/// Azure's limit of operations in one changeset.
pub(crate) const MAX_OPERATIONS: usize = 100;

/// One changeset operation, decoded.
struct Op {
    write: WriteOp,
    table: String,
    content_id: String,
    level: MetadataLevel,
    prefer: Option<bool>,
}

impl Op {
    /// Whether the response part echoes the written entity.
    fn echoes(&self) -> bool {
        self.write.kind == WriteKind::Insert && self.prefer != Some(false)
    }

    /// The write to hand to the service. Its properties move there unless the
    /// response echoes them; the response needs only the keys otherwise.
    fn take_write(&mut self) -> WriteOp {
        if self.echoes() {
            return self.write.clone();
        }
        let e = &mut self.write.entity;
        WriteOp {
            kind: self.write.kind,
            if_match: self.write.if_match.clone(),
            limit: self.write.limit,
            entity: Entity {
                partition_key: e.partition_key.clone(),
                row_key: e.row_key.clone(),
                timestamp: e.timestamp,
                properties: std::mem::take(&mut e.properties),
            },
        }
    }
}

/// The sub-request as a protocol request: account stripped from its path, its
/// verb as sent (its [`Route`] follows `X-HTTP-Method`, as a top-level request's
/// does). Its headers are left empty for the caller to move or copy in.
fn sub_request(cx: &Context, sub: &SubRequest) -> Result<Request> {
    let target = sub.path_and_query();
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let path = match path
        .strip_prefix('/')
        .and_then(|p| p.strip_prefix(cx.caller.account.as_str()))
    {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
        _ => path,
    };
    let method = Method::from_bytes(sub.method.as_bytes())
        .map_err(|_| Error::invalid_input("The batch operation's verb is not valid."))?;
    Ok(Request {
        method,
        path: path.to_owned(),
        query: parse_query(query),
        headers: http::HeaderMap::new(),
        body: sub.body.clone(),
    })
}

/// The metadata level an error part about `sub` is written in.
fn error_level(headers: &http::HeaderMap) -> MetadataLevel {
    negotiate(None, headers.get("accept").and_then(|v| v.to_str().ok())).unwrap_or(MetadataLevel::Minimal)
}

/// Why a changeset failed: the operation at fault, and how its error part is written.
struct Failed {
    index: usize,
    error: Error,
    content_id: String,
    level: MetadataLevel,
}

impl Failed {
    /// A failure of operation `index`, still as sent.
    fn of(subs: &[SubRequest], index: usize, error: Error) -> Failed {
        Failed::of_sub(subs.get(index), index, error)
    }

    /// A failure of operation `index`, `sub` as sent (if there is one).
    fn of_sub(sub: Option<&SubRequest>, index: usize, error: Error) -> Failed {
        Failed {
            index,
            error,
            content_id: sub
                .and_then(|s| s.content_id.clone())
                .unwrap_or_else(|| (index + 1).to_string()),
            level: sub.map_or(MetadataLevel::Minimal, |s| error_level(&s.headers)),
        }
    }

    /// A failure of the decoded operation `op`, number `index`.
    fn of_op(op: &Op, index: usize, error: Error) -> Failed {
        Failed {
            index,
            error,
            content_id: op.content_id.clone(),
            level: op.level,
        }
    }

    fn part(&self, cx: &Context) -> SubResponse {
        error_part(cx, &self.error, self.index, &self.content_id, self.level)
    }
}

/// Decodes operation `index`, moving its headers and Content-ID out of `sub`
/// (they are not copied per operation) once it decoded.
fn decode_op(cx: &Context, index: usize, sub: &mut SubRequest) -> std::result::Result<Op, Failed> {
    let fail = |sub: &SubRequest, error: Error| Failed::of_sub(Some(sub), index, error);
    let mut req = match sub_request(cx, sub) {
        Ok(req) => req,
        Err(e) => return Err(fail(sub, e)),
    };
    req.headers = std::mem::take(&mut sub.headers);
    let decoded = (|| {
        // Classified as a top-level request is: the same verbs, conditions and
        // metadata levels name the same writes.
        let route = Route::of(&req.method, &req.path, &req.query, &req.headers);
        route.method()?;
        let Parts {
            operation,
            resource,
            level,
            if_match,
            ..
        } = route.into_parts();
        let level = level?;
        let Some((table, write)) = decode_write(cx, &req, write_kind(operation), if_match, resource?)? else {
            return Err(Error::invalid_input(
                "A changeset may only contain entity insert, update, merge and delete operations.",
            ));
        };
        Ok((level, table, write))
    })();
    match decoded {
        Ok((level, table, write)) => Ok(Op {
            write,
            table,
            content_id: sub.content_id.take().unwrap_or_else(|| (index + 1).to_string()),
            level,
            prefer: prefer(&req),
        }),
        Err(e) => {
            // Its error part still reads its headers.
            sub.headers = std::mem::take(&mut req.headers);
            Err(fail(sub, e))
        }
    }
}

/// The error part of a failed changeset.
fn error_part(cx: &Context, error: &Error, index: usize, content_id: &str, level: MetadataLevel) -> SubResponse {
    let cosmos;
    let error = match cx.dialect {
        crate::cosmos::Dialect::Cosmos => {
            cosmos = crate::cosmos::batch_error(error);
            &cosmos
        }
        crate::cosmos::Dialect::Storage => error,
    };
    let (ct, body) = error_body::json(error, level, &cx.request_id, Some(index));
    SubResponse::new(error.status())
        .header("Content-ID", content_id.to_owned())
        .header("X-Content-Type-Options", "nosniff")
        .header("Cache-Control", "no-cache")
        .header("DataServiceVersion", "3.0;")
        .header("Content-Type", ct)
        .body(body)
}

/// Checks the changeset rules and decodes every operation.
fn decode_changeset(cx: &Context, subs: &mut [SubRequest]) -> std::result::Result<Vec<Op>, Failed> {
    if subs.is_empty() {
        return Err(Failed::of(
            subs,
            0,
            Error::invalid_input("The changeset contains no operations."),
        ));
    }
    if subs.len() > MAX_OPERATIONS {
        let e = Error::invalid_input("The batch request operation exceeds the maximum 100 changes per change set.");
        return Err(Failed::of(subs, 0, e));
    }
    let mut ops: Vec<Op> = Vec::with_capacity(subs.len());
    // Row keys by hash, so that no key is copied to find duplicates; a hash
    // seen before is checked against the keys themselves.
    let hasher = std::collections::hash_map::RandomState::new();
    let mut seen = HashSet::with_capacity(subs.len());
    for (i, sub) in subs.iter_mut().enumerate() {
        let op = decode_op(cx, i, sub)?;
        if let Some(first) = ops.first() {
            if !first.table.eq_ignore_ascii_case(&op.table) {
                let e = Error::invalid_input("All operations of a changeset must target the same table.");
                return Err(Failed::of_op(&op, i, e));
            }
            if first.write.entity.partition_key != op.write.entity.partition_key {
                let e = Error::new(ErrorCode::CommandsInBatchActOnDifferentPartitions);
                return Err(Failed::of_op(&op, i, e));
            }
        }
        let rk = &op.write.entity.row_key;
        if !seen.insert(hasher.hash_one(rk)) && ops.iter().any(|o| &o.write.entity.row_key == rk) {
            return Err(Failed::of_op(&op, i, Error::new(ErrorCode::InvalidDuplicateRow)));
        }
        ops.push(op);
    }
    Ok(ops)
}

/// The response part of a committed operation; takes the op so an inserted
/// entity echoed back is not copied. `etag` is the batch's: one commit, one time.
fn success_part(cx: &Context, op: Op, ts: tafel_service::model::DateTime, etag: &str) -> SubResponse {
    let mut part = SubResponse::new(204)
        .header("Content-ID", op.content_id)
        .header("X-Content-Type-Options", "nosniff")
        .header("Cache-Control", "no-cache")
        .header("DataServiceVersion", "3.0;");
    let e = &op.write.entity;
    match op.write.kind {
        WriteKind::Insert => {
            let location = entity_url(&cx.base_url, &op.table, &e.partition_key, &e.row_key);
            if op.prefer == Some(false) {
                part = part
                    .header("Preference-Applied", "return-no-content")
                    .header("Location", location.clone())
                    .header("DataServiceId", location)
                    .header("ETag", etag.to_owned());
            } else {
                let mut entity = op.write.entity;
                entity.timestamp = Some(ts);
                part.status = 201;
                if op.prefer == Some(true) {
                    part = part.header("Preference-Applied", "return-content");
                }
                part = part
                    .header("Content-Type", content_type(op.level))
                    .header("Location", location)
                    .header("ETag", etag.to_owned())
                    .body(entity_response_body(cx, op.level, &op.table, &entity, None));
            }
        }
        WriteKind::Replace | WriteKind::Merge => part = part.header("ETag", etag.to_owned()),
        WriteKind::Delete => {}
    }
    part
}

async fn changeset(svc: &Service, cx: &Context, subs: &mut [SubRequest]) -> Vec<SubResponse> {
    let mut ops = match decode_changeset(cx, subs) {
        Ok(ops) => ops,
        Err(f) => return vec![f.part(cx)],
    };
    let table = ops[0].table.clone();
    let writes = ops.iter_mut().map(Op::take_write).collect();
    match svc.write(&cx.caller, &table, writes).await {
        Ok(ts) => {
            let etag = etag_for(ts);
            ops.into_iter().map(|op| success_part(cx, op, ts, &etag)).collect()
        }
        Err(f) => {
            let failed = match ops.get(f.index) {
                Some(op) => Failed::of_op(op, f.index, f.error),
                None => Failed::of(subs, f.index, f.error),
            };
            vec![failed.part(cx)]
        }
    }
}

/// The lone GET of a query batch, classified as a top-level request is: its
/// request, table, keys and metadata level (owned, so that nothing the route
/// decided waits beside the read).
fn lone_get(cx: &Context, sub: &SubRequest) -> Result<(Request, String, (String, String), MetadataLevel)> {
    let mut req = sub_request(cx, sub)?;
    req.headers = sub.headers.clone();
    let route = Route::of(&req.method, &req.path, &req.query, &req.headers);
    let method = route.method()?;
    let Parts {
        operation,
        resource,
        level,
        ..
    } = route.into_parts();
    let (table, keys) = match (operation, resource?) {
        (
            Operation::QueryEntity,
            Resource::Entity {
                table,
                partition_key,
                row_key,
            },
        ) if method == Method::GET => (table.into_owned(), (partition_key.into_owned(), row_key.into_owned())),
        _ => {
            return Err(Error::invalid_input(
                "A batch query must be a single GET of one entity.",
            ))
        }
    };
    Ok((req, table, keys, level?))
}

/// A batch holding one lone GET of an entity.
async fn query(svc: &Service, cx: &Context, sub: &SubRequest) -> SubResponse {
    let result = match lone_get(cx, sub) {
        Ok((req, table, (pk, rk), level)) => get(svc, cx, &req, &table, (&pk, &rk), level).await,
        Err(e) => Err(e),
    };
    let content_id = sub.content_id.clone().unwrap_or_else(|| "1".to_owned());
    match result {
        Ok(resp) => {
            let mut part = SubResponse::new(resp.status.as_u16()).header("Content-ID", content_id.clone());
            for name in ["content-type", "etag"] {
                if let Some(v) = resp.headers.get(name).and_then(|v| v.to_str().ok()) {
                    part = part.header(if name == "etag" { "ETag" } else { "Content-Type" }, v.to_owned());
                }
            }
            part.body(resp.body)
        }
        Err(e) => {
            let level = negotiate(None, sub.header_str("accept")).unwrap_or(MetadataLevel::Minimal);
            error_part(cx, &e, 0, &content_id, level)
        }
    }
}

/// Runs a `$batch`; `parsed` is its body as the route read it (`None`: not read
/// there, and parsed here).
pub async fn batch(
    svc: &Service,
    cx: &Context,
    req: &Request,
    level: Decided<MetadataLevel>,
    parsed: Option<Box<Result<BatchRequest>>>,
) -> Result<Response> {
    // The answer is multipart/mixed whatever the outer Accept asks; each part follows its
    // own sub-request's Accept. The legacy Node.js SDK (azure-storage) sends its default
    // `Accept: application/atom+xml,application/xml` on $batch, which Azure answers.
    match level {
        Err(e) if e.code == ErrorCode::AtomFormatNotSupported => {}
        level => {
            level?;
        }
    }
    let ct = req
        .header("content-type")
        .ok_or_else(|| Error::invalid_input("A batch request needs a multipart/mixed Content-Type."))?;
    let mut parsed = match parsed {
        Some(parsed) => (*parsed)?,
        None => parse_batch_shared(ct, &req.body)?,
    };
    let (bb, cb) = new_boundaries();
    let body = match parsed.kind {
        BatchKind::Changeset => write_changeset_response(&bb, &cb, &changeset(svc, cx, &mut parsed.operations).await),
        BatchKind::Query => match parsed.operations.first() {
            Some(sub) => write_query_response(&bb, &query(svc, cx, sub).await),
            None => return Err(Error::invalid_input("The batch contains no operation.")),
        },
    };
    let mut resp = Response::new(StatusCode::ACCEPTED);
    resp.set(crate::names::CONTENT_TYPE, &response_content_type(&bb))?;
    resp.body = body.into();
    Ok(resp)
}
