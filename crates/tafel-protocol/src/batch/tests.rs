//! Codec tests: SDK fixtures, each tolerance, each error, exact response bytes,
//! and a parse → write → read-back round trip.

use super::fixtures::*;
use super::*;
use tafel_service::ErrorCode;

fn parse(ct: &str, body: &str) -> BatchRequest {
    match parse_batch(ct, body.as_bytes()) {
        Ok(b) => b,
        Err(e) => panic!("parse failed: {e}\n{body}"),
    }
}

fn parse_err(ct: &str, body: &str) -> String {
    match parse_batch(ct, body.as_bytes()) {
        Ok(b) => panic!("expected an error, got {b:?}\n{body}"),
        Err(e) => {
            assert_eq!(e.code, ErrorCode::InvalidInput);
            assert_eq!(e.status(), 400);
            e.message.into_owned()
        }
    }
}

fn methods(b: &BatchRequest) -> Vec<&str> {
    b.operations.iter().map(|o| o.method.as_str()).collect()
}

fn body_str(op: &SubRequest) -> &str {
    std::str::from_utf8(&op.body).unwrap()
}

const CT: &str = "multipart/mixed; boundary=batch_1";

/// A batch with one changeset holding `parts` (each: MIME headers, blank line,
/// request), CRLF line endings.
fn changeset_body(parts: &[&str]) -> String {
    let mut s = String::from("--batch_1\r\nContent-Type: multipart/mixed; boundary=changeset_1\r\n\r\n");
    for p in parts {
        s.push_str("--changeset_1\r\n");
        s.push_str(p);
        s.push_str("\r\n");
    }
    s.push_str("--changeset_1--\r\n--batch_1--\r\n");
    s
}

const HTTP_PART: &str = "Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n";

fn op_part(request: &str) -> String {
    format!("{HTTP_PART}{request}")
}

// ---------------------------------------------------------------- SDK fixtures

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

// ------------------------------------------------------------------ tolerances

#[test]
fn quoted_boundary_and_parameter_order() {
    let body = changeset_body(&[&op_part(
        "DELETE /t(PartitionKey='a',RowKey='b') HTTP/1.1\r\nIf-Match: *\r\n\r\n",
    )]);
    for ct in [
        "multipart/mixed; boundary=\"batch_1\"",
        "Multipart/Mixed;charset=utf-8;BOUNDARY=batch_1",
        "multipart/mixed ; boundary = batch_1 ",
    ] {
        assert_eq!(methods(&parse(ct, &body)), ["DELETE"], "{ct}");
    }
    // Quoted changeset boundary too, with characters that need quoting.
    let body = "--batch_1\r\nContent-Type: multipart/mixed; boundary=\"cs:1 x\"\r\n\r\n--cs:1 x\r\n".to_string()
        + HTTP_PART
        + "DELETE /t() HTTP/1.1\r\n\r\n\r\n--cs:1 x--\r\n--batch_1--\r\n";
    assert_eq!(methods(&parse(CT, &body)), ["DELETE"]);
}

#[test]
fn arbitrary_boundary_strings() {
    let body = "--XYZ'()+_,-./:=?\r\nContent-Type: multipart/mixed; boundary=abc\r\n\r\n--abc\r\n".to_string()
        + HTTP_PART
        + "POST /t HTTP/1.1\r\n\r\n{}\r\n--abc--\r\n--XYZ'()+_,-./:=?--";
    let b = parse("multipart/mixed; boundary=\"XYZ'()+_,-./:=?\"", &body);
    assert_eq!(body_str(&b.operations[0]), "{}");
}

