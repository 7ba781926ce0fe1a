//! The scale-out backend: any number of stateless Tafel nodes over one
//! PostgreSQL-wire database (PostgreSQL, CockroachDB, YugabyteDB).
//!
//! Invariants:
//! - Nodes keep no state of their own: every operation reads the database (a
//!   table's id included), so a table deleted or re-created through another node
//!   is seen at once.
//! - Every write is one transaction that locks the table row FOR SHARE and the
//!   keys' current rows FOR UPDATE (in key order: no deadlocks), runs the
//!   service's decision on those rows and applies it. A decision writes only keys
//!   it read, so the locks make writes of a key take turns, each seeing the one
//!   before: READ COMMITTED suffices and waits where SERIALIZABLE would abort (its
//!   predicate locks on index pages even made inserts of neighbouring keys
//!   conflict). A key seen absent is not locked; it is inserted with `ON CONFLICT
//!   DO NOTHING`, and finding it taken (or a serialization failure, which
//!   CockroachDB may report instead) runs the attempt again ([`txn`]). So the
//!   decision may run more than once; only the committed attempt's outcome is
//!   returned.
//! - A table delete (READ COMMITTED) removes the table row, waiting for writes
//!   that hold it, then every entity of the table, in one transaction: a write
//!   either committed before (its rows are deleted) or fails after (no table).
//! - A write is acknowledged only after its COMMIT returned: it is in the database.
//! - Reads are single statements or one read-only snapshot (a scan page).

mod connect;
mod scan;
mod schema;
mod snapshot;
mod stats;
mod tls;
mod txn;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime, Timeouts};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::IsolationLevel;

use self::stats::PgStats;
use self::txn::{retry, DbError};

use crate::error::{BackendError, FailureKind, StoreError};
use crate::key::EntityKey;
use crate::stats::StoreMetric;
use crate::traits::{Decide, Mutation, RowSink, ScanEnd, ScanRequest, Store, TableRecord};

pub use self::tls::{SslMode, SslOptions, TlsError};

pub struct PostgresOptions {
    /// Connections this node keeps to the database at most.
    pub pool_size: usize,
    /// TLS settings over the URL's own (`sslmode`, `sslrootcert`, …).
    pub ssl: SslOptions,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            pool_size: 16,
            ssl: SslOptions::default(),
        }
    }
}

pub struct PostgresStore {
    pool: Pool,
    stats: PgStats,
}

/// How long readiness waits for the database to answer.
const READY_DEADLINE: Duration = Duration::from_secs(2);

/// Lookups ignore case: tables are keyed by the name's ASCII lowercase bytes.
fn lower(name: &str) -> Vec<u8> {
    name.bytes().map(|b| b.to_ascii_lowercase()).collect()
}

/// Keys and values of one kind of put, as the two arrays a statement takes.
#[derive(Default)]
struct Puts<'a> {
    keys: Vec<&'a [u8]>,
    values: Vec<&'a [u8]>,
}

impl<'a> Puts<'a> {
    fn push(&mut self, key: &'a [u8], value: &'a [u8]) {
        self.keys.push(key);
        self.values.push(value);
    }
}

/// Begins a READ COMMITTED transaction, the level every write runs at (see the
/// invariants above).
async fn read_committed(client: &mut deadpool_postgres::Client) -> Result<deadpool_postgres::Transaction<'_>, DbError> {
    Ok(client
        .build_transaction()
        .isolation_level(IsolationLevel::ReadCommitted)
        .start()
        .await?)
}

fn record(row: &tokio_postgres::Row) -> Result<TableRecord, DbError> {
    let name: Vec<u8> = row.try_get(0)?;
    let name =
        String::from_utf8(name).map_err(|_| StoreError::failure(FailureKind::Corrupt, "table name is not UTF-8"))?;
    Ok(TableRecord {
        name,
        acl: row.try_get(1)?,
    })
}

