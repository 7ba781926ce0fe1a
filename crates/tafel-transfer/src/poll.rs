//! Following a source without a change feed (Azure, Azurite, a Tafel without
//! `--change-retention`) by its entities' Timestamps: each round copies what
//! changed since the newest Timestamp the last round saw, less an overlap, since
//! a write may become visible a moment after a later one was read. What a round
//! sees again is written again, harmlessly. Deletes leave no entity to see: this
//! way of following never sees them.

use std::num::NonZeroU8;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use time::format_description::well_known::iso8601::{Config, EncodedConfig, TimePrecision};
use time::format_description::well_known::{Iso8601, Rfc3339};
use time::OffsetDateTime;

use crate::follow::{Applier, State};
use crate::format::{self, Row};
use crate::progress::Progress;
use crate::read::{self, Parsed, Query};
use crate::{TableClient, TransferError};

/// How far before the newest Timestamp seen the next round starts.
pub const OVERLAP: Duration = Duration::from_secs(5);

/// An RFC 3339 time as the Table service's `datetime'…'` literal takes it (UTC, 100 ns).
pub fn odata_time(t: &str) -> Result<String, TransferError> {
    let t = OffsetDateTime::parse(t, &Rfc3339)
        .map_err(|e| TransferError::Usage(format!("'{t}' is not an RFC 3339 time (2026-01-31T12:00:00Z): {e}")))?;
    Ok(format_ticks(t))
}

/// RFC 3339 in UTC with seven decimals, truncated: the service's ticks (100 ns).
/// `time`'s `Rfc3339` would drop trailing zeros.
const TICKS: EncodedConfig = Config::DEFAULT
    .set_time_precision(TimePrecision::Second {
        decimal_digits: NonZeroU8::new(7),
    })
    .encode();

fn format_ticks(t: OffsetDateTime) -> String {
    // Fails only for a year past 9999, which `OffsetDateTime` cannot hold without
    // `time`'s large-dates feature; an empty literal is refused by the source.
    t.to_offset(time::UtcOffset::UTC)
        .format(&Iso8601::<TICKS>)
        .unwrap_or_default()
}

/// `filter` and `Timestamp ge datetime'since'`, as one `$filter`.
pub fn since_filter(filter: Option<&str>, since: &str) -> Result<String, TransferError> {
    let since = odata_time(since)?;
    Ok(match filter {
        Some(f) => format!("({f}) and Timestamp ge datetime'{since}'"),
        None => format!("Timestamp ge datetime'{since}'"),
    })
}

/// A page's rows to upsert and its newest Timestamp.
type Page = (Vec<Row>, Option<OffsetDateTime>);

/// One round: every entity of the query changed since `since` (all of them without
/// it) upserted into the target; returns the newest Timestamp seen.
pub async fn round(
    source: &Arc<TableClient>,
    table: &str,
    filter: Option<&str>,
    since: Option<&str>,
    applier: &Applier,
    progress: &dyn Progress,
) -> Result<Option<OffsetDateTime>, TransferError> {
    let filter = match since {
        Some(s) => {
            let from = OffsetDateTime::parse(s, &Rfc3339)
                .map_err(|e| TransferError::Protocol(format!("a Timestamp '{s}': {e}")))?
                - OVERLAP;
            Some(since_filter(filter, &format_ticks(from))?)
        }
        None => filter.map(str::to_owned),
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Page>(4);
    let reading = {
        let (source, table) = (source.clone(), table.to_owned());
        tokio::spawn(async move {
            let q = Query {
                table: &table,
                filter: filter.as_deref(),
                select: None,
            };
            read::pages(&source, &q, 1, parse, |page| {
                // The applier takes pages as fast as the target does; reading waits.
                tokio::task::block_in_place(|| tx.blocking_send(page)).map_err(|_| TransferError::Interrupted)
            })
            .await
        })
    };
    let mut newest: Option<OffsetDateTime> = None;
    while let Some((rows, page_newest)) = rx.recv().await {
        let n = rows.len() as u64;
        applier.upsert(rows).await?;
        progress.add(n, 0);
        newest = newest.max(page_newest);
    }
    match reading.await {
        Ok(r) => r.map(drop)?,
        Err(e) => return Err(TransferError::Protocol(format!("the reader stopped: {e}"))),
    }
    Ok(newest)
}

/// A query's page as rows to upsert, and its newest Timestamp.
fn parse(body: Bytes) -> Result<Parsed<Page>, TransferError> {
    let page: Value =
        serde_json::from_slice(&body).map_err(|e| TransferError::Protocol(format!("a query's page: {e}")))?;
    let Some(Value::Array(values)) = page.get("value").cloned() else {
        return Err(TransferError::Protocol("a query answered without 'value'".into()));
    };
    let (mut rows, mut newest) = (Vec::with_capacity(values.len()), None);
    for v in values {
        let ts = v["Timestamp"]
            .as_str()
            .and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok());
        newest = newest.max(ts);
        rows.push(format::import_value(v).map_err(|why| TransferError::Protocol(format!("an entity read: {why}")))?);
    }
    let last_partition_key = rows.last().map(|r| r.partition_key.clone());
    Ok(Parsed {
        rows: rows.len(),
        last_partition_key,
        page: (rows, newest),
    })
}

