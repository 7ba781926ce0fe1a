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

mod csv;
mod jsonl;

pub use csv::{read_csv, write_csv};
pub use jsonl::{export_page, import_line, import_page, read_jsonl};

use serde_json::{Map, Value};

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

/// An entity to write: its keys and its wire body (no Timestamp, no `odata.*`).
#[derive(Debug)]
pub struct Row {
    pub partition_key: String,
    pub row_key: String,
    pub body: String,
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

pub(super) fn row_of(map: Map<String, Value>) -> Result<Row, String> {
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
