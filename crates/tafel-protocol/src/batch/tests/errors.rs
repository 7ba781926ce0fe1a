//! Every way a body is rejected: always 400 InvalidInput, with a message that
//! says what was wrong.

use super::*;

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
