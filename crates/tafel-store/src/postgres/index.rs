//! Secondary indexes on PostgreSQL (docs/design/indexes.md, "PostgreSQL").
//!
//! A table's index on property P is a row of `tafel_indexes` (its state) and
//! one row of `tafel_index_entries` per entity with P: `(table id, P, encoded
//! value, entity key)`, all in the primary key, so an `eq` or a range of values
//! is one index range scan, and one value's entries come in key order. The
//! encoding is the service's [`IndexEncoder`], opaque here, as in the embedded
//! store; bytea compares as memcmp, the order the encoding is made for.
//!
//! Kept exact, however many nodes write: the list of a table's indexed
//! properties is also a column of its `tafel_tables` row (`indexes`, sorted).
//! Every entity write reads that column from the row it locks FOR SHARE (the
//! long way's `LOCK_TABLE`, the insert's CTE) and changes the entries of those
//! properties in its own transaction. Creating or dropping an index UPDATEs that
//! row, and an UPDATE's row lock conflicts with FOR SHARE. So a write either
//! holds its share lock first, and the create waits for it to commit (the
//! create's build then reads the entity), or takes it after the create
//! committed, and then reads the new list: under READ COMMITTED a FOR SHARE that
//! waited returns the row's newest version; under REPEATABLE READ or
//! SERIALIZABLE it fails with a serialization failure and the write runs again.
//! Creates, drops and truncates run at READ COMMITTED ([`read_committed`]),
//! so what they read after taking the lock includes every write before it.
//! No node caches the list as truth: the insert's one-round-trip path sends the
//! entries for the list it guesses, and its statement inserts only if the
//! locked row's list equals the guess (else nothing, and the write goes the
//! long way with the real list).
//!
//! The index `*` ([`ALL_PROPERTIES`]) is an element of that list like any
//! property: it asks for every property's entries, each under its property's
//! own name, so a query on P reads the P entries whoever asked for them, and an
//! entry is written once ([`Indexes::entity_entries`], the write paths' and the
//! build's). Dropping `*` removes the entries of properties not in the list;
//! dropping a property while `*` is listed keeps its entries.
//!
//! Building: the create's transaction writes the definition; on a table with
//! entities it is `building`, and every node's build task (`index_build.rs`)
//! writes the other entities' entries in short batches; on an empty table it is
//! ready at once.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use deadpool_postgres::GenericClient;

use super::txn::DbError;
use super::{lower, PostgresStore};
use crate::error::{FailureKind, StoreError};
use crate::key::{EntityKey, KeyRef};
use crate::paging::PageBuilder;
use crate::traits::{IndexEncoder, IndexInfo, IndexProgress, IndexScanRequest, Mutation, ScanEnd, ALL_PROPERTIES};

/// Entries removed per statement when a deleted table's go.
pub(super) const ENTRY_CHUNK: i64 = 1000;

/// Adds `$3` to a live table's list (sorted): its id, or no row when the table
/// is missing or has the index. An UPDATE: it waits for every write holding the
/// row FOR SHARE, and every later write waits for this transaction.
const ADD_TO_LIST: &str = "UPDATE tafel_tables
     SET indexes = ARRAY(SELECT p FROM UNNEST(array_append(indexes, $3::TEXT)) AS u(p) ORDER BY p)
     WHERE account = $1 AND lname = $2 AND NOT deleting AND NOT ($3 = ANY(indexes)) RETURNING id, indexes";
const REMOVE_FROM_LIST: &str = "UPDATE tafel_tables SET indexes = array_remove(indexes, $3::TEXT)
     WHERE account = $1 AND lname = $2 AND NOT deleting AND $3 = ANY(indexes) RETURNING id, indexes";
/// After a list change that changed nothing: whether the table is there and has the index.
const HAS_INDEX: &str = "SELECT $3 = ANY(indexes) FROM tafel_tables WHERE account = $1 AND lname = $2 AND NOT deleting";
const DEFINE: &str = "INSERT INTO tafel_indexes (table_id, property, ready, build_after, done)
     VALUES ($1, $2, false, NULL, 0)
     ON CONFLICT (table_id, property) DO UPDATE SET ready = false, build_after = NULL, done = 0";
const MARK_READY: &str = "UPDATE tafel_indexes SET ready = true, build_after = NULL, done = $3
     WHERE table_id = $1 AND property = $2";
