//! Entity operations: get, query, insert, update/merge (and their upserts), delete.

use http::StatusCode;
use tafel_service::model::{etag_bytes, DateTime, Entity, StoredRef};
use tafel_service::query::Expr;
use tafel_service::{EntityQuery, EntitySink, Error, ErrorCode, IfMatch, Result, Service, WriteKind, WriteOp};

use super::{apply_prefer, open_query_body, prefer, require_json_body, top, unsupported_options};
use crate::continuation;
use crate::json::{content_type_value, decode_entity_write, EntityFormat, MetadataLevel, Select};
use crate::operation::Operation;
use crate::request::{Context, Request, Response};
use crate::resource::{entity_url, Resource};
use crate::route::Decided;

/// Most properties an entity can have: 252 of its own and the three system ones
/// (limits.md). A `$select` naming more distinct ones asks for what cannot exist.
const MAX_SELECT: usize = 255;

/// `$select`; `None` for all properties. A list of more distinct names than an
/// entity can have is refused (each is looked up for every property written).
fn select(req: &Request) -> Result<Option<Select>> {
    let Some(raw) = req.param("$select").map(str::trim) else {
        return Ok(None);
    };
    if raw.is_empty() || raw == "*" {
        return Ok(None);
    }
    let names = raw.split(',').map(str::trim).filter(|s| !s.is_empty());
    let select = Select::new(names.map(str::to_owned));
    if select.len() > MAX_SELECT {
        return Err(Error::with_message(
            ErrorCode::InvalidInput,
            format!("$select names more than {MAX_SELECT} properties, more than an entity can have."),
        ));
    }
    Ok(Some(select))
}

/// The JSON body of a single entity (Get Entity, Insert with content, batch parts).
pub(crate) fn entity_response_body(
    cx: &Context,
    level: MetadataLevel,
    table: &str,
    e: &Entity,
    select: Option<&Select>,
) -> Vec<u8> {
    let f = EntityFormat::new(level, &cx.base_url, &cx.caller.account, table, select);
    let mut out = Vec::with_capacity(512);
    f.write(&mut out, e, true);
    out
}

pub(crate) async fn get(
    svc: &Service,
    cx: &Context,
    req: &Request,
    table: &str,
    (pk, rk): (&str, &str),
    level: MetadataLevel,
) -> Result<Response> {
    cx.table_name(table)?;
    let entity = svc.get_entity(&cx.caller, table, pk, rk).await?;
    let sel = select(req)?;
    let f = EntityFormat::new(level, &cx.base_url, &cx.caller.account, table, sel.as_ref());
    let mut body = Vec::with_capacity(entity.bytes.len() + 512);
    f.write_stored(&mut body, entity.view(), true)?;
    let mut resp = Response::with_body_typed(StatusCode::OK, content_type_value(level), body);
    set_etag(&mut resp, entity.view().timestamp()?)?;
    Ok(resp)
}

/// `GET /{table}/$count[?$filter=…]`: the number of entities the caller may read
/// that match, as `text/plain` (OData's count path). `filter` as for [`query`].
pub async fn count(
    svc: &Service,
    cx: &Context,
    req: &Request,
    table: &str,
    filter: Option<Result<Expr>>,
) -> Result<Response> {
    cx.table_name(table)?;
    for opt in ["$top", "$select", "NextPartitionKey", "NextRowKey"] {
        if req.param(opt).is_some() {
            return Err(Error::with_message(
                ErrorCode::InvalidQueryParameterValue,
                format!("The query option {opt} does not apply to $count."),
            ));
        }
    }
    let filter = filter.transpose()?;
    let n = svc.count_entities(&cx.caller, table, filter.as_ref()).await?;
    Ok(Response::with_body_typed(
        StatusCode::OK,
        http::HeaderValue::from_static("text/plain;charset=utf-8"),
        n.to_string().into_bytes(),
    ))
}

