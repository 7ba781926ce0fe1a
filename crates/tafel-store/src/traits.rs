//! The storage contract. A backend provides per-account tables addressed by
//! case-insensitive name, and entity values under ordered [`EntityKey`]s, with
//! atomic read-modify-write of several entities of one table.

use std::ops::ControlFlow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use async_trait::async_trait;

use crate::error::{FailureKind, NotReady, StoreError};
use crate::feed::{ChangesRead, ChangesRequest};
use crate::key::{EntityKey, KeyRange, KeyRef};
use crate::reset::{ResetError, SavepointInfo};
use crate::stats::StoreMetric;
use crate::undelete::{DeletedTable, UndeleteError};

/// A table as stored: its name with the case it was created with, and the opaque
/// access-policy blob the service keeps for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableRecord {
    pub name: String,
    pub acl: Vec<u8>,
}

/// A table's counters as of one commit: its entities and their bytes (each
/// entity's encoded key and stored value), kept exact by every write in the
/// write's own commit; and, where the backend counts them, its partitions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableStats {
    pub entities: u64,
    pub bytes: u64,
    /// `None` where a backend does not count partitions for this answer.
    pub partitions: Option<u64>,
}

/// One table's counters, for listings of every table (metrics).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSize {
    pub account: String,
    pub table: String,
    pub entities: u64,
    pub bytes: u64,
}