#[test]
fn request_target_forms() {
    let body = changeset_body(&[
        &op_part("POST http://127.0.0.1:10002/devstoreaccount1/t HTTP/1.1\r\n\r\n{}"),
        &op_part("PUT /devstoreaccount1/t(PartitionKey='a',RowKey='b') HTTP/1.1\r\n\r\n{}"),
        &op_part("MERGE /t(PartitionKey='a',RowKey='c') HTTP/1.1\r\n\r\n{}"),
        &op_part("DELETE t(PartitionKey='a',RowKey='d')\r\nIf-Match: *\r\n\r\n"),
    ]);
    let b = parse(CT, &body);
    let urls: Vec<&str> = b.operations.iter().map(|o| o.url.as_str()).collect();
    assert_eq!(
        urls,
        [
            "http://127.0.0.1:10002/devstoreaccount1/t",
            "/devstoreaccount1/t(PartitionKey='a',RowKey='b')",
            "/t(PartitionKey='a',RowKey='c')",
            "t(PartitionKey='a',RowKey='d')",
        ]
    );
    let paths: Vec<&str> = b.operations.iter().map(|o| o.path_and_query()).collect();
    assert_eq!(paths[0], "/devstoreaccount1/t");
    assert_eq!(&urls[1..], &paths[1..]);
}

#[test]
fn verbs_pass_through_upper_cased() {
    let body = changeset_body(&[
        &op_part("patch /t(PartitionKey='a',RowKey='b') HTTP/1.1\r\n\r\n{}"),
        &op_part("Get /t(PartitionKey='a',RowKey='c') HTTP/1.1\r\n\r\n"),
        &op_part("POST /t(PartitionKey='a',RowKey='d') HTTP/1.1\r\nX-HTTP-Method: MERGE\r\n\r\n{}"),
    ]);
    let b = parse(CT, &body);
    assert_eq!(methods(&b), ["PATCH", "GET", "POST"]);
    assert_eq!(b.operations[2].header_str("x-http-method"), Some("MERGE"));
}

#[test]
fn content_id_in_either_place() {
    let body = changeset_body(&[
        "Content-Type: application/http\r\nContent-ID: 7\r\n\r\nPOST /t HTTP/1.1\r\n\r\n{}",
        &op_part("POST /t HTTP/1.1\r\nContent-ID: 8\r\n\r\n{}"),
        // MIME-level wins when both are present.
        "Content-Type: application/http\r\ncontent-id: 9\r\n\r\nPOST /t HTTP/1.1\r\nContent-ID: 99\r\n\r\n{}",
        &op_part("POST /t HTTP/1.1\r\n\r\n{}"),
    ]);
    let b = parse(CT, &body);
    let ids: Vec<Option<&str>> = b.operations.iter().map(|o| o.content_id.as_deref()).collect();
    assert_eq!(ids, [Some("7"), Some("8"), Some("9"), None]);
}

#[test]
fn empty_bodies_and_missing_blank_line() {
    let body = changeset_body(&[
        // Headers, blank line, nothing.
        &op_part("DELETE /t(PartitionKey='a',RowKey='1') HTTP/1.1\r\nIf-Match: *\r\n\r\n"),
        // Headers without the terminating blank line.
        &op_part("DELETE /t(PartitionKey='a',RowKey='2') HTTP/1.1\r\nIf-Match: *\r\n"),
        // Request line only.
        &op_part("DELETE /t(PartitionKey='a',RowKey='3') HTTP/1.1"),
    ]);
    let b = parse(CT, &body);
    assert_eq!(b.operations.len(), 3);
    for op in &b.operations {
        assert!(op.body.is_empty(), "{op:?}");
    }
    assert_eq!(b.operations[1].header_str("if-match"), Some("*"));
    assert!(b.operations[2].headers.is_empty());
}

#[test]
fn body_keeps_everything_but_the_last_line_break() {
    let json = "{\"a\":\"--changeset_1\",\"b\":\"x\r\n--batch_1 y\"}";
    let body = changeset_body(&[
        &op_part(&format!(
            "POST /t HTTP/1.1\r\nContent-Type: application/json\r\n\r\n{json}"
        )),
        // Multi-line body, trailing blank line kept except the delimiter's CRLF.
        &op_part("POST /t HTTP/1.1\r\n\r\n{\n  \"a\": 1\n}\r\n"),
        &op_part("POST /t HTTP/1.1\r\n\r\n  {} \t"),
    ]);
    let b = parse(CT, &body);
    assert_eq!(body_str(&b.operations[0]), json);
    assert_eq!(body_str(&b.operations[1]), "{\n  \"a\": 1\n}\r\n");
    assert_eq!(body_str(&b.operations[2]), "  {} \t");
}