/// An entity query; `filter` is its `$filter` as the request's route parsed it.
pub async fn query(
    svc: &Service,
    cx: &Context,
    req: &Request,
    table: &str,
    filter: Option<Result<Expr>>,
    level: MetadataLevel,
) -> Result<Response> {
    cx.table_name(table)?;
    unsupported_options(req)?;
    let filter = filter.transpose()?;
    let resume = match req.param("NextPartitionKey") {
        Some(pk) => {
            let rk = req
                .param("NextRowKey")
                .map(continuation::decode)
                .transpose()?
                .unwrap_or_default();
            Some((continuation::decode(pk)?, rk))
        }
        None => None,
    };
    let top = match (top(req)?, cx.page_limit) {
        (Some(t), Some(n)) => Some(t.min(n)),
        (t, n) => t.or(n),
    };
    let q = EntityQuery { filter, top, resume };
    let sel = select(req)?;
    let f = EntityFormat::new(level, &cx.base_url, &cx.caller.account, table, sel.as_ref());
    let mut out = Vec::with_capacity(QUERY_BODY_START);
    open_query_body(&mut out, level, &cx.base_url, table);
    let mut rows = JsonRows {
        format: &f,
        start: out.len(),
        out,
        written: 0,
        page_limit: q.page_limit(),
    };
    let page = svc.query_entities(&cx.caller, table, &q, &mut rows).await?;
    let next = page.next;
    let written = rows.written;
    let mut out = rows.out;
    out.extend_from_slice(b"]}");
    let mut resp = Response::with_body_typed(StatusCode::OK, content_type_value(level), out);
    resp.entities = u32::try_from(written).unwrap_or(u32::MAX);
    resp.set(crate::names::X_TAFEL_QUERY_PLAN, &page.plan.header())?;
    resp.set(crate::names::X_TAFEL_ROWS_EXAMINED, &page.examined.to_string())?;
    if let Some((pk, rk)) = &next {
        resp.set(
            crate::names::X_MS_CONTINUATION_NEXTPARTITIONKEY,
            &continuation::encode(pk),
        )?;
        resp.set(crate::names::X_MS_CONTINUATION_NEXTROWKEY, &continuation::encode(rk))?;
    }
    Ok(resp)
}

/// Initial capacity of a query's body; a full page of ~1 KiB entities grows it
/// by doubling a handful of times.
const QUERY_BODY_START: usize = 64 << 10;

/// Writes the entities of a query page into the `value` array as the scan finds
/// them, while their bytes are still in the CPU cache.
struct JsonRows<'f> {
    format: &'f EntityFormat<'f>,
    out: Vec<u8>,
    /// Where the first entity begins in `out`, and how many have been written.
    start: usize,
    written: usize,
    page_limit: usize,
}

/// Entities a body holds before it reserves room for the rest of a full page.
const QUERY_BODY_RESERVE_AFTER: usize = 8;
/// The most a query body reserves at once.
const QUERY_BODY_RESERVE_MAX: usize = 8 << 20;

impl EntitySink for JsonRows<'_> {
    fn entity(&mut self, e: StoredRef<'_>) -> Result<()> {
        if self.written > 0 {
            self.out.push(b',');
        }
        self.format.write_stored(&mut self.out, e, false)?;
        self.written += 1;
        if self.written == QUERY_BODY_RESERVE_AFTER {
            // A page this long is likely a full one: room for the rest, reserved once
            // from the entities so far. Growing by doubling instead copies the body
            // several times over (megabytes for a page of 1 KiB entities) while the
            // scan runs; a query of a few entities never reserves.
            let per_entity = (self.out.len() - self.start).div_ceil(self.written);
            let rest = per_entity.saturating_mul(self.page_limit.saturating_sub(self.written));
            self.out.reserve(rest.min(QUERY_BODY_RESERVE_MAX));
        }
        Ok(())
    }
}

/// What the route decided of an entity write: which write, the answer's metadata
/// level and its `If-Match`, each parsed once.
pub(crate) struct WriteCall {
    kind: Option<WriteKind>,
    level: Decided<MetadataLevel>,
    if_match: Decided<IfMatch>,
}

impl WriteCall {
    pub(crate) fn new(operation: Operation, level: Decided<MetadataLevel>, if_match: Decided<IfMatch>) -> Self {
        WriteCall {
            kind: write_kind(operation),
            level,
            if_match,
        }
    }
}

/// The entity write `operation` is, if it is one (an upsert is a write without
/// an `If-Match`).
pub(crate) fn write_kind(operation: Operation) -> Option<WriteKind> {
    use Operation::*;
    match operation {
        InsertEntity => Some(WriteKind::Insert),
        UpdateEntity | InsertOrReplaceEntity => Some(WriteKind::Replace),
        MergeEntity | InsertOrMergeEntity => Some(WriteKind::Merge),
        DeleteEntity => Some(WriteKind::Delete),
        _ => None,
    }
}