/// Decides, from a row's key and value, whether a scan returns it. Runs on the
/// backend's threads, so it must be cheap and must not block.
pub type RowFilter = Arc<dyn Fn(KeyRef<'_>, &[u8]) -> bool + Send + Sync>;

/// One page of an ordered scan.
pub struct ScanRequest {
    /// Sorted, non-overlapping ranges to visit in order.
    pub ranges: Vec<KeyRange>,
    /// At most this many matching rows are returned.
    pub limit: usize,
    /// Rows the filter rejects are skipped; `None` returns every row.
    pub filter: Option<RowFilter>,
    /// Stop early (returning a continuation) once this instant has passed.
    pub deadline: Option<Instant>,
}

/// Takes the rows a scan returns, in key order, as the scan finds them. A query
/// turns each row into response bytes right there, while the row is still in the
/// CPU cache, instead of the scan copying every row into a page to be read again.
/// Must be cheap and must not block, like [`RowFilter`].
pub trait RowSink: Send {
    /// Takes one row. `Break` stops the scan at this row, when the sink cannot
    /// use more (its encoder failed): the sink keeps why, and the scan returns
    /// without a continuation for its caller to ask the sink. Scanning on to the
    /// end of the page would only encode rows for an answer that is an error.
    fn push(&mut self, key: KeyRef<'_>, value: &[u8]) -> ControlFlow<()>;
}

/// The plain sink: owned copies of the rows.
impl RowSink for Vec<(EntityKey, Vec<u8>)> {
    fn push(&mut self, key: KeyRef<'_>, value: &[u8]) -> ControlFlow<()> {
        Vec::push(self, (key.to_owned(), value.to_vec()));
        ControlFlow::Continue(())
    }
}

/// How a scan into a [`RowSink`] ended.
pub struct ScanEnd {
    /// Where the next page starts (inclusive), when the scan stopped before the end
    /// of its ranges and at least one more row may match; `None` too when the
    /// sink stopped the scan (see [`RowSink::push`]).
    pub next: Option<EntityKey>,
}

/// The property of the index that indexes every property of a table (Cosmos
/// DB's default policy): its entries are each property's, under its own name.
pub const ALL_PROPERTIES: &str = "*";

/// The value parts of secondary-index entries (docs/design/indexes.md) of an
/// entity in its stored form. The service gives it to the store (it knows the
/// stored form); the store keeps what it returns as opaque bytes, in the
/// entity's commit.
pub struct IndexEncoder {
    /// One property's, or `None` when the entity has no such property.
    one: Box<OneProperty>,
    /// Every indexable property's (not the keys, not `Timestamp`), by name.
    all: Box<EveryProperty>,
}

/// An entity's entry value for one property, if it has the property.
type OneProperty = dyn Fn(&[u8], &str) -> Option<Vec<u8>> + Send + Sync;
/// An entity's (property, entry value) for every property it has.
type EveryProperty = dyn Fn(&[u8]) -> Vec<(String, Vec<u8>)> + Send + Sync;

impl IndexEncoder {
    pub fn new(
        one: impl Fn(&[u8], &str) -> Option<Vec<u8>> + Send + Sync + 'static,
        all: impl Fn(&[u8]) -> Vec<(String, Vec<u8>)> + Send + Sync + 'static,
    ) -> IndexEncoder {
        IndexEncoder {
            one: Box::new(one),
            all: Box::new(all),
        }
    }

    pub fn one(&self, stored: &[u8], property: &str) -> Option<Vec<u8>> {
        (self.one)(stored, property)
    }

    pub fn all(&self, stored: &[u8]) -> Vec<(String, Vec<u8>)> {
        (self.all)(stored)
    }

    /// The entries an entity in stored form `stored` gives the indexes
    /// `definitions` (properties, [`ALL_PROPERTIES`] among them or not): each
    /// `(property, encoded value)` once, sorted, whoever asked for it.
    pub fn entries(&self, definitions: &[String], stored: &[u8]) -> Vec<(String, Vec<u8>)> {
        let mut out = match definitions.iter().any(|d| d == ALL_PROPERTIES) {
            true => self.all(stored),
            false => definitions
                .iter()
                .filter_map(|p| Some((p.clone(), self.one(stored, p)?)))
                .collect(),
        };
        out.sort_unstable();
        out.dedup();
        out
    }

    /// [`entries`](Self::entries), a panic in the service's encoder failing the
    /// write rather than the writer.
    #[cfg_attr(not(any(feature = "embedded", feature = "postgres")), allow(dead_code))]
    pub(crate) fn entries_or_fail(
        &self,
        definitions: &[String],
        stored: &[u8],
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        catch_unwind(AssertUnwindSafe(|| self.entries(definitions, stored)))
            .map_err(|_| StoreError::failure(FailureKind::Internal, "the index encoder panicked"))
    }

    /// What a write from `old` to `new` (stored forms; `None`: no entity) does
    /// to the entries of `definitions`: the entries gone, and those come. An
    /// entry in both stays as it is. For both backends' write paths.
    #[cfg_attr(not(any(feature = "embedded", feature = "postgres")), allow(dead_code))]
    pub(crate) fn moved(
        &self,
        definitions: &[String],
        old: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<Moved, StoreError> {
        let entries = |v: Option<&[u8]>| v.map_or(Ok(Vec::new()), |v| self.entries_or_fail(definitions, v));
        // Both sorted: a binary search finds an entry in the other.
        let (before, after) = (entries(old)?, entries(new)?);
        let gone = before
            .iter()
            .filter(|b| after.binary_search(b).is_err())
            .cloned()
            .collect();
        let came = after
            .iter()
            .filter(|a| before.binary_search(a).is_err())
            .cloned()
            .collect();
        Ok(Moved { gone, came })
    }
}

/// The entries a write removes and adds ([`IndexEncoder::moved`]), each
/// `(property, encoded value)`.
#[cfg_attr(not(any(feature = "embedded", feature = "postgres")), allow(dead_code))]
pub(crate) struct Moved {
    pub(crate) gone: Vec<(String, Vec<u8>)>,
    pub(crate) came: Vec<(String, Vec<u8>)>,
}

/// One secondary index of a table, as the admin API lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexInfo {
    pub property: String,
    /// Whether queries may use it (every entity of the table has its entry).
    pub ready: bool,
    pub entries: u64,
    /// While building: how far the build has come.
    pub progress: Option<IndexProgress>,
}

/// How far an index's online build has come: `done` of the table's `total`
/// entities have had their entries written (`total` counted when asked, so a
/// table written meanwhile can move it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexProgress {
    pub done: u64,
    pub total: u64,
}

/// Why an index operation failed.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The backend cannot do this yet; the message says so.
    #[error("{0}")]
    Unsupported(String),
    #[error("the table does not exist")]
    TableNotFound,
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for IndexError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::TableNotFound => IndexError::TableNotFound,
            other => IndexError::Store(other),
        }
    }
}

