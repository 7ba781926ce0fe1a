//! Entities to JSON, written by hand into one buffer: this runs for every entity
//! of every response, and the member order and annotation rules are exact
//! (json-format.md §1–§3). One writer serves owned entities and stored rows alike
//! through [`EntityView`], and allocates nothing per entity: per-response parts
//! are built once in [`EntityFormat::new`], the rest goes straight into the buffer.

use std::convert::Infallible;

use base64::Engine;
use tafel_service::model::codec::ValueRef;
use tafel_service::model::{etag_bytes, DateTime, Entity, StoredRef};

use super::MetadataLevel;
use crate::resource::push_entity_keys;

/// How to write entities of one response.
pub struct EntityFormat<'a> {
    level: MetadataLevel,
    base_url: &'a str,
    table: &'a str,
    select: Option<&'a [String]>,
    /// Full metadata only: the `odata.type` value, and the openings of the
    /// `odata.id` and `odata.editLink` strings up to the key part.
    type_json: Vec<u8>,
    id_open: Vec<u8>,
    edit_open: Vec<u8>,
}

impl<'a> EntityFormat<'a> {
    /// `base_url` is scheme, host and (path-style) account, e.g.
    /// `http://127.0.0.1:10002/devstoreaccount1`; `select` is `$select`: only these
    /// properties (system ones included only if listed).
    pub fn new(
        level: MetadataLevel,
        base_url: &'a str,
        account: &str,
        table: &'a str,
        select: Option<&'a [String]>,
    ) -> Self {
        let mut f = EntityFormat {
            level,
            base_url,
            table,
            select,
            type_json: Vec::new(),
            id_open: Vec::new(),
            edit_open: Vec::new(),
        };
        if level == MetadataLevel::Full {
            write_json_str(&mut f.type_json, &format!("{account}.{table}"));
            f.id_open = json_str_opening(&format!("{base_url}/{table}"));
            f.edit_open = json_str_opening(table);
        }
        f
    }

    fn selected(&self, name: &str) -> bool {
        self.select.is_none_or(|s| s.iter().any(|n| n == name))
    }

    /// Writes one owned entity. `single` adds the `odata.metadata` member of
    /// single-entity bodies.
    pub fn write(&self, out: &mut Vec<u8>, e: &Entity, single: bool) {
        let properties = e
            .properties
            .iter()
            .map(|p| Ok::<_, Infallible>((p.name.as_str(), ValueRef::from(&p.value))));
        let view = EntityView {
            partition_key: &e.partition_key,
            row_key: &e.row_key,
            timestamp: e.timestamp,
            properties,
        };
        match write_entity(self, out, view, single) {
            Ok(()) => {}
            Err(never) => match never {},
        }
    }

    /// Writes one entity from its stored bytes, validating them on the way. On
    /// error `out` holds a partial object and must be dropped.
    pub fn write_stored(&self, out: &mut Vec<u8>, e: StoredRef<'_>, single: bool) -> tafel_service::Result<()> {
        let (pk, rk) = e.keys();
        let (ts, properties) = e.read()?;
        let view = EntityView {
            partition_key: &pk,
            row_key: &rk,
            timestamp: Some(ts),
            properties,
        };
        write_entity(self, out, view, single)?;
        Ok(())
    }
}

/// An entity as the writer sees it, borrowed. `properties` yields them in order,
/// or the error that stops the entity (corrupt stored bytes).
pub struct EntityView<'a, P> {
    pub partition_key: &'a str,
    pub row_key: &'a str,
    pub timestamp: Option<DateTime>,
    pub properties: P,
}

