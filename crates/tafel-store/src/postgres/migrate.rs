//! Bringing the database's schema to this node's version, once, however many
//! nodes start at the same moment.
//!
//! `tafel_meta` holds `schema_version` and, while a node migrates,
//! `migration_lock`: a lease, the moment it expires in the database's clock
//! (milliseconds since the epoch), taken with one conditional upsert. Not
//! advisory locks: CockroachDB has none. A node that dies mid-migration leaves a
//! lease that expires; every migration is idempotent, so the next holder runs the
//! cut-short one again from the recorded version. The others poll the version
//! until it is theirs. A database newer than this node is refused.

use std::time::{Duration, Instant};

use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::Client;

use super::schema::{MIGRATIONS, SCHEMA_VERSION};
use super::txn::DbError;
use crate::error::{FailureKind, StoreError};

const CREATE_META: &str = "CREATE TABLE IF NOT EXISTS tafel_meta (name TEXT PRIMARY KEY, value BIGINT NOT NULL)";
const GET_VERSION: &str = "SELECT value FROM tafel_meta WHERE name = 'schema_version'";
const SET_VERSION: &str = "INSERT INTO tafel_meta (name, value) VALUES ('schema_version', $1)
     ON CONFLICT (name) DO UPDATE SET value = excluded.value";
/// Takes the lease unless another node holds one that has not expired; returns
/// the lease's expiry, the holder's token, only to the node that took it.
const TAKE_LOCK: &str = "INSERT INTO tafel_meta (name, value)
     VALUES ('migration_lock', CAST(extract(epoch FROM now()) * 1000 AS BIGINT) + $1)
     ON CONFLICT (name) DO UPDATE SET value = excluded.value
     WHERE tafel_meta.value < CAST(extract(epoch FROM now()) * 1000 AS BIGINT)
     RETURNING value";
const RELEASE_LOCK: &str = "DELETE FROM tafel_meta WHERE name = 'migration_lock' AND value = $1";

/// How long a lease lasts: far longer than the migrations take.
const LEASE: Duration = Duration::from_secs(60);
/// How long a node waits for another's migration before giving up.
const WAIT: Duration = Duration::from_secs(150);
const POLL: Duration = Duration::from_millis(200);

fn failure(message: String) -> DbError {
    DbError::Store(StoreError::failure(FailureKind::Internal, message))
}

/// Migrates the database to [`SCHEMA_VERSION`], or waits for the node doing it.
pub(crate) async fn migrate(client: &Client) -> Result<(), DbError> {
    create_meta(client).await?;
    let deadline = Instant::now() + WAIT;
    loop {
        let found = version(client).await?;
        if found == SCHEMA_VERSION {
            return Ok(());
        }
        refuse_newer(found)?;
        let lease = i64::try_from(LEASE.as_millis()).unwrap_or(i64::MAX);
        let taken = match client.query_opt(TAKE_LOCK, &[&lease]).await {
            Ok(taken) => taken,
            // Another node took the lease at the same moment: at SERIALIZABLE its
            // insert fails ours instead of leaving a row ours would see. Theirs to run.
            Err(e) if e.code() == Some(&SqlState::T_R_SERIALIZATION_FAILURE) => None,
            Err(e) => return Err(e.into()),
        };
        if let Some(row) = taken {
            let token: i64 = row.try_get(0)?;
            let outcome = run(client).await;
            // At SERIALIZABLE, a node reading the lease at the same moment can fail the delete.
            let params: [&(dyn ToSql + Sync); 1] = [&token];
            let release = || client.execute(RELEASE_LOCK, &params);
            if let Err(e) = again_on(&[SqlState::T_R_SERIALIZATION_FAILURE], release).await {
                // The lease expires by itself.
                tracing::warn!(error = %e, "releasing the schema migration lock");
            }
            return outcome;
        }
        if Instant::now() > deadline {
            return Err(failure(format!(
                "the database's schema is at version {found} and another node has held the migration \
                 lock (tafel_meta 'migration_lock') for over {WAIT:?}; if no node is migrating, delete that row"
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The migrations after the recorded version, each then recorded, under the lease.
async fn run(client: &Client) -> Result<(), DbError> {
    // Read again: another node may have finished between our read and our lease.
    let from = version(client).await?;
    refuse_newer(from)?;
    for (i, statements) in MIGRATIONS.iter().enumerate().skip(usize::try_from(from).unwrap_or(0)) {
        let to = i as i64 + 1;
        tracing::info!(from = to - 1, to, "migrating the database schema");
        client.batch_execute(statements).await?;
        client.execute(SET_VERSION, &[&to]).await?;
    }
    Ok(())
}

fn refuse_newer(found: i64) -> Result<(), DbError> {
    if found > SCHEMA_VERSION {
        return Err(failure(format!(
            "the database's schema is version {found}, newer than this node knows ({SCHEMA_VERSION}): \
             a newer Tafel migrated it; run that release (or newer) on every node"
        )));
    }
    Ok(())
}

async fn version(client: &Client) -> Result<i64, DbError> {
    Ok(match client.query_opt(GET_VERSION, &[]).await? {
        Some(row) => row.try_get(0)?,
        None => 0,
    })
}

/// `CREATE TABLE IF NOT EXISTS` of nodes starting together may race (PostgreSQL
/// then reports a duplicate): that is retried.
async fn create_meta(client: &Client) -> Result<(), DbError> {
    let raced = [
        SqlState::UNIQUE_VIOLATION,
        SqlState::DUPLICATE_TABLE,
        SqlState::DUPLICATE_OBJECT,
        SqlState::T_R_SERIALIZATION_FAILURE,
    ];
    again_on(&raced, || client.batch_execute(CREATE_META)).await?;
    Ok(())
}

/// Runs `statement` again (up to 5 times in all, a little later each time) while it
/// fails with one of the `raced` SQLSTATEs, which another node starting at the same
/// moment causes.
async fn again_on<T, F, Fut>(raced: &[SqlState], mut statement: F) -> Result<T, tokio_postgres::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, tokio_postgres::Error>>,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        match statement().await {
            Err(e) if attempt < 5 && e.code().is_some_and(|c| raced.contains(c)) => {
                tokio::time::sleep(Duration::from_millis(50 * attempt)).await;
            }
            done => return done,
        }
    }
}
