//! The Table API operation a request asks for, named as Azure's storage
//! analytics names it: the one place metrics and access logs get it from. The
//! names are a fixed set, so they make bounded metric labels.

use http::{HeaderMap, Method};
use percent_encoding::percent_decode_str;

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

/// The kind of resource a path names, without its names and keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Service,
    Tables,
    Table,
    EntitySet,
    Entity,
    Batch,
}

impl From<&Resource> for Shape {
    fn from(r: &Resource) -> Self {
        match r {
            Resource::Service => Shape::Service,
            Resource::Tables => Shape::Tables,
            Resource::Table(_) => Shape::Table,
            Resource::EntitySet(_) | Resource::BelowTable(_) => Shape::EntitySet,
            Resource::Entity { .. } => Shape::Entity,
            Resource::Batch => Shape::Batch,
            // Read like a query (and named so, for metrics: `shape` sees a name).
            Resource::Changes => Shape::EntitySet,
        }
    }
}

/// The shape of a path below the account root (as sent), told the way
/// [`resource::parse`] tells it but without copying names or keys out: this
/// runs for every request. The keys themselves are not checked: a malformed
/// entity path is still an entity operation (that then fails with `InvalidUri`).
pub fn shape(path: &str) -> Option<Shape> {
    // Most paths have no escape at all: a memchr is cheaper than the decoder's scan.
    let decoded = match memchr::memchr(b'%', path.as_bytes()) {
        None => std::borrow::Cow::Borrowed(path),
        Some(_) => percent_decode_str(path).decode_utf8().ok()?,
    };
    let path = decoded.strip_prefix('/').unwrap_or(&decoded);
    if path.is_empty() {
        return Some(Shape::Service);
    }
    if path == "$batch" || path == "$batch/" {
        return Some(Shape::Batch);
    }
    let (name, args) = match path.find('(') {
        Some(i) => (&path[..i], Some(path[i + 1..].strip_suffix(')')?.trim())),
        None => (path.strip_suffix('/').unwrap_or(path), None),
    };
    if name.is_empty() || name.contains('/') {
        return None;
    }
    Some(match (name == "Tables", args) {
        (true, None | Some("")) => Shape::Tables,
        (true, Some(_)) => Shape::Table,
        (false, None | Some("")) => Shape::EntitySet,
        (false, Some(_)) => Shape::Entity,
    })
}

/// The operation of `method` (the effective verb, after `X-HTTP-Method`) on
/// `path` (below the account root, as sent). A request the handlers would
/// refuse for its verb is `Unknown`.
pub fn classify(method: &Method, path: &str, query: &[(String, String)], headers: &HeaderMap) -> Operation {
    if method == Method::OPTIONS {
        return Operation::Preflight;
    }
    match shape(path) {
        Some(s) => of(method, s, query, headers),
        None => Operation::Unknown,
    }
}

/// The table a path names, if any (for access logs; it copies the name).
pub fn table(path: &str) -> Option<String> {
    match resource::parse(path).ok()? {
        Resource::Table(t) | Resource::EntitySet(t) | Resource::Entity { table: t, .. } => Some(t),
        _ => None,
    }
}

/// The PartitionKey an entity path names, if any (for fault rules; it copies the key).
pub fn partition(path: &str) -> Option<String> {
    match resource::parse(path).ok()? {
        Resource::Entity { partition_key, .. } => Some(partition_key),
        _ => None,
    }
}

/// The PartitionKey of an insert's JSON body (an insert's path names none).
pub fn body_partition(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Keys {
        #[serde(rename = "PartitionKey")]
        partition_key: String,
    }
    serde_json::from_slice::<Keys>(body).ok().map(|k| k.partition_key)
}

/// The table and PartitionKey a `$batch` acts on, from its first operation (a
/// changeset names one of each), for fault rules; `None` when it does not parse.
pub fn batch_target(account: &str, content_type: &str, body: &[u8]) -> Option<(String, Option<String>)> {
    let batch = crate::batch::parse_batch(content_type, body).ok()?;
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
        } => Some((table, Some(partition_key))),
        Resource::EntitySet(table) => Some((table, body_partition(&sub.body))),
        _ => None,
    }
}

/// The operation named `name` (as [`Operation::as_str`] gives it).
pub fn from_name(name: &str) -> Option<Operation> {
    Operation::ALL.iter().copied().find(|o| o.as_str() == name)
}

/// The operation of `method` on a resource of shape `shape`.
pub fn of(method: &Method, shape: Shape, query: &[(String, String)], headers: &HeaderMap) -> Operation {
    use Operation::*;
    let param = |name: &str| query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let read = method == Method::GET || method == Method::HEAD;
    let conditional = || headers.contains_key(http::header::IF_MATCH);
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
        Shape::EntitySet if param("comp") == Some("acl") => match (read, method == Method::PUT) {
            (true, _) => GetTableAcl,
            (_, true) => SetTableAcl,
            _ => Unknown,
        },
        Shape::EntitySet if read => QueryEntities,
        Shape::EntitySet if method == Method::POST => InsertEntity,
        Shape::Entity => match method.as_str() {
            "GET" | "HEAD" => QueryEntity,
            "PUT" if conditional() => UpdateEntity,
            "PUT" => InsertOrReplaceEntity,
            "MERGE" | "PATCH" if conditional() => MergeEntity,
            "MERGE" | "PATCH" => InsertOrMergeEntity,
            "DELETE" => DeleteEntity,
            _ => Unknown,
        },
        Shape::Batch if method == Method::POST => EntityGroupTransaction,
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
        classify(&method, path, &query, &headers)
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
            (op("GET", "/a/b", &[], false), Unknown),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }

    #[test]
    fn shape_agrees_with_the_resource_parser_on_every_path_it_parses() {
        for path in [
            "/",
            "",
            "/Tables",
            "/Tables()",
            "/Tables('abc')",
            "/Tables(%27abc%27)",
            "/$batch",
            "/$batch/",
            "/mytable",
            "/mytable/",
            "/mytable()",
            "/t(PartitionKey='a',RowKey='b')",
            "/t(PartitionKey=%27a%20b%27,RowKey=%27(x,y)%27)",
            "/t(RowKey='b',PartitionKey='a')",
        ] {
            let parsed = resource::parse(path).expect(path);
            assert_eq!(shape(path), Some(Shape::from(&parsed)), "{path}");
        }
        assert_eq!(table("/t(PartitionKey='a',RowKey='b')").as_deref(), Some("t"));
        assert_eq!(table("/Tables('x')").as_deref(), Some("x"));
        assert_eq!(table("/Tables"), None);
    }

    #[test]
    fn index_is_the_position_in_all() {
        for (i, o) in Operation::ALL.iter().enumerate() {
            assert_eq!(o.index(), i);
        }
    }
}