const UNDEFINE: &str = "DELETE FROM tafel_indexes WHERE table_id = $1 AND property = $2";
const DROP_ENTRIES: &str = "DELETE FROM tafel_index_entries WHERE table_id = $1 AND property = $2";
/// A drop of `*`: the entries of every property the list (`$2`, what is left) lacks.
const DROP_UNLISTED_ENTRIES: &str =
    "DELETE FROM tafel_index_entries WHERE table_id = $1 AND NOT (property = ANY($2::TEXT[]))";
/// Whether table `$1` has no entity (after the create's lock: no write is in it).
const EMPTY: &str = "SELECT NOT EXISTS (SELECT 1 FROM tafel_entities WHERE table_id = $1)";

/// A write's entries: removed first, then added (an entry already there, as a
/// build may have written it, is left as it is).
pub(super) const DELETE_ENTRIES: &str = "DELETE FROM tafel_index_entries e
     USING UNNEST($2::TEXT[], $3::BYTEA[], $4::BYTEA[]) AS u(p, v, k)
     WHERE e.table_id = $1 AND e.property = u.p AND e.value = u.v AND e.key = u.k";
pub(super) const INSERT_ENTRIES: &str = "INSERT INTO tafel_index_entries (table_id, property, value, key)
     SELECT $1, u.p, u.v, u.k FROM UNNEST($2::TEXT[], $3::BYTEA[], $4::BYTEA[]) AS u(p, v, k)
     ON CONFLICT DO NOTHING";

/// A table's indexes with their entries counted (`*`'s: those of properties
/// not in the list), and the table's entities (a build's progress); a row with
/// a NULL property is a table without any; no row, no table.
const LIST: &str = "SELECT d.property, d.ready, d.done,
         CASE WHEN d.property = '*' THEN
             (SELECT count(*) FROM tafel_index_entries e WHERE e.table_id = t.id AND e.property <> ALL(t.indexes))
         ELSE
             (SELECT count(*) FROM tafel_index_entries e WHERE e.table_id = t.id AND e.property = d.property)
         END,
         (SELECT CAST(COALESCE(sum(c.entities), 0) AS BIGINT) FROM tafel_table_counts c WHERE c.table_id = t.id)
     FROM tafel_tables t LEFT JOIN tafel_indexes d ON d.table_id = t.id
     WHERE t.account = $1 AND t.lname = $2 AND NOT t.deleting ORDER BY d.property";
const READY: &str = "SELECT d.property FROM tafel_tables t JOIN tafel_indexes d ON d.table_id = t.id AND d.ready
     WHERE t.account = $1 AND t.lname = $2 AND NOT t.deleting ORDER BY d.property";
/// A query's candidates, in one statement (one snapshot): first a row with the
/// table's id and how many of the properties `$3` have a ready index (all of
/// them with `*` ready), then the
/// keys of the entries in the ranges (`$4` property, `[$5, $6)` values) at or
/// after `$7`, at most `$8` of them. No row: no table.
const CANDIDATES: &str = "WITH t AS (SELECT id FROM tafel_tables WHERE account = $1 AND lname = $2 AND NOT deleting)
     SELECT t.id, (SELECT count(*) FROM UNNEST($3::TEXT[]) AS w(p) WHERE EXISTS (SELECT 1 FROM tafel_indexes d
                   WHERE d.table_id = t.id AND d.ready AND d.property IN (w.p, '*'))), NULL::BYTEA FROM t
     UNION ALL
     (SELECT NULL, NULL, e.key FROM t, UNNEST($4::TEXT[], $5::BYTEA[], $6::BYTEA[]) AS r(p, lo, hi),
          tafel_index_entries e
      WHERE e.table_id = t.id AND e.property = r.p AND e.value >= r.lo AND e.value < r.hi AND e.key >= $7
      LIMIT $8)";
/// Candidate entities by key, in key order.
const FETCH: &str = "SELECT key, value FROM tafel_entities WHERE table_id = $1 AND key = ANY($2::BYTEA[]) ORDER BY key";

/// Deleted tables' entries and definitions (the reaper's, a kept table's sweep).
const DELETE_ENTRY_CHUNK: &str = "DELETE FROM tafel_index_entries WHERE (table_id, property, value, key) IN
     (SELECT table_id, property, value, key FROM tafel_index_entries WHERE table_id = $1 LIMIT $2)";
