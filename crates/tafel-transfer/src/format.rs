//! The files entities travel in.
//!
//! - JSONL: one entity per line in the Table service's own JSON, every property JSON
//!   cannot type carrying its `@odata.type` (Int64, DateTime, Guid, Binary, and every
//!   Double), so all eight types come back exactly. `Timestamp` is kept, for people;
//!   imports drop it (the service sets it).
//! - CSV: the columns Azure Storage Explorer writes and reads: `PartitionKey`,
//!   `RowKey`, `Timestamp`, then each property followed by `Name@type` (`Edm.Int64`…).
//!
//! Either may be zstd-compressed (a name ending in `.zst`).

use std::io::{BufRead, Write};

use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::read::Parsed;
use crate::TransferError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Csv,
}

impl Format {
    /// From `--format`, else the file name (`x.jsonl`, `x.csv.zst`); JSONL otherwise.
    pub fn pick(explicit: Option<&str>, path: &str) -> Result<Format, TransferError> {
        let name = explicit.map(str::to_ascii_lowercase).unwrap_or_else(|| {
            let base = path.trim_end_matches(".zst");
            base.rsplit('.').next().unwrap_or("").to_ascii_lowercase()
        });
        match name.as_str() {
            "csv" => Ok(Format::Csv),
            "jsonl" | "ndjson" | "json" | "" | "-" => Ok(Format::Jsonl),
            _ if explicit.is_none() => Ok(Format::Jsonl),
            other => Err(TransferError::Usage(format!("unknown format '{other}' (jsonl or csv)"))),
        }
    }
}

/// A query page's entities as the service sent them (full metadata), each cut to
/// the export form and appended to `out` as a line: no `odata.*` members, keys
/// first. Values are copied as they came, never parsed into numbers or strings,
/// so nothing is lost or rewritten and a page costs one pass. Returns how many,
/// and the last one's PartitionKey.
pub fn export_page(body: &[u8], out: &mut Vec<u8>) -> Result<(usize, Option<String>), TransferError> {
    let page = RawPage::of(body)?;
    for entity in &page.value {
        write_entity(&entity.0, out);
        out.push(b'\n');
    }
    Ok((page.value.len(), page.last_partition_key()))
}

/// A member name and its colon. A name borrowed from the page had no escapes in it
/// (serde_json borrows only those) and goes back as it came.
#[allow(clippy::ptr_arg)] // which variant it is is the point
fn push_name(out: &mut Vec<u8>, name: &Cow<'_, str>) {
    match name {
        Cow::Borrowed(n) => {
            out.push(b'"');
            out.extend_from_slice(n.as_bytes());
            out.push(b'"');
        }
        // Writing a str into a Vec cannot fail.
        Cow::Owned(n) => drop(serde_json::to_writer(&mut *out, n)),
    }
    out.push(b':');
}

const KEYS_FIRST: [&str; 4] = ["PartitionKey", "RowKey", "Timestamp@odata.type", "Timestamp"];

fn write_entity(members: &[(Cow<'_, str>, &RawValue)], out: &mut Vec<u8>) {
    out.push(b'{');
    let mut first = true;
    let mut put = |k: &Cow<'_, str>, v: &RawValue, out: &mut Vec<u8>| {
        if !first {
            out.push(b',');
        }
        first = false;
        push_name(out, k);
        out.extend_from_slice(v.get().as_bytes());
    };
    for key in KEYS_FIRST {
        if let Some((k, v)) = members.iter().find(|(k, _)| k == key) {
            put(k, v, out);
        }
    }
    for (k, v) in members {
        if !KEYS_FIRST.contains(&k.as_ref()) && !k.starts_with("odata.") {
            put(k, v, out);
        }
    }
    out.push(b'}');
}

#[derive(serde::Deserialize)]
struct RawPage<'a> {
    #[serde(borrow)]
    value: Vec<RawEntity<'a>>,
}

/// An entity's members in the order sent, values unparsed.
struct RawEntity<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for RawEntity<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Members<'a> {
            type Value = RawEntity<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an entity (a JSON object)")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(16));
                while let Some(key) = map.next_key::<Key<'a>>()? {
                    members.push((key.0, map.next_value::<&'a RawValue>()?));
                }
                Ok(RawEntity(members))
            }
        }
        d.deserialize_map(Members(std::marker::PhantomData))
    }
}

