//! Entity group transactions (`POST /$batch`, batch.md): parse the multipart
//! body, check the changeset rules, run every operation as one atomic service
//! write, and answer per operation — or with the single failing operation.

use std::collections::HashSet;

use http::{Method, StatusCode};
use tafel_service::model::{etag_for, Entity};
use tafel_service::{Error, ErrorCode, Result, Service, WriteKind, WriteOp};

use super::entities::{decode_write, entity_response_body, get};
use super::{metadata_level, prefer};
use crate::batch::{
    new_boundaries, parse_batch, response_content_type, write_changeset_response, write_query_response, BatchKind,
    SubRequest, SubResponse,
};
use crate::error_body;
use crate::json::{content_type, negotiate, MetadataLevel};
use crate::request::{effective_method, parse_query, Context, Request, Response};
use crate::resource::{self, entity_path, Resource};

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
            entity: Entity {
                partition_key: e.partition_key.clone(),
                row_key: e.row_key.clone(),
                timestamp: e.timestamp,
                properties: std::mem::take(&mut e.properties),
            },
        }
    }
}

/// The sub-request as a protocol request: account stripped from its path.
fn sub_request(cx: &Context, sub: &SubRequest) -> Result<Request> {
    let target = sub.path_and_query();
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let account_prefix = format!("/{}", cx.caller.account);
    let path = match path.strip_prefix(&account_prefix) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
        _ => path,
    };
    let method = Method::from_bytes(sub.method.as_bytes())
        .map_err(|_| Error::invalid_input("The batch operation's verb is not valid."))?;
    let method = effective_method(&method, &sub.headers)?;
    Ok(Request {
        method,
        path: path.to_owned(),
        query: parse_query(query),
        headers: sub.headers.clone(),
        body: sub.body.clone(),
    })
}

fn decode_op(cx: &Context, index: usize, sub: &SubRequest) -> Result<Op> {
    let req = sub_request(cx, sub)?;
    let level = negotiate(None, req.header("accept"))?;
    let content_id = sub.content_id.clone().unwrap_or_else(|| (index + 1).to_string());
    let Some((table, write)) = decode_write(&req, resource::parse(&req.path)?)? else {
        return Err(Error::invalid_input(
            "A changeset may only contain entity insert, update, merge and delete operations.",
        ));
    };
    Ok(Op {
        write,
        table,
        content_id,
        level,
        prefer: prefer(&req),
    })
}

/// The error part of a failed changeset.
fn error_part(cx: &Context, error: &Error, index: usize, content_id: &str, level: MetadataLevel) -> SubResponse {
    let (ct, body) = error_body::json(error, level, &cx.request_id, Some(index));
    SubResponse::new(error.status())
        .header("Content-ID", content_id)
        .header("X-Content-Type-Options", "nosniff")
        .header("Cache-Control", "no-cache")
        .header("DataServiceVersion", "3.0;")
        .header("Content-Type", ct)
        .body(body)
}

/// Checks the changeset rules and decodes every operation; the error carries
/// the index of the operation at fault.
fn decode_changeset(cx: &Context, subs: &[SubRequest]) -> std::result::Result<Vec<Op>, (usize, Error)> {
    if subs.is_empty() {
        return Err((0, Error::invalid_input("The changeset contains no operations.")));
    }
    if subs.len() > MAX_OPERATIONS {
        return Err((
            0,
            Error::invalid_input("The batch request operation exceeds the maximum 100 changes per change set."),
        ));
    }
    let mut ops: Vec<Op> = Vec::with_capacity(subs.len());
    let mut seen = HashSet::with_capacity(subs.len());
    for (i, sub) in subs.iter().enumerate() {
        let op = decode_op(cx, i, sub).map_err(|e| (i, e))?;
        if let Some(first) = ops.first() {
            if !first.table.eq_ignore_ascii_case(&op.table) {
                return Err((
                    i,
                    Error::invalid_input("All operations of a changeset must target the same table."),
                ));
            }
            if first.write.entity.partition_key != op.write.entity.partition_key {
                return Err((i, Error::new(ErrorCode::CommandsInBatchActOnDifferentPartitions)));
            }
        }
        if !seen.insert(op.write.entity.row_key.clone()) {
            return Err((i, Error::new(ErrorCode::InvalidDuplicateRow)));
        }
        ops.push(op);
    }
    Ok(ops)
}

