use super::*;
use crate::request::parse_query;

/// The route of `method` on `uri`: a path-style URL of `devstoreaccount1`, or a
/// path below the account root.
fn route(method: &str, uri: &str, if_match: bool) -> Route<'static> {
    let method = Method::from_bytes(method.as_bytes()).unwrap();
    let (path, query) = match uri.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (uri, None),
    };
    let path = path.strip_prefix("/devstoreaccount1").unwrap_or(path);
    let mut headers = HeaderMap::new();
    if if_match {
        headers.insert("if-match", "*".parse().unwrap());
    }
    Route::of(&method, path, &parse_query(query), &headers).into_owned()
}

fn op(method: &str, uri: &str, if_match: bool) -> Operation {
    route(method, uri, if_match).operation()
}

fn lane(method: &str, uri: &str) -> Lane {
    route(method, uri, false).lane()
}

#[test]
fn each_operation_is_named_from_resource_and_verb() {
    use Operation::*;
    let e = "/t(PartitionKey='a',RowKey='b')";
    let cases = [
        (op("GET", "/Tables", false), QueryTables),
        (op("GET", "/Tables('t')", false), QueryTable),
        (op("POST", "/Tables", false), CreateTable),
        (op("DELETE", "/Tables('t')", false), DeleteTable),
        (op("GET", "/t()", false), QueryEntities),
        (op("HEAD", "/t", false), QueryEntities),
        (op("GET", e, false), QueryEntity),
        (op("POST", "/t", false), InsertEntity),
        (op("PUT", e, true), UpdateEntity),
        (op("PUT", e, false), InsertOrReplaceEntity),
        (op("MERGE", e, true), MergeEntity),
        (op("PATCH", e, false), InsertOrMergeEntity),
        (op("DELETE", e, true), DeleteEntity),
        (op("POST", "/$batch", false), EntityGroupTransaction),
        (op("GET", "/t?comp=acl", false), GetTableAcl),
        (op("PUT", "/t?comp=acl", false), SetTableAcl),
        (
            op("GET", "/?restype=service&comp=properties", false),
            GetTableServiceProperties,
        ),
        (
            op("PUT", "/?restype=service&comp=properties", false),
            SetTableServiceProperties,
        ),
        (op("GET", "/?restype=service&comp=stats", false), GetTableServiceStats),
        (op("OPTIONS", "/t", false), Preflight),
        (op("DELETE", "/Tables", false), Unknown),
        (op("GET", "/a/b", false), Unknown),
        // Azure inserts into `t` (charge.rs's regression test).
        (op("POST", "/t/Tables", false), InsertEntity),
        (op("POST", "/t/$batch", false), InsertEntity),
        (op("POST", "/t/Tables('x')", false), Unknown),
        // A malformed entity path is still an entity operation (answered InvalidUri).
        (op("GET", "/t(PartitionKey='a')", false), QueryEntity),
        (op("GET", "/Tables(x)", false), QueryTable),
    ];
    for (i, (got, want)) in cases.into_iter().enumerate() {
        assert_eq!(got, want, "case {i}");
    }
}

#[test]
fn a_tunnelled_verb_names_the_operation() {
    let mut headers = HeaderMap::new();
    headers.insert("x-http-method", "MERGE".parse().unwrap());
    let r = Route::of(&Method::POST, "/t(PartitionKey='a',RowKey='b')", &[], &headers);
    assert_eq!(r.operation(), Operation::InsertOrMergeEntity);
    headers.insert("x-http-method", "BOGUS".parse().unwrap());
    let r = Route::of(&Method::POST, "/t(PartitionKey='a',RowKey='b')", &[], &headers);
    assert_eq!(r.operation(), Operation::Unknown);
}

#[test]
fn the_table_and_partition_come_from_the_one_parse() {
    let r = route("GET", "/t(PartitionKey='a%20b',RowKey='c')", false);
    assert_eq!((r.table(), r.partition()), (Some("t"), Some("a b")));
    let r = route("GET", "/Tables('x')", false);
    assert_eq!((r.table(), r.partition()), (Some("x"), None));
    assert_eq!(route("GET", "/Tables", false).table(), None);
    assert_eq!(route("GET", "/t(PartitionKey='a')", false).table(), None);
}

#[test]
fn an_entity_query_carries_its_parsed_filter_and_nothing_else_parses_one() {
    let r = route("GET", "/t()?$filter=X%20eq%201", false);
    assert_eq!(r.filter(), parse_filter("X eq 1").ok().as_ref());
    assert!(route("GET", "/t()?$filter=%20", false).filter().is_none());
    // Not an entity query: the filter is the handler's business (or none's).
    assert!(route("GET", "/Tables?$filter=X%20eq%201", false).filter().is_none());
    assert!(route("GET", "/t?comp=acl&$filter=X%20eq%201", false).filter().is_none());
    let parts = route("GET", "/t()?$filter=X%20eq", false).into_parts();
    assert!(matches!(parts.filter, Some(Err(_))));
}

