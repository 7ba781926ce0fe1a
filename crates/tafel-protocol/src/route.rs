//! A request classified once, from its verb, path, query and headers: the
//! resource its path names, the operation it asks for (metrics, the access log,
//! fault rules), where it runs, and an entity query's parsed `$filter`. All of it
//! comes from the one path parser (`resource.rs`) and the one `$filter` parser the
//! handlers use, so where a request runs, what it is counted as and what is done
//! with it cannot disagree; the handler takes the parsed path and filter from here.

use http::{HeaderMap, Method};
use tafel_service::model::Value;
use tafel_service::query::{CompareOp, Expr};
use tafel_service::Error;
use tafel_service::{Access, Action};

use crate::filter::parse_filter;
use crate::operation::{self, Operation};
use crate::request::effective_method;
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
    /// The verb after `X-HTTP-Method`, or why that header is refused.
    method: Result<Method, Error>,
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
        let operation = match (method, shape) {
            (&Method::OPTIONS, _) => Operation::Preflight,
            (_, Some(shape)) => operation::of(method, shape, query, headers),
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
            method: effective,
        }
    }

    /// The verb the request asks for (`X-HTTP-Method` followed), or why its
    /// `X-HTTP-Method` is refused: decided once, in [`Route::of`].
    pub fn method(&self) -> Result<Method, Error> {
        self.method.clone()
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
        }
    }

    /// The resource, or why the path names none; and the parsed `$filter`.
    pub(crate) fn into_parts(self) -> (Result<Resource<'a>, Error>, Option<Result<Expr, Error>>) {
        (self.resource.map_err(|i| i.error), self.filter)
    }

    pub(crate) fn resource(&self) -> Option<&Resource<'a>> {
        self.resource.as_ref().ok()
    }
}

fn param<'q>(query: &'q [(String, String)], name: &str) -> Option<&'q str> {
    query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// Whether the filter pins both keys by `eq` in a conjunction (whatever else it
/// asks): it matches one entity at most.
fn names_one_entity(filter: &Expr) -> bool {
    fn pins(e: &Expr, key: &str) -> bool {
        match e {
            Expr::Compare {
                property,
                op: CompareOp::Eq,
                value: Value::String(_),
            } => property == key,
            Expr::And(all) => all.iter().any(|t| pins(t, key)),
            _ => false,
        }
    }
    pins(filter, "PartitionKey") && pins(filter, "RowKey")
}

#[cfg(test)]
mod tests;