#[test]
fn body_with_boundary_text_at_line_start_but_longer() {
    // A line that starts with the delimiter text but continues is content.
    let body = changeset_body(&[&op_part(
        "POST /t HTTP/1.1\r\n\r\n--changeset_1x\r\n--changeset_1 z\r\n--changeset_1--y",
    )]);
    let b = parse(CT, &body);
    assert_eq!(
        body_str(&b.operations[0]),
        "--changeset_1x\r\n--changeset_1 z\r\n--changeset_1--y"
    );
}

#[test]
fn transport_padding_preamble_epilogue() {
    let body = concat!(
        "This is the preamble.\r\n",
        "--batch_1 \t\r\n",
        "Content-Type: multipart/mixed; boundary=changeset_1\r\n",
        "\r\n",
        "changeset preamble\r\n",
        "--changeset_1  \r\n",
        "Content-Type: application/http\r\n",
        "Content-Transfer-Encoding: binary\r\n",
        "\r\n",
        "POST /t HTTP/1.1\r\n",
        "\r\n",
        "{}\r\n",
        "--changeset_1--\t \r\n",
        "changeset epilogue\r\n",
        "--batch_1-- \r\n",
        "This is the epilogue.\r\n",
        "--batch_1\r\n",
    );
    let b = parse(CT, body);
    assert_eq!(methods(&b), ["POST"]);
    assert_eq!(body_str(&b.operations[0]), "{}");
}

#[test]
fn header_names_case_insensitive_and_folded_values() {
    let body = concat!(
        "--batch_1\r\n",
        "CONTENT-TYPE: multipart/mixed;\r\n",
        " boundary=changeset_1\r\n",
        "\r\n",
        "--changeset_1\r\n",
        "content-type: Application/HTTP; msgtype=request\r\n",
        "CONTENT-TRANSFER-ENCODING: BINARY\r\n",
        "cOnTeNt-Id: 3\r\n",
        "\r\n",
        "PUT /t(PartitionKey='a',RowKey='b') HTTP/1.1\r\n",
        "IF-MATCH: *\r\n",
        "Accept:application/json;odata=nometadata\r\n",
        "\r\n",
        "{}\r\n",
        "--changeset_1--\r\n",
        "--batch_1--\r\n",
    );
    let b = parse(CT, body);
    let op = &b.operations[0];
    assert_eq!(op.content_id.as_deref(), Some("3"));
    assert_eq!(op.header_str("If-Match"), Some("*"));
    assert_eq!(op.header_str("accept"), Some("application/json;odata=nometadata"));
}

#[test]
fn repeated_sub_request_headers_are_all_kept() {
    let body = changeset_body(&[&op_part(
        "POST /t HTTP/1.1\r\nX-HTTP-Method: MERGE\r\nX-HTTP-Method: PUT\r\n\r\n{}",
    )]);
    let b = parse(CT, &body);
    let all: Vec<_> = b.operations[0].headers.get_all("x-http-method").iter().collect();
    assert_eq!(all.len(), 2);
}

#[test]
fn blank_lines_before_request_line() {
    let body = changeset_body(&[&op_part("\r\n\r\nPOST /t HTTP/1.1\r\n\r\n{}")]);
    assert_eq!(methods(&parse(CT, &body)), ["POST"]);
}

#[test]
fn query_batch() {
    let body = format!(
        "--batch_1\r\n{HTTP_PART}GET /t(PartitionKey='a',RowKey='b') HTTP/1.1\r\nAccept: application/json;odata=nometadata\r\n\r\n\r\n--batch_1--\r\n"
    );
    let b = parse(CT, &body);
    assert_eq!(b.kind, BatchKind::Query);
    assert_eq!(b.operations.len(), 1);
    assert_eq!(b.operations[0].url, "/t(PartitionKey='a',RowKey='b')");
    assert!(b.operations[0].body.is_empty());
}

#[test]
fn empty_changeset_parses() {
    // JS-style empty transaction; Azure rejects it, the caller decides.
    let body = "--batch_1\r\ncontent-type: multipart/mixed; boundary=changeset_1\r\n\r\n\r\n--changeset_1--\r\n--batch_1--\r\n";
    let b = parse(CT, body);
    assert_eq!(b.kind, BatchKind::Changeset);
    assert!(b.operations.is_empty());
}