/// Half-open ranges `[start, end)` of one index's encoded values.
pub type ValueRanges = Vec<(Vec<u8>, Vec<u8>)>;

/// One page of a query answered from secondary indexes: the candidates are the
/// entities with an entry in `ranges` (per property, half-open byte ranges of
/// encoded values) whose keys are at or after `from`, in key order; each is read
/// and kept when `filter` takes it, until `limit` are kept.
pub struct IndexScanRequest {
    pub ranges: Vec<(String, ValueRanges)>,
    pub from: Option<EntityKey>,
    pub limit: usize,
    pub filter: RowFilter,
    /// More candidates than this: the index does not answer (the scan does).
    /// Only where candidates are gathered and sorted (ranges over several values):
    /// one value's entries are read in key order, as far as the page goes.
    pub max_candidates: usize,
    /// Past it the page ends where it is, with a continuation (as a scan's).
    pub deadline: Option<Instant>,
}

impl IndexScanRequest {
    /// Puts the candidate keys gathered from the ranges (in value order) in key
    /// order, each once, and gives the scan's paging rules for reading them (a
    /// page ends at the first match past its limit, which starts the next page),
    /// so an index's pages are the scan's. For each backend's `index_scan_into`.
    #[cfg_attr(not(any(feature = "embedded", feature = "postgres")), allow(dead_code))]
    pub(crate) fn candidates_in_key_order(&self, keys: &mut Vec<Vec<u8>>) -> ScanRequest {
        keys.sort_unstable();
        keys.dedup();
        self.paging()
    }

    /// The scan's paging rules for candidates offered in key order.
    #[cfg_attr(not(any(feature = "embedded", feature = "postgres")), allow(dead_code))]
    pub(crate) fn paging(&self) -> ScanRequest {
        ScanRequest {
            ranges: Vec::new(),
            limit: self.limit,
            filter: Some(self.filter.clone()),
            deadline: self.deadline,
        }
    }
}

/// What a write does to one of the keys it locked.
#[derive(Debug, Clone, PartialEq)]
pub enum Mutation {
    Put(Vec<u8>),
    /// A put the change feed records as a merge (when the row was there).
    Merge(Vec<u8>),
    Delete,
    /// A delete the change feed records with `"reason":"expired"` (the TTL
    /// sweep's).
    Expire,
    Keep,
}

/// Given the current value of each requested key (`None` = absent), decides what to
/// write: one mutation per key, in key order, or none to change nothing. Runs inside the backend's transaction: everything it sees and writes is
/// atomic with respect to every other write. A backend that retries conflicting
/// transactions (PostgreSQL) may call it more than once, each time with fresh rows;
/// only the last call's decision takes effect. `Fn`, not `FnMut`: the closure
/// only reads what it captured, and (being `Sync`) a backend can hold it by `&`
/// across awaits.
pub type Decide = Box<dyn Fn(&[Option<&[u8]>]) -> Vec<Mutation> + Send + Sync>;

/// What a write expects of its keys' rows: a hint for the backend, never a
/// condition (the decision alone decides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Rows may be there or not.
    Any,
    /// Every key absent: [`Store::insert_entities`].
    Absent,
}

