//! A request classified once, from its verb, path, query and headers: the
//! resource its path names, the operation it asks for, where it runs, and what
//! its head says that more than one layer needs (an entity query's `$filter`, the
//! metadata level, `If-Match`, whether errors are XML). The handlers dispatch on
//! the operation decided here (`handlers::handle`), as metrics, the access log,
//! fault rules and `--azure-limits` name it, so what a request is counted as and
//! what is done with it cannot disagree; nothing here is parsed a second time.

use http::{HeaderMap, Method};
use tafel_service::query::{pinned_keys, Expr};
use tafel_service::{Access, Action, Error, ErrorCode, IfMatch};

use crate::batch::{parse_batch_shared, BatchRequest};
use crate::filter::parse_filter;
use crate::json::{negotiate, MetadataLevel};
use crate::operation::{self, Operation};
use crate::request::{effective_method, Request};
use crate::resource::{self, Invalid, Resource, Shape};

/// Where a request runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// On its connection's serving thread: it is short.
    Serving,
    /// On the runtime for entity queries, which may scan for long.
    Query,
    /// On the runtime for `$batch`.
    Batch,
}

/// What a request is, decided once before it runs.
#[derive(Debug)]
pub struct Route<'a> {
    resource: Result<Resource<'a>, Invalid>,
    operation: Operation,
    lane: Lane,
    /// An entity query's `$filter`, parsed (`None` when it has none, or the request
    /// is no entity query).
    filter: Option<Result<Expr, Error>>,
    /// The verb after `X-HTTP-Method`, or why that header is refused. (Errors
    /// are boxed here: a route moves with its request, and is kept small.)
    method: Decided<Method>,
    /// The answer's JSON metadata level (`$format` over `Accept`), or why neither
    /// can be answered.
    level: Decided<MetadataLevel>,
    /// An entity's `If-Match` (`IfMatch::None` on other resources), or why it
    /// is refused.
    if_match: Decided<IfMatch>,
    /// Errors are answered as XML (service and ACL requests: `comp`/`restype`).
    xml_errors: bool,
    /// A `$batch`'s parts, parsed once when its body arrived ([`Route::read_body`];
    /// none without a Content-Type: the handler refuses it).
    batch: Option<Box<Result<BatchRequest, Error>>>,
    /// An insert's PartitionKey, read from its body when it was asked for.
    insert_partition: Option<Box<str>>,
}

impl<'a> Route<'a> {
    /// Classifies `method` (as sent; a POST's `X-HTTP-Method` is followed here, a
    /// bad one is classified as the verb sent and refused by [`Route::method`]) on
    /// `path` (below the account root, as sent) with the form-decoded `query`. Names
    /// and keys are borrowed from `path`.
    pub fn of(method: &Method, path: &'a str, query: &[(String, String)], headers: &HeaderMap) -> Self {
        let effective = effective_method(method, headers);
        let method = effective.as_ref().unwrap_or(method);
        let resource = resource::parse_shaped(path);
        let shape = match &resource {
            Ok(r) => Some(Shape::from(r)),
            Err(invalid) => invalid.shape,
        };
        // Only an entity's verbs take a condition: other requests never read it.
        let if_match = match shape {
            Some(Shape::Entity) => parse_if_match(headers).map_err(Box::new),
            _ => Ok(IfMatch::None),
        };
        // A condition that does not parse still makes the write conditional: the
        // handler refuses it.
        let conditional = !matches!(if_match, Ok(IfMatch::None));
        let operation = match (method, shape) {
            (&Method::OPTIONS, _) => Operation::Preflight,
            (_, Some(shape)) => operation::of(method, shape, query, conditional),
            (_, None) => Operation::Unknown,
        };
        // Parsed here, only for an entity query, to tell a point read from a scan;
        // the handler takes it from here instead of parsing it again.
        let filter = match operation {
            Operation::QueryEntities => param(query, "$filter")
                .filter(|f| !f.trim().is_empty())
                .map(parse_filter),
            _ => None,
        };
        let lane = match (operation, &filter) {
            // A malformed filter is answered at once; one that names a single
            // entity reads at most one row, as a point read does.
            (Operation::QueryEntities, Some(Err(_))) => Lane::Serving,
            (Operation::QueryEntities, Some(Ok(f))) if names_one_entity(f) => Lane::Serving,
            // A feed read may wait up to a minute for a change: cancelled, as a
            // query is, when its client goes away.
            (Operation::QueryEntities | Operation::ReadChanges, _) => Lane::Query,
            (Operation::EntityGroupTransaction, _) => Lane::Batch,
            _ => Lane::Serving,
        };
        Route {
            resource,
            operation,
            lane,
            filter,
            method: effective.map_err(Box::new),
            level: negotiate(
                param(query, "$format"),
                headers.get(http::header::ACCEPT).and_then(|v| v.to_str().ok()),
            )
            .map_err(Box::new),
            if_match,
            xml_errors: query.iter().any(|(k, _)| k == "comp" || k == "restype"),
            batch: None,
            insert_partition: None,
        }
    }