#[test]
fn one_hundred_and_one_operations_parse() {
    // The 100-operation limit is the caller's (it reports the 101st op).
    let op = op_part("POST /t HTTP/1.1\r\n\r\n{}");
    let parts: Vec<&str> = std::iter::repeat_n(op.as_str(), 101).collect();
    assert_eq!(parse(CT, &changeset_body(&parts)).operations.len(), 101);
}

// ---------------------------------------------------------------------- errors

#[test]
fn error_content_type() {
    let body = changeset_body(&[&op_part("POST /t HTTP/1.1\r\n\r\n{}")]);
    for ct in [
        "",
        "application/json",
        "multipart/mixed",
        "multipart/mixed; boundary=",
        "multipart/mixed; charset=utf-8",
        "multipart/form-data; boundary=batch_1",
        "text/plain; boundary=batch_1",
    ] {
        parse_err(ct, &body);
    }
}

#[test]
fn error_boundary_not_found_or_not_closed() {
    parse_err(CT, "");
    parse_err(CT, "just some text");
    parse_err(
        "multipart/mixed; boundary=other",
        &changeset_body(&[&op_part("POST /t HTTP/1.1\r\n\r\n{}")]),
    );
    // Truncated: no closing delimiter for the batch…
    let full = changeset_body(&[&op_part("POST /t HTTP/1.1\r\n\r\n{}")]);
    let truncated = full.trim_end_matches("--batch_1--\r\n");
    let msg = parse_err(CT, truncated);
    assert!(msg.contains("closing"), "{msg}");
    // …or for the changeset.
    let body = format!(
        "--batch_1\r\nContent-Type: multipart/mixed; boundary=changeset_1\r\n\r\n--changeset_1\r\n{HTTP_PART}POST /t HTTP/1.1\r\n\r\n{{}}\r\n--batch_1--\r\n"
    );
    let msg = parse_err(CT, &body);
    assert!(msg.contains("closing"), "{msg}");
}

#[test]
fn error_no_parts() {
    parse_err(CT, "--batch_1--\r\n");
    parse_err(CT, "preamble\r\n--batch_1--");
}

#[test]
fn error_two_changesets() {
    let cs = "--batch_1\r\nContent-Type: multipart/mixed; boundary=cs\r\n\r\n--cs\r\n".to_string()
        + HTTP_PART
        + "POST /t HTTP/1.1\r\n\r\n{}\r\n--cs--\r\n";
    let body = format!("{cs}{cs}--batch_1--\r\n");
    let msg = parse_err(CT, &body);
    assert!(msg.contains("only one changeset"), "{msg}");
}

#[test]
fn error_get_mixed_with_changeset() {
    let cs = "--batch_1\r\nContent-Type: multipart/mixed; boundary=cs\r\n\r\n--cs\r\n".to_string()
        + HTTP_PART
        + "POST /t HTTP/1.1\r\n\r\n{}\r\n--cs--\r\n";
    let get = format!("--batch_1\r\n{HTTP_PART}GET /t(PartitionKey='a',RowKey='b') HTTP/1.1\r\n\r\n\r\n");
    for body in [format!("{cs}{get}--batch_1--\r\n"), format!("{get}{cs}--batch_1--\r\n")] {
        let msg = parse_err(CT, &body);
        assert!(msg.contains("mix"), "{msg}");
    }
}

#[test]
fn error_lone_non_get_or_two_gets() {
    let lone_post = format!("--batch_1\r\n{HTTP_PART}POST /t HTTP/1.1\r\n\r\n{{}}\r\n--batch_1--\r\n");
    parse_err(CT, &lone_post);
    let get = format!("--batch_1\r\n{HTTP_PART}GET /t(PartitionKey='a',RowKey='b') HTTP/1.1\r\n\r\n\r\n");
    parse_err(CT, &format!("{get}{get}--batch_1--\r\n"));
}