impl PostgresStore {
    /// Connects to `url` (a libpq-style URL or `key=value` string, TLS as
    /// [`tls`] says) and creates the schema if it is missing. Connections are
    /// driven by the runtime this is called on, which must outlive every use of
    /// the store ([`connect`]).
    pub async fn connect(url: &str, options: PostgresOptions) -> Result<Self, StoreError> {
        let (config, connector) = tls::configure(url, options.ssl)
            .map_err(|e| BackendError::caused_by(FailureKind::Unavailable, "postgres connection settings", e))?;
        let manager = Manager::from_connect(
            config,
            connect::OnStoreRuntime::current(connector),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            // A request waits this long for a connection before failing, not forever.
            .timeouts(Timeouts {
                wait: Some(Duration::from_secs(30)),
                create: Some(Duration::from_secs(10)),
                recycle: Some(Duration::from_secs(5)),
            })
            .build()
            .map_err(|e| BackendError::caused_by(FailureKind::Internal, "building the connection pool", e))?;
        let client = pool.get().await.map_err(|e| {
            let why = connect::with_causes(&e);
            BackendError::new(FailureKind::Unavailable, format!("connecting to the database: {why}"))
        })?;
        schema::ensure(&client).await.map_err(DbError::into_store)?;
        Ok(PostgresStore {
            pool,
            stats: PgStats::default(),
        })
    }

    async fn client(&self) -> Result<deadpool_postgres::Client, DbError> {
        let started = std::time::Instant::now();
        let client = self.pool.get().await;
        self.stats.pool_wait.observe_duration(started.elapsed());
        Ok(client?)
    }

    /// One attempt of a write: the whole transaction, from BEGIN to COMMIT.
    async fn write_once(&self, account: &str, lname: &[u8], keys: &[&[u8]], decide: &Decide) -> Result<(), DbError> {
        let mut client = self.client().await?;
        let tx = read_committed(&mut client).await?;
        let lock = tx.prepare_cached(schema::LOCK_TABLE).await?;
        let read = tx.prepare_cached(schema::READ_FOR_WRITE).await?;
        // Both statements go out before either answer comes back (pipelined).
        let (lock_params, read_params): (&[&(dyn ToSql + Sync)], &[&(dyn ToSql + Sync)]) =
            (&[&account, &lname], &[&account, &lname, &keys]);
        let (table, found) = tokio::try_join!(tx.query_opt(&lock, lock_params), tx.query(&read, read_params))?;
        let Some(table) = table else {
            return Err(StoreError::TableNotFound.into());
        };
        let id: i64 = table.try_get(0)?;
        let mut current: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        for row in &found {
            let key: &[u8] = row.try_get(0)?;
            if let Some(i) = keys.iter().position(|k| *k == key) {
                current[i] = Some(row.try_get(1)?);
            }
        }
        let views: Vec<Option<&[u8]>> = current.iter().map(|c| c.as_deref()).collect();
        let mutations = catch_unwind(AssertUnwindSafe(|| decide(&views)))
            .map_err(|_| StoreError::failure(FailureKind::Internal, "write decision panicked"))?;
        if !mutations.is_empty() {
            if mutations.len() != keys.len() {
                return Err(StoreError::failure(FailureKind::Internal, "decision does not cover every key").into());
            }
            let (mut puts, mut inserts, mut deletes) = (Puts::default(), Puts::default(), Vec::new());
            for ((key, m), cur) in keys.iter().zip(&mutations).zip(&current) {
                match (m, cur) {
                    (Mutation::Put(v), Some(_)) => puts.push(key, v),
                    (Mutation::Put(v), None) => inserts.push(key, v),
                    // An absent row has nothing to delete.
                    (Mutation::Delete, Some(_)) => deletes.push(*key),
                    (Mutation::Delete, None) | (Mutation::Keep, _) => {}
                }
            }
            if !inserts.keys.is_empty() {
                let insert = tx.prepare_cached(schema::INSERT_ENTITIES).await?;
                let n = tx.execute(&insert, &[&id, &inserts.keys, &inserts.values]).await?;
                if n != inserts.keys.len() as u64 {
                    return Err(DbError::Raced);
                }
            }
            if !puts.keys.is_empty() {
                let put = tx.prepare_cached(schema::PUT_ENTITIES).await?;
                tx.execute(&put, &[&id, &puts.keys, &puts.values]).await?;
            }
            if !deletes.is_empty() {
                let delete = tx.prepare_cached(schema::DELETE_ENTITIES).await?;
                tx.execute(&delete, &[&id, &deletes]).await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    async fn create_once(&self, account: &str, name: &str) -> Result<bool, DbError> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(schema::CREATE_TABLE).await?;
        let mut draws = 0;
        loop {
            draws += 1;
            // A name taken already inserts nothing (`ON CONFLICT`); the only other
            // unique key is the id, so a unique violation is an id drawn twice.
            let id = fastrand::i64(..);
            match client
                .execute(&stmt, &[&account, &lower(name), &name.as_bytes(), &id])
                .await
            {
                Ok(n) => return Ok(n == 1),
                Err(e) if draws < 4 && e.code() == Some(&SqlState::UNIQUE_VIOLATION) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    async fn delete_once(&self, account: &str, lname: &[u8]) -> Result<bool, DbError> {
        let mut client = self.client().await?;
        // READ COMMITTED: deleting the table row waits for the writes holding it
        // (FOR SHARE), and the entity delete's fresh snapshot then sees their rows.
        let tx = read_committed(&mut client).await?;
        let delete = tx.prepare_cached(schema::DELETE_TABLE).await?;
        let Some(row) = tx.query_opt(&delete, &[&account, &lname]).await? else {
            return Ok(false);
        };
        let id: i64 = row.try_get(0)?;
        let entities = tx.prepare_cached(schema::DELETE_TABLE_ENTITIES).await?;
        tx.execute(&entities, &[&id]).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn scan_once(
        &self,
        account: &str,
        lname: &[u8],
        request: &ScanRequest,
    ) -> Result<(scan::Rows, ScanEnd), DbError> {
        let mut client = self.client().await?;
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let page = scan::scan(&tx, &self.stats.rows, account, lname, request).await?;
        tx.commit().await?;
        Ok(page)
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn create_table(&self, account: &str, name: &str) -> Result<bool, StoreError> {
        retry(&self.stats, "create table", || self.create_once(account, name)).await
    }

    async fn delete_table(&self, account: &str, name: &str) -> Result<bool, StoreError> {
        let lname = lower(name);
        retry(&self.stats, "delete table", || self.delete_once(account, &lname)).await
    }

    async fn get_table(&self, account: &str, name: &str) -> Result<Option<TableRecord>, StoreError> {
        let lname = lower(name);
        retry(&self.stats, "get table", || async {
            let client = self.client().await?;
            let stmt = client.prepare_cached(schema::GET_TABLE).await?;
            match client.query_opt(&stmt, &[&account, &lname]).await? {
                Some(row) => Ok(Some(record(&row)?)),
                None => Ok(None),
            }
        })
        .await
    }

    async fn set_table_acl(&self, account: &str, name: &str, acl: Vec<u8>) -> Result<bool, StoreError> {
        let lname = lower(name);
        retry(&self.stats, "set table acl", || async {
            let client = self.client().await?;
            let stmt = client.prepare_cached(schema::SET_ACL).await?;
            Ok(client.execute(&stmt, &[&account, &lname, &acl]).await? == 1)
        })
        .await
    }

    async fn list_tables(
        &self,
        account: &str,
        from: Option<&str>,
        limit: usize,
    ) -> Result<Vec<TableRecord>, StoreError> {
        let from = from.unwrap_or("").as_bytes();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        retry(&self.stats, "list tables", || async {
            let client = self.client().await?;
            let stmt = client.prepare_cached(schema::LIST_TABLES).await?;
            let rows = client.query(&stmt, &[&account, &from, &limit]).await?;
            rows.iter().map(record).collect()
        })
        .await
    }

    async fn get_entity(&self, account: &str, table: &str, key: &EntityKey) -> Result<Option<Vec<u8>>, StoreError> {
        let lname = lower(table);
        let key = key.as_bytes();
        retry(&self.stats, "get entity", || async {
            let client = self.client().await?;
            let stmt = client.prepare_cached(schema::GET_ENTITY).await?;
            match client.query_opt(&stmt, &[&account, &lname, &key]).await? {
                Some(row) => Ok(row.try_get(0)?),
                None => Err(StoreError::TableNotFound.into()),
            }
        })
        .await
    }

    async fn scan_into(
        &self,
        account: &str,
        table: &str,
        request: ScanRequest,
        sink: &mut (dyn RowSink + '_),
    ) -> Result<ScanEnd, StoreError> {
        let lname = lower(table);
        let (rows, end) = retry(&self.stats, "scan", || self.scan_once(account, &lname, &request)).await?;
        for (key, value) in &rows {
            sink.push(key.view(), value);
        }
        Ok(end)
    }

    async fn write_entities(
        &self,
        account: &str,
        table: &str,
        keys: Vec<EntityKey>,
        decide: Decide,
    ) -> Result<(), StoreError> {
        let lname = lower(table);
        let keys: Vec<&[u8]> = keys.iter().map(EntityKey::as_bytes).collect();
        retry(&self.stats, "write", || {
            self.write_once(account, &lname, &keys, &decide)
        })
        .await
    }

    async fn snapshot(&self) -> Result<Box<dyn crate::Snapshot>, StoreError> {
        let client = self.client().await.map_err(DbError::into_store)?;
        // Out of the pool: the transaction stays open as long as the snapshot lives.
        let client = deadpool_postgres::Object::take(client);
        let snapshot = snapshot::PgSnapshot::begin(client).await.map_err(DbError::into_store)?;
        Ok(Box::new(snapshot))
    }

    async fn get_service_properties(&self, account: &str) -> Result<Option<Vec<u8>>, StoreError> {
        retry(&self.stats, "get service properties", || async {
            let client = self.client().await?;
            let stmt = client.prepare_cached(schema::GET_PROPS).await?;
            match client.query_opt(&stmt, &[&account]).await? {
                Some(row) => Ok(Some(row.try_get(0)?)),
                None => Ok(None),
            }
        })
        .await
    }

    async fn set_service_properties(&self, account: &str, value: Vec<u8>) -> Result<(), StoreError> {
        retry(&self.stats, "set service properties", || async {
            let client = self.client().await?;
            let stmt = client.prepare_cached(schema::SET_PROPS).await?;
            client.execute(&stmt, &[&account, &value]).await?;
            Ok(())
        })
        .await
    }

    async fn ready(&self) -> Result<(), String> {
        let ping = async {
            let client = self.client().await.map_err(|e| e.into_store().to_string())?;
            client
                .simple_query("SELECT 1")
                .await
                .map_err(|e| format!("postgres: {e}"))?;
            Ok(())
        };
        tokio::time::timeout(READY_DEADLINE, ping)
            .await
            .unwrap_or_else(|_| Err(format!("the database did not answer within {READY_DEADLINE:?}")))
    }

    fn metrics(&self) -> Vec<StoreMetric> {
        self.stats.metrics(&self.pool)
    }

    async fn count_tables(&self, account: &str) -> Result<u64, StoreError> {
        retry(&self.stats, "count tables", || async {
            let client = self.client().await?;
            let stmt = client.prepare_cached(schema::COUNT_TABLES).await?;
            let n: i64 = client.query_one(&stmt, &[&account]).await?.try_get(0)?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
        .await
    }

    async fn shutdown(&self) -> Result<(), StoreError> {
        // Every acknowledged write is committed already; closing only ends the
        // idle connections and refuses new operations.
        self.pool.close();
        Ok(())
    }
}