const DROP_DEFINITIONS: &str = "DELETE FROM tafel_indexes WHERE table_id = $1";
/// The same for the table a delete just marked, found by its name (`$3` the chunk).
pub(super) const DELETE_ENTRY_CHUNK_NAMED: &str =
    "DELETE FROM tafel_index_entries WHERE (table_id, property, value, key) IN
     (SELECT table_id, property, value, key FROM tafel_index_entries WHERE table_id =
         (SELECT id FROM tafel_tables WHERE account = $1 AND lname = $2 AND deleting) LIMIT $3)";
pub(super) const DROP_DEFINITIONS_NAMED: &str = "DELETE FROM tafel_indexes WHERE table_id IN
     (SELECT id FROM tafel_tables WHERE account = $1 AND lname = $2 AND deleting)";

/// A table, by account and lowercase name, as the guesses are kept.
type TableName = (String, Vec<u8>);

/// The store's index state on this node: the service's encoder, and the
/// indexed properties last seen per table, only ever a guess (see the top).
#[derive(Default)]
pub(super) struct Indexes {
    encoder: OnceLock<IndexEncoder>,
    guesses: Mutex<HashMap<TableName, Arc<[String]>>>,
    /// Each table's ready indexes as a query last read them, and when.
    ready: Mutex<HashMap<TableName, ReadyAt>>,
    /// Wakes this node's build task (`index_build.rs`).
    build: tokio::sync::Notify,
}

/// A table's ready indexes and when they were read.
type ReadyAt = (Instant, Arc<[String]>);

/// How long a query takes a table's ready indexes as read before, rather than read
/// them again (one more round trip per query). Only ever a choice of plan: an index
/// believed ready that is not answers `None` in the scan's own statement (the query
/// scans), and one ready but not yet seen leaves a query scanning for this long on a
/// node that did not declare it (the declaring node forgets its entry at once).
const READY_FRESH: Duration = Duration::from_secs(1);

/// Tables whose lists a node remembers at most (then it starts over).
const GUESSED_TABLES: usize = 1 << 16;

impl Indexes {
    pub(super) fn set_encoder(&self, encoder: IndexEncoder) {
        let _ = self.encoder.set(encoder);
        // Builds left by a stopped node wait for it.
        self.wake_builder();
    }

    pub(super) fn has_encoder(&self) -> bool {
        self.encoder.get().is_some()
    }

    /// A build is due: this node's build task runs now (or when its pass ends).
    pub(super) fn wake_builder(&self) {
        self.build.notify_one();
    }

    pub(super) async fn woken(&self) {
        self.build.notified().await;
    }

    /// The indexed properties table `lname` had when this node last looked.
    pub(super) fn guess(&self, account: &str, lname: &[u8]) -> Arc<[String]> {
        let guesses = self.guesses.lock().unwrap_or_else(PoisonError::into_inner);
        guesses
            .get(&(account.to_owned(), lname.to_vec()))
            .cloned()
            .unwrap_or_else(|| Arc::from(Vec::new()))
    }