#[test]
fn error_changeset_part_not_application_http() {
    for part in [
        "Content-Type: application/json\r\n\r\nPOST /t HTTP/1.1\r\n\r\n{}".to_string(),
        "Content-Transfer-Encoding: binary\r\n\r\nPOST /t HTTP/1.1\r\n\r\n{}".to_string(),
        "\r\nPOST /t HTTP/1.1\r\n\r\n{}".to_string(),
        // A changeset nested in a changeset.
        "Content-Type: multipart/mixed; boundary=inner\r\n\r\n--inner\r\n".to_string()
            + HTTP_PART
            + "POST /t HTTP/1.1\r\n\r\n{}\r\n--inner--",
    ] {
        let msg = parse_err(CT, &changeset_body(&[&part]));
        assert!(msg.contains("application/http"), "{msg}");
    }
}

#[test]
fn error_outer_part_without_or_with_unknown_content_type() {
    parse_err(CT, "--batch_1\r\n\r\nGET /t HTTP/1.1\r\n\r\n--batch_1--");
    parse_err(CT, "--batch_1\r\nContent-Type: text/plain\r\n\r\nhello\r\n--batch_1--");
    parse_err(CT, "--batch_1\r\n--batch_1--");
}

#[test]
fn error_malformed_request_line() {
    for request in [
        "",
        "\r\n\r\n",
        "POST\r\n\r\n{}",
        "POST HTTP/1.1\r\n\r\n{}",
        "/t HTTP/1.1\r\n\r\n{}",
        "P@ST /t HTTP/1.1\r\n\r\n{}",
        "{\"PartitionKey\":\"a\"}",
    ] {
        let msg = parse_err(CT, &changeset_body(&[&op_part(request)]));
        assert!(msg.contains("request line"), "{request:?}: {msg}");
    }
}

#[test]
fn error_malformed_headers() {
    for request in [
        "POST /t HTTP/1.1\r\nno colon here\r\n\r\n{}",
        "POST /t HTTP/1.1\r\nBad Name: x\r\n\r\n{}",
        "POST /t HTTP/1.1\r\nX: a\u{1}b\r\n\r\n{}",
    ] {
        parse_err(CT, &changeset_body(&[&op_part(request)]));
    }
    let many = format!("POST /t HTTP/1.1\r\n{}\r\n{{}}", "X-A: 1\r\n".repeat(200));
    let msg = parse_err(CT, &changeset_body(&[&op_part(&many)]));
    assert!(msg.contains("Too many headers"), "{msg}");
}

#[test]
fn error_too_many_parts() {
    let op = op_part("POST /t HTTP/1.1\r\n\r\n{}");
    let parts: Vec<&str> = std::iter::repeat_n(op.as_str(), MAX_PARTS).collect();
    // MAX_PARTS changeset parts + the changeset itself exceed the cap.
    let msg = parse_err(CT, &changeset_body(&parts));
    assert!(msg.contains("too many parts"), "{msg}");
    let parts: Vec<&str> = std::iter::repeat_n(op.as_str(), MAX_PARTS - 1).collect();
    assert_eq!(parse(CT, &changeset_body(&parts)).operations.len(), MAX_PARTS - 1);
}

#[test]
fn error_too_many_outer_parts_stops_early() {
    // Lots of tiny outer parts: rejected by the cap, not parsed one by one.
    let body = "--batch_1\r\n".repeat(100_000) + "--batch_1--";
    let msg = parse_err(CT, &body);
    assert!(msg.contains("too many parts"), "{msg}");
}

// ---------------------------------------------------------------------- writer

/// The parts of [`AZURE_RESPONSE_UPDATE_DELETE`].
fn update_delete_parts() -> Vec<SubResponse> {
    vec![
        SubResponse::new(204)
            .header("Content-ID", "0")
            .header("X-Content-Type-Options", "nosniff")
            .header("Cache-Control", "no-cache")
            .header("DataServiceVersion", "1.0;")
            .header("ETag", "W/\"datetime'2014-01-31T10%3A39%3A48.8625852Z'\""),
        SubResponse::new(204)
            .header("Content-ID", "1")
            .header("X-Content-Type-Options", "nosniff")
            .header("Cache-Control", "no-cache")
            .header("DataServiceVersion", "1.0;"),
    ]
}