impl<'a> RawPage<'a> {
    fn of(body: &'a [u8]) -> Result<Self, TransferError> {
        let bad = |e: &dyn std::fmt::Display| {
            TransferError::Protocol(format!("a query answered with a page that is not JSON: {e}"))
        };
        // Checked as UTF-8 once as a whole: parsing a `str` then skips the check of
        // each string, a tenth of the export's time.
        let text = std::str::from_utf8(body).map_err(|e| bad(&e))?;
        serde_json::from_str(text).map_err(|e| bad(&e))
    }

    fn last_partition_key(&self) -> Option<String> {
        let last = self.value.last()?;
        let (_, v) = last.0.iter().find(|(k, _)| k == "PartitionKey")?;
        serde_json::from_str(v.get()).ok()
    }
}

/// A member name, borrowed from the page unless it had escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Key<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Name<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Name<'a> {
            type Value = Key<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(Name(std::marker::PhantomData))
    }
}

/// An entity to write: its keys and its wire body (no Timestamp, no `odata.*`).
#[derive(Debug)]
pub struct Row {
    pub partition_key: String,
    pub row_key: String,
    pub body: String,
}

/// A JSONL line as a row to write.
pub fn import_line(line: &str) -> Result<Row, String> {
    let entity: RawEntity<'_> = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    import_raw(&entity.0)
}

/// A query page's entities (full metadata, as [`export_page`] reads them) as rows
/// to write, each or why not.
pub fn import_page(body: &[u8]) -> Result<Parsed<Vec<Result<Row, String>>>, TransferError> {
    let page = RawPage::of(body)?;
    Ok(Parsed {
        rows: page.value.len(),
        last_partition_key: page.last_partition_key(),
        page: page.value.iter().map(|e| import_raw(&e.0)).collect(),
    })
}

/// An entity in the wire form (a JSONL line's, or as a query returned it) as a row
/// to write: without `odata.*` members and without the Timestamp the service sets.
pub fn import_value(value: Value) -> Result<Row, String> {
    let Value::Object(mut map) = value else {
        return Err("not a JSON object".into());
    };
    map.retain(|k, _| !k.starts_with("odata.") && k != "Timestamp" && k != "Timestamp@odata.type");
    row_of(map)
}

/// As [`import_value`], from an entity's members as sent: values are copied, not
/// parsed, so a row costs one pass over its line and nothing is rewritten.
fn import_raw(members: &[(Cow<'_, str>, &RawValue)]) -> Result<Row, String> {
    let key = |name: &str| match members.iter().rev().find(|(k, _)| k == name) {
        Some((_, v)) => serde_json::from_str::<String>(v.get()).map_err(|_| format!("{name} must be a string")),
        None => Err(format!("{name} must be a string")),
    };
    let (partition_key, row_key) = (key("PartitionKey")?, key("RowKey")?);
    let mut body = Vec::with_capacity(members.iter().map(|(k, v)| k.len() + v.get().len() + 4).sum());
    body.push(b'{');
    for (k, v) in members {
        if k.starts_with("odata.") || k == "Timestamp" || k == "Timestamp@odata.type" {
            continue;
        }
        if body.len() > 1 {
            body.push(b',');
        }
        push_name(&mut body, k);
        body.extend_from_slice(v.get().as_bytes());
    }
    body.push(b'}');
    Ok(Row {
        partition_key,
        row_key,
        // Member names written by serde_json and values copied from a str: UTF-8.
        body: String::from_utf8(body).map_err(|e| e.to_string())?,
    })
}

fn row_of(map: Map<String, Value>) -> Result<Row, String> {
    let key = |k: &str| match map.get(k) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(format!("{k} must be a string")),
    };
    let (partition_key, row_key) = (key("PartitionKey")?, key("RowKey")?);
    Ok(Row {
        partition_key,
        row_key,
        body: Value::Object(map).to_string(),
    })
}

/// The EDM type of a property of a full-metadata entity.
fn edm_type(map: &Map<String, Value>, name: &str, v: &Value) -> &'static str {
    if let Some(Value::String(t)) = map.get(&format!("{name}@odata.type")) {
        return match t.as_str() {
            "Edm.Int64" => "Edm.Int64",
            "Edm.DateTime" => "Edm.DateTime",
            "Edm.Guid" => "Edm.Guid",
            "Edm.Binary" => "Edm.Binary",
            "Edm.Double" => "Edm.Double",
            "Edm.Int32" => "Edm.Int32",
            "Edm.Boolean" => "Edm.Boolean",
            _ => "Edm.String",
        };
    }
    match v {
        Value::Bool(_) => "Edm.Boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "Edm.Int32",
        Value::Number(_) => "Edm.Double",
        _ => "Edm.String",
    }
}

