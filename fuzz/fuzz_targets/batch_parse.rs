//! `$batch` request parser: arbitrary bytes under a few content types must never
//! panic, and whatever parses must hold the codec's invariants and be writable
//! as a response.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tafel_protocol::batch::{
    new_boundaries, parse_batch, write_changeset_response, write_query_response, BatchKind, SubResponse, MAX_PARTS,
};

const CONTENT_TYPES: &[&str] = &[
    "multipart/mixed; boundary=b",
    "multipart/mixed; boundary=\"batch_1\"",
    "multipart/mixed; boundary=batch_7d2a",
    "Multipart/Mixed;charset=utf-8;boundary=-",
];

fuzz_target!(|data: &[u8]| {
    // An input that starts with a delimiter line is a whole body whose boundary
    // is that line's: the captured SDK bodies that seed this target
    // (fuzz/README.md) parse as they do in the codec's tests. Otherwise the first
    // byte picks the content type; a leading run up to `\n` may instead supply
    // one (so the fuzzer can explore Content-Type parsing too).
    let (content_type, body) = if let Some(line) = data.strip_prefix(b"--") {
        let end = line.iter().position(|b| matches!(b, b'\r' | b'\n')).unwrap_or(line.len());
        let boundary = String::from_utf8_lossy(&line[..end]);
        (format!("multipart/mixed; boundary={boundary}"), data)
    } else {
        let Some((&selector, rest)) = data.split_first() else {
            return;
        };
        if selector & 0x80 != 0 {
            match rest.iter().position(|b| *b == b'\n') {
                Some(nl) => (String::from_utf8_lossy(&rest[..nl]).into_owned(), &rest[nl + 1..]),
                None => return,
            }
        } else {
            (
                CONTENT_TYPES[usize::from(selector) % CONTENT_TYPES.len()].to_string(),
                rest,
            )
        }
    };

    let Ok(batch) = parse_batch(&content_type, body) else {
        return;
    };
    assert!(batch.operations.len() <= MAX_PARTS);
    if batch.kind == BatchKind::Query {
        assert_eq!(batch.operations.len(), 1);
    }
    let mut parts = Vec::with_capacity(batch.operations.len());
    for op in &batch.operations {
        assert!(!op.method.is_empty());
        assert!(!op.url.is_empty());
        let _ = op.path_and_query();
        let mut part = SubResponse::new(204);
        if let Some(id) = &op.content_id {
            part = part.header("Content-ID", id.clone());
        }
        parts.push(part.body(op.body.clone()));
    }
    let (bb, cb) = new_boundaries();
    let out = match (batch.kind, parts.first()) {
        (BatchKind::Query, Some(part)) => write_query_response(&bb, part),
        _ => write_changeset_response(&bb, &cb, &parts),
    };
    assert!(out.ends_with(format!("--{bb}--\r\n").as_bytes()));
});
