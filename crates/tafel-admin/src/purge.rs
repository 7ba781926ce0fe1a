//! Purge by filter on the admin listener (docs/lifecycle.md):
//!
//! - `POST /accounts/A/tables/T/purge` with JSON `{"filter": "…", "partition":
//!   "P", "batch": N}` (each optional; none: every entity) starts a job that
//!   deletes every matching entity, and answers at once: 202 with the job and
//!   `Location: /purge-jobs/ID`.
//! - `GET /purge-jobs/ID`: the job's progress (`deleted`, `state`: `running`,
//!   `done` or `failed` with its `error`); `GET /purge-jobs`: every job.
//!
//! The filter is checked before anything starts: one that does not parse is
//! 400 `InvalidFilter` naming what is wrong; a missing table is 404
//! `TableNotFound`. The work is [`crate::purge_job`]'s.

use bytes::Bytes;
use http::{header, Method, StatusCode};
use http_body_util::{BodyExt, Limited};
use serde_json::{json, Value};

use crate::listener::{error, json_response, not_allowed, store_failure, unauthorized, AdminState, Resp};
use crate::purge_job::{self, Job, JobState, Purges, DEFAULT_BATCH, MAX_BATCH};

const MAX_BODY: usize = 64 * 1024;

/// Whether `path` is one of this module's.
pub(crate) fn owns(path: &str) -> bool {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    matches!(
        parts.as_slice(),
        ["accounts", _, "tables", _, "purge"] | ["purge-jobs"] | ["purge-jobs", _]
    )
}

pub(crate) async fn route(state: &AdminState, req: hyper::Request<hyper::body::Incoming>) -> Resp {
    if !state.authorized(&req) {
        return unauthorized();
    }
    let path = req.uri().path().to_owned();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let get = req.method() == Method::GET || req.method() == Method::HEAD;
    match parts.as_slice() {
        ["accounts", account, "tables", table, "purge"] => {
            if req.method() != Method::POST {
                return not_allowed("POST");
            }
            let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
                Ok(b) => b.to_bytes(),
                Err(e) => return bad("InvalidInput", format!("could not read the body: {e}")),
            };
            start(state, account, table, &body).await
        }
        ["purge-jobs"] if get => match state.purge.as_ref() {
            None => json_response(StatusCode::OK, &json!({ "jobs": [] })),
            Some(p) => match p.all().await {
                Ok(jobs) => {
                    let jobs: Vec<Value> = jobs.iter().map(Job::to_json).collect();
                    json_response(StatusCode::OK, &json!({ "jobs": jobs }))
                }
                Err(e) => store_failure(&e, "listing purge jobs", e.to_string()),
            },
        },
        ["purge-jobs", id] => {
            let found = match state.purge.as_ref() {
                None => Ok(None),
                Some(p) => p.get(id).await,
            };
            match found {
                Ok(Some(job)) if get => json_response(StatusCode::OK, &job.to_json()),
                Ok(_) if get => error(StatusCode::NOT_FOUND, "JobNotFound", format!("no purge job {id:?}")),
                Err(e) if get => store_failure(&e, "reading a purge job", e.to_string()),
                _ => not_allowed("GET"),
            }
        }
        _ => not_allowed("GET"),
    }
}

/// What a POST asks: `(filter, partition, batch)`.
fn parse_body(body: &Bytes) -> Result<(Option<String>, Option<String>, usize), String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok((None, None, DEFAULT_BATCH));
    }
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body) else {
        return Err("the body is not a JSON object {\"filter\": …, \"partition\": …}".into());
    };
    let (mut filter, mut partition, mut batch) = (None, None, DEFAULT_BATCH);
    for (k, v) in &map {
        match (k.as_str(), v) {
            ("filter", Value::String(s)) => filter = Some(s.clone()).filter(|s| !s.trim().is_empty()),
            ("partition", Value::String(s)) => partition = Some(s.clone()),
            ("batch", Value::Number(n)) if n.as_u64().is_some_and(|b| (1..=MAX_BATCH as u64).contains(&b)) => {
                batch = n.as_u64().map_or(DEFAULT_BATCH, |b| b as usize);
            }
            ("filter" | "partition" | "batch", Value::Null) => {}
            ("batch", _) => return Err(format!("\"batch\" is a number from 1 to {MAX_BATCH}")),
            ("filter" | "partition", _) => return Err(format!("{k:?} is a string")),
            _ => return Err(format!("unknown field {k:?} (expected filter, partition, batch)")),
        }
    }
    Ok((filter, partition, batch))
}