#[test]
fn queries_and_batches_run_long_and_point_operations_do_not() {
    for uri in [
        "/devstoreaccount1/mytable()?$filter=X%20eq%201",
        "/devstoreaccount1/mytable",
        "/mytable()",
        // Not one entity: an `or`, a key compared otherwise, keys only inside literals.
        "/t()?$filter=PartitionKey%20eq%20'a'%20or%20RowKey%20eq%20'b'",
        "/t()?$filter=PartitionKey%20eq%20'a'%20and%20not%20(RowKey%20eq%20'b')",
        "/t()?$filter=PartitionKey%20eq%20'a'%20and%20RowKey%20ge%20'b'",
        "/t()?$filter=Name%20eq%20'PartitionKey%20eq%20RowKey%20eq'",
        "/t()?$filter=Name%20eq%20'x''%20and%20PartitionKey%20eq%20''%20RowKey%20eq%20'",
        // Property names are case-sensitive: these are no keys.
        "/t()?$filter=partitionkey%20eq%20'a'%20and%20rowkey%20eq%20'b'",
    ] {
        assert_eq!(lane("GET", uri), Lane::Query, "{uri}");
    }
    assert_eq!(lane("POST", "/devstoreaccount1/$batch"), Lane::Batch);
    for (method, uri) in [
        ("GET", "/devstoreaccount1/mytable(PartitionKey='a',RowKey='b')"),
        // A query for one entity is a point read too.
        (
            "GET",
            "/devstoreaccount1/t()?$filter=PartitionKey%20eq%20'p1'%20and%20RowKey%20eq%20'r%20or%20x'",
        ),
        ("GET", "/t()?%24filter=(RowKey+eq+'b')+and+(PartitionKey+eq+'a')&$top=1"),
        // Whatever else the conjunction asks, it reads one row at most.
        (
            "GET",
            "/t()?$filter=PartitionKey%20eq%20'a'%20and%20(X%20eq%201%20or%20Y%20eq%202)%20and%20RowKey%20eq%20'b'",
        ),
        // A filter that does not parse is answered at once.
        ("GET", "/t()?$filter=X%20eq"),
        ("GET", "/devstoreaccount1/Tables"),
        ("GET", "/devstoreaccount1/Tables('mytable')"),
        ("GET", "/devstoreaccount1/mytable?comp=acl"),
        ("GET", "/devstoreaccount1/?restype=service&comp=properties"),
        ("POST", "/devstoreaccount1/mytable"),
        ("PUT", "/devstoreaccount1/mytable(PartitionKey='a',RowKey='b')"),
    ] {
        assert_eq!(lane(method, uri), Lane::Serving, "{method} {uri}");
    }
}

#[test]
fn a_table_named_tables_archive_is_scanned_on_the_query_runtime() {
    // Its name starts with "Tables", which was taken for the Tables collection: its
    // scans ran on a serving thread, holding up that thread's connections.
    for uri in [
        "/devstoreaccount1/TablesArchive()",
        "/devstoreaccount1/tablesarchive",
        "/devstoreaccount1/TablesArchive()?$filter=X%20eq%201",
        "/devstoreaccount1/Tables2",
    ] {
        assert_eq!(lane("GET", uri), Lane::Query, "{uri}");
        assert_eq!(op("GET", uri, false), Operation::QueryEntities, "{uri}");
    }
}

#[test]
fn a_service_parameter_on_a_tables_entities_names_no_operation() {
    // The handler refuses these (400 InvalidQueryParameterValue): metrics and fault
    // rules must not name them a query or an insert.
    assert_eq!(op("GET", "/t?restype=service", false), Operation::Unknown);
    assert_eq!(op("POST", "/t/Tables?restype=x", false), Operation::Unknown);
    assert_eq!(op("POST", "/t/Tables", false), Operation::InsertEntity);
}

#[test]
fn the_head_is_read_once_for_the_metadata_level_the_condition_and_the_error_format() {
    let r = route("GET", "/t()?$format=application/json;odata=nometadata", false);
    assert_eq!(r.level().ok(), Some(MetadataLevel::No));
    assert!(!r.xml_errors());
    assert!(route("GET", "/t()?$format=atom", false).level().is_err());
    assert!(route("GET", "/?restype=service&comp=properties", false).xml_errors());
    assert!(route("PUT", "/t?comp=acl", false).xml_errors());

    let e = "/t(PartitionKey='a',RowKey='b')";
    let conditional = route("PUT", e, true).into_parts();
    assert!(matches!(conditional.if_match, Ok(IfMatch::Any)));
    // A condition that is not header text is refused, never taken for none (an
    // update answered as an upsert).
    let mut headers = HeaderMap::new();
    headers.insert("if-match", http::HeaderValue::from_bytes(b"W/\"\xff\"").unwrap());
    let r = Route::of(&Method::PUT, e, &[], &headers);
    assert_eq!(r.operation(), Operation::UpdateEntity);
    assert!(r.into_parts().if_match.is_err());
}
