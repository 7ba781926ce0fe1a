//! The Table API operation a request asks for, named as Azure's storage
//! analytics names it: the one place metrics and access logs get it from. The
//! names are a fixed set, so they make bounded metric labels.

use http::{HeaderMap, Method};

use crate::resource::{self, Resource};

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
    Preflight,
    Unknown,
);

impl Operation {
    /// Position in [`Operation::ALL`], for tables indexed by operation.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The operation of `method` (the effective verb, after `X-HTTP-Method`) on
/// `path` (below the account root, as sent), with the resource it names when the
/// path parses. A request the handlers would refuse for its verb is `Unknown`.
pub fn classify(
    method: &Method,
    path: &str,
    query: &[(String, String)],
    headers: &HeaderMap,
) -> (Operation, Option<Resource>) {
    if method == Method::OPTIONS {
        return (Operation::Preflight, resource::parse(path).ok());
    }
    match resource::parse(path) {
        Ok(r) => (of(method, &r, query, headers), Some(r)),
        Err(_) => (Operation::Unknown, None),
    }
}

/// The operation of `method` on a parsed resource.
pub fn of(method: &Method, resource: &Resource, query: &[(String, String)], headers: &HeaderMap) -> Operation {
    use Operation::*;
    let param = |name: &str| query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let read = method == Method::GET || method == Method::HEAD;
    let conditional = headers.contains_key("if-match");
    match resource {
        Resource::Service => match (param("comp"), read, method == Method::PUT) {
            (Some("properties"), true, _) => GetTableServiceProperties,
            (Some("properties"), _, true) => SetTableServiceProperties,
            (Some("stats"), true, _) => GetTableServiceStats,
            _ => Unknown,
        },
        Resource::Tables if read => QueryTables,
        Resource::Tables if method == Method::POST => CreateTable,
        Resource::Table(_) if read => QueryTable,
        Resource::Table(_) if method == Method::DELETE => DeleteTable,
        Resource::EntitySet(_) if param("comp") == Some("acl") => match (read, method == Method::PUT) {
            (true, _) => GetTableAcl,
            (_, true) => SetTableAcl,
            _ => Unknown,
        },
        Resource::EntitySet(_) if read => QueryEntities,
        Resource::EntitySet(_) if method == Method::POST => InsertEntity,
        Resource::Entity { .. } => match method.as_str() {
            "GET" | "HEAD" => QueryEntity,
            "PUT" if conditional => UpdateEntity,
            "PUT" => InsertOrReplaceEntity,
            "MERGE" | "PATCH" if conditional => MergeEntity,
            "MERGE" | "PATCH" => InsertOrMergeEntity,
            "DELETE" => DeleteEntity,
            _ => Unknown,
        },
        Resource::Batch if method == Method::POST => EntityGroupTransaction,
        _ => Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(method: &str, path: &str, query: &[(&str, &str)], if_match: bool) -> Operation {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let query: Vec<(String, String)> = query.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut headers = HeaderMap::new();
        if if_match {
            headers.insert("if-match", "*".parse().unwrap());
        }
        classify(&method, path, &query, &headers).0
    }

    #[test]
    fn each_operation_is_named_from_resource_and_verb() {
        use Operation::*;
        let e = "/t(PartitionKey='a',RowKey='b')";
        let cases = [
            (op("GET", "/Tables", &[], false), QueryTables),
            (op("GET", "/Tables('t')", &[], false), QueryTable),
            (op("POST", "/Tables", &[], false), CreateTable),
            (op("DELETE", "/Tables('t')", &[], false), DeleteTable),
            (op("GET", "/t()", &[], false), QueryEntities),
            (op("GET", e, &[], false), QueryEntity),
            (op("POST", "/t", &[], false), InsertEntity),
            (op("PUT", e, &[], true), UpdateEntity),
            (op("PUT", e, &[], false), InsertOrReplaceEntity),
            (op("MERGE", e, &[], true), MergeEntity),
            (op("PATCH", e, &[], false), InsertOrMergeEntity),
            (op("DELETE", e, &[], true), DeleteEntity),
            (op("POST", "/$batch", &[], false), EntityGroupTransaction),
            (op("GET", "/t", &[("comp", "acl")], false), GetTableAcl),
            (op("PUT", "/t", &[("comp", "acl")], false), SetTableAcl),
            (
                op("GET", "/", &[("restype", "service"), ("comp", "properties")], false),
                GetTableServiceProperties,
            ),
            (
                op("PUT", "/", &[("restype", "service"), ("comp", "properties")], false),
                SetTableServiceProperties,
            ),
            (
                op("GET", "/", &[("restype", "service"), ("comp", "stats")], false),
                GetTableServiceStats,
            ),
            (op("OPTIONS", "/t", &[], false), Preflight),
            (op("DELETE", "/Tables", &[], false), Unknown),
            (op("GET", "/t(PartitionKey='a')", &[], false), Unknown),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }

    #[test]
    fn index_is_the_position_in_all() {
        for (i, o) in Operation::ALL.iter().enumerate() {
            assert_eq!(o.index(), i);
        }
    }
}
