//! The Table API operation a request asks for, named as Azure's storage
//! analytics names it: the one place metrics and access logs get it from. The
//! names are a fixed set, so they make bounded metric labels.

use http::Method;

use crate::resource::{self, Resource, Shape};

macro_rules! operations {
    ($($name:ident),* $(,)?) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Operation { $($name),* }

        impl Operation {
            /// Every operation, in declaration order ([`Operation::index`]).
            pub const ALL: &'static [Operation] = &[$(Operation::$name),*];

            pub fn as_str(self) -> &'static str {
                match self { $(Operation::$name => stringify!($name)),* }
            }
        }
    };
}

operations!(
    QueryTables,
    QueryTable,
    CreateTable,
    DeleteTable,
    QueryEntities,
    QueryEntity,
    InsertEntity,
    UpdateEntity,
    MergeEntity,
    DeleteEntity,
    InsertOrReplaceEntity,
    InsertOrMergeEntity,
    EntityGroupTransaction,
    GetTableAcl,
    SetTableAcl,
    GetTableServiceProperties,
    SetTableServiceProperties,
    GetTableServiceStats,
    // A read of the change feed (Tafel's own; Azure has none).
    ReadChanges,
    Preflight,
    Unknown,
);

impl Operation {
    /// Position in [`Operation::ALL`], for tables indexed by operation.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The PartitionKey of an insert's JSON body (an insert's path names none).
pub(crate) fn body_partition(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Keys {
        #[serde(rename = "PartitionKey")]
        partition_key: String,
    }
    serde_json::from_slice::<Keys>(body).ok().map(|k| k.partition_key)
}

/// The table and PartitionKey a `$batch` acts on, from its first operation (a
/// changeset names one of each), for fault rules.
pub fn batch_target(account: &str, batch: &crate::batch::BatchRequest) -> Option<(String, Option<String>)> {
    sub_request_target(account, batch.operations.first()?)
}

/// The table and PartitionKey one `$batch` sub-request acts on: an entity's from
/// its path, an insert's from its body; `None` for any other resource.
pub fn sub_request_target(account: &str, sub: &crate::batch::SubRequest) -> Option<(String, Option<String>)> {
    let target = sub.path_and_query();
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    let path = match path.strip_prefix('/').and_then(|p| p.strip_prefix(account)) {
        Some(rest) if rest.starts_with('/') => rest,
        _ => path,
    };
    match resource::parse(path).ok()? {
        Resource::Entity {
            table, partition_key, ..
        } => Some((table.into_owned(), Some(partition_key.into_owned()))),
        Resource::EntitySet(table) => Some((table.into_owned(), body_partition(&sub.body))),
        _ => None,
    }
}

/// The operation named `name` (as [`Operation::as_str`] gives it).
pub fn from_name(name: &str) -> Option<Operation> {
    Operation::ALL.iter().copied().find(|o| o.as_str() == name)
}

/// The operation of `method` (the effective verb, after `X-HTTP-Method`) on a
/// resource of shape `shape`, `conditional` when it carries an `If-Match`; a
/// request the handlers refuse (for its verb, or a `restype` on a table's
/// entities) is `Unknown`. `route.rs` classifies a request with it, and the
/// handlers dispatch on what it says.
pub(crate) fn of(method: &Method, shape: Shape, query: &[(String, String)], conditional: bool) -> Operation {
    use Operation::*;
    let param = |name: &str| query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let read = method == Method::GET || method == Method::HEAD;
    match shape {
        Shape::Service => match (param("comp"), read, method == Method::PUT) {
            (Some("properties"), true, _) => GetTableServiceProperties,
            (Some("properties"), _, true) => SetTableServiceProperties,
            (Some("stats"), true, _) => GetTableServiceStats,
            _ => Unknown,
        },
        Shape::Tables if read => QueryTables,
        Shape::Tables if method == Method::POST => CreateTable,
        Shape::Table if read => QueryTable,
        Shape::Table if method == Method::DELETE => DeleteTable,
        // A service operation's parameter on a table's URL: refused.
        Shape::EntitySet | Shape::BelowTable if param("restype").is_some() => Unknown,
        Shape::EntitySet if param("comp") == Some("acl") => match (read, method == Method::PUT) {
            (true, _) => GetTableAcl,
            (_, true) => SetTableAcl,
            _ => Unknown,
        },
        Shape::EntitySet if read => QueryEntities,
        // A count is a query of the table that answers how many, not which.
        Shape::Count if read => QueryEntities,
        // Azure takes a POST to `/name/Tables` or `/name/$batch` as an insert into `name`.
        Shape::EntitySet | Shape::BelowTable if method == Method::POST => InsertEntity,
        Shape::Entity => match method.as_str() {
            "GET" | "HEAD" => QueryEntity,
            "PUT" if conditional => UpdateEntity,
            "PUT" => InsertOrReplaceEntity,
            "MERGE" | "PATCH" if conditional => MergeEntity,
            "MERGE" | "PATCH" => InsertOrMergeEntity,
            "DELETE" => DeleteEntity,
            _ => Unknown,
        },
        Shape::Batch if method == Method::POST => EntityGroupTransaction,
        Shape::Changes if read => ReadChanges,
        _ => Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_is_the_position_in_all() {
        for (i, o) in Operation::ALL.iter().enumerate() {
            assert_eq!(o.index(), i);
        }
    }
}
