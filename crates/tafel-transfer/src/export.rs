//! `tafel export`: a table's entities (or a query's) to a JSONL or CSV file,
//! page by page as [`read::pages`] reads them.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use crate::format::{self, Format};
use crate::progress::Progress;
use crate::read::{self, Parsed, Query};
use crate::{create_output, TableClient, TransferError};

/// Writes every entity of the query to `out` (`-`: standard output); returns how
/// many were written.
pub async fn export(
    client: &Arc<TableClient>,
    q: &Query<'_>,
    parallel: usize,
    out: &str,
    format: Format,
    progress: &dyn Progress,
) -> Result<Exported, TransferError> {
    match format {
        Format::Jsonl => export_jsonl(client, q, parallel, out, progress).await,
        Format::Csv => export_csv(client, q, parallel, out, progress).await,
    }
}

/// Each page's rows, re-encoded as they come, one line each.
async fn export_jsonl(
    client: &Arc<TableClient>,
    q: &Query<'_>,
    parallel: usize,
    out: &str,
    progress: &dyn Progress,
) -> Result<Exported, TransferError> {
    // Counted here: the progress only reports, it is not asked back.
    let mut exported = 0u64;
    let mut w = create_output(out)?;
    let lines = |body: Bytes| {
        let mut lines = Vec::with_capacity(body.len());
        let (rows, last_partition_key) = format::export_page(&body, &mut lines)?;
        Ok(Parsed {
            page: (lines, rows as u64),
            rows,
            last_partition_key,
        })
    };
    let ranges = read::pages(client, q, parallel, lines, |(lines, n)| {
        w.write_all(&lines)?;
        exported += n;
        progress.add(n, lines.len() as u64);
        Ok(())
    })
    .await?;
    w.finish()?;
    Ok(Exported { rows: exported, ranges })
}

/// CSV names every column in its header, so the rows are spooled to a temporary
/// file while the columns are gathered, then written under that header.
async fn export_csv(
    client: &Arc<TableClient>,
    q: &Query<'_>,
    parallel: usize,
    out: &str,
    progress: &dyn Progress,
) -> Result<Exported, TransferError> {
    let mut exported = 0u64;
    let table = q.table.to_owned();
    let values = move |body: Bytes| {
        let rows = page_values(&table, &body)?;
        let last_partition_key = rows.last().and_then(|r| r["PartitionKey"].as_str()).map(str::to_owned);
        Ok(Parsed {
            rows: rows.len(),
            last_partition_key,
            page: rows,
        })
    };
    let spool = tempfile::tempfile()?;
    let mut spooled = std::io::BufWriter::new(spool);
    let (mut columns, mut seen) = (Vec::new(), HashSet::new());
    let ranges = read::pages(client, q, parallel, values, |rows| {
        for row in &rows {
            if let Value::Object(map) = row {
                for k in map.keys() {
                    let system = matches!(k.as_str(), "PartitionKey" | "RowKey" | "Timestamp");
                    if !system && !k.contains('@') && !k.starts_with("odata.") && seen.insert(k.clone()) {
                        columns.push(k.clone());
                    }
                }
            }
            serde_json::to_writer(&mut spooled, row).map_err(|e| TransferError::Io(e.into()))?;
            spooled.write_all(b"\n")?;
        }
        exported += rows.len() as u64;
        progress.add(rows.len() as u64, 0);
        Ok(())
    })
    .await?;
    let mut spool = spooled.into_inner().map_err(|e| e.into_error())?;
    std::io::Seek::rewind(&mut spool)?;
    let rows = std::io::BufReader::new(spool)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok());
    let mut w = create_output(out)?;
    format::write_csv(&mut w, &columns, rows)?;
    w.finish()?;
    Ok(Exported { rows: exported, ranges })
}

/// The rows of one page of a query's answer.
fn page_values(table: &str, body: &[u8]) -> Result<Vec<Value>, TransferError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(mut page)) => match page.remove("value") {
            Some(Value::Array(rows)) => Ok(rows),
            _ => Err(TransferError::Protocol(format!(
                "{table}: a query answered without 'value'"
            ))),
        },
        _ => Err(TransferError::Protocol(format!(
            "{table}: a query answered with no JSON object"
        ))),
    }
}

pub struct Exported {
    pub rows: u64,
    /// Key ranges read (`--parallel`).
    pub ranges: u64,
}