/// [`Store::write_entities`] (or, expecting absent keys, [`Store::insert_entities`])
/// with a decision that also yields a value of the caller's (the operation's result,
/// or why it refused): the value of the call whose decision took effect.
pub async fn write_with<T: Send + 'static>(
    store: &(impl Store + ?Sized),
    account: &str,
    table: &str,
    keys: Vec<EntityKey>,
    expect: Expect,
    decide: impl Fn(&[Option<&[u8]>]) -> (Vec<Mutation>, T) + Send + Sync + 'static,
) -> Result<T, StoreError> {
    let cell = Arc::new(Mutex::new(None));
    let out = cell.clone();
    let decide: Decide = Box::new(move |current| {
        let (mutations, value) = decide(current);
        *out.lock().unwrap_or_else(PoisonError::into_inner) = Some(value);
        mutations
    });
    match expect {
        Expect::Any => store.write_entities(account, table, keys, decide).await?,
        Expect::Absent => store.insert_entities(account, table, keys, decide).await?,
    }
    let value = cell.lock().unwrap_or_else(PoisonError::into_inner).take();
    value.ok_or_else(|| StoreError::failure(crate::FailureKind::Internal, "the write finished without a decision"))
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Creates a table; `Ok(false)` if one with the same name ignoring case exists.
    async fn create_table(&self, account: &str, name: &str) -> Result<bool, StoreError>;
    /// Deletes a table and all its entities; `Ok(false)` if there was none.
    async fn delete_table(&self, account: &str, name: &str) -> Result<bool, StoreError>;
    /// Looks a table up by name, ignoring case.
    async fn get_table(&self, account: &str, name: &str) -> Result<Option<TableRecord>, StoreError>;
    /// Replaces a table's access-policy blob; `Ok(false)` if the table does not exist.
    async fn set_table_acl(&self, account: &str, name: &str, acl: Vec<u8>) -> Result<bool, StoreError>;
    /// Up to `limit` tables in ordinal order of their stored names, starting at
    /// the first whose name is >= `from`.
    async fn list_tables(
        &self,
        account: &str,
        from: Option<&str>,
        limit: usize,
    ) -> Result<Vec<TableRecord>, StoreError>;

    async fn get_entity(&self, account: &str, table: &str, key: &EntityKey) -> Result<Option<Vec<u8>>, StoreError>;

    /// One page of an ordered scan, each returned row handed to `sink` as it is found.
    async fn scan_into(
        &self,
        account: &str,
        table: &str,
        request: ScanRequest,
        sink: &mut (dyn RowSink + '_),
    ) -> Result<ScanEnd, StoreError>;

    /// Atomically reads `keys` (distinct, of one table), lets `decide` choose the
    /// mutations, applies them and makes them durable before returning.
    async fn write_entities(
        &self,
        account: &str,
        table: &str,
        keys: Vec<EntityKey>,
        decide: Decide,
    ) -> Result<(), StoreError>;

    /// [`Store::write_entities`] for a write that expects every key absent (inserts):
    /// the same contract, and a hint. A backend may write what `decide` chooses for
    /// absent rows without reading them first, as long as it falls back to the read
    /// when a row turns out to be there.
    async fn insert_entities(
        &self,
        account: &str,
        table: &str,
        keys: Vec<EntityKey>,
        decide: Decide,
    ) -> Result<(), StoreError> {
        self.write_entities(account, table, keys, decide).await
    }

    async fn get_service_properties(&self, account: &str) -> Result<Option<Vec<u8>>, StoreError>;
    async fn set_service_properties(&self, account: &str, value: Vec<u8>) -> Result<(), StoreError>;

    /// Deletes every entity of a table at once, in one commit: its counters
    /// read 0, its index entries go (its indexes stay), and the change feed
    /// gets one `truncateTable` change. How many entities went; `None` when
    /// there is no such table.
    async fn truncate_table(&self, account: &str, table: &str) -> Result<Option<u64>, StoreError>;

    /// Operator records (purge jobs and the like): small values under a kind
    /// and an id, durable like any write and seen by every node sharing the
    /// store, so that no node's local disk holds state another must resume.
    async fn put_record(&self, kind: &str, id: &str, value: Vec<u8>) -> Result<(), StoreError>;
    async fn get_record(&self, kind: &str, id: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Every record of `kind`, by id.
    async fn list_records(&self, kind: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError>;
    async fn delete_record(&self, kind: &str, id: &str) -> Result<(), StoreError>;
    /// Takes or renews `owner`'s lease on record `id` for `lease`: false while
    /// another owner's lease runs, so two nodes never work one job. A store
    /// that only one process opens grants it always.
    async fn claim_record(
        &self,
        _kind: &str,
        _id: &str,
        _owner: &str,
        _lease: std::time::Duration,
    ) -> Result<bool, StoreError> {
        Ok(true)
    }

    /// A consistent view of everything stored, as of now, for a backup. It may
    /// hold resources (a database connection, old pages) until dropped.
    async fn snapshot(&self) -> Result<Box<dyn crate::Snapshot>, StoreError>;

    /// Saves the whole store's state under `name` (a savepoint: copy-on-write,
    /// costs nothing until the data changes). [`ResetError::Exists`] if taken.
    async fn save_savepoint(&self, name: &str) -> Result<(), ResetError> {
        let _ = name;
        Err(self.resets_unsupported())
    }
    /// Brings the whole store back to the state saved under `name`; savepoints
    /// saved after it are gone (their state is on another timeline).
    async fn restore_savepoint(&self, name: &str) -> Result<(), ResetError> {
        let _ = name;
        Err(self.resets_unsupported())
    }
    /// Every savepoint, oldest first.
    async fn list_savepoints(&self) -> Result<Vec<SavepointInfo>, ResetError> {
        Err(self.resets_unsupported())
    }
    async fn delete_savepoint(&self, name: &str) -> Result<(), ResetError> {
        let _ = name;
        Err(self.resets_unsupported())
    }
    /// Removes every table (with its entities and ACL) and the service
    /// properties of `account` at once; other accounts are untouched. Returns
    /// how many tables there were.
    async fn clear_account(&self, account: &str) -> Result<u64, ResetError> {
        let _ = account;
        Err(self.resets_unsupported())
    }
    /// What a backend without savepoints answers.
    fn resets_unsupported(&self) -> ResetError {
        ResetError::Unsupported("this storage backend has no snapshots".into())
    }

    /// Gives the store the service's [`IndexEncoder`]; until then, and on a
    /// backend without indexes, no index is kept.
    fn set_index_encoder(&self, encoder: IndexEncoder) {
        let _ = encoder;
    }

    /// Declares an index on `property` of a table; `Ok(false)` if it exists
    /// already. A backend may build the entries before answering (the index is
    /// then ready) or online after it (the index lists as building, with its
    /// progress, until ready); queries use only ready indexes.
    async fn create_index(&self, account: &str, table: &str, property: &str) -> Result<bool, IndexError> {
        let _ = (account, table, property);
        Err(self.indexes_unsupported())
    }

    /// Drops an index and its entries; `Ok(false)` if there was none.
    async fn drop_index(&self, account: &str, table: &str, property: &str) -> Result<bool, IndexError> {
        let _ = (account, table, property);
        Err(self.indexes_unsupported())
    }

    /// A table's indexes, by property.
    async fn list_indexes(&self, account: &str, table: &str) -> Result<Vec<IndexInfo>, IndexError> {
        let _ = (account, table);
        Err(self.indexes_unsupported())
    }

    /// The properties of a table with a ready index (none on a backend without them).
    async fn ready_indexes(&self, account: &str, table: &str) -> Result<Vec<String>, StoreError> {
        let _ = (account, table);
        Ok(Vec::new())
    }

    /// One page of a query from indexes ([`IndexScanRequest`]), each kept row
    /// handed to `sink`; `Ok(None)` when the indexes cannot answer it (one is not
    /// ready, or there are too many candidates): the caller scans instead.
    async fn index_scan_into(
        &self,
        account: &str,
        table: &str,
        request: IndexScanRequest,
        sink: &mut (dyn RowSink + '_),
    ) -> Result<Option<ScanEnd>, StoreError> {
        let _ = (account, table, request, sink);
        Ok(None)
    }

    /// What a backend without secondary indexes answers.
    fn indexes_unsupported(&self) -> IndexError {
        IndexError::Unsupported("this storage backend has no secondary indexes yet (the embedded store has)".into())
    }

    /// Turns the change feed on for the accounts `settings` names (from now on).
    fn set_change_feed(&self, settings: crate::feed::FeedSettings) -> Result<(), StoreError>;

    /// One page of `account`'s change feed (`feed.rs`); `NotEnabled` when the
    /// account records none.
    async fn read_changes(&self, account: &str, request: &ChangesRequest) -> Result<ChangesRead, StoreError> {
        let _ = (account, request);
        Ok(ChangesRead::NotEnabled)
    }

    /// Returns once `account`'s feed may have a change past `head`, or at
    /// `until`, whichever is first (a long poll's wait). May return early.
    async fn wait_for_changes(&self, account: &str, head: u64, until: Instant) {
        let _ = (account, head);
        let step = Instant::now() + std::time::Duration::from_millis(200);
        tokio::time::sleep_until(step.min(until).into()).await;
    }

    /// Makes everything acknowledged durable and stops accepting writes.
    async fn shutdown(&self) -> Result<(), StoreError>;

    /// Whether the store can serve now; the reason when it cannot. Bounded in
    /// time: a load balancer's health check waits for it.
    async fn ready(&self) -> Result<(), NotReady> {
        Ok(())
    }

    /// The backend's own metrics as of now (commit groups, syncs, pool, ...).
    fn metrics(&self) -> Vec<StoreMetric> {
        Vec::new()
    }

    /// How many entities `table` holds, from its counter (no scan);
    /// `TableNotFound` when there is no such table.
    async fn count_entities(&self, account: &str, table: &str) -> Result<u64, StoreError>;

    /// A table's counters, partitions included (counted, so it costs a seek per
    /// partition on the embedded backend); `None` when there is no such table.
    async fn table_stats(&self, account: &str, table: &str) -> Result<Option<TableStats>, StoreError>;

    /// Every table's counters, of every account, in no particular order.
    async fn table_sizes(&self) -> Result<Vec<TableSize>, StoreError>;

    /// Keeps a deleted table restorable for `keep` (`None`: Delete Table
    /// removes it at once, as Azure does). A backend without undelete refuses a
    /// duration.
    fn set_table_soft_delete(&self, keep: Option<std::time::Duration>) -> Result<(), UndeleteError> {
        match keep {
            None => Ok(()),
            Some(_) => Err(self.undelete_unsupported()),
        }
    }

    /// How long a deleted table stays restorable (`None`: soft delete is off),
    /// as [`Store::set_table_soft_delete`] last set it.
    fn table_soft_delete(&self) -> Option<std::time::Duration> {
        None
    }

    /// `account`'s deleted tables still restorable, most recently deleted first.
    async fn deleted_tables(&self, account: &str) -> Result<Vec<DeletedTable>, UndeleteError> {
        let _ = account;
        Err(self.undelete_unsupported())
    }

    /// Restores deleted table `id` of `account` under `name` (its own when
    /// `None`), with its entities, access policies, counters and indexes;
    /// answers the name it took.
    async fn restore_table(&self, account: &str, id: u64, name: Option<&str>) -> Result<String, UndeleteError> {
        let _ = (account, id, name);
        Err(self.undelete_unsupported())
    }

    /// What a backend without undelete answers.
    fn undelete_unsupported(&self) -> UndeleteError {
        UndeleteError::Unsupported("this storage backend keeps no deleted tables yet (the embedded store does)".into())
    }

    /// How many tables `account` has.
    async fn count_tables(&self, account: &str) -> Result<u64, StoreError> {
        let (mut n, mut from) = (0u64, None::<String>);
        loop {
            let page = self.list_tables(account, from.as_deref(), 1000).await?;
            let skip = usize::from(from.is_some());
            n += page.len().saturating_sub(skip) as u64;
            if page.len() < 1000 {
                return Ok(n);
            }
            from = page.last().map(|t| t.name.clone());
        }
    }
}
