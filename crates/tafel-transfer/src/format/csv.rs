//! CSV with the columns Azure Storage Explorer writes and reads.

use std::io::{BufRead, Write};

use serde_json::{Map, Value};

use super::{row_of, Row};
use crate::TransferError;

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
