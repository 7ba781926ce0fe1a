//! The PostgreSQL backend against a real PostgreSQL (`TAFEL_TEST_POSTGRES_URL`,
//! which `scripts/with-postgres` provides). Every test works in an account of its
//! own, so tests share the database without seeing each other. Where the contract
//! leaves a choice (paging, ordering, edge cases), the answer is compared with the
//! embedded store's. The tests are grouped by what they exercise, one module
//! each; the helpers here serve them all.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a failed step fails the test

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tafel_store::embedded::{EmbeddedOptions, EmbeddedStore};
use tafel_store::postgres::{PostgresOptions, PostgresStore};
use tafel_store::{
    write_with, Decide, EntityKey, Expect, KeyRange, Mutation, RowFilter, ScanRequest, Store, StoreError,
};

mod big_tables;
mod concurrency;
mod counts;
mod feed;
mod indexes;
mod lifecycle;
mod migrations;
mod operations;
mod records;
mod scans;
mod tls;
// Scans into owned pages, as the unit tests do.
#[path = "../../src/test_support.rs"]
mod test_support;

use test_support::{ScanEntities, ScanPage};

/// The database URL. Every test here is `#[ignore]`d, so a plain `cargo test` lists
/// them as ignored rather than passing them without a database; one that runs was
/// asked for (`-- --include-ignored`, as scripts/test does under
/// scripts/with-postgres), and without a URL it fails rather than pass untested.
fn url() -> String {
    match std::env::var("TAFEL_TEST_POSTGRES_URL") {
        Ok(u) if !u.is_empty() => u,
        _ => panic!(
            "TAFEL_TEST_POSTGRES_URL is not set: the PostgreSQL backend tests need a database \
             (run them with scripts/with-postgres cargo test -p tafel-store --test postgres -- --include-ignored)"
        ),
    }
}

async fn pg(url: &str) -> PostgresStore {
    PostgresStore::connect(
        url,
        PostgresOptions {
            pool_size: 8,
            ..PostgresOptions::default()
        },
    )
    .await
    .expect("connect to the test database")
}

/// A plain SQL session on `url` (no TLS), for a test that looks at the database itself.
/// It reads at READ COMMITTED whatever the server's default: under SERIALIZABLE even a
/// lone count can be cancelled (40001) by the store's own transactions running beside
/// it (the reaper's deletes), and a test's look is not one of the store's transactions.
async fn sql(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    client
        .batch_execute("SET default_transaction_isolation = 'read committed'")
        .await
        .unwrap();
    client
}

/// The one BIGINT `query` answers (a count, a stored number).
async fn scalar(client: &tokio_postgres::Client, query: &str) -> i64 {
    client.query_one(query, &[]).await.unwrap().get(0)
}

/// A new empty database on the test server (for a test that watches its sessions or
/// its schema); its URL, without TLS.
async fn fresh_database(url: &str) -> String {
    let admin = sql(url).await;
    let name = format!("tafel_big_{:012x}", fastrand::u64(..) >> 16);
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    let mut config: tokio_postgres::Config = url.parse().unwrap();
    config.dbname(&name);
    // Back to a URL the store parses: host, port and user as given.
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "127.0.0.1".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("postgres");
    format!("postgresql://{user}@{host}:{port}/{name}?sslmode=disable")
}

/// Creates `name`, waiting (up to `within`) while a deleted table of that name is
/// still going; panics on any other answer.
async fn create_when_free(store: &PostgresStore, account: &str, name: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        match store.create_table(account, name).await {
            Ok(true) => return,
            Err(StoreError::TableBeingDeleted) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            other => panic!("create {name}: {other:?}"),
        }
    }
}

fn account() -> String {
    format!("acct{:016x}", fastrand::u64(..))
}

fn embedded() -> (EmbeddedStore, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("tafel-pg-parity-{:016x}", fastrand::u64(..)));
    let store = EmbeddedStore::open(
        &dir,
        EmbeddedOptions {
            cache_size: 8 << 20,
            ..EmbeddedOptions::default()
        },
    )
    .expect("open embedded");
    (store, dir)
}

fn key(pk: &str, rk: &str) -> EntityKey {
    EntityKey::new(pk, rk)
}

/// Puts `values[i]` under `keys[i]`.
fn put_all(values: Vec<Vec<u8>>) -> Decide {
    Box::new(move |_| values.iter().cloned().map(Mutation::Put).collect())
}

async fn put(store: &dyn Store, account: &str, table: &str, pk: &str, rk: &str, value: &[u8]) {
    store
        .write_entities(account, table, vec![key(pk, rk)], put_all(vec![value.to_vec()]))
        .await
        .expect("put");
}

/// A decision that also says what it did, for [`write_with`].
trait Decides<T>: Fn(&[Option<&[u8]>]) -> (Vec<Mutation>, T) + Send + Sync + 'static {}
impl<T, F: Fn(&[Option<&[u8]>]) -> (Vec<Mutation>, T) + Send + Sync + 'static> Decides<T> for F {}

/// Inserts `key` if absent; `true` if this call inserted it.
fn insert_if_absent(value: Vec<u8>) -> impl Decides<bool> {
    move |current| match current[0] {
        Some(_) => (Vec::new(), false),
        None => (vec![Mutation::Put(value.clone())], true),
    }
}

/// Adds one to a little-endian u64 counter (absent = 0); returns the new value.
fn increment() -> impl Decides<u64> {
    |current| {
        let n = current[0].map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap_or([0; 8]))) + 1;
        (vec![Mutation::Put(n.to_le_bytes().to_vec())], n)
    }
}

/// The store's count of attempts run again after a conflict.
fn retries(store: &dyn Store) -> u64 {
    store
        .metrics()
        .iter()
        .find_map(|m| match (m.name, &m.value) {
            ("postgres_retries", tafel_store::MetricValue::Counter(n)) => Some(*n),
            _ => None,
        })
        .expect("the postgres backend counts its retries")
}

fn names(records: &[tafel_store::TableRecord]) -> Vec<&str> {
    records.iter().map(|r| r.name.as_str()).collect()
}

fn all(limit: usize, filter: Option<RowFilter>) -> ScanRequest {
    ScanRequest {
        ranges: vec![KeyRange::all()],
        limit,
        filter,
        deadline: None,
    }
}

fn every_third() -> RowFilter {
    Arc::new(|_, v| v.first().is_some_and(|b| b % 3 == 0))
}
