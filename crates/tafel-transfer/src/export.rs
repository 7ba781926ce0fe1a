//! `tafel export`: a table's entities (or a query's) to a JSONL or CSV file,
//! page by page, the next page fetched while the last one is written.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::sync::Arc;

use bytes::Bytes;
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
    each: impl FnMut(Vec<Value>) -> Result<(), TransferError>,
) -> Result<(), TransferError> {
    let table = q.table.to_owned();
    let parse = move |body: Bytes| match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(mut page)) => match page.remove("value") {
            Some(Value::Array(rows)) => Ok(rows),
            _ => Err(TransferError::Protocol(format!(
                "{table}: a query answered without 'value'"
            ))),
        },
        _ => Err(TransferError::Protocol(format!(
            "{table}: a query answered with no JSON object"
        ))),
    };
    pages_as(client, q, parse, each).await
}

/// Pages of a query, each turned into a `T` by `parse` on the task that fetched it
/// (another core, while the last page is handed on) and then handed to `each`.
pub async fn pages_as<T: Send + 'static>(
    client: &Arc<TableClient>,
    q: &Query<'_>,
    parse: impl Fn(Bytes) -> Result<T, TransferError> + Send + Sync + 'static,
    mut each: impl FnMut(T) -> Result<(), TransferError>,
) -> Result<(), TransferError> {
    let (table, filter, select) = (
        q.table.to_owned(),
        q.filter.map(str::to_owned),
        q.select.map(str::to_owned),
    );
    let parse = Arc::new(parse);
    let fetch = move |client: Arc<TableClient>, next: Option<Continuation>| {
        let (table, filter, select, parse) = (table.clone(), filter.clone(), select.clone(), parse.clone());
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
                    Ok((body, next)) => return parse(body).map(|page| (page, next)),
                    Err(e) => return Err(e),
                }
            }
        })
    };
    let mut pending = Some(fetch(client.clone(), None));
    while let Some(page) = pending.take() {
        let (page, next) = page
            .await
            .map_err(|e| TransferError::Protocol(format!("a page fetch stopped: {e}")))??;
        pending = next.map(|n| fetch(client.clone(), Some(n)));
        each(page)?;
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
            let lines = |body: Bytes| {
                let mut lines = Vec::with_capacity(body.len());
                let n = format::export_page(&body, &mut lines)?;
                Ok((lines, n))
            };
            pages_as(client, q, lines, |(lines, n)| {
                w.write_all(&lines)?;
                progress.add(n, lines.len() as u64);
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