    /// Reads what the arrived body says: a `$batch` is parsed here, once (its
    /// parts are slices of `request.body`, not copies); an insert's PartitionKey
    /// only when `insert_partition` asks for it (limits and fault rules do, and
    /// both are off by default: the handler decodes the entity anyway).
    pub fn read_body(&mut self, request: &Request, insert_partition: bool) {
        match self.operation {
            Operation::EntityGroupTransaction => {
                if let Some(ct) = request.header("content-type") {
                    self.batch = Some(Box::new(parse_batch_shared(ct, &request.body)));
                }
            }
            Operation::InsertEntity if insert_partition => {
                self.insert_partition = operation::body_partition(&request.body).map(String::into_boxed_str);
            }
            _ => {}
        }
    }

    /// The `$batch`'s parts, if it is one and they parsed ([`Route::read_body`]).
    pub fn batch(&self) -> Option<&BatchRequest> {
        self.batch.as_deref()?.as_ref().ok()
    }

    /// An insert's PartitionKey, if [`Route::read_body`] was asked for it and the
    /// body names one.
    pub fn insert_partition(&self) -> Option<&str> {
        self.insert_partition.as_deref()
    }

    /// The verb the request asks for (`X-HTTP-Method` followed), or why its
    /// `X-HTTP-Method` is refused: decided once, in [`Route::of`].
    pub fn method(&self) -> Result<Method, Error> {
        self.method.clone().map_err(|e| *e)
    }

    /// The operation, as metrics and the access log name it.
    pub fn operation(&self) -> Operation {
        self.operation
    }

    pub fn lane(&self) -> Lane {
        self.lane
    }

    /// The table the path names, if any.
    pub fn table(&self) -> Option<&str> {
        match self.resource.as_ref().ok()? {
            Resource::Table(t)
            | Resource::EntitySet(t)
            | Resource::Count(t)
            | Resource::Entity { table: t, .. }
            | Resource::BelowTable(t)
            | Resource::KeyedBelowTable(t) => Some(t),
            _ => None,
        }
    }

    /// The PartitionKey an entity path names, if any.
    pub fn partition(&self) -> Option<&str> {
        match self.resource.as_ref().ok()? {
            Resource::Entity { partition_key, .. } => Some(partition_key),
            _ => None,
        }
    }

    /// The entity query's parsed `$filter`, when it has one that parses.
    pub fn filter(&self) -> Option<&Expr> {
        self.filter.as_ref()?.as_ref().ok()
    }

    /// Whether errors are answered as XML (service and ACL requests) rather than JSON.
    pub fn xml_errors(&self) -> bool {
        self.xml_errors
    }

    /// The answer's JSON metadata level, as negotiated from the head.
    pub fn level(&self) -> Result<MetadataLevel, Error> {
        self.level.clone().map_err(|e| *e)
    }

    /// Whether the operation takes a request body. `Unknown` may: its handler
    /// decides what it is.
    pub fn takes_body(&self) -> bool {
        use Operation::*;
        !matches!(
            self.operation,
            QueryTables
                | QueryTable
                | DeleteTable
                | QueryEntities
                | QueryEntity
                | DeleteEntity
                | GetTableAcl
                | GetTableServiceProperties
                | GetTableServiceStats
                | ReadChanges
                | Preflight
        )
    }

