//! Queries followed to their last page, and the check of a page's entities,
//! for partition-query and scan-filter.

use std::fmt::Write as _;
use std::time::Instant;

use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::Value;

use super::{Bench, MAX_PAGES, UNKNOWN};
use crate::client::{encode_query, Conn, Resp};
use crate::data::{self, Values};

impl Bench {
    /// Runs a query to completion (following continuations), calling `on_page`
    /// with each page and the instant its request was sent. `Ok(false)` when
    /// `deadline` passed before the last page.
    pub(super) async fn query_all(
        &self,
        conn: &mut Conn,
        base: &str,
        deadline: Option<Instant>,
        mut on_page: impl FnMut(&Resp, Instant),
    ) -> Result<bool, String> {
        let mut url = base.to_string();
        for _ in 0..MAX_PAGES {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(false);
            }
            let req = self.ep.request(&Method::GET, &url, None, Bytes::new(), &[])?;
            let t0 = Instant::now();
            let r = conn.send(req).await?;
            if r.status != StatusCode::OK {
                return Err(r.describe());
            }
            on_page(&r, t0);
            match next_page(base, &r) {
                Some(u) => url = u,
                None => return Ok(true),
            }
        }
        Err(format!("more than {MAX_PAGES} pages"))
    }

    pub(super) fn verify_page(&self, body: &[u8]) -> Vec<Result<(), String>> {
        let parsed: Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => return vec![Err(format!("invalid JSON page: {e}"))],
        };
        let Some(items) = parsed["value"].as_array() else {
            return vec![Err("page without a value array".into())];
        };
        items
            .iter()
            .filter_map(|item| {
                let obj = item.as_object()?;
                let rk = obj.get("RowKey").and_then(Value::as_str).unwrap_or("");
                let id: u64 = match rk.parse() {
                    Ok(id) => id,
                    Err(_) => return Some(Err(format!("unexpected RowKey {rk:?}"))),
                };
                let version = self.version(id);
                if version == UNKNOWN {
                    return None;
                }
                Some(data::verify_entity(
                    obj,
                    &data::data_pk(id),
                    rk,
                    &Values::new(self.cfg.shape, id, version),
                ))
            })
            .collect()
    }
}

/// Appends the continuation of `resp` to `base`; `None` when the result is complete.
fn next_page(base: &str, resp: &Resp) -> Option<String> {
    let npk = resp.header("x-ms-continuation-nextpartitionkey")?;
    let mut url = format!("{base}&NextPartitionKey={}", encode_query(npk));
    if let Some(nrk) = resp.header("x-ms-continuation-nextrowkey") {
        let _ = write!(url, "&NextRowKey={}", encode_query(nrk));
    }
    Some(url)
}
