//! Errors of one database attempt and the retry policy around attempts.
//!
//! Every operation runs as attempts: a transaction (or single statement) that
//! either commits or is abandoned whole. An attempt that fails with a
//! serialization failure or a deadlock (SQLSTATE 40001, 40P01: another node's
//! transaction conflicted), or that found a key it saw absent inserted by then, is
//! run again from scratch after a jittered backoff, a
//! bounded number of times; then the operation fails with [`StoreError::Busy`].
//!
//! An attempt told that its transaction had already failed (SQLSTATE 25P02)
//! is run again too, after the pool's idle connections are closed. Its own
//! statements cannot cause that: a pipelined transaction reports its first
//! failure, in statement order (`pipelined.rs`). So a connection reached the
//! pool inside a failed transaction, which no path is known to leave (a 500
//! seen once, not reproduced); the warning names the operation, and the
//! transaction, rolled back whole, is safe to run again.

use std::future::Future;
use std::time::Duration;

use tokio_postgres::error::SqlState;

use super::stats::PgStats;
use crate::error::{BackendError, FailureKind, StoreError};

/// Attempts before a conflicting operation gives up with `Busy` (about 3 s of
/// backoff). Under SERIALIZABLE on PostgreSQL, writes of neighbouring keys
/// conflict on the index page they share (its predicate locks are per page), so a
/// hot range of sequential keys needs this many; CockroachDB tracks reads per key.
pub(crate) const MAX_ATTEMPTS: u32 = 40;
/// Backoff before the second attempt; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(1);
const MAX_BACKOFF: Duration = Duration::from_millis(100);

/// Why an attempt failed.
#[derive(Debug)]
pub(crate) enum DbError {
    Pg(tokio_postgres::Error),
    Pool(deadpool_postgres::PoolError),
    /// A definite answer (no table, a corrupt row): never retried.
    Store(StoreError),
    /// A row the attempt saw absent appeared before it could insert it.
    Raced,
    /// The attempt took longer than its deadline: the database did not answer.
    TimedOut(Duration),
    /// A statement was refused because its transaction had already failed
    /// (SQLSTATE 25P02), with no failure before it reported (see the top).
    Aborted,
}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> Self {
        match e.code() {
            Some(&SqlState::IN_FAILED_SQL_TRANSACTION) => DbError::Aborted,
            _ => DbError::Pg(e),
        }
    }
}

impl From<deadpool_postgres::PoolError> for DbError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        DbError::Pool(e)
    }
}

impl From<StoreError> for DbError {
    fn from(e: StoreError) -> Self {
        DbError::Store(e)
    }
}

impl DbError {
    /// A conflict with a concurrent transaction: running again may succeed.
    pub(crate) fn is_conflict(&self) -> bool {
        match self {
            DbError::Pg(e) => matches!(
                e.code(),
                Some(&SqlState::T_R_SERIALIZATION_FAILURE) | Some(&SqlState::T_R_DEADLOCK_DETECTED)
            ),
            DbError::Raced => true,
            _ => false,
        }
    }

    pub(crate) fn into_store(self) -> StoreError {
        match self {
            DbError::Store(e) => e,
            // The server's message (with its SQLSTATE) says more than the Display of the wrapper.
            DbError::Pg(e) => {
                let context = match e.as_db_error() {
                    Some(db) => format!("postgres: {} ({})", db.message(), db.code().code()),
                    None => "postgres".to_owned(),
                };
                // A closed connection or one that failed on the wire is the database out
                // of reach, and so are the database's own errors of that kind; any
                // other database error is the statement's.
                let kind = match e.as_db_error() {
                    None if e.is_closed() || crate::error::io_kind(&e).is_some() => FailureKind::Unavailable,
                    Some(db) if out_of_reach(db.code()) => FailureKind::Unavailable,
                    _ => FailureKind::Internal,
                };
                BackendError::of_kind(kind, context, e).into()
            }
            DbError::Pool(e) => BackendError::of_kind(FailureKind::Unavailable, "postgres pool", e).into(),
            DbError::Raced => StoreError::Busy("a key was inserted concurrently".into()),
            DbError::TimedOut(after) => StoreError::failure(
                FailureKind::Unavailable,
                format!("postgres: no answer within {after:?}"),
            ),
            DbError::Aborted => StoreError::failure(
                FailureKind::Internal,
                "postgres: a statement ran in a transaction that had already failed (25P02)",
            ),
        }
    }
}