async fn start(state: &AdminState, account: &str, table: &str, body: &Bytes) -> Resp {
    let Some(purges) = state.purge.clone() else {
        return error(
            StatusCode::NOT_IMPLEMENTED,
            "NotSupported",
            "this server was started without purge jobs".into(),
        );
    };
    let mut job = match new_job(state, &purges, account, table, body).await {
        Ok(job) => job,
        Err(refused) => return refused,
    };
    // Neither filter nor partition: the whole table, emptied at once.
    if job.filter.is_none() && job.partition.is_none() {
        if let Err(refused) = truncate(state, &mut job).await {
            return refused;
        }
    }
    let done = job.state == JobState::Done;
    let id = match purges.add(job).await {
        Ok(id) => id,
        Err(e) => return store_failure(&e, "starting a purge", e.to_string()),
    };
    tracing::info!(id, account, "purge started");
    let started = match done {
        true => purges.get(&id).await,
        false => purge_job::start(purges, &id).await,
    };
    let body = match started {
        Ok(Some(job)) => job.to_json(),
        Ok(None) => json!({"id": id}),
        Err(e) => return store_failure(&e, "starting a purge", e.to_string()),
    };
    let mut r = json_response(StatusCode::ACCEPTED, &body);
    if let Ok(v) = http::HeaderValue::from_str(&format!("/purge-jobs/{id}")) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// The job a request asks for, checked: its account, body, filter and table;
/// or the answer refusing it.
async fn new_job(state: &AdminState, purges: &Purges, account: &str, table: &str, body: &Bytes) -> Result<Job, Resp> {
    if !state.accounts.iter().any(|a| a == account) {
        return Err(error(
            StatusCode::NOT_FOUND,
            "AccountNotFound",
            format!("this server has no account named {account:?}"),
        ));
    }
    let (filter, partition, batch) = parse_body(body).map_err(|e| bad("InvalidInput", e))?;
    if let Some(f) = &filter {
        // Alone first, so an error's position is in the text the caller sent.
        (purges.compile)(f).map_err(|e| bad("InvalidFilter", format!("the filter does not parse: {e}")))?;
    }
    let table = match state.store.get_table(account, table).await {
        Ok(Some(t)) => t.name,
        Ok(None) => return Err(no_table(account, table)),
        Err(e) => return Err(store_failure(&e, "starting a purge", e.to_string())),
    };
    let job = Job {
        id: String::new(),
        account: account.to_owned(),
        table,
        filter,
        partition,
        batch,
        state: JobState::Running,
        deleted: 0,
        cursor: None,
        started: purge_job::now_secs(),
        finished: None,
    };
    if let Some(text) = job.filter_text() {
        (purges.compile)(&text).map_err(|e| bad("InvalidFilter", format!("the filter does not parse: {e}")))?;
    }
    Ok(job)
}

/// Empties the job's whole table at once, and marks the job done.
async fn truncate(state: &AdminState, job: &mut Job) -> Result<(), Resp> {
    match state.store.truncate_table(&job.account, &job.table).await {
        Ok(Some(n)) => {
            job.deleted = n;
            job.state = JobState::Done;
            job.finished = Some(purge_job::now_secs());
            Ok(())
        }
        Ok(None) => Err(no_table(&job.account, &job.table)),
        Err(e) => Err(store_failure(&e, "truncating a table", e.to_string())),
    }
}

fn no_table(account: &str, table: &str) -> Resp {
    error(
        StatusCode::NOT_FOUND,
        "TableNotFound",
        format!("account {account:?} has no table named {table:?}"),
    )
}

fn bad(code: &str, message: String) -> Resp {
    error(StatusCode::BAD_REQUEST, code, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purge_paths_are_told_apart() {
        assert!(owns("/accounts/devstoreaccount1/tables/T/purge"));
        assert!(owns("/purge-jobs"));
        assert!(owns("/purge-jobs/00ab"));
        assert!(!owns("/accounts/devstoreaccount1/tables/T/stats"));
    }

    #[test]
    fn a_body_names_only_what_a_purge_takes() {
        let ok = parse_body(&Bytes::from_static(
            br#"{"filter":"n gt 1","partition":"p","batch":10}"#,
        ));
        assert_eq!(ok.ok(), Some((Some("n gt 1".into()), Some("p".into()), 10)));
        assert!(parse_body(&Bytes::new()).is_ok());
        for bad in [
            r#"{"filtre":"x"}"#,
            r#"{"batch":0}"#,
            r#"{"batch":1001}"#,
            r#"{"filter":1}"#,
            "[]",
        ] {
            assert!(parse_body(&Bytes::copy_from_slice(bad.as_bytes())).is_err(), "{bad}");
        }
    }
}