    /// Refuses, from the head alone, a write that `access` may not make at all,
    /// before a byte of its body is read or held; the service checks again with
    /// what the body says (a new table's name, an insert's keys, a batch's
    /// operations). Operations without a body are left to the service.
    pub fn admit(&self, access: &Access) -> Result<(), Error> {
        use Operation::*;
        let keys = match self.resource() {
            Some(Resource::Entity {
                partition_key, row_key, ..
            }) => Some((&**partition_key, &**row_key)),
            _ => None,
        };
        let action = match self.operation {
            CreateTable => Action::CreateTable,
            InsertEntity => Action::InsertEntity,
            UpdateEntity | MergeEntity => Action::UpdateEntity,
            InsertOrReplaceEntity | InsertOrMergeEntity => Action::UpsertEntity,
            SetTableAcl => Action::SetTableAcl,
            SetTableServiceProperties => Action::SetServiceProperties,
            // A batch's table and operations are in its body: one of them must be possible.
            EntityGroupTransaction => {
                let any = [
                    Action::InsertEntity,
                    Action::UpdateEntity,
                    Action::DeleteEntity,
                    Action::ReadEntity,
                ];
                let mut refused = None;
                for a in any {
                    match access.may(a, None, None) {
                        Ok(()) => return Ok(()),
                        Err(e) => refused = Some(e),
                    }
                }
                return refused.map_or(Ok(()), Err);
            }
            _ => return Ok(()),
        };
        let table = match self.operation {
            CreateTable | SetTableServiceProperties => None,
            _ => self.table(),
        };
        access.may(action, table, keys)
    }

    /// The same route owning what it borrowed, to go with its request to
    /// another runtime.
    pub fn into_owned(self) -> Route<'static> {
        Route {
            resource: self.resource.map(Resource::into_owned),
            operation: self.operation,
            lane: self.lane,
            filter: self.filter,
            method: self.method,
            level: self.level,
            if_match: self.if_match,
            xml_errors: self.xml_errors,
            batch: self.batch,
            insert_partition: self.insert_partition,
        }
    }

    /// What the handlers take from the route, moved out of it.
    pub(crate) fn into_parts(self) -> Parts<'a> {
        Parts {
            operation: self.operation,
            resource: self.resource.map_err(|i| i.error),
            filter: self.filter,
            level: self.level,
            if_match: self.if_match,
            batch: self.batch,
        }
    }

    pub(crate) fn resource(&self) -> Option<&Resource<'a>> {
        self.resource.as_ref().ok()
    }
}

/// A decision made from the head, or why the request is refused: the error boxed,
/// as it waits beside the request's other state.
pub(crate) type Decided<T> = Result<T, Box<Error>>;

/// A route's decisions as the handlers take them: each owned, to be moved on.
pub(crate) struct Parts<'a> {
    pub operation: Operation,
    /// The resource, or why the path names none.
    pub resource: Decided<Resource<'a>>,
    /// An entity query's `$filter`, parsed.
    pub filter: Option<Result<Expr, Error>>,
    pub level: Decided<MetadataLevel>,
    pub if_match: Decided<IfMatch>,
    /// A `$batch`'s parts, parsed when its body arrived (`None`: not read here).
    pub batch: Option<Box<Result<BatchRequest, Error>>>,
}

/// `If-Match`, parsed; a value that is not header text is refused as a malformed one.
fn parse_if_match(headers: &HeaderMap) -> Result<IfMatch, Error> {
    match headers.get(http::header::IF_MATCH) {
        None => Ok(IfMatch::None),
        Some(v) => match v.to_str() {
            Ok(v) => IfMatch::parse(Some(v)),
            Err(_) => Err(Error::with_message(
                ErrorCode::InvalidInput,
                "The If-Match header must be '*' or a weak ETag (W/\"...\").",
            )),
        },
    }
}

fn param<'q>(query: &'q [(String, String)], name: &str) -> Option<&'q str> {
    query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// Whether the filter pins both keys (whatever else it asks): it matches one
/// entity at most.
fn names_one_entity(filter: &Expr) -> bool {
    let pinned = pinned_keys(filter);
    pinned.partition.is_some() && pinned.row.is_some()
}

#[cfg(test)]
mod tests;