#[test]
fn writer_matches_recorded_azure_success() {
    let out = write_changeset_response(
        "batchresponse_e4a1a0da-d414-41fb-a62c-d6534bb8cbf4",
        "changesetresponse_20e8418a-6031-4765-aecd-88045fbe9b1b",
        &update_delete_parts(),
    );
    assert_eq!(String::from_utf8(out).unwrap(), AZURE_RESPONSE_UPDATE_DELETE);
}

#[test]
fn writer_matches_recorded_azure_failure() {
    let error = concat!(
        "{\"odata.error\":{\"code\":\"EntityAlreadyExists\",\"message\":{\"lang\":\"en-US\",",
        "\"value\":\"1:The specified entity already exists.\\nRequestId:a1f47a48-9bb1-4b3d-8c6d-d49d382153e8",
        "\\nTime:2014-01-31T10:28:02.5907425Z\"}}}"
    );
    let part = SubResponse::new(409)
        .header("Content-ID", "1")
        .header("X-Content-Type-Options", "nosniff")
        .header("Cache-Control", "no-cache")
        .header("Preference-Applied", "return-no-content")
        .header("DataServiceVersion", "3.0;")
        .header(
            "Content-Type",
            "application/json;odata=minimalmetadata;streaming=true;charset=utf-8",
        )
        .body(error);
    let out = write_changeset_response(
        "batchresponse_fe2c3109-0555-4011-abe3-55d0c32a4ca2",
        "changesetresponse_a2395820-82ca-4a23-bd49-290bfa44f306",
        &[part],
    );
    assert_eq!(String::from_utf8(out).unwrap(), AZURE_RESPONSE_CONFLICT);
}

#[test]
fn writer_matches_recorded_azure_query() {
    let part = SubResponse::new(200)
        .header("DataServiceVersion", "3.0;")
        .header(
            "Content-Type",
            "application/json;odata=minimalmetadata;streaming=true;charset=utf-8",
        )
        .header("Content-ID", "0")
        .header("X-Content-Type-Options", "nosniff")
        .header("Cache-Control", "no-cache")
        .header("ETag", "W/\"datetime'2014-01-31T10%3A39%3A48.8625852Z'\"")
        .body(concat!(
            "{\"odata.metadata\":\"https://dummy.table.core.windows.net/$metadata#testtable/@Element\",",
            "\"PartitionKey\":\"tests\",\"RowKey\":\"insert1\",\"Timestamp\":\"2014-01-31T10:39:48.8625852Z\",\"value\":11}"
        ));
    let out = write_query_response("batchresponse_1e63b1d3-5284-43a5-b13f-b379dfe1a38b", &part);
    assert_eq!(String::from_utf8(out).unwrap(), AZURE_RESPONSE_GET);
}

#[test]
fn writer_small_example_exact_bytes() {
    let parts = [
        SubResponse::new(201)
            .header("Content-ID", "1")
            .header(
                "Content-Type",
                "application/json;odata=nometadata;streaming=true;charset=utf-8",
            )
            .body("{\"a\":1}"),
        SubResponse::new(412),
    ];
    let out = write_changeset_response("batchresponse_b", "changesetresponse_c", &parts);
    let expected = "--batchresponse_b\r\n\
Content-Type: multipart/mixed; boundary=changesetresponse_c\r\n\
\r\n\
--changesetresponse_c\r\n\
Content-Type: application/http\r\n\
Content-Transfer-Encoding: binary\r\n\
\r\n\
HTTP/1.1 201 Created\r\n\
Content-ID: 1\r\n\
Content-Type: application/json;odata=nometadata;streaming=true;charset=utf-8\r\n\
\r\n\
{\"a\":1}\r\n\
--changesetresponse_c\r\n\
Content-Type: application/http\r\n\
Content-Transfer-Encoding: binary\r\n\
\r\n\
HTTP/1.1 412 Precondition Failed\r\n\
\r\n\
\r\n\
--changesetresponse_c--\r\n\
--batchresponse_b--\r\n";
    assert_eq!(String::from_utf8(out).unwrap(), expected);

    let empty = write_changeset_response("b", "c", &[]);
    assert_eq!(
        String::from_utf8(empty).unwrap(),
        "--b\r\nContent-Type: multipart/mixed; boundary=c\r\n\r\n--c--\r\n--b--\r\n"
    );
}

