//! What the parser accepts beyond the strict grammar: boundary forms, request
//! targets, header spellings, padding, preambles and epilogues.

use super::*;

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
