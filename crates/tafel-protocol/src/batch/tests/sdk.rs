//! The request bodies the SDKs send ([`super::fixtures`]), parsed.

use super::fixtures::*;
use super::*;

#[test]
fn python_sdk_batch() {
    let b = parse(PY_AZURITE_CONTENT_TYPE, PY_AZURITE);
    assert_eq!(b.kind, BatchKind::Changeset);
    assert_eq!(methods(&b), ["POST", "PATCH", "PUT", "PATCH", "PUT", "DELETE"]);
    let base = "http://127.0.0.1:10002/devstoreaccount1/orders";
    assert_eq!(b.operations[0].url, base);
    assert_eq!(
        b.operations[5].url,
        format!("{base}(PartitionKey='p1',RowKey='r%27%276%20x')")
    );
    assert_eq!(
        b.operations[1].path_and_query(),
        "/devstoreaccount1/orders(PartitionKey='p1',RowKey='r2')"
    );
    for (i, op) in b.operations.iter().enumerate() {
        // azure-core numbers parts from 0 in the MIME headers.
        assert_eq!(op.content_id.as_deref(), Some(i.to_string().as_str()));
        assert!(op.headers.get("content-id").is_none());
        // The body framing is exact: it matches the Content-Length Python sent.
        if let Some(len) = op.header_str("content-length") {
            assert_eq!(len.parse::<usize>().unwrap(), op.body.len(), "op {i}");
        }
        assert!(op.header_str("prefer").is_none());
    }
    assert!(body_str(&b.operations[0]).starts_with("{\"PartitionKey\": \"p1\""));
    assert!(body_str(&b.operations[0]).contains("a --changeset_x line\\r\\n--batch"));
    assert!(body_str(&b.operations[0]).ends_with('}'));
    assert_eq!(
        b.operations[3].header_str("If-Match"),
        Some("W/\"datetime'2024-06-04T08%3A00%3A00.0000000Z'\"")
    );
    assert_eq!(b.operations[4].header_str("if-match"), Some("*"));
    assert_eq!(b.operations[5].header_str("if-match"), Some("*"));
    assert!(b.operations[5].body.is_empty());
    assert_eq!(
        b.operations[0].header_str("accept"),
        Some("application/json;odata=minimalmetadata")
    );
}

#[test]
fn python_sdk_cosmos_style_merge() {
    let b = parse(PY_COSMOS_CONTENT_TYPE, PY_COSMOS);
    assert_eq!(methods(&b), ["POST", "POST", "PUT", "POST", "PUT", "DELETE"]);
    assert_eq!(b.operations[0].header_str("x-http-method"), None);
    assert_eq!(b.operations[1].header_str("X-HTTP-Method"), Some("MERGE"));
    assert_eq!(b.operations[3].header_str("X-HTTP-Method"), Some("MERGE"));
    assert!(b.operations[1]
        .url
        .starts_with("http://localhost:10005/devstoreaccount1/orders(PartitionKey='p1'"));
}

#[test]
fn js_sdk_batch() {
    let b = parse(JS_AZURITE_CONTENT_TYPE, JS_AZURITE);
    assert_eq!(b.kind, BatchKind::Changeset);
    assert_eq!(methods(&b), ["POST", "PATCH", "PUT", "PATCH", "PUT", "DELETE"]);
    for op in &b.operations {
        assert_eq!(op.content_id, None, "the JS SDK sends no Content-ID");
        assert!(op.header_str("x-ms-version").is_none());
    }
    assert_eq!(b.operations[0].header_str("prefer"), Some("return-no-content"));
    // The JS SDK writes an extra CRLF between the headers and the body.
    assert_eq!(
        body_str(&b.operations[0]),
        "\r\n{\"PartitionKey\":\"p1\",\"RowKey\":\"r1\",\"Qty\":3,\"Note\":\"a --changeset_x line\\r\\n--batch\"}"
    );
    assert_eq!(
        body_str(&b.operations[1]),
        "\r\n{\"PartitionKey\":\"p1\",\"RowKey\":\"r2\",\"Big\":\"9007199254740993\",\"Big@odata.type\":\"Edm.Int64\"}"
    );
    assert!(b.operations[5].body.is_empty());
    assert_eq!(
        b.operations[5].url,
        "http://127.0.0.1:10002/devstoreaccount1/orders(PartitionKey='p1',RowKey='r''6%20x')"
    );
}

