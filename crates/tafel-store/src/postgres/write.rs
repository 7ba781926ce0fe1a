//! Entity writes: the read-decide-write transaction every write can take, and the
//! one-round-trip path of a write that expects its keys absent (inserts).
//!
//! An insert expecting absent keys is decided first as if they were, and written
//! with one plain INSERT, its own transaction, that finds and locks the table's
//! row as it goes. Its success proves the keys were absent, so that decision was
//! the right one; a unique violation means one was there, and the write is done
//! again the long way, reading first. Besides saving a round trip, this path reads none of the
//! entity index: under SERIALIZABLE on PostgreSQL, whose predicate locks cover a
//! whole index page, concurrent inserts of neighbouring keys (a new partition's
//! rows, an import) no longer conflict with each other.

use std::panic::{catch_unwind, AssertUnwindSafe};

use futures_util::future::{try_join, try_join3, try_join_all};
use futures_util::TryFutureExt;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::Statement;

use super::pipelined::{self, OpenTxn};
use super::txn::DbError;
use super::{counts, index, schema, PostgresStore};
use crate::error::{FailureKind, StoreError};
use crate::feed::ChangeOp;
use crate::traits::{Decide, Mutation};

/// Statement parameters, as tokio-postgres takes them.
type Params<'a> = [&'a (dyn ToSql + Sync)];

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

/// A write's changes as the feed records them (`feed.rs`).
#[derive(Default)]
struct FeedRows<'a> {
    ops: Vec<i16>,
    keys: Vec<&'a [u8]>,
    values: Vec<Option<&'a [u8]>>,
}

impl<'a> FeedRows<'a> {
    fn push(&mut self, key: &'a [u8], m: &'a Mutation, existed: bool) {
        if let Some((op, value)) = ChangeOp::of(m, existed) {
            self.ops.push(op as i16);
            self.keys.push(key);
            self.values.push(value);
        }
    }
}

/// A decided write's rows by statement, its feed rows and its change to the
/// table's counters.
#[derive(Default)]
struct Sorted<'a> {
    puts: Puts<'a>,
    inserts: Puts<'a>,
    deletes: Vec<&'a [u8]>,
    feed: FeedRows<'a>,
    entities: i64,
    bytes: i64,
}