/// The response part of a committed operation; takes the op so an inserted
/// entity echoed back is not copied.
fn success_part(cx: &Context, op: Op, ts: tafel_service::model::DateTime) -> SubResponse {
    let mut part = SubResponse::new(204)
        .header("Content-ID", &op.content_id)
        .header("X-Content-Type-Options", "nosniff")
        .header("Cache-Control", "no-cache")
        .header("DataServiceVersion", "3.0;");
    let e = &op.write.entity;
    match op.write.kind {
        WriteKind::Insert => {
            let location = format!(
                "{}/{}",
                cx.base_url,
                entity_path(&op.table, &e.partition_key, &e.row_key)
            );
            if op.prefer == Some(false) {
                part = part
                    .header("Preference-Applied", "return-no-content")
                    .header("Location", &location)
                    .header("DataServiceId", &location)
                    .header("ETag", etag_for(ts));
            } else {
                let mut entity = op.write.entity;
                entity.timestamp = Some(ts);
                part.status = 201;
                if op.prefer == Some(true) {
                    part = part.header("Preference-Applied", "return-content");
                }
                part = part
                    .header("Content-Type", content_type(op.level))
                    .header("Location", &location)
                    .header("ETag", etag_for(ts))
                    .body(entity_response_body(cx, op.level, &op.table, &entity, None));
            }
        }
        WriteKind::Replace | WriteKind::Merge => part = part.header("ETag", etag_for(ts)),
        WriteKind::Delete => {}
    }
    part
}

async fn changeset(svc: &Service, cx: &Context, subs: &[SubRequest]) -> Vec<SubResponse> {
    let level_of = |i: usize| {
        subs.get(i)
            .and_then(|s| negotiate(None, s.header_str("accept")).ok())
            .unwrap_or(MetadataLevel::Minimal)
    };
    let content_id_of = |i: usize| {
        subs.get(i)
            .and_then(|s| s.content_id.clone())
            .unwrap_or_else(|| (i + 1).to_string())
    };
    let mut ops = match decode_changeset(cx, subs) {
        Ok(ops) => ops,
        Err((i, e)) => return vec![error_part(cx, &e, i, &content_id_of(i), level_of(i))],
    };
    let table = ops[0].table.clone();
    let writes = ops.iter_mut().map(Op::take_write).collect();
    match svc.write(&cx.caller, &table, writes).await {
        Ok(ts) => ops.into_iter().map(|op| success_part(cx, op, ts)).collect(),
        Err(f) => vec![error_part(
            cx,
            &f.error,
            f.index,
            &content_id_of(f.index),
            level_of(f.index),
        )],
    }
}

/// A batch holding one lone GET of an entity.
async fn query(svc: &Service, cx: &Context, sub: &SubRequest) -> SubResponse {
    let result = async {
        let req = sub_request(cx, sub)?;
        match resource::parse(&req.path)? {
            Resource::Entity {
                table,
                partition_key,
                row_key,
            } if req.method == Method::GET => get(svc, cx, &req, &table, (&partition_key, &row_key)).await,
            _ => Err(Error::invalid_input(
                "A batch query must be a single GET of one entity.",
            )),
        }
    }
    .await;
    let content_id = sub.content_id.clone().unwrap_or_else(|| "1".to_owned());
    match result {
        Ok(resp) => {
            let mut part = SubResponse::new(resp.status.as_u16()).header("Content-ID", content_id);
            for name in ["content-type", "etag"] {
                if let Some(v) = resp.headers.get(name).and_then(|v| v.to_str().ok()) {
                    part = part.header(if name == "etag" { "ETag" } else { "Content-Type" }, v);
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

pub async fn batch(svc: &Service, cx: &Context, req: &Request) -> Result<Response> {
    // The answer is multipart/mixed whatever the outer Accept asks; each part follows its
    // own sub-request's Accept. The legacy Node.js SDK (azure-storage) sends its default
    // `Accept: application/atom+xml,application/xml` on $batch, which Azure answers.
    match metadata_level(req) {
        Err(e) if e.code == ErrorCode::AtomFormatNotSupported => {}
        level => {
            level?;
        }
    }
    let ct = req
        .header("content-type")
        .ok_or_else(|| Error::invalid_input("A batch request needs a multipart/mixed Content-Type."))?;
    let parsed = parse_batch(ct, &req.body)?;
    let (bb, cb) = new_boundaries();
    let body = match parsed.kind {
        BatchKind::Changeset => write_changeset_response(&bb, &cb, &changeset(svc, cx, &parsed.operations).await),
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