/// What polling reads, and how often.
pub struct Polled<'a> {
    pub source: &'a Arc<TableClient>,
    pub table: &'a str,
    pub filter: Option<&'a str>,
    pub interval: Duration,
}

/// Polls every `interval` until Ctrl-C, from `state.since` on; saves the state after
/// each round.
pub async fn follow(
    polled: &Polled<'_>,
    applier: &Applier,
    state: &mut State,
    checkpoint: &Path,
    progress: &dyn Progress,
) -> Result<(), TransferError> {
    let Polled {
        source,
        table,
        filter,
        interval,
    } = *polled;
    eprintln!(
        "following {table} by its Timestamps every {interval:?}: the source has no change feed, \
         so deletes at the source are NOT seen and stay in the target"
    );
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        let r = tokio::select! {
            r = round(source, table, filter, state.since.as_deref(), applier, progress) => r?,
            _ = &mut ctrl_c => return Ok(()),
        };
        if let Some(newest) = r {
            let newest = format_ticks(newest);
            if state
                .since
                .as_deref()
                .is_none_or(|s| odata_time(s).is_ok_and(|s| s < newest))
            {
                state.since = Some(newest);
            }
        }
        state.copied = true;
        state.save(checkpoint)?;
        if let Some(age) = state.since.as_deref().and_then(crate::follow::age) {
            progress.status(&format!("newest change seen {age:.1} s ago"));
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = &mut ctrl_c => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_become_odata_literals_at_100_ns_in_utc() {
        assert_eq!(
            odata_time("2026-11-27T03:04:05Z").unwrap(),
            "2026-11-27T03:04:05.0000000Z"
        );
        assert_eq!(
            odata_time("2026-11-27T04:04:05.123456789+01:00").unwrap(),
            "2026-11-27T03:04:05.1234567Z"
        );
        assert!(odata_time("yesterday").is_err());
        assert_eq!(
            since_filter(Some("N gt 1"), "2026-01-01T00:00:00Z").unwrap(),
            "(N gt 1) and Timestamp ge datetime'2026-01-01T00:00:00.0000000Z'"
        );
    }

    #[test]
    fn a_page_gives_rows_without_timestamps_and_its_newest_timestamp() {
        let body = br#"{"value":[
            {"PartitionKey":"a","RowKey":"1","Timestamp":"2026-01-01T00:00:02.5Z","N":1},
            {"PartitionKey":"b","RowKey":"2","Timestamp":"2026-01-01T00:00:09.1234567Z"},
            {"PartitionKey":"c","RowKey":"3","Timestamp":"2026-01-01T00:00:03Z"}]}"#;
        let parsed = parse(Bytes::from_static(body)).unwrap();
        let (rows, newest) = parsed.page;
        assert_eq!(rows.len(), 3);
        assert!(!rows[0].body.contains("Timestamp"));
        assert_eq!(format_ticks(newest.unwrap()), "2026-01-01T00:00:09.1234567Z");
        assert_eq!(parsed.last_partition_key.as_deref(), Some("c"));
    }
}
