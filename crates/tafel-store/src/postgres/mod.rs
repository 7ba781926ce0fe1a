//! The scale-out backend: any number of stateless Tafel nodes over one
//! PostgreSQL-wire database (PostgreSQL, CockroachDB, YugabyteDB).
//!
//! Invariants:
//! - Nodes keep no state of their own: every operation reads the database (a
//!   table's id included, in the same statement), so a table deleted or
//!   re-created through another node is seen at once.
//! - Every write is one transaction, at the database's default isolation, that
//!   locks the table row FOR SHARE and the keys' current rows FOR UPDATE (in key
//!   order: no deadlocks), runs the service's decision on those rows and applies
//!   it, in two round trips ([`pipelined`]). A decision writes only keys it read,
//!   so under READ COMMITTED the locks make writes of a key take turns, each
//!   seeing the one before; under SERIALIZABLE the database aborts one of two
//!   conflicting writes. A key seen absent is not locked; it is inserted with a
//!   plain INSERT, and finding it taken (or a serialization failure) runs the
//!   attempt again ([`txn`]). So the decision may run more than once; only the
//!   committed attempt's outcome is returned. A write of keys expected absent
//!   (inserts) first tries one round trip without the reads ([`write`]).
//! - A write is acknowledged only after its COMMIT answered: it is in the
//!   database. One whose COMMIT went unanswered is never run again: it fails.
//! - A table delete marks the table row (waiting for the writes that hold it);
//!   its entities go in bounded chunks ([`reaper`]), so no transaction grows with
//!   a table's size.
//! - Reads are single statements (a scan page: one per chunk, [`scan`]).

mod connect;
mod counts;
mod deleted;
mod feed;
mod index;
mod index_build;
mod migrate;
mod pipelined;
mod reaper;
mod records;
mod scan;
mod schema;
mod session;
mod snapshot;
mod stats;
mod tls;
mod txn;
mod write;

use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::Pool;
use futures_util::future::{join, join4};
use tokio_postgres::error::SqlState;

use self::stats::PgStats;
use self::txn::{retry, DbError};

use crate::error::{BackendError, FailureKind, NotReady, StoreError};
use crate::key::EntityKey;
use crate::reset::ResetError;
use crate::stats::StoreMetric;
use crate::traits::{
    Decide, IndexEncoder, IndexError, IndexInfo, IndexScanRequest, RowSink, ScanEnd, ScanRequest, Store, TableRecord,
    TableSize, TableStats,
};

pub use self::schema::SCHEMA_VERSION;
pub use self::tls::{SslMode, SslOptions, TlsError};

pub struct PostgresOptions {
    /// Connections this node keeps to the database at most.
    pub pool_size: usize,
    /// The longest a statement may run (the database ends it), and, a little
    /// longer, the longest an attempt may wait on the database before the request
    /// fails with 503 (a database that stopped answering, a cut link).
    pub timeout: Duration,
    /// TLS settings over the URL's own (`sslmode`, `sslrootcert`, …).
    pub ssl: SslOptions,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            pool_size: 16,
            timeout: Duration::from_secs(30),
            ssl: SslOptions::default(),
        }
    }
}

pub struct PostgresStore {
    pool: Pool,
    stats: PgStats,
    reaper: reaper::Reaper,
    /// How long one attempt may take, waits for the database included.
    deadline: Duration,
    /// The change feed's settings (`feed.rs`).
    feed: std::sync::Arc<feed::Feed>,
    /// How long a deleted table stays restorable (ns; 0: deleted at once; `deleted.rs`).
    keep_ns: std::sync::atomic::AtomicU64,
    /// The index encoder and what this node last saw of tables' indexes (`index.rs`).
    indexes: std::sync::Arc<index::Indexes>,
    /// This node's task building indexes online (`index_build.rs`).
    _builder: index_build::Builder,
}