/// A deliberately naive reader of a changeset response, written the way the
/// SDKs read it (split on the literal delimiters), independent of the codec.
/// (status, headers, body) of each part.
type ReadPart = (u16, Vec<(String, String)>, String);

fn read_changeset_response(content_type: &str, body: &[u8]) -> Vec<ReadPart> {
    let text = std::str::from_utf8(body).unwrap();
    let batch_boundary = content_type.strip_prefix("multipart/mixed; boundary=").unwrap();
    let inner = text
        .strip_prefix(&format!("--{batch_boundary}\r\n"))
        .unwrap()
        .strip_suffix(&format!("--{batch_boundary}--\r\n"))
        .unwrap();
    let (cs_header, cs_body) = inner.split_once("\r\n\r\n").unwrap();
    let cs_boundary = cs_header
        .strip_prefix("Content-Type: multipart/mixed; boundary=")
        .unwrap();
    let cs_body = cs_body.strip_suffix(&format!("--{cs_boundary}--\r\n")).unwrap();
    let mut parts = Vec::new();
    for chunk in cs_body.split(&format!("--{cs_boundary}\r\n")).skip(1) {
        let chunk = chunk.strip_suffix("\r\n").unwrap();
        let (mime, http) = chunk.split_once("\r\n\r\n").unwrap();
        assert_eq!(
            mime,
            "Content-Type: application/http\r\nContent-Transfer-Encoding: binary"
        );
        let (head, body) = http.split_once("\r\n\r\n").unwrap();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        let status: u16 = status_line.split(' ').nth(1).unwrap().parse().unwrap();
        let headers = lines
            .map(|l| {
                let (n, v) = l.split_once(": ").unwrap();
                (n.to_string(), v.to_string())
            })
            .collect();
        parts.push((status, headers, body.to_string()));
    }
    parts
}

#[test]
fn round_trip_parse_then_write() {
    for (ct, body) in [
        (PY_AZURITE_CONTENT_TYPE, PY_AZURITE),
        (JS_AZURITE_CONTENT_TYPE, JS_AZURITE),
    ] {
        let batch = parse(ct, body);
        let responses: Vec<SubResponse> = batch
            .operations
            .iter()
            .enumerate()
            .map(|(i, op)| {
                // Echo the request's Content-ID, else number 1..n.
                let id = op.content_id.clone().unwrap_or_else(|| (i + 1).to_string());
                let r = SubResponse::new(if op.method == "POST" { 201 } else { 204 })
                    .header("Content-ID", id)
                    .header("ETag", format!("W/\"datetime'2024-06-04T08%3A15%3A30.{i:07}Z'\""));
                if op.method == "POST" {
                    r.header(
                        "Content-Type",
                        "application/json;odata=minimalmetadata;streaming=true;charset=utf-8",
                    )
                    .body(op.body.clone())
                } else {
                    r
                }
            })
            .collect();
        let (bb, cb) = new_boundaries();
        let out = write_changeset_response(&bb, &cb, &responses);
        let read = read_changeset_response(&response_content_type(&bb), &out);
        assert_eq!(read.len(), batch.operations.len());
        for (i, ((status, headers, body), op)) in read.iter().zip(&batch.operations).enumerate() {
            let expected_id = op.content_id.clone().unwrap_or_else(|| (i + 1).to_string());
            assert_eq!(headers[0], ("Content-ID".to_string(), expected_id));
            if op.method == "POST" {
                assert_eq!(*status, 201);
                assert_eq!(body.as_bytes(), &op.body[..]);
            } else {
                assert_eq!(*status, 204);
                assert!(body.is_empty());
            }
        }
    }
}

#[test]
fn written_responses_reparse_as_multipart() {
    // The writer's framing is valid multipart: the codec's own splitter reads
    // it back with exact part contents.
    let (bb, cb) = new_boundaries();
    let out = write_changeset_response(&bb, &cb, &update_delete_parts());
    let mut budget = 10;
    let outer = multipart::split_parts(&out, &bb, &mut budget).unwrap();
    assert_eq!(outer.len(), 1);
    let (h, content) = multipart::parse_header_block(outer[0]).unwrap();
    assert_eq!(
        multipart::header(&h, "content-type"),
        Some(format!("multipart/mixed; boundary={cb}").as_str())
    );
    let inner = multipart::split_parts(content, &cb, &mut budget).unwrap();
    assert_eq!(inner.len(), 2);
    assert!(inner[1].ends_with(b"DataServiceVersion: 1.0;\r\n\r\n"));
}