/// Writes CSV as Storage Explorer does. Columns must be known before the first
/// row, so the export spools its rows first (`columns`: every property, in the
/// order first seen).
pub fn write_csv(out: impl Write, columns: &[String], rows: impl Iterator<Item = Value>) -> Result<(), TransferError> {
    let mut w = csv::Writer::from_writer(out);
    let mut header = vec!["PartitionKey".to_owned(), "RowKey".to_owned(), "Timestamp".to_owned()];
    for c in columns {
        header.push(c.clone());
        header.push(format!("{c}@type"));
    }
    w.write_record(&header).map_err(csv_error)?;
    for row in rows {
        let Value::Object(map) = row else { continue };
        let text = |v: Option<&Value>| match v {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        let mut record = vec![
            text(map.get("PartitionKey")),
            text(map.get("RowKey")),
            text(map.get("Timestamp")),
        ];
        for c in columns {
            match map.get(c) {
                Some(v) => {
                    record.push(text(Some(v)));
                    record.push(edm_type(&map, c, v).to_owned());
                }
                None => record.extend([String::new(), String::new()]),
            }
        }
        w.write_record(&record).map_err(csv_error)?;
    }
    w.flush()?;
    Ok(())
}

fn csv_error(e: csv::Error) -> TransferError {
    TransferError::Io(std::io::Error::other(e))
}

/// Reads Storage Explorer's CSV: each record as a row to write, or why it cannot be
/// one; with the record's line number.
pub fn read_csv(input: impl BufRead) -> impl Iterator<Item = (u64, Result<Row, String>)> {
    let mut r = csv::ReaderBuilder::new().flexible(true).from_reader(input);
    let header: Result<Vec<String>, String> = r
        .headers()
        .map(|h| h.iter().map(str::to_owned).collect())
        .map_err(|e| format!("the header: {e}"));
    let mut records = r.into_records();
    let mut failed_header = header.as_ref().err().cloned();
    std::iter::from_fn(move || {
        if let Some(why) = failed_header.take() {
            return Some((1, Err(why)));
        }
        let header = header.as_ref().ok()?;
        let record = records.next()?;
        Some(match record {
            Ok(rec) => {
                let line = rec.position().map_or(0, |p| p.line());
                (line, csv_row(header, &rec))
            }
            Err(e) => (e.position().map_or(0, |p| p.line()), Err(e.to_string())),
        })
    })
}

fn csv_row(header: &[String], rec: &csv::StringRecord) -> Result<Row, String> {
    let at = |name: &str| header.iter().position(|h| h == name);
    let field = |i: usize| rec.get(i).unwrap_or("");
    let mut map = Map::new();
    for key in ["PartitionKey", "RowKey"] {
        let i = at(key).ok_or_else(|| format!("the header has no {key} column"))?;
        map.insert(key.to_owned(), Value::String(field(i).to_owned()));
    }
    for (i, name) in header.iter().enumerate() {
        if matches!(name.as_str(), "PartitionKey" | "RowKey" | "Timestamp") || name.ends_with("@type") {
            continue;
        }
        let text = field(i);
        let ty = at(&format!("{name}@type")).map(field).unwrap_or("Edm.String");
        if ty.is_empty() && text.is_empty() {
            continue; // this row has no such property
        }
        let (value, annotate) = typed(ty, text).map_err(|why| format!("{name} ({ty}): {why}"))?;
        if annotate {
            map.insert(format!("{name}@odata.type"), Value::String(ty.to_owned()));
        }
        map.insert(name.clone(), value);
    }
    row_of(map)
}

/// A CSV cell as its JSON value, and whether JSON needs the type named.
fn typed(ty: &str, text: &str) -> Result<(Value, bool), String> {
    Ok(match ty {
        "Edm.String" | "" => (Value::String(text.to_owned()), false),
        "Edm.Int32" => {
            let v: i32 = text.parse().map_err(|_| "not a 32-bit whole number")?;
            (Value::from(v), false)
        }
        "Edm.Int64" => {
            let v: i64 = text.parse().map_err(|_| "not a 64-bit whole number")?;
            (Value::String(v.to_string()), true)
        }
        "Edm.Double" => match text {
            "NaN" | "Infinity" | "-Infinity" => (Value::String(text.to_owned()), true),
            _ => {
                let v: f64 = text.parse().map_err(|_| "not a number")?;
                (serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number), true)
            }
        },
        "Edm.Boolean" => match text.to_ascii_lowercase().as_str() {
            "true" => (Value::Bool(true), false),
            "false" => (Value::Bool(false), false),
            _ => return Err("not true or false".into()),
        },
        "Edm.DateTime" | "Edm.Guid" | "Edm.Binary" => (Value::String(text.to_owned()), true),
        other => return Err(format!("unknown type {other}")),
    })
}