/// How long readiness waits for the database to answer.
const READY_DEADLINE: Duration = Duration::from_secs(2);

/// Lookups ignore case: tables are keyed by the name's ASCII lowercase bytes.
fn lower(name: &str) -> Vec<u8> {
    name.bytes().map(|b| b.to_ascii_lowercase()).collect()
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
        let (mut config, connector) = tls::configure(url, options.ssl)
            .map_err(|e| BackendError::caused_by(FailureKind::Unavailable, "postgres connection settings", e))?;
        connect::fail_fast(&mut config);
        // The schema first, on a connection of its own: the pool's connections
        // prepare statements that need the current schema as they open.
        let setup = connect::pool(config.clone(), connector.clone(), 1, None)?;
        let client = setup.get().await.map_err(|e| {
            let why = connect::with_causes(&e);
            BackendError::new(FailureKind::Unavailable, format!("connecting to the database: {why}"))
        })?;
        migrate::migrate(&client).await.map_err(DbError::into_store)?;
        drop(client);
        setup.close();
        let pool = connect::pool(
            config,
            connector,
            options.pool_size,
            Some(session::hook(options.timeout)),
        )?;
        let reaper = reaper::Reaper::start(pool.clone());
        // Deletes a node left unfinished when it stopped.
        reaper.wake();
        let indexes = std::sync::Arc::<index::Indexes>::default();
        let builder = index_build::Builder::start(pool.clone(), indexes.clone());
        Ok(PostgresStore {
            pool,
            stats: PgStats::default(),
            reaper,
            deadline: options.timeout + Duration::from_secs(2),
            feed: Default::default(),
            keep_ns: Default::default(),
            indexes,
            _builder: builder,
        })
    }

    async fn retry<T, F, Fut>(&self, what: &str, attempt: F) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, DbError>>,
    {
        let close_idle = || drop(self.pool.retain(|_, _| false));
        retry(&self.stats, self.deadline, what, attempt, close_idle).await
    }

    async fn client(&self) -> Result<deadpool_postgres::Client, DbError> {
        let started = std::time::Instant::now();
        let client = self.pool.get().await;
        self.stats.pool_wait.observe_duration(started.elapsed());
        Ok(client?)
    }

    async fn create_once(&self, account: &str, name: &str) -> Result<bool, DbError> {
        let client = self.client().await?;
        let recorded = self.feed.on(account);
        let stmt = match recorded {
            true => client.prepare_cached(feed::CREATE_TABLE_RECORDED).await?,
            false => client.prepare_cached(schema::CREATE_TABLE).await?,
        };
        let lname = lower(name);
        let mut draws = 0;
        loop {
            draws += 1;
            // A name taken already inserts nothing (`ON CONFLICT`); the only other
            // unique key is the id, so a unique violation is an id drawn twice.
            let id = fastrand::i64(..);
            let now = i64::try_from(crate::feed::now_ns()).unwrap_or(i64::MAX);
            let created = match recorded {
                true => {
                    client
                        .execute(&stmt, &[&account, &lname, &name.as_bytes(), &id, &now])
                        .await
                }
                false => client.execute(&stmt, &[&account, &lname, &name.as_bytes(), &id]).await,
            };
            match created {
                Ok(1) => return Ok(true),
                Ok(_) => break,
                Err(e) if draws < 4 && e.code() == Some(&SqlState::UNIQUE_VIOLATION) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        // The name is taken: by a table, or by one whose entities are still going.
        let deleting = client.prepare_cached(schema::TABLE_DELETING).await?;
        match client.query_opt(&deleting, &[&account, &lname]).await? {
            Some(row) if row.try_get::<_, bool>(0)? => Err(StoreError::TableBeingDeleted.into()),
            Some(_) => Ok(false),
            // Gone between the two statements: a create that runs again may succeed.
            None => Err(DbError::Raced),
        }
    }

    /// Marks the table deleted, and in the same round trip deletes a first chunk of
    /// its entities and, if that was all of them, its row: a small table's name is
    /// free at once; a large one's entities go in the background ([`reaper`]).
    async fn delete_once(&self, account: &str, lname: &[u8]) -> Result<bool, DbError> {
        let client = self.client().await?;
        let recorded = self.feed.on(account);
        let mark = match recorded {
            true => client.prepare_cached(feed::MARK_DELETING_RECORDED).await?,
            false => client.prepare_cached(schema::MARK_DELETING).await?,
        };
        let now = i64::try_from(crate::feed::now_ns()).unwrap_or(i64::MAX);
        let mark_params: &[&(dyn tokio_postgres::types::ToSql + Sync)] = match recorded {
            true => &[&account, &lname, &now],
            false => &[&account, &lname],
        };
        let chunk = client.prepare_cached(schema::DELETE_CHUNK_NAMED).await?;
        let entries = client.prepare_cached(index::DELETE_ENTRY_CHUNK_NAMED).await?;
        let definitions = client.prepare_cached(index::DROP_DEFINITIONS_NAMED).await?;
        let drop_empty = client.prepare_cached(schema::DROP_EMPTY_NAMED).await?;
        let drop_counts = client.prepare_cached(schema::DROP_COUNTS_NAMED).await?;
        let (limit, entry_limit) = (reaper::CHUNK, index::ENTRY_CHUNK);
        // Not short-circuiting: the mark's answer is the delete's; the chunks and
        // the drop are the reaper's work done early, which it finishes if they
        // failed. The counters and index definitions go after the mark (no write
        // reaches the table then), before the drop frees the name; left behind,
        // they would belong to no table. `join` polls in order: sent in this order.
        let ((marked, chunk, entries, _), (_, dropped)) = join(
            join4(
                client.query_opt(&mark, mark_params),
                client.execute(&chunk, &[&account, &lname, &limit]),
                client.execute(&entries, &[&account, &lname, &entry_limit]),
                client.execute(&definitions, &[&account, &lname]),
            ),
            join(
                client.execute(&drop_counts, &[&account, &lname]),
                client.execute(&drop_empty, &[&account, &lname]),
            ),
        )
        .await;
        let marked = marked?.is_some();
        if marked && (chunk.is_err() || entries.is_err() || !matches!(dropped, Ok(1))) {
            self.reaper.wake();
        }
        Ok(marked)
    }

    async fn scan_once(
        &self,
        account: &str,
        lname: &[u8],
        request: &ScanRequest,
    ) -> Result<(scan::Rows, ScanEnd), DbError> {
        let client = self.client().await?;
        scan::scan(&client, &self.stats.rows, account, lname, request).await
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn create_table(&self, account: &str, name: &str) -> Result<bool, StoreError> {
        self.retry("create table", || self.create_once(account, name)).await
    }

    async fn delete_table(&self, account: &str, name: &str) -> Result<bool, StoreError> {
        let lname = lower(name);
        let keep = self.keep_ns.load(std::sync::atomic::Ordering::Acquire);
        if keep > 0 {
            return self
                .retry("delete table", || self.soft_delete_once(account, &lname, keep))
                .await;
        }
        self.retry("delete table", || self.delete_once(account, &lname)).await
    }

    async fn get_table(&self, account: &str, name: &str) -> Result<Option<TableRecord>, StoreError> {
        let lname = lower(name);
        self.retry("get table", || async {
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
        self.retry("set table acl", || async {
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
        self.retry("list tables", || async {
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
        self.retry("get entity", || async {
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
        let (rows, end) = self.retry("scan", || self.scan_once(account, &lname, &request)).await?;
        Ok(scan::deliver(rows, end, sink))
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
        let recorded = self.feed.on(account);
        self.retry("write", || self.write_once(account, &lname, &keys, &decide, recorded))
            .await
    }

    async fn insert_entities(
        &self,
        account: &str,
        table: &str,
        keys: Vec<EntityKey>,
        decide: Decide,
    ) -> Result<(), StoreError> {
        // With the feed on, inserts record their changes in the long way's transaction.
        let recorded = self.feed.on(account);
        if let Some(values) = write::decided_for_absent(&decide, keys.len())?.filter(|_| !recorded) {
            let lname = lower(table);
            let key_bytes: Vec<&[u8]> = keys.iter().map(EntityKey::as_bytes).collect();
            let values: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
            if self
                .retry("insert", || self.insert_once(account, &lname, &key_bytes, &values))
                .await?
            {
                return Ok(());
            }
        }
        // A key was there (or the decision was not to insert): decide again on the
        // rows as they are.
        self.write_entities(account, table, keys, decide).await
    }

    fn set_index_encoder(&self, encoder: IndexEncoder) {
        self.indexes.set_encoder(encoder);
    }

    async fn create_index(&self, account: &str, table: &str, property: &str) -> Result<bool, IndexError> {
        let once = || self.create_index_once(account, table, property);
        let created = self.retry("create an index", once).await;
        self.indexes.forget_ready(account, table);
        Ok(created?)
    }

    async fn drop_index(&self, account: &str, table: &str, property: &str) -> Result<bool, IndexError> {
        let once = || self.drop_index_once(account, table, property);
        let dropped = self.retry("drop an index", once).await;
        self.indexes.forget_ready(account, table);
        Ok(dropped?)
    }

    async fn list_indexes(&self, account: &str, table: &str) -> Result<Vec<IndexInfo>, IndexError> {
        Ok(self
            .retry("list indexes", || self.list_indexes_once(account, table))
            .await?)
    }

    async fn ready_indexes(&self, account: &str, table: &str) -> Result<Vec<String>, StoreError> {
        // Read at most once a second per table (`index::READY_FRESH`): a filter query
        // keeps its one round trip.
        if let Some(list) = self.indexes.fresh_ready(account, table) {
            return Ok(list);
        }
        let list = self
            .retry("ready indexes", || self.ready_indexes_once(account, table))
            .await?;
        self.indexes.saw_ready(account, table, &list);
        Ok(list)
    }

    async fn index_scan_into(
        &self,
        account: &str,
        table: &str,
        request: IndexScanRequest,
        sink: &mut (dyn RowSink + '_),
    ) -> Result<Option<ScanEnd>, StoreError> {
        let once = || self.index_scan_once(account, table, &request);
        let page = self.retry("index scan", once).await?;
        Ok(page.map(|(rows, end)| scan::deliver(rows, end, sink)))
    }

    fn set_change_feed(&self, settings: crate::feed::FeedSettings) -> Result<(), StoreError> {
        self.feed.set(settings, self.pool.clone())
    }

    async fn read_changes(
        &self,
        account: &str,
        request: &crate::feed::ChangesRequest,
    ) -> Result<crate::feed::ChangesRead, StoreError> {
        if !self.feed.on(account) {
            return Ok(crate::feed::ChangesRead::NotEnabled);
        }
        self.retry("read changes", || async {
            let client = self.client().await?;
            feed::read(&client, account, request).await
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
        self.retry("get service properties", || async {
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
        self.retry("set service properties", || async {
            let client = self.client().await?;
            let stmt = client.prepare_cached(schema::SET_PROPS).await?;
            client.execute(&stmt, &[&account, &value]).await?;
            Ok(())
        })
        .await
    }

    async fn truncate_table(&self, account: &str, table: &str) -> Result<Option<u64>, StoreError> {
        self.retry("truncate a table", || self.truncate_once(account, table))
            .await
    }

    async fn put_record(&self, kind: &str, id: &str, value: Vec<u8>) -> Result<(), StoreError> {
        self.retry("put a record", || self.put_record_once(kind, id, &value))
            .await
    }

    async fn get_record(&self, kind: &str, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.retry("get a record", || self.get_record_once(kind, id)).await
    }

    async fn list_records(&self, kind: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.retry("list records", || self.list_records_once(kind)).await
    }

    async fn delete_record(&self, kind: &str, id: &str) -> Result<(), StoreError> {
        self.retry("delete a record", || self.delete_record_once(kind, id))
            .await
    }

    async fn claim_record(&self, kind: &str, id: &str, owner: &str, lease: Duration) -> Result<bool, StoreError> {
        self.retry("claim a record", || self.claim_record_once(kind, id, owner, lease))
            .await
    }

    /// One table at a time (each delete its own transaction; the reaper
    /// removes their entities in the background), then the properties.
    async fn clear_account(&self, account: &str) -> Result<u64, ResetError> {
        let mut deleted = 0;
        loop {
            let page = self.list_tables(account, None, 1000).await?;
            if page.is_empty() {
                break;
            }
            for t in page {
                deleted += u64::from(self.delete_table(account, &t.name).await?);
            }
        }
        self.retry("clear service properties", || async {
            let client = self.client().await?;
            let stmt = client.prepare_cached(schema::DELETE_PROPS).await?;
            client.execute(&stmt, &[&account]).await?;
            Ok(())
        })
        .await?;
        Ok(deleted)
    }

    fn resets_unsupported(&self) -> ResetError {
        ResetError::Unsupported(
            "snapshots need the embedded store (redb's copy-on-write savepoints); the PostgreSQL \
             backend has none: give each test run a database of its own, or empty an account \
             with DELETE /accounts/NAME/data"
                .into(),
        )
    }

    async fn ready(&self) -> Result<(), NotReady> {
        let ping = async {
            let client = self.client().await.map_err(|e| e.into_store())?;
            client
                .simple_query("SELECT 1")
                .await
                .map_err(|e| BackendError::caused_by(FailureKind::Unavailable, "postgres", e))?;
            Ok(())
        };
        tokio::time::timeout(READY_DEADLINE, ping)
            .await
            .unwrap_or(Err(NotReady::NoAnswer(READY_DEADLINE)))
    }

    fn metrics(&self) -> Vec<StoreMetric> {
        self.stats.metrics(&self.pool)
    }

    async fn count_entities(&self, account: &str, table: &str) -> Result<u64, StoreError> {
        let lname = lower(table);
        self.retry("count entities", || async {
            match self.counts_once(account, &lname, false).await? {
                Some(s) => Ok(s.entities),
                None => Err(counts::not_found()),
            }
        })
        .await
    }

    async fn table_stats(&self, account: &str, table: &str) -> Result<Option<TableStats>, StoreError> {
        let lname = lower(table);
        self.retry("table stats", || self.counts_once(account, &lname, true))
            .await
    }

    fn set_table_soft_delete(&self, keep: Option<Duration>) -> Result<(), crate::UndeleteError> {
        let ns = keep.map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        self.keep_ns.store(ns, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    fn table_soft_delete(&self) -> Option<Duration> {
        let ns = self.keep_ns.load(std::sync::atomic::Ordering::Acquire);
        (ns > 0).then(|| Duration::from_nanos(ns))
    }

    async fn deleted_tables(&self, account: &str) -> Result<Vec<crate::DeletedTable>, crate::UndeleteError> {
        Ok(self.retry("list deleted tables", || self.list_deleted(account)).await?)
    }

    async fn restore_table(&self, account: &str, id: u64, name: Option<&str>) -> Result<String, crate::UndeleteError> {
        self.retry("restore a table", || self.restore_once(account, id, name))
            .await?
    }

    async fn table_sizes(&self) -> Result<Vec<TableSize>, StoreError> {
        self.retry("table sizes", || self.sizes_once()).await
    }

    async fn count_tables(&self, account: &str) -> Result<u64, StoreError> {
        self.retry("count tables", || async {
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