// ------------------------------------------------------------------ robustness

fn all_fixtures() -> Vec<(&'static str, &'static str)> {
    vec![
        (PY_AZURITE_CONTENT_TYPE, PY_AZURITE),
        (PY_COSMOS_CONTENT_TYPE, PY_COSMOS),
        (JS_AZURITE_CONTENT_TYPE, JS_AZURITE),
        (JS_COSMOS_CONTENT_TYPE, JS_COSMOS),
        (JS_2020_CONTENT_TYPE, JS_2020),
        (NODE_LEGACY_CONTENT_TYPE, NODE_LEGACY),
        (NODE_LEGACY_CONTENT_TYPE, NODE_LEGACY_GET),
        ("multipart/mixed; boundary=batch_7d2a", SPEC_EXAMPLE_LF),
    ]
}

#[test]
fn every_truncation_of_every_fixture_is_handled() {
    for (ct, body) in all_fixtures() {
        let bytes = body.as_bytes();
        for end in 0..bytes.len() {
            let _ = parse_batch(ct, &bytes[..end]);
        }
        for start in 0..bytes.len().min(400) {
            let _ = parse_batch(ct, &bytes[start..]);
        }
    }
}

/// Small deterministic PRNG (xorshift64*) so the mutation tests need no
/// dependency and always run the same cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn check_invariants(batch: &BatchRequest) {
    assert!(batch.operations.len() <= MAX_PARTS);
    assert!(batch.kind != BatchKind::Query || batch.operations.len() == 1);
    for op in &batch.operations {
        assert!(!op.method.is_empty() && !op.url.is_empty());
        let _ = op.path_and_query();
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    // Bytes drawn mostly from the characters that matter to the parser.
    const ALPHABET: &[u8] =
        b"--\r\n\r\n b:;=\"Content-Type multipart/mixed application/http boundary=b GET /t HTTP/1.1 {}\t\x00\xff";
    for _ in 0..3000 {
        let len = rng.below(400);
        let body: Vec<u8> = (0..len)
            .map(|_| {
                if rng.below(8) == 0 {
                    rng.next() as u8
                } else {
                    ALPHABET[rng.below(ALPHABET.len())]
                }
            })
            .collect();
        for ct in [
            "multipart/mixed; boundary=b",
            "multipart/mixed; boundary=\"b\"",
            "multipart/mixed; boundary=-",
        ] {
            if let Ok(batch) = parse_batch(ct, &body) {
                check_invariants(&batch);
            }
        }
    }
}

#[test]
fn mutated_fixtures_never_panic() {
    let fixtures = all_fixtures();
    let mut rng = Rng(0x0123_4567_89AB_CDEF);
    let mut parsed = 0;
    for round in 0..4000 {
        let (ct, body) = fixtures[round % fixtures.len()];
        let mut bytes = body.as_bytes().to_vec();
        for _ in 0..1 + rng.below(6) {
            if bytes.is_empty() {
                break;
            }
            let pos = rng.below(bytes.len());
            let byte = rng.next() as u8;
            match rng.below(5) {
                0 => bytes[pos] = byte,
                1 => {
                    bytes.remove(pos);
                }
                2 => bytes.insert(pos, b"\r\n- :"[rng.below(5)]),
                3 => {
                    // Duplicate a slice (repeats delimiters, headers, parts).
                    let end = (pos + rng.below(200)).min(bytes.len());
                    let chunk = bytes[pos..end].to_vec();
                    bytes.splice(pos..pos, chunk);
                }
                _ => bytes.truncate(pos),
            }
        }
        if let Ok(batch) = parse_batch(ct, &bytes) {
            parsed += 1;
            check_invariants(&batch);
        }
    }
    // The mutations are light enough that many inputs still parse.
    assert!(parsed > 400, "only {parsed} mutated inputs parsed");
}
