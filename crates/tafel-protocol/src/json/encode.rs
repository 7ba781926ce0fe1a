//! Entities to JSON, written by hand into one buffer: this runs for every entity
//! of every response, and the member order and annotation rules are exact
//! (json-format.md §1–§3).

use base64::Engine;
use tafel_service::model::{Entity, Value};

use super::MetadataLevel;
use crate::resource::entity_path;

/// How to write entities of one response.
pub struct EntityFormat<'a> {
    pub level: MetadataLevel,
    /// Scheme, host and (path-style) account: `http://127.0.0.1:10002/devstoreaccount1`.
    pub base_url: &'a str,
    pub account: &'a str,
    pub table: &'a str,
    /// `$select`: only these properties (system ones included only if listed).
    pub select: Option<&'a [String]>,
}

pub fn write_json_str(out: &mut Vec<u8>, s: &str) {
    // Most keys and values need no escaping: copy them in one go.
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
        return;
    }
    // Writing a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

fn key(out: &mut Vec<u8>, name: &str) {
    write_json_str(out, name);
    out.push(b':');
}

fn annotation(out: &mut Vec<u8>, name: &str, edm: &str) {
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"@odata.type\":\"");
    out.extend_from_slice(edm.as_bytes());
    out.extend_from_slice(b"\",");
}

fn double(out: &mut Vec<u8>, d: f64) -> bool {
    if d.is_nan() {
        out.extend_from_slice(b"\"NaN\"");
    } else if d == f64::INFINITY {
        out.extend_from_slice(b"\"Infinity\"");
    } else if d == f64::NEG_INFINITY {
        out.extend_from_slice(b"\"-Infinity\"");
    } else {
        // ryu keeps a fraction on integral values ("5.0"), so clients read a Double.
        let mut buf = ryu::Buffer::new();
        out.extend_from_slice(buf.format_finite(d).as_bytes());
        return false;
    }
    true
}

impl EntityFormat<'_> {
    fn selected(&self, name: &str) -> bool {
        self.select.is_none_or(|s| s.iter().any(|n| n == name))
    }

    /// Writes one entity object. `single` adds the `odata.metadata` member of
    /// single-entity bodies.
    pub fn write(&self, out: &mut Vec<u8>, e: &Entity, single: bool) {
        write_entity(self, out, e, single)
    }
}

pub fn write_entity(f: &EntityFormat<'_>, out: &mut Vec<u8>, e: &Entity, single: bool) {
    let full = f.level == MetadataLevel::Full;
    let meta = f.level != MetadataLevel::No;
    out.push(b'{');
    if single && meta {
        key(out, "odata.metadata");
        write_json_str(out, &format!("{}/$metadata#{}/@Element", f.base_url, f.table));
        out.push(b',');
    }
    let path = if full {
        entity_path(f.table, &e.partition_key, &e.row_key)
    } else {
        String::new()
    };
    if full {
        key(out, "odata.type");
        write_json_str(out, &format!("{}.{}", f.account, f.table));
        out.push(b',');
        key(out, "odata.id");
        write_json_str(out, &format!("{}/{}", f.base_url, path));
        out.push(b',');
    }
    if meta {
        if let Some(etag) = e.etag() {
            key(out, "odata.etag");
            write_json_str(out, &etag);
            out.push(b',');
        }
    }
    if full {
        key(out, "odata.editLink");
        write_json_str(out, &path);
        out.push(b',');
    }
    if f.selected("PartitionKey") {
        key(out, "PartitionKey");
        write_json_str(out, &e.partition_key);
        out.push(b',');
    }
    if f.selected("RowKey") {
        key(out, "RowKey");
        write_json_str(out, &e.row_key);
        out.push(b',');
    }
    if let Some(ts) = e.timestamp.filter(|_| f.selected("Timestamp")) {
        if full {
            annotation(out, "Timestamp", "Edm.DateTime");
        }
        key(out, "Timestamp");
        out.push(b'"');
        let mut s = String::with_capacity(28);
        ts.write_iso(&mut s);
        out.extend_from_slice(s.as_bytes());
        out.extend_from_slice(b"\",");
    }
    for p in &e.properties {
        if !f.selected(&p.name) {
            continue;
        }
        let ty = p.value.edm_type();
        let annotate = meta
            && match &p.value {
                Value::Int64(_) | Value::DateTime(_) | Value::Guid(_) | Value::Binary(_) => true,
                Value::Double(d) => full || !d.is_finite(),
                Value::String(_) | Value::Int32(_) | Value::Boolean(_) => false,
            };
        if annotate {
            annotation(out, &p.name, ty.name());
        }
        key(out, &p.name);
        match &p.value {
            Value::String(s) => write_json_str(out, s),
            Value::Int32(v) => out.extend_from_slice(itoa::Buffer::new().format(*v).as_bytes()),
            Value::Int64(v) => {
                out.push(b'"');
                out.extend_from_slice(itoa::Buffer::new().format(*v).as_bytes());
                out.push(b'"');
            }
            Value::Double(d) => {
                double(out, *d);
            }
            Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::DateTime(d) => {
                out.push(b'"');
                let mut s = String::with_capacity(28);
                d.write_iso(&mut s);
                out.extend_from_slice(s.as_bytes());
                out.push(b'"');
            }
            Value::Guid(g) => {
                out.push(b'"');
                g.write_canonical(out);
                out.push(b'"');
            }
            Value::Binary(b) => {
                out.push(b'"');
                out.extend_from_slice(base64::engine::general_purpose::STANDARD.encode(b).as_bytes());
                out.push(b'"');
            }
        }
        out.push(b',');
    }
    if out.last() == Some(&b',') {
        out.pop();
    }
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(s: &str) -> String {
        let mut out = Vec::new();
        write_json_str(&mut out, s);
        String::from_utf8(out).unwrap_or_default()
    }

    #[test]
    fn strings_are_valid_json_on_both_paths() {
        for s in [
            "plain",
            "",
            "ünïcode ✓ \u{1F600}",
            "quote\"d",
            "back\\slash",
            "line\nbreak\t",
            "\u{1}\u{1f}",
            "</script>",
        ] {
            let written = json(s);
            let back: String = serde_json::from_str(&written).unwrap_or_else(|e| panic!("{written}: {e}"));
            assert_eq!(back, s);
        }
        assert_eq!(json("plain"), "\"plain\"");
    }

    #[test]
    fn guids_are_written_canonically() {
        let g = tafel_service::model::Guid::parse("3F2504E0-4F89-11D3-9A0C-0305E82C3301").expect("valid guid");
        let mut out = Vec::new();
        g.write_canonical(&mut out);
        assert_eq!(out, b"3f2504e0-4f89-11d3-9a0c-0305e82c3301");
    }
}