impl<'a> Sorted<'a> {
    /// Sorts each key's mutation by what it finds there (`current`).
    fn of(keys: &[&'a [u8]], mutations: &'a [Mutation], current: &'a [Option<Vec<u8>>], recorded: bool) -> Self {
        let mut s = Sorted::default();
        for ((&key, m), cur) in keys.iter().zip(mutations).zip(current) {
            if recorded {
                s.feed.push(key, m, cur.is_some());
            }
            match (m, cur) {
                (Mutation::Put(v) | Mutation::Merge(v), Some(old)) => {
                    s.bytes += counts::row_bytes(key, v) - counts::row_bytes(key, old);
                    s.puts.push(key, v)
                }
                (Mutation::Put(v) | Mutation::Merge(v), None) => {
                    (s.entities, s.bytes) = (s.entities + 1, s.bytes + counts::row_bytes(key, v));
                    s.inserts.push(key, v)
                }
                // An absent row has nothing to delete.
                (Mutation::Delete | Mutation::Expire, Some(old)) => {
                    (s.entities, s.bytes) = (s.entities - 1, s.bytes - counts::row_bytes(key, old));
                    s.deletes.push(key)
                }
                (Mutation::Delete | Mutation::Expire, None) | (Mutation::Keep, _) => {}
            }
        }
        s
    }

    fn is_empty(&self) -> bool {
        self.inserts.keys.is_empty() && self.puts.keys.is_empty() && self.deletes.is_empty()
    }
}

/// The service's decision on `current`; its panic is an error, not a crash.
fn decided(decide: &Decide, current: &[Option<&[u8]>]) -> Result<Vec<Mutation>, DbError> {
    catch_unwind(AssertUnwindSafe(|| decide(current)))
        .map_err(|_| StoreError::failure(FailureKind::Internal, "write decision panicked").into())
}

/// The values to insert if every key is absent: `Some` when the decision for
/// absent rows puts every key (what an insert decides), else `None` (take the long way).
pub(super) fn decided_for_absent(decide: &Decide, keys: usize) -> Result<Option<Vec<Vec<u8>>>, StoreError> {
    // No keys, nothing to insert: an INSERT of no rows could not tell a missing table.
    if keys == 0 {
        return Ok(None);
    }
    let mutations = decided(decide, &vec![None; keys]).map_err(DbError::into_store)?;
    if mutations.len() != keys {
        return Ok(None);
    }
    Ok(mutations
        .into_iter()
        .map(|m| match m {
            Mutation::Put(v) | Mutation::Merge(v) => Some(v),
            Mutation::Delete | Mutation::Expire | Mutation::Keep => None,
        })
        .collect())
}

impl PostgresStore {
    /// One attempt of an insert of keys expected absent, in one round trip: true
    /// when it committed, false when a key was there (nothing was written).
    pub(super) async fn insert_once(
        &self,
        account: &str,
        lname: &[u8],
        keys: &[&[u8]],
        values: &[&[u8]],
    ) -> Result<bool, DbError> {
        let client = self.client().await?;
        let insert = client.prepare_cached(schema::INSERT_NEW_ENTITIES).await?;
        let change = counts::change_id();
        // The entries of the indexes this node last saw on the table: the
        // statement inserts only if the table's list (locked) is exactly that.
        let guess = self.indexes.guess(account, lname);
        let entries = index::entries_of(&self.indexes, &guess, keys, values)?;
        let params: [&(dyn ToSql + Sync); 9] = [
            &account,
            &lname,
            &keys,
            &values,
            &change,
            &&*guess,
            &entries.properties,
            &entries.values,
            &entries.keys,
        ];
        // One statement, its own transaction: it reads the table's row and locks it
        // in the same snapshot, so a table created or deleted meanwhile is seen
        // whole or not at all, and a delete's mark waits for the rows; and it
        // counts the rows in the table's counters.
        match client.query_opt(&insert, &params).await {
            Ok(None) => Err(StoreError::TableNotFound.into()),
            Ok(Some(row)) => {
                let list: Vec<String> = row.try_get(0)?;
                if *list == *guess {
                    return Ok(true);
                }
                // Nothing was written: the long way, with the list it reads.
                self.indexes.saw(account, lname, list);
                Ok(false)
            }
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// One attempt of a write: the whole transaction, from BEGIN to COMMIT, in
    /// two round trips ([`pipelined`]).
    pub(super) async fn write_once(
        &self,
        account: &str,
        lname: &[u8],
        keys: &[&[u8]],
        decide: &Decide,
        recorded: bool,
    ) -> Result<(), DbError> {
        let txn = OpenTxn::new(self.client().await?);
        match self.write_in(&txn, account, lname, keys, decide, recorded).await {
            Ok(true) => {
                txn.finish();
                Ok(())
            }
            Ok(false) => {
                txn.abandon();
                Ok(())
            }
            Err(e) => {
                txn.abandon();
                Err(e)
            }
        }
    }

    /// The write's statements; true when they ended with a COMMIT that answered,
    /// false when the decision changed nothing and the transaction is left to roll back.
    async fn write_in(
        &self,
        txn: &OpenTxn,
        account: &str,
        lname: &[u8],
        keys: &[&[u8]],
        decide: &Decide,
        recorded: bool,
    ) -> Result<bool, DbError> {
        let client = txn.client()?;
        let (id, indexed, current) = read_for_write(client, account, lname, keys).await?;
        let views: Vec<Option<&[u8]>> = current.iter().map(|c| c.as_deref()).collect();
        let mutations = decided(decide, &views)?;
        if mutations.is_empty() {
            return Ok(false);
        }
        if mutations.len() != keys.len() {
            return Err(StoreError::failure(FailureKind::Internal, "decision does not cover every key").into());
        }
        let Sorted {
            puts,
            inserts,
            deletes,
            feed,
            entities,
            bytes,
        } = match Sorted::of(keys, &mutations, &current, recorded) {
            s if s.is_empty() => return Ok(false),
            s => s,
        };
        // The entries of the indexes the locked table row lists (`index.rs`).
        let (removed, added) = index::changes(&self.indexes, &indexed, keys, &mutations, &current)?;
        if *self.indexes.guess(account, lname) != *indexed {
            self.indexes.saw(account, lname, indexed.clone());
        }
        let unindex = client.prepare_cached(index::DELETE_ENTRIES).await?;
        let reindex = client.prepare_cached(index::INSERT_ENTRIES).await?;
        let insert = client.prepare_cached(schema::INSERT_ENTITIES).await?;
        let put = client.prepare_cached(schema::PUT_ENTITIES).await?;
        let delete = client.prepare_cached(schema::DELETE_ENTITIES).await?;
        let add_counts = client.prepare_cached(schema::ADD_COUNTS).await?;
        let change = counts::change_id();
        // The feed's statement and parameters (when the feed is on), declared
        // before the futures that borrow them.
        let record = match feed.ops.is_empty() {
            true => None,
            false => Some(client.prepare_cached(super::feed::RECORD_ENTITY_CHANGES).await?),
        };
        let n = feed.ops.len() as i64;
        let now = i64::try_from(crate::feed::now_ns()).unwrap_or(i64::MAX);
        let record_params: [&(dyn ToSql + Sync); 8] =
            [&account, &n, &now, &id, &feed.ops, &feed.keys, &feed.values, &lname];
        let changes: [(&Statement, &Params, bool); 6] = [
            (
                &insert,
                &[&id, &inserts.keys, &inserts.values],
                !inserts.keys.is_empty(),
            ),
            (&put, &[&id, &puts.keys, &puts.values], !puts.keys.is_empty()),
            (&delete, &[&id, &deletes], !deletes.is_empty()),
            // The index entries, in the same transaction as their entities.
            (
                &unindex,
                &[&id, &removed.properties, &removed.values, &removed.keys],
                !removed.is_empty(),
            ),
            (
                &reindex,
                &[&id, &added.properties, &added.values, &added.keys],
                !added.is_empty(),
            ),
            // The counters, in the same transaction as the rows they count.
            (
                &add_counts,
                &[&id, &change, &entities, &bytes],
                entities != 0 || bytes != 0,
            ),
        ];
        let mut changes: Vec<_> = changes
            .iter()
            .filter(|(_, _, any)| *any)
            .map(|(stmt, params, _)| client.execute(*stmt, params))
            .collect();
        // The feed's rows, in the same transaction, after the data's.
        if let Some(stmt) = &record {
            changes.push(client.execute(stmt, &record_params));
        }
        // Round trip 2: the changes and COMMIT. A key seen absent and inserted since
        // fails the insert (a unique violation: the write runs again), and the COMMIT
        // behind it rolls back.
        match try_join(try_join_all(changes), client.batch_execute(pipelined::COMMIT)).await {
            Ok(_) => Ok(true),
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => Err(DbError::Raced),
            Err(e) => Err(e.into()),
        }
    }
}

/// Round trip 1 of a write: BEGIN, the table's row (locked) and the keys'
/// rows; the table's id, its indexed properties and each key's current value.
async fn read_for_write(
    client: &deadpool_postgres::Client,
    account: &str,
    lname: &[u8],
    keys: &[&[u8]],
) -> Result<(i64, Vec<String>, Vec<Option<Vec<u8>>>), DbError> {
    let lock = client.prepare_cached(schema::LOCK_TABLE).await?;
    let read = client.prepare_cached(schema::READ_FOR_WRITE).await?;
    let (lock_params, read_params): (&Params, &Params) = (&[&account, &lname], &[&account, &lname, &keys]);
    let ((), table, found) = try_join3(
        client.batch_execute(pipelined::BEGIN).err_into(),
        client.query_opt(&lock, lock_params).err_into::<DbError>(),
        client.query(&read, read_params).err_into(),
    )
    .await?;
    let Some(table) = table else {
        return Err(StoreError::TableNotFound.into());
    };
    let (id, indexed): (i64, Vec<String>) = (table.try_get(0)?, table.try_get(1)?);
    let mut current: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
    for row in &found {
        let key: &[u8] = row.try_get(0)?;
        if let Some(i) = keys.iter().position(|k| *k == key) {
            current[i] = Some(row.try_get(1)?);
        }
    }
    Ok((id, indexed, current))
}