    /// Table `table`'s ready indexes if read within [`READY_FRESH`].
    pub(super) fn fresh_ready(&self, account: &str, table: &str) -> Option<Vec<String>> {
        let ready = self.ready.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, list) = ready.get(&(account.to_owned(), lower(table)))?;
        (at.elapsed() < READY_FRESH).then(|| list.to_vec())
    }

    pub(super) fn saw_ready(&self, account: &str, table: &str, list: &[String]) {
        let mut ready = self.ready.lock().unwrap_or_else(PoisonError::into_inner);
        if ready.len() >= GUESSED_TABLES {
            ready.clear();
        }
        ready.insert((account.to_owned(), lower(table)), (Instant::now(), Arc::from(list)));
    }

    /// After this node declared or dropped an index of `table`: read it anew.
    pub(super) fn forget_ready(&self, account: &str, table: &str) {
        let mut ready = self.ready.lock().unwrap_or_else(PoisonError::into_inner);
        ready.remove(&(account.to_owned(), lower(table)));
    }

    /// After this node's build task made an index ready (it knows the table's id,
    /// not its name): every table's read anew.
    pub(super) fn forget_all_ready(&self) {
        let mut ready = self.ready.lock().unwrap_or_else(PoisonError::into_inner);
        ready.clear();
    }

    pub(super) fn saw(&self, account: &str, lname: &[u8], list: Vec<String>) {
        let mut guesses = self.guesses.lock().unwrap_or_else(PoisonError::into_inner);
        if guesses.len() >= GUESSED_TABLES {
            guesses.clear();
        }
        guesses.insert((account.to_owned(), lname.to_vec()), Arc::from(list));
    }

    /// The entries (property, encoded value) that the stored entity `value`
    /// gives the indexes `definitions` (`*` among them or not), sorted, each
    /// once: what every write path and the build write. A panic in the encoder,
    /// or a table with indexes written before the service gave its encoder,
    /// fails the write.
    pub(super) fn entity_entries(
        &self,
        definitions: &[String],
        value: &[u8],
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.encoder()?.entries_or_fail(definitions, value)
    }

    /// The service's encoder; a table with indexes written before the service
    /// gave it fails the write.
    fn encoder(&self) -> Result<&IndexEncoder, StoreError> {
        self.encoder.get().ok_or_else(|| {
            StoreError::failure(
                FailureKind::Internal,
                "a table with secondary indexes written before the service gave the store its index encoder",
            )
        })
    }
}

/// Index entries as the three arrays `DELETE_ENTRIES` and `INSERT_ENTRIES` take.
#[derive(Default)]
pub(super) struct Entries {
    pub(super) properties: Vec<String>,
    pub(super) values: Vec<Vec<u8>>,
    pub(super) keys: Vec<Vec<u8>>,
}

impl Entries {
    fn push(&mut self, property: &str, value: Vec<u8>, key: &[u8]) {
        self.properties.push(property.to_owned());
        self.values.push(value);
        self.keys.push(key.to_vec());
    }

