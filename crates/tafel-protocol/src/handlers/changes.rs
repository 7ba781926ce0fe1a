//! `GET /$changes`: a page of the account's change feed as JSON lines
//! (docs/change-feed.md), each entity written by the query encoder at full
//! metadata, without the links a feed line has no use for.

use std::time::Duration;

use http::StatusCode;
use tafel_service::feed::{Change, ChangeOp, ChangesFrom};
use tafel_service::model::{DateTime, StoredRef};
use tafel_service::{ChangesQuery, Error, ErrorCode, Result, Service, MAX_CHANGES, MAX_WAIT};

use crate::json::{write_json_str, EntityFormat, MetadataLevel};
use crate::request::{Context, Request, Response};

const NDJSON: &str = "application/x-ndjson";

fn bad(name: &str, value: &str, why: &str) -> Error {
    Error::with_message(
        ErrorCode::InvalidQueryParameterValue,
        format!("The value '{value}' of the query parameter {name} is not valid: {why}."),
    )
}

/// The request's parameters as a service query.
fn query(req: &Request) -> Result<ChangesQuery> {
    let from = match (req.param("after"), req.param("since")) {
        (Some(_), Some(_)) => {
            return Err(Error::with_message(
                ErrorCode::InvalidQueryParameterValue,
                "Give either after or since, not both.",
            ))
        }
        (Some("latest"), None) => ChangesFrom::Latest,
        (Some(a), None) => ChangesFrom::After(
            a.trim()
                .parse()
                .map_err(|_| bad("after", a, "a position (a whole number) or latest"))?,
        ),
        (None, Some(s)) => {
            let t = DateTime::parse(s.trim()).ok_or_else(|| bad("since", s, "an RFC 3339 UTC time"))?;
            let ticks = (t.ticks() - DateTime::from_unix_seconds(0).ticks()).max(0) as u64;
            let ns = ticks.saturating_mul(100);
            ChangesFrom::Since(ns)
        }
        (None, None) => ChangesFrom::Oldest,
    };
    let limit = match req.param("limit") {
        None => MAX_CHANGES,
        Some(l) => match l.trim().parse::<usize>() {
            Ok(n) if (1..=MAX_CHANGES).contains(&n) => n,
            _ => return Err(bad("limit", l, "a whole number from 1 to 1000")),
        },
    };
    let wait = match req.param("wait") {
        None => Duration::ZERO,
        Some(w) => match w.trim().parse::<f64>() {
            Ok(s) if (0.0..=MAX_WAIT.as_secs_f64()).contains(&s) => Duration::from_secs_f64(s),
            _ => return Err(bad("wait", w, "seconds from 0 to 60")),
        },
    };
    let table = match req.param("table") {
        Some("") => return Err(bad("table", "", "a table name")),
        t => t.map(str::to_owned),
    };
    Ok(ChangesQuery {
        table,
        from,
        limit,
        wait,
    })
}

/// The time of a change: the entity's Timestamp, or when a table change was recorded.
fn recorded_at(ns: u64) -> DateTime {
    DateTime(DateTime::from_unix_seconds(0).ticks() + (ns / 100) as i64)
}

/// Writes one change as a line.
fn write_line(out: &mut Vec<u8>, account: &str, base_url: &str, c: &Change) -> Result<()> {
    out.extend_from_slice(format!("{{\"position\":\"{}\",\"txn\":\"{}\",\"time\":", c.position, c.txn).as_bytes());
    let entity = match (&c.key, &c.value) {
        (Some(key), Some(bytes)) => Some(StoredRef { key: key.view(), bytes }),
        _ => None,
    };
    let time = match entity {
        Some(e) => e
            .timestamp()
            .map_err(|_| Error::internal("a change holds a corrupt entity"))?,
        None => recorded_at(c.time_ns),
    };
    write_json_str(out, time.iso().as_str());
    out.extend_from_slice(b",\"op\":");
    write_json_str(out, c.op.name());
    if c.op == ChangeOp::Expire {
        out.extend_from_slice(b",\"reason\":\"expired\"");
    }
    out.extend_from_slice(b",\"table\":");
    write_json_str(out, &c.table);
    if let Some(key) = &c.key {
        let (pk, rk) = key.keys();
        out.extend_from_slice(b",\"PartitionKey\":");
        write_json_str(out, &pk);
        out.extend_from_slice(b",\"RowKey\":");
        write_json_str(out, &rk);
    }
    if let Some(e) = entity.filter(|_| !matches!(c.op, ChangeOp::Delete | ChangeOp::Expire)) {
        out.extend_from_slice(b",\"entity\":");
        EntityFormat::new(MetadataLevel::Full, base_url, account, &c.table, None)
            .without_links()
            .write_stored(out, e, false)?;
        out.extend_from_slice(b",\"etag\":");
        write_json_str(out, &tafel_service::model::etag_for(time));
    }
    out.extend_from_slice(b"}\n");
    Ok(())
}

pub(super) async fn read(svc: &Service, cx: &Context, req: &Request) -> Result<Response> {
    let query = query(req)?;
    let page = svc.read_changes(&cx.caller, query).await?;
    let mut body = Vec::with_capacity(page.changes.len() * 256);
    for c in &page.changes {
        write_line(&mut body, &cx.caller.account, &cx.base_url, c)?;
    }
    let mut resp = Response::with_body(StatusCode::OK, NDJSON, body);
    resp.set(crate::names::X_TAFEL_NEXT_AFTER, &page.next_after.to_string())?;
    resp.set(crate::names::X_TAFEL_HEAD, &page.head.to_string())?;
    resp.entities = page.changes.len() as u32;
    Ok(resp)
}
