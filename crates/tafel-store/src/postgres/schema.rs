//! The database schema, created on start by every node (idempotently), and the
//! SQL every operation runs. Only what PostgreSQL, CockroachDB and YugabyteDB all
//! accept: plain tables, `bytea`, `ON CONFLICT`, `= ANY`, `ORDER BY … LIMIT`.
//!
//! Invariants:
//! - `tafel_tables` holds one row per table, keyed by account and the name's ASCII
//!   lowercase bytes (lookups ignore case); `name` keeps the bytes as created and
//!   orders the listing (bytea compares bytewise: ordinal order).
//! - A table's `id` is random and unique; its entities live under `(id, key)`, and
//!   a table's row and its entities are deleted in one transaction, so a table
//!   re-created under the same name never sees old rows.
//! - Entity keys are `EntityKey` bytes, whose memcmp order is Azure's order, which
//!   is exactly bytea's order.

use tokio_postgres::error::SqlState;

use super::DbError;

/// Bumped when the schema changes incompatibly; a node refuses other versions.
pub(crate) const SCHEMA_VERSION: i64 = 1;

const CREATE: &str = "
CREATE TABLE IF NOT EXISTS tafel_meta (
    name TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS tafel_tables (
    account TEXT NOT NULL,
    lname BYTEA NOT NULL,
    name BYTEA NOT NULL,
    id BIGINT NOT NULL UNIQUE,
    acl BYTEA NOT NULL,
    PRIMARY KEY (account, lname)
);
CREATE UNIQUE INDEX IF NOT EXISTS tafel_tables_by_name ON tafel_tables (account, name);
CREATE TABLE IF NOT EXISTS tafel_entities (
    table_id BIGINT NOT NULL,
    key BYTEA NOT NULL,
    value BYTEA NOT NULL,
    PRIMARY KEY (table_id, key)
);
CREATE TABLE IF NOT EXISTS tafel_service_properties (
    account TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);
";

pub(crate) const SET_VERSION: &str =
    "INSERT INTO tafel_meta (name, value) VALUES ('schema_version', $1) ON CONFLICT (name) DO NOTHING";
pub(crate) const GET_VERSION: &str = "SELECT value FROM tafel_meta WHERE name = 'schema_version'";

pub(crate) const GET_TABLE: &str = "SELECT name, acl FROM tafel_tables WHERE account = $1 AND lname = $2";
pub(crate) const COUNT_TABLES: &str = "SELECT count(*) FROM tafel_tables WHERE account = $1";
pub(crate) const TABLE_ID: &str = "SELECT id FROM tafel_tables WHERE account = $1 AND lname = $2";
pub(crate) const CREATE_TABLE: &str =
    "INSERT INTO tafel_tables (account, lname, name, id, acl) VALUES ($1, $2, $3, $4, '')
     ON CONFLICT (account, lname) DO NOTHING";
pub(crate) const DELETE_TABLE: &str = "DELETE FROM tafel_tables WHERE account = $1 AND lname = $2 RETURNING id";
pub(crate) const DELETE_TABLE_ENTITIES: &str = "DELETE FROM tafel_entities WHERE table_id = $1";
pub(crate) const SET_ACL: &str = "UPDATE tafel_tables SET acl = $3 WHERE account = $1 AND lname = $2";
pub(crate) const LIST_TABLES: &str =
    "SELECT name, acl FROM tafel_tables WHERE account = $1 AND name >= $2 ORDER BY name LIMIT $3";

/// The table's id and one entity, in one statement (one snapshot, one round
/// trip): no row means no table; a NULL value means no entity.
pub(crate) const GET_ENTITY: &str = "SELECT e.value FROM tafel_tables t
     LEFT JOIN tafel_entities e ON e.table_id = t.id AND e.key = $3
     WHERE t.account = $1 AND t.lname = $2";
/// A write's reads, sent together: the table row, locked FOR SHARE so a table
/// delete waits for the write (and a write behind a delete fails); and the current
/// rows of the keys, locked FOR UPDATE so concurrent writers of a key queue up.
pub(crate) const LOCK_TABLE: &str = "SELECT id FROM tafel_tables WHERE account = $1 AND lname = $2 FOR SHARE";
/// Rows are locked in key order, so writes of overlapping key sets cannot deadlock.
pub(crate) const READ_FOR_WRITE: &str = "SELECT key, value FROM tafel_entities
     WHERE table_id = (SELECT id FROM tafel_tables WHERE account = $1 AND lname = $2) AND key = ANY($3)
     ORDER BY key FOR UPDATE";
/// Puts of keys the write saw absent: a row that appeared since is a conflict,
/// which the caller sees as fewer rows inserted than asked for.
pub(crate) const INSERT_ENTITIES: &str = "INSERT INTO tafel_entities (table_id, key, value)
     SELECT $1, u.k, u.v FROM UNNEST($2::BYTEA[], $3::BYTEA[]) AS u(k, v)
     ON CONFLICT (table_id, key) DO NOTHING";
/// Puts of keys the write saw (and locked).
pub(crate) const PUT_ENTITIES: &str = "INSERT INTO tafel_entities (table_id, key, value)
     SELECT $1, u.k, u.v FROM UNNEST($2::BYTEA[], $3::BYTEA[]) AS u(k, v)
     ON CONFLICT (table_id, key) DO UPDATE SET value = excluded.value";
pub(crate) const DELETE_ENTITIES: &str = "DELETE FROM tafel_entities WHERE table_id = $1 AND key = ANY($2)";

pub(crate) const SCAN_FROM: &str =
    "SELECT key, value FROM tafel_entities WHERE table_id = $1 AND key >= $2 ORDER BY key LIMIT $3";
pub(crate) const SCAN_BETWEEN: &str =
    "SELECT key, value FROM tafel_entities WHERE table_id = $1 AND key >= $2 AND key < $4 ORDER BY key LIMIT $3";

/// A backup's reads (`snapshot.rs`): everything, in order.
pub(crate) const ALL_PROPS: &str = "SELECT account, value FROM tafel_service_properties ORDER BY account";
pub(crate) const ALL_TABLES: &str = "SELECT account, name, acl, id FROM tafel_tables ORDER BY account, name";
pub(crate) const ROWS_FIRST: &str = "SELECT key, value FROM tafel_entities WHERE table_id = $1 ORDER BY key LIMIT $2";
pub(crate) const ROWS_AFTER: &str =
    "SELECT key, value FROM tafel_entities WHERE table_id = $1 AND key > $2 ORDER BY key LIMIT $3";

pub(crate) const GET_PROPS: &str = "SELECT value FROM tafel_service_properties WHERE account = $1";
pub(crate) const SET_PROPS: &str = "INSERT INTO tafel_service_properties (account, value) VALUES ($1, $2)
     ON CONFLICT (account) DO UPDATE SET value = excluded.value";

/// Creates the schema if needed and checks its version. Nodes starting together
/// may race on `CREATE … IF NOT EXISTS` (PostgreSQL then reports a duplicate), so
/// that is retried.
pub(crate) async fn ensure(client: &tokio_postgres::Client) -> Result<(), DbError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match client.batch_execute(CREATE).await {
            Ok(()) => break,
            Err(e)
                if attempt < 5
                    && matches!(
                        e.code(),
                        Some(&SqlState::UNIQUE_VIOLATION)
                            | Some(&SqlState::DUPLICATE_TABLE)
                            | Some(&SqlState::DUPLICATE_OBJECT)
                            | Some(&SqlState::T_R_SERIALIZATION_FAILURE)
                    ) =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(50 * attempt)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    client.execute(SET_VERSION, &[&SCHEMA_VERSION]).await?;
    let found: i64 = client.query_one(GET_VERSION, &[]).await?.try_get(0)?;
    if found != SCHEMA_VERSION {
        return Err(DbError::Store(crate::StoreError::failure(
            crate::FailureKind::Internal,
            format!("database schema version {found}, this node needs {SCHEMA_VERSION}"),
        )));
    }
    Ok(())
}