/// SQLSTATE classes of a database that cannot serve now: 08 connection exception,
/// 53 insufficient resources (too many connections), 57 operator intervention
/// (shutting down, starting up, a statement timeout).
fn out_of_reach(code: &SqlState) -> bool {
    matches!(code.code().get(..2), Some("08" | "53" | "57"))
}

/// How long to wait before attempt `attempt + 1` (attempt counts from 1): a
/// random share of an exponentially growing cap, so conflicting nodes spread out.
pub(crate) fn backoff(attempt: u32) -> Duration {
    let cap = FIRST_BACKOFF
        .saturating_mul(1 << attempt.min(16).saturating_sub(1))
        .min(MAX_BACKOFF);
    let nanos = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(fastrand::u64(nanos / 2..=nanos))
}

/// Runs `attempt` until it succeeds, fails for a reason other than a conflict, or
/// has conflicted [`MAX_ATTEMPTS`] times; counts the reruns in `stats`. An
/// attempt past `deadline` is dropped (a transaction it opened ends with its
/// connection) and fails: an answer the database never gave is not waited for.
/// An attempt whose connection was inside a failed transaction (see the top)
/// calls `close_idle` and runs again, as after a conflict.
pub(super) async fn retry<T, F, Fut>(
    stats: &PgStats,
    deadline: Duration,
    what: &str,
    mut attempt: F,
    close_idle: impl Fn(),
) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, DbError>>,
{
    let mut n = 0;
    loop {
        n += 1;
        let outcome = tokio::time::timeout(deadline, attempt())
            .await
            .unwrap_or(Err(DbError::TimedOut(deadline)));
        match outcome {
            Ok(v) => return Ok(v),
            Err(e) if e.is_conflict() || matches!(e, DbError::Aborted) => {
                if matches!(e, DbError::Aborted) {
                    tracing::warn!(
                        operation = what,
                        "a pooled connection was inside a failed transaction (25P02): closing the idle ones and running the operation again"
                    );
                    close_idle();
                }
                if n >= MAX_ATTEMPTS {
                    stats.gave_up();
                    return Err(StoreError::Busy(format!(
                        "{what}: still conflicting after {n} attempts"
                    )));
                }
                stats.conflict_retried();
                tokio::time::sleep(backoff(n)).await;
            }
            Err(e) => return Err(e.into_store().during(what)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn a_connection_left_in_a_failed_transaction_is_closed_and_the_operation_runs_again() {
        let stats = PgStats::default();
        let (attempts, closed) = (AtomicU32::new(0), AtomicU32::new(0));
        let attempt = || async {
            match attempts.fetch_add(1, Ordering::SeqCst) {
                0 => Err(DbError::Aborted),
                _ => Ok(7),
            }
        };
        let close_idle = || {
            closed.fetch_add(1, Ordering::SeqCst);
        };
        let got = retry(&stats, Duration::from_secs(5), "insert", attempt, close_idle).await;
        assert_eq!(got.ok(), Some(7));
        assert_eq!((attempts.into_inner(), closed.into_inner()), (2, 1));
    }

    #[tokio::test]
    async fn a_failure_names_the_operation_that_met_it() {
        let attempt = || async { Err::<(), _>(DbError::Store(StoreError::failure(FailureKind::Internal, "x"))) };
        let got = retry(
            &PgStats::default(),
            Duration::from_secs(5),
            "list indexes",
            attempt,
            || (),
        )
        .await;
        let text = got.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(text.contains("list indexes: x"), "{text}");
    }

    #[test]
    fn backoff_grows_and_stays_capped() {
        assert!(backoff(1) <= FIRST_BACKOFF);
        assert!(backoff(4) >= FIRST_BACKOFF * 4);
        for n in 1..40 {
            assert!(backoff(n) <= MAX_BACKOFF);
        }
    }
}