/// A JSONL reader's lines with their numbers, skipping blank ones.
pub fn read_jsonl(input: impl BufRead) -> impl Iterator<Item = (u64, Result<Row, String>)> {
    input.lines().enumerate().filter_map(|(i, line)| {
        let n = i as u64 + 1;
        match line {
            Ok(l) if l.trim().is_empty() => None,
            Ok(l) => Some((n, import_line(&l))),
            Err(e) => Some((n, Err(format!("reading: {e}")))),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// One entity as JSONL, through [`export_page`].
    fn export_line(entity: &Value) -> Result<String, TransferError> {
        let mut line = Vec::new();
        let body = serde_json::to_vec(&serde_json::json!({ "value": [entity] }))
            .map_err(|e| TransferError::Protocol(e.to_string()))?;
        export_page(&body, &mut line)?;
        line.pop();
        String::from_utf8(line).map_err(|e| TransferError::Protocol(e.to_string()))
    }

    fn wire() -> Value {
        json!({
            "odata.etag": "W/\"x\"", "odata.id": "http://x", "PartitionKey": "p", "RowKey": "r",
            "Timestamp@odata.type": "Edm.DateTime", "Timestamp": "2024-01-01T00:00:00.1234567Z",
            "Big@odata.type": "Edm.Int64", "Big": "9223372036854775807", "N": -5, "Ok": true,
            "D@odata.type": "Edm.Double", "D": 5.0, "S": "a,\"b\"\nc",
            "When@odata.type": "Edm.DateTime", "When": "9999-12-31T23:59:59.9999999Z",
            "Id@odata.type": "Edm.Guid", "Id": "0f8fad5b-d9cb-469f-a165-70867728950e",
            "Bin@odata.type": "Edm.Binary", "Bin": "AP8Q"
        })
    }

    #[test]
    fn jsonl_keeps_every_type_and_drops_what_the_service_sets() {
        let line = export_line(&wire()).unwrap();
        assert!(
            line.starts_with(r#"{"PartitionKey":"p","RowKey":"r","Timestamp@odata.type""#),
            "{line}"
        );
        assert!(!line.contains("odata.etag") && !line.contains("odata.id"));
        let row = import_line(&line).unwrap();
        let body: Value = serde_json::from_str(&row.body).unwrap();
        assert_eq!(body["Big"], "9223372036854775807");
        assert_eq!(body["D@odata.type"], "Edm.Double");
        assert!(body.get("Timestamp").is_none());
        assert!(import_line(r#"{"PartitionKey":1,"RowKey":"r"}"#).is_err());
    }

    #[test]
    fn csv_round_trips_through_storage_explorers_columns() {
        let cols: Vec<String> = ["Big", "N", "Ok", "D", "S", "When", "Id", "Bin"]
            .map(String::from)
            .to_vec();
        let mut out = Vec::new();
        write_csv(&mut out, &cols, std::iter::once(wire())).unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(
            text.starts_with("PartitionKey,RowKey,Timestamp,Big,Big@type,N,N@type"),
            "{text}"
        );
        let rows: Vec<_> = read_csv(&out[..]).collect();
        assert_eq!(rows.len(), 1);
        let body: Value = serde_json::from_str(&rows[0].1.as_ref().unwrap().body).unwrap();
        let back: Value = serde_json::from_str(&import_line(&export_line(&wire()).unwrap()).unwrap().body).unwrap();
        assert_eq!(body, back, "CSV and JSONL give the same entity");
        let bad = "PartitionKey,RowKey,N,N@type\np,r,x,Edm.Int32\n";
        assert!(read_csv(bad.as_bytes())
            .next()
            .unwrap()
            .1
            .unwrap_err()
            .contains("N (Edm.Int32)"));
    }
}
