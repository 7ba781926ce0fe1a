//! The response writer: exact bytes against recorded Azure responses, and a
//! parse → write → read-back round trip.

use super::fixtures::*;
use super::*;

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