    pub(super) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// What a write does to the entries of `properties`: each key's entries move from
/// its current value to its new one (`removed`, `added`).
pub(super) fn changes(
    indexes: &Indexes,
    properties: &[String],
    keys: &[&[u8]],
    mutations: &[Mutation],
    current: &[Option<Vec<u8>>],
) -> Result<(Entries, Entries), StoreError> {
    let (mut removed, mut added) = (Entries::default(), Entries::default());
    if properties.is_empty() {
        return Ok((removed, added));
    }
    for ((&key, m), old) in keys.iter().zip(mutations).zip(current) {
        let new = match m {
            Mutation::Put(v) | Mutation::Merge(v) => Some(v.as_slice()),
            Mutation::Delete | Mutation::Expire => None,
            Mutation::Keep => continue,
        };
        let moved = indexes.encoder()?.moved(properties, old.as_deref(), new)?;
        for (p, e) in moved.gone {
            removed.push(&p, e, key);
        }
        for (p, e) in moved.came {
            added.push(&p, e, key);
        }
    }
    Ok((removed, added))
}

/// The entries of new entities (`keys[i]` taking `values[i]`) for `properties`.
pub(super) fn entries_of(
    indexes: &Indexes,
    properties: &[String],
    keys: &[&[u8]],
    values: &[&[u8]],
) -> Result<Entries, StoreError> {
    let mut out = Entries::default();
    if properties.is_empty() {
        return Ok(out);
    }
    for (&key, &value) in keys.iter().zip(values) {
        for (p, e) in indexes.entity_entries(properties, value)? {
            out.push(&p, e, key);
        }
    }
    Ok(out)
}

/// Removes every index entry and definition of table `id`, which no write
/// reaches any more (marked deleted, or kept past its time), in chunks.
pub(super) async fn drop_all(client: &deadpool_postgres::Object, id: i64) -> Result<u64, DbError> {
    let chunk = client.prepare_cached(DELETE_ENTRY_CHUNK).await?;
    let mut removed = 0;
    loop {
        let n = client.execute(&chunk, &[&id, &ENTRY_CHUNK]).await?;
        removed += n;
        if n == 0 {
            break;
        }
    }
    let defs = client.prepare_cached(DROP_DEFINITIONS).await?;
    client.execute(&defs, &[&id]).await?;
    Ok(removed)
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl PostgresStore {
    /// One attempt of a create: the definition, `building` on a table with
    /// entities (the build task writes their entries), ready on an empty one; one
    /// short transaction (see the top). `Ok(false)` when the index exists.
    pub(super) async fn create_index_once(&self, account: &str, table: &str, property: &str) -> Result<bool, DbError> {
        let lname = lower(table);
        let mut client = self.client().await?;
        let tx = read_committed(&mut client).await?;
        let add = tx.prepare_cached(ADD_TO_LIST).await?;
        let Some(row) = tx.query_opt(&add, &[&account, &lname, &property]).await? else {
            return match exists(&tx, account, &lname, property).await? {
                true => Ok(false),
                // Not listed, yet the UPDATE found it listed: changed between the two statements.
                false => Err(DbError::Raced),
            };
        };
        let (id, list): (i64, Vec<String>) = (row.try_get(0)?, row.try_get(1)?);
        let define = tx.prepare_cached(DEFINE).await?;
        tx.execute(&define, &[&id, &property]).await?;
        // After the lock, at READ COMMITTED: every write before it is seen, none runs.
        let empty = tx.prepare_cached(EMPTY).await?;
        let empty: bool = tx.query_one(&empty, &[&id]).await?.try_get(0)?;
        if empty {
            let ready = tx.prepare_cached(MARK_READY).await?;
            tx.execute(&ready, &[&id, &property, &0i64]).await?;
        }
        tx.commit().await?;
        self.indexes.saw(account, &lname, list);
        if !empty {
            self.indexes.wake_builder();
        }
        Ok(true)
    }

    /// One attempt of a drop: the definition and its entries, in one transaction
    /// that holds the table's row as a create does. `Ok(false)` without the index.
    pub(super) async fn drop_index_once(&self, account: &str, table: &str, property: &str) -> Result<bool, DbError> {
        let lname = lower(table);
        let mut client = self.client().await?;
        let tx = read_committed(&mut client).await?;
        let remove = tx.prepare_cached(REMOVE_FROM_LIST).await?;
        let Some(row) = tx.query_opt(&remove, &[&account, &lname, &property]).await? else {
            return match exists(&tx, account, &lname, property).await? {
                // Listed, yet the UPDATE found it not: changed between the two statements.
                true => Err(DbError::Raced),
                false => Ok(false),
            };
        };
        let (id, rest): (i64, Vec<String>) = (row.try_get(0)?, row.try_get(1)?);
        let undefine = tx.prepare_cached(UNDEFINE).await?;
        tx.execute(&undefine, &[&id, &property]).await?;
        if property == ALL_PROPERTIES {
            let entries = tx.prepare_cached(DROP_UNLISTED_ENTRIES).await?;
            tx.execute(&entries, &[&id, &rest]).await?;
        } else if !rest.iter().any(|p| p == ALL_PROPERTIES) {
            // With `*` left, its entries are `*`'s too.
            let entries = tx.prepare_cached(DROP_ENTRIES).await?;
            tx.execute(&entries, &[&id, &property]).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    pub(super) async fn list_indexes_once(&self, account: &str, table: &str) -> Result<Vec<IndexInfo>, DbError> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(LIST).await?;
        let rows = client.query(&stmt, &[&account, &lower(table)]).await?;
        if rows.is_empty() {
            return Err(StoreError::TableNotFound.into());
        }
        let mut out = Vec::new();
        for row in &rows {
            let Some(property) = row.try_get::<_, Option<String>>(0)? else {
                continue;
            };
            let ready: bool = row.try_get(1)?;
            // Entities the build has passed, of the table's now (deletes behind the cursor
            // do not lower `done`: it is capped).
            let (done, total) = (count(row.try_get(2)?), count(row.try_get(4)?));
            let progress = (!ready).then_some(IndexProgress {
                done: done.min(total),
                total,
            });
            out.push(IndexInfo {
                property,
                ready,
                entries: count(row.try_get(3)?),
                progress,
            });
        }
        Ok(out)
    }

    pub(super) async fn ready_indexes_once(&self, account: &str, table: &str) -> Result<Vec<String>, DbError> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(READY).await?;
        let rows = client.query(&stmt, &[&account, &lower(table)]).await?;
        rows.iter().map(|r| Ok(r.try_get(0)?)).collect()
    }

    /// One attempt of a page from indexes: its rows (kept until the attempt
    /// ended, as a scan's), or `None` when the indexes cannot answer.
    pub(super) async fn index_scan_once(
        &self,
        account: &str,
        table: &str,
        request: &IndexScanRequest,
    ) -> Result<Option<(super::scan::Rows, ScanEnd)>, DbError> {
        let client = self.client().await?;
        let mut wanted: Vec<&str> = request.ranges.iter().map(|(p, _)| p.as_str()).collect();
        wanted.sort_unstable();
        wanted.dedup();
        let (mut props, mut los, mut his) = (Vec::new(), Vec::new(), Vec::new());
        for (property, ranges) in &request.ranges {
            for (lo, hi) in ranges.iter().filter(|(lo, hi)| lo < hi) {
                props.push(property.as_str());
                los.push(lo.as_slice());
                his.push(hi.as_slice());
            }
        }
        let from: &[u8] = request.from.as_ref().map_or(&[], EntityKey::as_bytes);
        let limit = i64::try_from(request.max_candidates).unwrap_or(i64::MAX - 1) + 1;
        let stmt = client.prepare_cached(CANDIDATES).await?;
        let lname = lower(table);
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 8] =
            [&account, &lname, &wanted, &props, &los, &his, &from, &limit];
        let rows = client.query(&stmt, &params).await?;
        let (mut id, mut keys) = (None, Vec::new());
        for row in &rows {
            match row.try_get::<_, Option<Vec<u8>>>(2)? {
                Some(key) => keys.push(key),
                None => {
                    id = Some(row.try_get::<_, i64>(0)?);
                    if count(row.try_get(1)?) != wanted.len() as u64 {
                        return Ok(None);
                    }
                }
            }
        }
        let Some(id) = id else {
            return Err(StoreError::TableNotFound.into());
        };
        if keys.len() > request.max_candidates {
            return Ok(None);
        }
        let paging = request.candidates_in_key_order(&mut keys);
        let mut out = super::scan::Rows::new();
        let mut page = PageBuilder::new(&paging, &mut out).counted(&self.stats.rows);
        let fetch = client.prepare_cached(FETCH).await?;
        let mut rest = keys.as_slice();
        while !rest.is_empty() {
            let want = request
                .limit
                .saturating_sub(page.len())
                .saturating_add(1)
                .clamp(256, 1000);
            let (chunk, after) = rest.split_at(want.min(rest.len()));
            rest = after;
            let found = client.query(&fetch, &[&id, &chunk]).await?;
            let offered = catch_unwind(AssertUnwindSafe(|| -> Result<_, DbError> {
                for row in &found {
                    // A candidate deleted since its entry was read is simply gone.
                    let (key, value): (&[u8], &[u8]) = (row.try_get(0)?, row.try_get(1)?);
                    if let Some(end) = page.offer(KeyRef::new(key), value) {
                        return Ok(Some(end));
                    }
                }
                Ok(None)
            }))
            .map_err(|_| StoreError::failure(FailureKind::Internal, "a query's filter panicked (a bug)"))?;
            if let Some(end) = offered? {
                drop(page);
                return Ok(Some((out, end)));
            }
        }
        let end = page.finish();
        Ok(Some((out, end)))
    }
}

/// A transaction at READ COMMITTED whatever the database's default: its
/// statements after the table row's lock see every write that held the row
/// before (a snapshot per statement). At SERIALIZABLE, a create would read the
/// table as of before its lock waited, and a build reading the whole table
/// would conflict with every concurrent write (and be run again until it gave up).
pub(super) async fn read_committed(
    client: &mut deadpool_postgres::Object,
) -> Result<deadpool_postgres::Transaction<'_>, DbError> {
    Ok(client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::ReadCommitted)
        .start()
        .await?)
}

/// After a list change that found nothing to change: whether the table has the
/// index (`TableNotFound` without the table).
async fn exists(client: &impl GenericClient, account: &str, lname: &[u8], property: &str) -> Result<bool, DbError> {
    let stmt = client.prepare_cached(HAS_INDEX).await?;
    match client.query_opt(&stmt, &[&account, &lname, &property]).await? {
        Some(row) => Ok(row.try_get(0)?),
        None => Err(StoreError::TableNotFound.into()),
    }
}
