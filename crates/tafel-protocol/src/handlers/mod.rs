//! Request → service call → response, one module per operation family.

mod acl;
mod batch;
mod changes;
mod entities;
mod service;
mod tables;

use http::{HeaderValue, Method, StatusCode};
use tafel_service::{Action, Error, ErrorCode, Result, Service};

use crate::json::{write_json_str, MetadataLevel};
use crate::operation::Operation;
use crate::request::{Context, Request, Response};
use crate::resource::Resource;
use crate::route::{Decided, Parts, Route};

/// Opens a query's response body: `{`, the `odata.metadata` member (naming
/// `what`, `Tables` or a table, unless there is no metadata) and the `value`
/// array, which the caller fills and closes.
fn open_query_body(out: &mut Vec<u8>, level: MetadataLevel, base_url: &str, what: &str) {
    out.push(b'{');
    if level != MetadataLevel::No {
        out.extend_from_slice(b"\"odata.metadata\":");
        write_json_str(out, &format!("{base_url}/$metadata#{what}"));
        out.push(b',');
    }
    out.extend_from_slice(b"\"value\":[");
}

fn method_not_allowed() -> Error {
    Error::new(ErrorCode::MethodNotAllowed)
}

/// Whether `method` changes anything: every verb but the reads (a `$batch` is a
/// POST, a write even when it holds only reads).
fn is_write(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Runs one operation: `req`, as `route` (classified from it) tells. The route's
/// operation picks the handler; a request it names no operation for (`Unknown`,
/// or a preflight that reached here) is refused by [`refuse`], as Azure refuses it.
pub async fn handle(svc: &Service, cx: &Context, req: &Request, route: Route<'_>) -> Result<Response> {
    // The secondary endpoint is a read-only replica (an RA-GRS account's); a
    // Cosmos account's `-secondary` endpoint takes writes (`cosmos::secondary_writes`).
    if cx.secondary && is_write(&req.method) && !crate::cosmos::secondary_writes(cx.dialect) {
        return Err(Error::with_message(
            ErrorCode::InsufficientAccountPermissions,
            "Write operations are not allowed.",
        ));
    }
    let Parts {
        operation,
        resource,
        filter,
        level,
        if_match,
        batch,
    } = route.into_parts();
    let resource = resource?;
    if cx.dialect.is_cosmos() {
        crate::cosmos::admit(&resource, req)?;
    }
    use Operation::*;
    match (operation, resource) {
        (QueryTables, Resource::Tables) => tables::query(svc, cx, req, level?).await,
        (CreateTable, Resource::Tables) => tables::create(svc, cx, req, level?).await,
        (QueryTable, Resource::Table(name)) => tables::get(svc, cx, &name, level?).await,
        (DeleteTable, Resource::Table(name)) => tables::delete(svc, cx, &name).await,
        (GetTableAcl, Resource::EntitySet(table)) => {
            cx.table_name(&table)?;
            acl::get(svc, cx, &table).await
        }
        (SetTableAcl, Resource::EntitySet(table)) => {
            cx.table_name(&table)?;
            acl::set(svc, cx, req, &table).await
        }
        (QueryEntities, Resource::EntitySet(table)) => entities::query(svc, cx, req, &table, filter, level?).await,
        (QueryEntities, Resource::Count(table)) => entities::count(svc, cx, req, &table, filter).await,
        (
            QueryEntity,
            Resource::Entity {
                table,
                partition_key,
                row_key,
            },
        ) => entities::get(svc, cx, req, &table, (&partition_key, &row_key), level?).await,
        // Azure takes a POST to `/t/Tables` (or `/t/$batch`) as an insert into the
        // table: 404 when it does not exist, else the body's missing keys (or a
        // batch's media type) refused.
        (InsertEntity, Resource::BelowTable(table)) => {
            cx.table_name(&table)?;
            svc.require_table(&cx.caller, &table, Action::InsertEntity).await?;
            let call = entities::WriteCall::new(operation, level, if_match);
            entities::write(svc, cx, req, call, Resource::EntitySet(table)).await
        }
        (
            InsertEntity | UpdateEntity | MergeEntity | DeleteEntity | InsertOrReplaceEntity | InsertOrMergeEntity,
            resource,
        ) => {
            let call = entities::WriteCall::new(operation, level, if_match);
            entities::write(svc, cx, req, call, resource).await
        }
        (EntityGroupTransaction, Resource::Batch) => batch::batch(svc, cx, req, level, batch).await,
        (ReadChanges, Resource::Changes) => changes::read(svc, cx, req).await,
        (GetTableServiceProperties | SetTableServiceProperties | GetTableServiceStats, Resource::Service) => {
            service::handle(svc, cx, req, operation).await
        }
        (_, resource) => refuse(svc, cx, req, resource, level).await,
    }
}

/// The answer to a request that names no operation: its verb is not one the
/// resource takes, or a parameter makes it something Azure does not serve.
async fn refuse(
    svc: &Service,
    cx: &Context,
    req: &Request,
    resource: Resource<'_>,
    level: Decided<MetadataLevel>,
) -> Result<Response> {
    match resource {
        Resource::EntitySet(_) | Resource::BelowTable(_) if req.param("restype").is_some() => {
            Err(Error::new(ErrorCode::InvalidQueryParameterValue))
        }
        Resource::EntitySet(table) if req.param("comp") == Some("acl") => {
            cx.table_name(&table)?;
            Err(method_not_allowed())
        }
        // An entity's or a table's entities' verb that writes nothing: an
        // unanswerable `Accept` is named first, as for the writes.
        Resource::EntitySet(_) | Resource::Entity { .. } => {
            level?;
            Err(method_not_allowed())
        }
        Resource::BelowTable(_) => Err(Error::new(ErrorCode::InvalidUri)),
        // `/t/Tables('x')` (Delete Table through an account URL that ends in a
        // table name): Azure answers 404 TableNotFound when `t` does not exist, which
        // the SDKs' delete_table takes as done, else one key where `t`'s entities
        // have two.
        Resource::KeyedBelowTable(table) => {
            cx.table_name(&table)?;
            svc.require_table(&cx.caller, &table, keyed_below_table_action(&req.method))
                .await?;
            Err(Error::with_message(
                ErrorCode::InvalidInput,
                format!(
                    "The number of keys specified in the URI does not match number of key properties for the resource '{table}'."
                ),
            ))
        }
        Resource::Service => service::handle(svc, cx, req, Operation::Unknown).await,
        _ => Err(method_not_allowed()),
    }
}

/// What a request on `/t/Tables('x')` would do to table `t`'s entities, for the
/// access check before its table is looked up.
fn keyed_below_table_action(method: &Method) -> Action {
    match *method {
        Method::GET | Method::HEAD => Action::ReadEntity,
        Method::DELETE => Action::DeleteEntity,
        Method::POST => Action::InsertEntity,
        _ => Action::UpdateEntity,
    }
}

/// Parses `$top`: 1 to 1000.
pub(crate) fn top(req: &Request) -> Result<Option<usize>> {
    let Some(raw) = req.param("$top") else { return Ok(None) };
    let n: i64 = raw.trim().parse().map_err(|_| {
        Error::with_message(
            ErrorCode::InvalidQueryParameterValue,
            format!("The value '{raw}' of $top is not a number."),
        )
    })?;
    if !(1..=1000).contains(&n) {
        return Err(Error::with_message(
            ErrorCode::OutOfRangeInput,
            format!("The value {n} of $top is outside the range 1 to 1000."),
        ));
    }
    Ok(Some(n as usize))
}

/// Refuses request bodies that are not JSON.
pub(crate) fn require_json_body(req: &Request) -> Result<()> {
    let Some(ct) = req.header(http::header::CONTENT_TYPE) else {
        return Ok(());
    };
    let essence = ct.split(';').next().unwrap_or("").trim();
    let is = |m: &str| essence.eq_ignore_ascii_case(m);
    if is("application/json") || essence.is_empty() {
        if contains_ignore_ascii_case(ct, "odata=verbose") {
            Err(Error::new(ErrorCode::JsonVerboseFormatNotSupported))
        } else {
            Ok(())
        }
    } else if is("application/atom+xml") || is("application/xml") {
        Err(Error::new(ErrorCode::AtomFormatNotSupported))
    } else {
        Err(Error::new(ErrorCode::MediaTypeNotSupported))
    }
}

/// `haystack.to_ascii_lowercase().contains(needle)` for a lowercase `needle`,
/// without the copy: these run on every write's headers.
pub(crate) fn contains_ignore_ascii_case(haystack: &str, needle: &str) -> bool {
    haystack
        .as_bytes()
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

/// `Prefer: return-no-content` / `return-content`, if sent.
pub(crate) fn prefer(req: &Request) -> Option<bool> {
    let p = req.header(crate::names::PREFER)?;
    if contains_ignore_ascii_case(p, "return-no-content") {
        Some(false)
    } else if contains_ignore_ascii_case(p, "return-content") {
        Some(true)
    } else {
        None
    }
}

/// Applies the `Prefer` outcome to a 201-with-body response.
pub(crate) fn apply_prefer(resp: &mut Response, prefer: Option<bool>) {
    match prefer {
        Some(false) => {
            resp.status = StatusCode::NO_CONTENT;
            resp.body = bytes::Bytes::new();
            resp.headers.remove(crate::names::CONTENT_TYPE);
            resp.set_value(
                crate::names::PREFERENCE_APPLIED,
                const { HeaderValue::from_static("return-no-content") },
            );
        }
        Some(true) => resp.set_value(
            crate::names::PREFERENCE_APPLIED,
            const { HeaderValue::from_static("return-content") },
        ),
        None => {}
    }
}

pub(crate) fn unsupported_options(req: &Request) -> Result<()> {
    for opt in [
        "$orderby",
        "$skip",
        "$expand",
        "$count",
        "$inlinecount",
        "$search",
        "$apply",
    ] {
        if req.param(opt).is_some() {
            return Err(Error::with_message(
                ErrorCode::NotImplemented,
                format!("The query option {opt} is not supported by the Table service."),
            ));
        }
    }
    Ok(())
}