fn escaped(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// Whether JSON needs any byte of `s` escaped. Checks 16 bytes per step without an
/// early exit inside the step, so the compiler can use vector compares: this scan
/// is a large share of query encoding (every key and string value passes here).
fn needs_escape(s: &[u8]) -> bool {
    let mut chunks = s.chunks_exact(16);
    for c in &mut chunks {
        if c.iter().fold(false, |acc, &b| acc | escaped(b)) {
            return true;
        }
    }
    chunks.remainder().iter().any(|&b| escaped(b))
}

pub fn write_json_str(out: &mut Vec<u8>, s: &str) {
    // Most keys and values need no escaping: copy them in one go.
    if !needs_escape(s.as_bytes()) {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
        return;
    }
    // Writing a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// `s` as a JSON string without its closing quote, for a tail to follow. JSON
/// escapes character by character, so escaping the parts equals escaping the whole.
fn json_str_opening(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 2);
    write_json_str(&mut out, s);
    out.pop();
    out
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

/// `open` (from [`json_str_opening`]), the key part of an entity path, the
/// closing quote.
fn entity_path_str(out: &mut Vec<u8>, open: &[u8], pk: &str, rk: &str) {
    out.extend_from_slice(open);
    push_entity_keys(out, pk, rk);
    out.push(b'"');
}

/// The JSON string of `etag_for(ts)`; its only bytes JSON escapes are the two '"'.
fn etag_str(out: &mut Vec<u8>, ts: DateTime) {
    out.push(b'"');
    for b in etag_bytes(ts) {
        if b == b'"' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
}

fn datetime_str(out: &mut Vec<u8>, ts: DateTime) {
    out.push(b'"');
    out.extend_from_slice(&ts.iso_bytes());
    out.push(b'"');
}

/// Base64 encoded straight into the tail of `out`.
fn base64_str(out: &mut Vec<u8>, b: &[u8]) {
    let engine = &base64::engine::general_purpose::STANDARD;
    out.push(b'"');
    let start = out.len();
    match base64::encoded_len(b.len(), true) {
        Some(n) => {
            out.resize(start + n, 0);
            let written = engine.encode_slice(b, &mut out[start..]).unwrap_or(0);
            out.truncate(start + written);
        }
        // Only for inputs larger than memory; keep the allocating path's behaviour.
        None => out.extend_from_slice(engine.encode(b).as_bytes()),
    }
    out.push(b'"');
}

fn double(out: &mut Vec<u8>, d: f64) {
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
    }
}

fn value(out: &mut Vec<u8>, v: ValueRef<'_>) {
    match v {
        ValueRef::String(s) => write_json_str(out, s),
        ValueRef::Int32(v) => out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes()),
        ValueRef::Int64(v) => {
            out.push(b'"');
            out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
            out.push(b'"');
        }
        ValueRef::Double(d) => double(out, d),
        ValueRef::Boolean(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
        ValueRef::DateTime(d) => datetime_str(out, d),
        ValueRef::Guid(g) => {
            out.push(b'"');
            g.write_canonical(out);
            out.push(b'"');
        }
        ValueRef::Binary(b) => base64_str(out, b),
    }
}

/// One custom property and its trailing comma. Types JSON cannot tell apart are
/// annotated unless metadata is off; full metadata annotates every Double too.
fn property(out: &mut Vec<u8>, level: MetadataLevel, name: &str, v: ValueRef<'_>) {
    let annotate = level != MetadataLevel::No
        && match v {
            ValueRef::Int64(_) | ValueRef::DateTime(_) | ValueRef::Guid(_) | ValueRef::Binary(_) => true,
            ValueRef::Double(d) => level == MetadataLevel::Full || !d.is_finite(),
            ValueRef::String(_) | ValueRef::Int32(_) | ValueRef::Boolean(_) => false,
        };
    if annotate {
        annotation(out, name, v.edm_type().name());
    }
    key(out, name);
    value(out, v);
    out.push(b',');
}

/// Writes one entity object. `single` adds the `odata.metadata` member of
/// single-entity bodies. Stops at the first property error, leaving a partial
/// object in `out`.
pub fn write_entity<'a, P, E>(
    f: &EntityFormat<'_>,
    out: &mut Vec<u8>,
    e: EntityView<'a, P>,
    single: bool,
) -> Result<(), E>
where
    P: Iterator<Item = Result<(&'a str, ValueRef<'a>), E>>,
{
    let full = f.level == MetadataLevel::Full;
    let meta = f.level != MetadataLevel::No;
    out.push(b'{');
    if single && meta {
        key(out, "odata.metadata");
        write_json_str(out, &format!("{}/$metadata#{}/@Element", f.base_url, f.table));
        out.push(b',');
    }
    if full {
        key(out, "odata.type");
        out.extend_from_slice(&f.type_json);
        out.push(b',');
        key(out, "odata.id");
        entity_path_str(out, &f.id_open, e.partition_key, e.row_key);
        out.push(b',');
    }
    if let Some(ts) = e.timestamp.filter(|_| meta) {
        key(out, "odata.etag");
        etag_str(out, ts);
        out.push(b',');
    }
    if full {
        key(out, "odata.editLink");
        entity_path_str(out, &f.edit_open, e.partition_key, e.row_key);
        out.push(b',');
    }
    if f.selected("PartitionKey") {
        key(out, "PartitionKey");
        write_json_str(out, e.partition_key);
        out.push(b',');
    }
    if f.selected("RowKey") {
        key(out, "RowKey");
        write_json_str(out, e.row_key);
        out.push(b',');
    }
    if let Some(ts) = e.timestamp.filter(|_| f.selected("Timestamp")) {
        if full {
            annotation(out, "Timestamp", "Edm.DateTime");
        }
        key(out, "Timestamp");
        datetime_str(out, ts);
        out.push(b',');
    }
    for p in e.properties {
        let (name, v) = p?;
        if f.selected(name) {
            property(out, f.level, name, v);
        }
    }
    if out.last() == Some(&b',') {
        out.pop();
    }
    out.push(b'}');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tafel_service::model::{codec, etag_for, Guid, Property, StoredEntity, Value};

    use crate::resource::entity_path;

    /// The old `EntityFormat`, whose fields the old writer read.
    struct LegacyFormat<'a> {
        level: MetadataLevel,
        base_url: &'a str,
        account: &'a str,
        table: &'a str,
        select: Option<&'a [String]>,
    }

    /// The writer as it was before entities could be written from stored bytes,
    /// kept verbatim as the reference both paths must match byte for byte.
    fn legacy_write_entity(f: &LegacyFormat<'_>, out: &mut Vec<u8>, e: &Entity, single: bool) {
        let LegacyFormat {
            level,
            base_url,
            account,
            table,
            select,
        } = *f;
        let selected = |name: &str| select.is_none_or(|s| s.iter().any(|n| n == name));
        let full = level == MetadataLevel::Full;
        let meta = level != MetadataLevel::No;
        out.push(b'{');
        if single && meta {
            key(out, "odata.metadata");
            write_json_str(out, &format!("{}/$metadata#{}/@Element", base_url, table));
            out.push(b',');
        }
        let path = if full {
            entity_path(table, &e.partition_key, &e.row_key)
        } else {
            String::new()
        };
        if full {
            key(out, "odata.type");
            write_json_str(out, &format!("{}.{}", account, table));
            out.push(b',');
            key(out, "odata.id");
            write_json_str(out, &format!("{}/{}", base_url, path));
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
        if selected("PartitionKey") {
            key(out, "PartitionKey");
            write_json_str(out, &e.partition_key);
            out.push(b',');
        }
        if selected("RowKey") {
            key(out, "RowKey");
            write_json_str(out, &e.row_key);
            out.push(b',');
        }
        if let Some(ts) = e.timestamp.filter(|_| selected("Timestamp")) {
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
            if !selected(&p.name) {
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
                Value::Double(d) => double(out, *d),
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

    fn ts(s: &str) -> DateTime {
        DateTime::parse(s).unwrap_or(DateTime::MIN)
    }

    /// Every EDM type, the Double special values, integral doubles, Int64 beyond
    /// 2^53, binaries of every padding length and strings that need escaping.
    fn samples() -> Vec<Entity> {
        let p = |n: &str, value| Property { name: n.into(), value };
        let guid = Guid::parse("3F2504E0-4F89-11D3-9A0C-0305E82C3301").unwrap_or(Guid([0; 16]));
        let everything = Entity {
            partition_key: "p'1 ü/\"x\"".into(),
            row_key: "r\\2\n\u{1F600}%".into(),
            timestamp: Some(ts("2024-06-04T08:15:30.1234567Z")),
            properties: vec![
                p("Name", Value::String("Ada \"the\" \\ Countess\u{1}\t✓".into())),
                p("Empty", Value::String(String::new())),
                p("Age", Value::Int32(-36)),
                p("MaxI", Value::Int32(i32::MAX)),
                p("Big", Value::Int64(9_007_199_254_740_993)),
                p("MinL", Value::Int64(i64::MIN)),
                p("Score", Value::Double(97.5)),
                p("Five", Value::Double(5.0)),
                p("Tiny", Value::Double(-1e-300)),
                p("NegZero", Value::Double(-0.0)),
                p("Nan", Value::Double(f64::NAN)),
                p("Inf", Value::Double(f64::INFINITY)),
                p("NegInf", Value::Double(f64::NEG_INFINITY)),
                p("Yes", Value::Boolean(true)),
                p("No", Value::Boolean(false)),
                p("When", Value::DateTime(DateTime::MIN)),
                p("Until", Value::DateTime(DateTime::MAX)),
                p("Id", Value::Guid(guid)),
                p("Blob0", Value::Binary(vec![])),
                p("Blob1", Value::Binary(vec![0xFF])),
                p("Blob2", Value::Binary(vec![0, 1])),
                p("Blob3", Value::Binary(vec![0xFB, 0xEF, 0xBE])),
                p("Blob4", Value::Binary((0..=255).collect())),
            ],
        };
        let bare = Entity {
            timestamp: Some(ts("1999-12-31T23:59:59.0000001Z")),
            ..Entity::new("", "")
        };
        // U+E000.. is remapped in the store key: keys_cow must decode it.
        let remapped = Entity {
            timestamp: Some(ts("2000-02-29T00:00:00Z")),
            properties: vec![p("X", Value::Int32(1))],
            ..Entity::new("\u{E000}pk", "rk\u{FFFF}")
        };
        vec![everything, bare, remapped]
    }

    fn stored(e: &Entity) -> StoredEntity {
        let ts = e.timestamp.unwrap_or(DateTime::MIN);
        StoredEntity::new(&e.partition_key, &e.row_key, codec::encode(ts, &e.properties))
    }

    fn selects() -> Vec<Option<Vec<String>>> {
        let list = |names: &[&str]| Some(names.iter().map(|n| n.to_string()).collect());
        vec![
            None,
            list(&["Name"]),
            list(&["Timestamp", "Big", "Nan", "Blob2", "Missing"]),
            list(&["PartitionKey", "RowKey", "Id", "When", "Five"]),
            list(&[]),
        ]
    }

    const LEVELS: [MetadataLevel; 3] = [MetadataLevel::No, MetadataLevel::Minimal, MetadataLevel::Full];

    /// The old writer's bytes for `e`, checked to be one valid JSON object.
    fn legacy(level: MetadataLevel, base_url: &str, select: Option<&[String]>, e: &Entity, single: bool) -> Vec<u8> {
        let f = LegacyFormat {
            level,
            base_url,
            account: "acct",
            table: "Tbl1",
            select,
        };
        let mut out = Vec::new();
        legacy_write_entity(&f, &mut out, e, single);
        let parsed: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
        assert!(parsed.is_object());
        out
    }

    #[test]
    fn owned_and_stored_write_exactly_what_the_old_writer_did() {
        for base_url in ["http://127.0.0.1:10002/devstoreaccount1", "http://h\"o\\st/acc ount"] {
            for (level, select, single) in LEVELS
                .into_iter()
                .flat_map(|l| selects().into_iter().map(move |s| (l, s)))
                .flat_map(|(l, s)| [(l, s.clone(), true), (l, s, false)])
            {
                let sel = select.as_deref();
                let f = EntityFormat::new(level, base_url, "acct", "Tbl1", sel);
                for e in samples() {
                    let want = legacy(level, base_url, sel, &e, single);
                    let ctx = format!("{level:?} {select:?} {:?} single={single}", e.partition_key);
                    let mut owned = Vec::new();
                    f.write(&mut owned, &e, single);
                    assert_eq!(String::from_utf8_lossy(&owned), String::from_utf8_lossy(&want), "{ctx}");
                    let mut from_store = Vec::new();
                    f.write_stored(&mut from_store, stored(&e).view(), single)
                        .expect("valid bytes");
                    assert_eq!(
                        String::from_utf8_lossy(&from_store),
                        String::from_utf8_lossy(&want),
                        "{ctx}"
                    );
                }
                // Owned entities not yet written have no Timestamp (and so no ETag).
                let unwritten = Entity::new("p", "r");
                let mut owned = Vec::new();
                f.write(&mut owned, &unwritten, single);
                assert_eq!(owned, legacy(level, base_url, sel, &unwritten, single));
            }
        }
    }

    #[test]
    fn etag_member_is_the_json_of_etag_for() {
        for t in [
            "2024-06-04T08:15:30.1234567Z",
            "1601-01-01T00:00:00Z",
            "9999-12-31T23:59:59.9999999Z",
        ] {
            let mut direct = Vec::new();
            etag_str(&mut direct, ts(t));
            let mut via_string = Vec::new();
            write_json_str(&mut via_string, &etag_for(ts(t)));
            assert_eq!(direct, via_string, "{t}");
        }
    }

    #[test]
    fn corrupt_stored_bytes_are_an_error_not_a_panic() {
        let e = &samples()[0];
        let good = stored(e);
        for level in LEVELS {
            let f = EntityFormat::new(level, "http://x/a", "a", "t", None);
            for cut in 0..good.bytes.len() {
                let bad = StoredEntity {
                    key: good.key.clone(),
                    bytes: good.bytes[..cut].to_vec(),
                };
                let mut out = Vec::new();
                let err = f.write_stored(&mut out, bad.view(), false).err().map(|e| e.code);
                assert_eq!(err, Some(tafel_service::ErrorCode::InternalError), "cut at {cut}");
            }
            let mut bad_utf8 = good.clone();
            // The first property's name starts after the 11-byte header, tag and length.
            bad_utf8.bytes[14] = 0xFF;
            let err = f
                .write_stored(&mut Vec::new(), bad_utf8.view(), true)
                .err()
                .map(|e| e.code);
            assert_eq!(err, Some(tafel_service::ErrorCode::InternalError));
        }
    }

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
    fn escape_scan_agrees_with_the_bytewise_rule() {
        for b in 0..=255u8 {
            for len in [1, 15, 16, 17, 40] {
                for at in [0, len / 2, len - 1] {
                    let mut v = vec![b'a'; len];
                    v[at] = b;
                    assert_eq!(needs_escape(&v), escaped(b), "byte {b} at {at} of {len}");
                }
            }
        }
        assert!(!needs_escape(b""));
    }

    #[test]
    fn guids_are_written_canonically() {
        let g = tafel_service::model::Guid::parse("3F2504E0-4F89-11D3-9A0C-0305E82C3301").expect("valid guid");
        let mut out = Vec::new();
        g.write_canonical(&mut out);
        assert_eq!(out, b"3f2504e0-4f89-11d3-9a0c-0305e82c3301");
    }
}
