//! Entities to JSON, written by hand into one buffer: this runs for every entity
//! of every response, and the member order and annotation rules are exact
//! (json-format.md §1–§3). One writer serves owned entities and stored rows alike
//! through [`EntityView`], and allocates nothing per entity: per-response parts
//! are built once in [`EntityFormat::new`], the rest goes straight into the buffer.

use std::convert::Infallible;

use base64::Engine;
use tafel_service::model::codec::ValueRef;
use tafel_service::model::{etag_of_iso, DateTime, Entity, Iso, StoredRef};

use super::MetadataLevel;
use crate::resource::push_entity_keys;

/// `$select`'s property names, sorted and without repeats: each property of each
/// entity written is looked up in it, so the lookup is a binary search, not a walk
/// of a list the client chose the length of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Select(Vec<String>);

impl Select {
    pub(crate) fn new(names: impl IntoIterator<Item = String>) -> Self {
        let mut names: Vec<String> = names.into_iter().collect();
        names.sort_unstable();
        names.dedup();
        Select(names)
    }

    /// Distinct names.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    fn has(&self, name: &str) -> bool {
        self.0.binary_search_by(|n| n.as_str().cmp(name)).is_ok()
    }
}

/// How to write entities of one response.
pub(crate) struct EntityFormat<'a> {
    level: MetadataLevel,
    base_url: &'a str,
    table: &'a str,
    select: Option<&'a Select>,
    /// Full metadata only: the `odata.type` value, and the openings of the
    /// `odata.id` and `odata.editLink` strings up to the key part.
    type_json: Vec<u8>,
    id_open: Vec<u8>,
    edit_open: Vec<u8>,
    /// Full metadata's `odata.id` and `odata.editLink` (the change feed has none).
    links: bool,
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
        select: Option<&'a Select>,
    ) -> Self {
        let mut f = EntityFormat {
            level,
            base_url,
            table,
            select,
            type_json: Vec::new(),
            id_open: Vec::new(),
            edit_open: Vec::new(),
            links: true,
        };
        if level == MetadataLevel::Full {
            write_json_str(&mut f.type_json, &[account, ".", table].concat());
            f.id_open = json_str_opening(&[base_url, "/", table].concat());
            f.edit_open = json_str_opening(table);
        }
        f
    }

    /// Without `odata.id` and `odata.editLink`: entities outside a query's
    /// response (the change feed's lines).
    pub(crate) fn without_links(mut self) -> Self {
        self.links = false;
        self
    }

    fn selected(&self, name: &str) -> bool {
        self.select.is_none_or(|s| s.has(name))
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
    pub(crate) fn write_stored(&self, out: &mut Vec<u8>, e: StoredRef<'_>, single: bool) -> tafel_service::Result<()> {
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
pub(crate) struct EntityView<'a, P> {
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

pub(crate) fn write_json_str(out: &mut Vec<u8>, s: &str) {
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

/// The ETag of `iso` (a timestamp's ISO bytes) as a JSON string: its only bytes JSON
/// escapes are its two '"'.
fn etag_str(out: &mut Vec<u8>, iso: &Iso) {
    let etag = etag_of_iso(iso);
    let etag = etag.as_bytes();
    // `W/"…'"`: the quotes are the third byte and the last one.
    out.extend_from_slice(b"\"W/\\\"");
    out.extend_from_slice(&etag[3..etag.len() - 1]);
    out.extend_from_slice(b"\\\"\"");
}

fn datetime_str(out: &mut Vec<u8>, iso: &Iso) {
    out.push(b'"');
    out.extend_from_slice(iso.as_bytes());
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
        ValueRef::DateTime(d) => datetime_str(out, &d.iso()),
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
pub(crate) fn write_entity<'a, P, E>(
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
        // `concat`, not `format!`: the formatting machinery cost ~1,000 instructions
        // per single-entity answer (benchmark-history §24).
        write_json_str(out, &[f.base_url, "/$metadata#", f.table, "/@Element"].concat());
        out.push(b',');
    }
    if full {
        key(out, "odata.type");
        out.extend_from_slice(&f.type_json);
        out.push(b',');
    }
    if full && f.links {
        key(out, "odata.id");
        entity_path_str(out, &f.id_open, e.partition_key, e.row_key);
        out.push(b',');
    }
    let iso = e.timestamp.map(DateTime::iso);
    if let Some(iso) = iso.as_ref().filter(|_| meta) {
        key(out, "odata.etag");
        etag_str(out, iso);
        out.push(b',');
    }
    if full && f.links {
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
    if let Some(iso) = iso.as_ref().filter(|_| f.selected("Timestamp")) {
        if full {
            annotation(out, "Timestamp", "Edm.DateTime");
        }
        key(out, "Timestamp");
        datetime_str(out, iso);
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
mod tests;