#[test]
fn js_sdk_cosmos_style_merge() {
    let b = parse(JS_COSMOS_CONTENT_TYPE, JS_COSMOS);
    assert_eq!(methods(&b), ["POST", "POST", "PUT", "POST", "PUT", "DELETE"]);
    assert_eq!(b.operations[1].header_str("x-http-method"), Some("MERGE"));
    assert_eq!(b.operations[2].header_str("x-http-method"), None);
    assert_eq!(
        b.operations[4].path_and_query(),
        "/myacct/orders(PartitionKey='p1',RowKey='r5')"
    );
}

#[test]
fn js_2020_batch_without_closing_delimiter() {
    let b = parse(JS_2020_CONTENT_TYPE, JS_2020);
    assert_eq!(methods(&b), ["POST", "PUT"]);
    assert_eq!(
        body_str(&b.operations[0]),
        "{\"PartitionKey\":\"batchTest\",\"RowKey\":\"1\",\"name\":\"first\"}"
    );
}

#[test]
fn legacy_node_inner_content_id_and_get() {
    let b = parse(NODE_LEGACY_CONTENT_TYPE, NODE_LEGACY);
    assert_eq!(methods(&b), ["PUT", "DELETE"]);
    assert_eq!(b.operations[0].content_id.as_deref(), Some("0"));
    assert_eq!(b.operations[1].content_id.as_deref(), Some("1"));
    // Inner Content-ID also stays visible as a sub-request header.
    assert_eq!(b.operations[1].header_str("Content-ID"), Some("1"));
    assert!(b.operations[1].body.is_empty());

    let q = parse(NODE_LEGACY_CONTENT_TYPE, NODE_LEGACY_GET);
    assert_eq!(q.kind, BatchKind::Query);
    assert_eq!(methods(&q), ["GET"]);
    assert_eq!(q.operations[0].content_id.as_deref(), Some("0"));
    assert!(q.operations[0].body.is_empty());
    assert_eq!(
        q.operations[0].path_and_query(),
        "/testtable(PartitionKey=%27tests%27,RowKey=%27insert1%27)"
    );
}

#[test]
fn spec_example_lf_equals_crlf() {
    let lf = parse("multipart/mixed; boundary=batch_7d2a", SPEC_EXAMPLE_LF);
    let crlf_body = SPEC_EXAMPLE_LF.replace('\n', "\r\n");
    let crlf = parse("multipart/mixed; boundary=batch_7d2a", &crlf_body);
    assert_eq!(lf, crlf);
    assert_eq!(methods(&lf), ["POST", "MERGE", "DELETE"]);
    assert_eq!(
        body_str(&lf.operations[1]),
        "{\"PartitionKey\":\"2024-06\",\"RowKey\":\"A099\",\"Shipped\":true}"
    );
    assert!(lf.operations[2].body.is_empty());
    assert_eq!(lf.operations[0].header_str("dataserviceversion"), Some("3.0;"));
}

#[test]
fn sdk_fixtures_with_bare_lf() {
    for (ct, body) in [
        (PY_AZURITE_CONTENT_TYPE, PY_AZURITE),
        (JS_AZURITE_CONTENT_TYPE, JS_AZURITE),
    ] {
        let crlf = parse(ct, body);
        let lf = parse(ct, &body.replace("\r\n", "\n"));
        assert_eq!(methods(&crlf), methods(&lf));
        for (a, b) in crlf.operations.iter().zip(&lf.operations) {
            assert_eq!(a.url, b.url);
            assert_eq!(a.headers, b.headers);
            assert_eq!(a.content_id, b.content_id);
            // Bodies keep their own (JSON-escaped) text; only the JS extra
            // line break changes form.
            assert_eq!(body_str(a).trim_start(), body_str(b).trim_start());
        }
    }
}