/// Decodes an entity write — insert, update, merge, delete and the two upserts — the
/// same way for top-level requests and `$batch` sub-requests. `None` when the call
/// names no write on this resource.
pub(crate) fn decode_write(
    cx: &Context,
    req: &Request,
    kind: Option<WriteKind>,
    if_match: Decided<IfMatch>,
    resource: Resource<'_>,
) -> Result<Option<(String, WriteOp)>> {
    let (table, kind, keys) = match (resource, kind) {
        (Resource::EntitySet(table), Some(WriteKind::Insert)) => (table, WriteKind::Insert, None),
        (
            Resource::Entity {
                table,
                partition_key,
                row_key,
            },
            Some(kind @ (WriteKind::Replace | WriteKind::Merge | WriteKind::Delete)),
        ) => (table, kind, Some((partition_key, row_key))),
        _ => return Ok(None),
    };
    cx.table_name(&table)?;
    let entity = match (kind, keys) {
        (WriteKind::Delete, Some((pk, rk))) => Entity::new(pk, rk),
        (_, keys) => {
            require_json_body(req)?;
            let decoded = decode_entity_write(&req.body, keys.as_ref().map(|(p, r)| (p.as_ref(), r.as_ref())))?;
            cx.dialect.admit_entity(decoded)?
        }
    };
    // Insert takes no If-Match (whatever a client sends with one is ignored); Delete needs one.
    let if_match = match kind {
        WriteKind::Insert => IfMatch::None,
        _ => match if_match? {
            IfMatch::None if kind == WriteKind::Delete => {
                return Err(Error::with_message(
                    ErrorCode::MissingRequiredHeader,
                    "An If-Match header is required to delete an entity; use '*' to delete unconditionally.",
                ))
            }
            m => m,
        },
    };
    let limit = cx.dialect.entity_limit();
    Ok(Some((
        table.into_owned(),
        WriteOp {
            kind,
            entity,
            if_match,
            limit,
        },
    )))
}

/// The `ETag` header from the stack: no String made to be copied again.
fn set_etag(resp: &mut Response, ts: DateTime) -> Result<()> {
    let etag = etag_bytes(ts);
    resp.set(crate::names::ETAG, etag.as_str())
}

/// Runs an entity write and answers as Azure does: 201 with the entity (or 204
/// under `Prefer: return-no-content`) for inserts, 204 with the new ETag for
/// updates and merges, 204 for deletes.
pub(crate) async fn write(
    svc: &Service,
    cx: &Context,
    req: &Request,
    call: WriteCall,
    resource: Resource<'_>,
) -> Result<Response> {
    let WriteCall { kind, level, if_match } = call;
    let level = level?;
    let Some((table, op)) = decode_write(cx, req, kind, if_match, resource)? else {
        return Err(Error::new(ErrorCode::MethodNotAllowed));
    };
    let kind = op.kind;
    let pref = prefer(req);
    // An insert's reply echoes the entity unless the client asked for no content:
    // only then is it worth a copy and an encoding (the SDKs ask for none).
    let echo = (kind == WriteKind::Insert && pref != Some(false)).then(|| op.entity.clone());
    let location = (kind == WriteKind::Insert).then(|| {
        let e = &op.entity;
        entity_url(&cx.base_url, &table, &e.partition_key, &e.row_key)
    });
    let ts = svc.write_entity(&cx.caller, &table, op).await?;
    let mut resp = Response::new(StatusCode::NO_CONTENT);
    match (kind, location) {
        (WriteKind::Insert, Some(location)) => {
            if let Some(mut entity) = echo {
                entity.timestamp = Some(ts);
                let body = entity_response_body(cx, level, &table, &entity, None);
                resp = Response::with_body_typed(StatusCode::CREATED, content_type_value(level), body);
            }
            set_etag(&mut resp, ts)?;
            resp.set(crate::names::LOCATION, &location)?;
            if pref == Some(false) {
                resp.set(crate::names::DATASERVICEID, &location)?;
            }
            apply_prefer(&mut resp, pref);
        }
        (WriteKind::Delete, _) => {}
        _ => set_etag(&mut resp, ts)?,
    }
    Ok(resp)
}
