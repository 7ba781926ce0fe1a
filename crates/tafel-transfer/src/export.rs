//! `tafel export`: a table's entities (or a query's) to a JSONL or CSV file,
//! page by page, the next page fetched while the last one is written.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::sync::Arc;

use serde_json::Value;

use crate::client::Continuation;
use crate::format::{self, Format};
use crate::progress::Progress;
use crate::{create_output, TableClient, TransferError};

pub struct Query<'a> {
    pub table: &'a str,
    pub filter: Option<&'a str>,
    pub select: Option<&'a str>,
}

/// Pages of a query, each handed to `each` while the next is on its way.
pub async fn pages(
    client: &Arc<TableClient>,
    q: &Query<'_>,
    mut each: impl FnMut(Vec<Value>) -> Result<(), TransferError>,
) -> Result<(), TransferError> {
    let (table, filter, select) = (
        q.table.to_owned(),
        q.filter.map(str::to_owned),
        q.select.map(str::to_owned),
    );
    let fetch = move |client: Arc<TableClient>, next: Option<Continuation>| {
        let (table, filter, select) = (table.clone(), filter.clone(), select.clone());
        tokio::spawn(async move {
            let mut attempt = 0;
            loop {
                match client
                    .query_page(&table, filter.as_deref(), select.as_deref(), next.as_ref())
                    .await
                {
                    Err(TransferError::Transient(why)) if attempt < crate::import::RETRIES => {
                        attempt += 1;
                        note_retry(&why, attempt);
                        tokio::time::sleep(crate::import::backoff(attempt)).await;
                    }
                    other => return other,
                }
            }
        })
    };
    let mut pending = Some(fetch(client.clone(), None));
    while let Some(page) = pending.take() {
        let (rows, next) = page
            .await
            .map_err(|e| TransferError::Protocol(format!("a page fetch stopped: {e}")))??;
        pending = next.map(|n| fetch(client.clone(), Some(n)));
        each(rows)?;
    }
    Ok(())
}

fn note_retry(why: &str, attempt: u32) {
    eprintln!("retrying a page (attempt {attempt}): {why}");
}

/// Writes every entity of the query to `out` (`-`: standard output); returns how
/// many were written.
pub async fn export(
    client: &Arc<TableClient>,
    q: &Query<'_>,
    out: &str,
    format: Format,
    progress: &Progress,
) -> Result<u64, TransferError> {
    match format {
        Format::Jsonl => {
            let mut w = create_output(out)?;
            pages(client, q, |rows| {
                let mut bytes = 0;
                for row in &rows {
                    let line = format::export_line(row)?;
                    bytes += line.len() as u64 + 1;
                    w.write_all(line.as_bytes())?;
                    w.write_all(b"\n")?;
                }
                progress.add(rows.len() as u64, bytes);
                Ok(())
            })
            .await?;
            w.finish()?;
        }
        Format::Csv => {
            // CSV names every column in its header, so the rows are spooled first.
            let spool = tempfile::tempfile()?;
            let mut spooled = std::io::BufWriter::new(spool);
            let (mut columns, mut seen) = (Vec::new(), HashSet::new());
            pages(client, q, |rows| {
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
        }
    }
    Ok(progress.rows())
}
