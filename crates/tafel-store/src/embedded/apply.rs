//! What the writer does to its write transaction: the store's redb tables, each
//! logged change carried out on them (live, or replayed from the log), and the
//! rules every job follows (tables, ACLs, service properties, entity writes),
//! every change it makes logged.

use std::ops::Bound;
use std::panic::{catch_unwind, AssertUnwindSafe};

use redb::{CursorError, ReadableTable};

use super::checksums::{seal, seal_in_place, unseal};
use super::commit::Pending;
use super::schema::*;
use super::wal::{LogBuf, Op};
use super::Job;
use crate::error::{FailureKind, StoreError};
use crate::feed::{ChangeOp, FeedSettings};
use crate::key::EntityKey;
use crate::traits::{Decide, Mutation};

/// The store's redb tables, open in one write transaction. The two that
/// entity writes do not touch open on first use: redb looks each open table
/// up in its table tree twice (at the open and at the commit), in every
/// group's commit (benchmark-history §23).
pub(super) struct Tables<'t> {
    txn: &'t redb::WriteTransaction,
    tables: redb::Table<'t, &'static [u8], &'static [u8]>,
    order: Option<redb::Table<'t, &'static [u8], ()>>,
    entities: redb::Table<'t, &'static [u8], &'static [u8]>,
    changes: Option<redb::Table<'t, &'static [u8], &'static [u8]>>,
    pub(super) meta: redb::Table<'t, &'static str, &'static [u8]>,
}

/// The table in `slot`, opened in `txn` the first time it is asked for.
fn opened<'s, 't, K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &'t redb::WriteTransaction,
    slot: &'s mut Option<redb::Table<'t, K, V>>,
    table: redb::TableDefinition<'_, K, V>,
) -> Result<&'s mut redb::Table<'t, K, V>, StoreError> {
    match slot {
        Some(t) => Ok(t),
        None => Ok(slot.insert(txn.open_table(table).map_err(to_store_error)?)),
    }
}

impl<'t> Tables<'t> {
    pub(super) fn open(txn: &'t redb::WriteTransaction) -> Result<Self, redb::TableError> {
        Ok(Tables {
            txn,
            tables: txn.open_table(TABLES)?,
            order: None,
            entities: txn.open_table(ENTITIES)?,
            changes: None,
            meta: txn.open_table(META)?,
        })
    }

    fn order(&mut self) -> Result<&mut redb::Table<'t, &'static [u8], ()>, StoreError> {
        opened(self.txn, &mut self.order, TABLE_ORDER)
    }

    pub(super) fn changes(&mut self) -> Result<&mut redb::Table<'t, &'static [u8], &'static [u8]>, StoreError> {
        opened(self.txn, &mut self.changes, CHANGES)
    }

    /// The byte-keyed table a log op names.
    fn by_tag(&mut self, t: u8) -> Result<&mut redb::Table<'t, &'static [u8], &'static [u8]>, StoreError> {
        match t {
            T_TABLES => Ok(&mut self.tables),
            T_ENTITIES => Ok(&mut self.entities),
            T_CHANGES => self.changes(),
            _ => Err(StoreError::failure(
                FailureKind::Corrupt,
                format!("log op on table {t}"),
            )),
        }
    }

    /// Carries out one logged change (live, or replayed from the log).
    pub(super) fn apply(&mut self, op: &Op<'_>) -> Result<(), StoreError> {
        match *op {
            Op::Insert {
                table: T_ORDER, key, ..
            } => self.order()?.insert(key, ()).map(drop).map_err(to_store_error),
            Op::Remove { table: T_ORDER, key } => self.order()?.remove(key).map(drop).map_err(to_store_error),
            Op::Remove { table: T_META, key } => {
                let key = std::str::from_utf8(key).map_err(to_store_error)?;
                self.meta.remove(key).map(drop).map_err(to_store_error)
            }
            Op::Insert {
                table: T_META,
                key,
                value,
            } => {
                let key = std::str::from_utf8(key).map_err(to_store_error)?;
                self.meta.insert(key, value).map(drop).map_err(to_store_error)
            }
            Op::Insert { table, key, value } => {
                self.by_tag(table)?.insert(key, value).map(drop).map_err(to_store_error)
            }
            Op::Remove { table, key } => self.by_tag(table)?.remove(key).map(drop).map_err(to_store_error),
            Op::RemoveRange { table, lo, hi } => self
                .by_tag(table)?
                .retain_in(lo..hi, |_, _| false)
                .map_err(to_store_error),
        }
    }
}

/// Applies jobs, logging every change it makes.
pub(super) struct Writer<'t, 'l> {
    pub(super) tables: Tables<'t>,
    pub(super) log: &'l mut LogBuf,
    /// Which accounts record their changes (`feed.rs`).
    pub(super) feed: &'l FeedSettings,
}

impl Writer<'_, '_> {
    pub(super) fn change(&mut self, op: Op<'_>) -> Result<(), StoreError> {
        self.tables.apply(&op)?;
        self.log.push(&op);
        Ok(())
    }

    pub(super) fn apply(&mut self, job: Job) -> Pending {
        match job {
            Job::CreateTable { account, name, reply } => Pending::Bool(reply, self.create_table(&account, &name)),
            Job::DeleteTable { account, name, reply } => Pending::Bool(reply, self.delete_table(&account, &name)),
            Job::SetAcl {
                account,
                name,
                acl,
                reply,
            } => Pending::Bool(reply, self.set_acl(&account, &name, &acl)),
            Job::SetProps { account, value, reply } => {
                let key = props_key(&account);
                let r = self.change(Op::Insert {
                    table: T_META,
                    key: key.as_bytes(),
                    value: &seal(key.as_bytes(), &value),
                });
                Pending::Unit(reply, r)
            }
            Job::Write {
                account,
                table,
                keys,
                decide,
                reply,
            } => Pending::Unit(reply, self.write(&account, &table, &keys, decide)),
            Job::ClearAccount { account, reply } => Pending::Count(reply, self.clear_account(&account)),
            Job::TrimChanges { now_ns, reply } => Pending::Unit(reply, self.trim_changes(now_ns)),
            // The writer loop runs these alone; one here is a bug.
            Job::Savepoint { reply, .. } => Pending::Savepoint(
                reply,
                Err(StoreError::failure(FailureKind::Internal, "a savepoint job in a group")),
            ),
        }
    }

    fn table(&self, account: &str, name: &str) -> Result<Option<TableValue>, StoreError> {
        let key = table_key(account, name);
        let found = self.tables.tables.get(key.as_slice()).map_err(to_store_error)?;
        found.map(|v| decode_table(&key, v.value())).transpose()
    }

    fn create_table(&mut self, account: &str, name: &str) -> Result<bool, StoreError> {
        if self.table(account, name)?.is_some() {
            return Ok(false);
        }
        let id = match self.tables.meta.get(NEXT_TABLE_ID).map_err(to_store_error)? {
            Some(v) => decode_u64(NEXT_TABLE_ID, v.value())?,
            None => 1,
        };
        self.change(Op::Insert {
            table: T_META,
            key: NEXT_TABLE_ID.as_bytes(),
            value: &seal(NEXT_TABLE_ID.as_bytes(), &(id + 1).to_le_bytes()),
        })?;
        let key = table_key(account, name);
        self.change(Op::Insert {
            table: T_TABLES,
            key: &key,
            value: &seal(&key, &encode_table(id, name, &[])),
        })?;
        self.change(Op::Insert {
            table: T_ORDER,
            key: &order_key(account, name),
            value: &[],
        })?;
        self.record(account, name, &[(ChangeOp::CreateTable, None, None)])?;
        Ok(true)
    }

    fn delete_table(&mut self, account: &str, name: &str) -> Result<bool, StoreError> {
        let Some(t) = self.table(account, name)? else {
            return Ok(false);
        };
        self.change(Op::Remove {
            table: T_TABLES,
            key: &table_key(account, name),
        })?;
        self.change(Op::Remove {
            table: T_ORDER,
            key: &order_key(account, &t.record.name),
        })?;
        self.change(Op::RemoveRange {
            table: T_ENTITIES,
            lo: &t.id.to_be_bytes(),
            hi: &(t.id + 1).to_be_bytes(),
        })?;
        self.record(account, &t.record.name, &[(ChangeOp::DeleteTable, None, None)])?;
        Ok(true)
    }

    /// Deletes every table of `account` and its service properties; returns
    /// how many tables there were.
    fn clear_account(&mut self, account: &str) -> Result<u64, StoreError> {
        let lo = order_key(account, "");
        let mut hi = account.as_bytes().to_vec();
        hi.push(1);
        let mut names = Vec::new();
        for item in self
            .tables
            .order()?
            .range::<&[u8]>(lo.as_slice()..hi.as_slice())
            .map_err(to_store_error)?
        {
            let (k, _) = item.map_err(to_store_error)?;
            let name = k.value().get(lo.len()..).unwrap_or_default();
            names.push(String::from_utf8(name.to_vec()).map_err(to_store_error)?);
        }
        for name in &names {
            self.delete_table(account, name)?;
        }
        let props = props_key(account);
        if self.tables.meta.get(props.as_str()).map_err(to_store_error)?.is_some() {
            self.change(Op::Remove {
                table: T_META,
                key: props.as_bytes(),
            })?;
        }
        Ok(names.len() as u64)
    }

    fn set_acl(&mut self, account: &str, name: &str, acl: &[u8]) -> Result<bool, StoreError> {
        let Some(t) = self.table(account, name)? else {
            return Ok(false);
        };
        let key = table_key(account, name);
        self.change(Op::Insert {
            table: T_TABLES,
            key: &key,
            value: &seal(&key, &encode_table(t.id, &t.record.name, acl)),
        })?;
        Ok(true)
    }

    fn write(&mut self, account: &str, table: &str, keys: &[EntityKey], decide: Decide) -> Result<(), StoreError> {
        let Some(t) = self.table(account, table)? else {
            return Err(StoreError::TableNotFound);
        };
        let full: Vec<Vec<u8>> = keys.iter().map(|k| row_key(t.id, k.as_bytes())).collect();
        let mut current: Vec<Option<Vec<u8>>> = Vec::with_capacity(keys.len());
        for k in &full {
            // A damaged row fails the write: nothing is built on what it holds.
            let found = self.tables.entities.get(k.as_slice()).map_err(to_store_error)?;
            current.push(found.map(|v| unseal(k, v.value()).map(<[u8]>::to_vec)).transpose()?);
        }
        let views: Vec<Option<&[u8]>> = current.iter().map(|c| c.as_deref()).collect();
        let mutations = catch_unwind(AssertUnwindSafe(|| decide(&views)))
            .map_err(|_| StoreError::failure(FailureKind::Internal, "write decision panicked"))?;
        if !mutations.is_empty() {
            if mutations.len() != full.len() {
                return Err(StoreError::failure(
                    FailureKind::Internal,
                    "decision does not cover every key",
                ));
            }
            // A batch's new rows go in last, as ascending runs, when its keys are
            // distinct (they are for every batch the service accepts; with a
            // repeated key the order of the changes matters, so they keep it). A
            // single-row write takes the plain path.
            let mut fresh: Vec<(&[u8], Vec<u8>)> = Vec::new();
            let runs = full.len() > 1 && distinct_keys(&full);
            let recording = self.feed.for_account(account).is_some();
            let mut changes = Vec::new();
            for (((k, m), old), key) in full.iter().zip(mutations).zip(&current).zip(keys) {
                if recording {
                    let (key, existed) = (key.as_bytes(), old.is_some());
                    match &m {
                        Mutation::Put(v) if existed => changes.push((ChangeOp::Replace, Some(key), Some(v.clone()))),
                        Mutation::Merge(v) if existed => changes.push((ChangeOp::Merge, Some(key), Some(v.clone()))),
                        Mutation::Put(v) | Mutation::Merge(v) => {
                            changes.push((ChangeOp::Insert, Some(key), Some(v.clone())))
                        }
                        Mutation::Delete if existed => changes.push((ChangeOp::Delete, Some(key), None)),
                        Mutation::Delete | Mutation::Keep => {}
                    }
                }
                match m {
                    Mutation::Put(mut v) | Mutation::Merge(mut v) => {
                        seal_in_place(k, &mut v);
                        if runs && old.is_none() {
                            fresh.push((k, v));
                            continue;
                        }
                        self.change(Op::Insert {
                            table: T_ENTITIES,
                            key: k,
                            value: &v,
                        })?
                    }
                    Mutation::Delete => self.change(Op::Remove {
                        table: T_ENTITIES,
                        key: k,
                    })?,
                    Mutation::Keep => {}
                }
            }
            self.insert_new_rows(fresh)?;
            let changes: Vec<_> = changes.iter().map(|(op, k, v)| (*op, *k, v.as_deref())).collect();
            self.record(account, &t.record.name, &changes)?;
        }
        Ok(())
    }

    /// Inserts entity rows whose keys are absent and distinct. Two or more go in
    /// through a cursor in key order: redb packs such a run into full leaves,
    /// where inserting rows one by one splits each full leaf in half: a table
    /// loaded by batches took a third more pages (cache, disk, checkpoint writes)
    /// than its rows need.
    fn insert_new_rows(&mut self, mut rows: Vec<(&[u8], Vec<u8>)>) -> Result<(), StoreError> {
        rows.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut rest = rows.as_slice();
        while rest.len() >= 2 {
            let placed = insert_run(&mut self.tables.entities, self.log, rest)?;
            rest = &rest[placed..];
            if placed == 1 {
                // New rows alternate with existing ones: a run of one costs a
                // third more than a plain insert, so the rest go in one by one.
                break;
            }
        }
        for (key, value) in rest {
            self.change(Op::Insert {
                table: T_ENTITIES,
                key,
                value,
            })?;
        }
        Ok(())
    }
}

/// Inserts `rows` (sorted, absent) through one cursor, from the first row's gap
/// up to the first row an existing one sorts before; returns how many went in.
fn insert_run(
    entities: &mut redb::Table<'_, &'static [u8], &'static [u8]>,
    log: &mut LogBuf,
    rows: &[(&[u8], Vec<u8>)],
) -> Result<usize, StoreError> {
    let Some((first, _)) = rows.first() else {
        return Ok(0);
    };
    let mut cursor = entities
        .lower_bound_mut(Bound::Included(*first))
        .map_err(to_store_error)?;
    let mut placed = 0;
    for (key, value) in rows {
        match cursor.insert_before(*key, value.as_slice()) {
            Ok(()) => {}
            // An existing row sorts before this one: the run ends here. (The
            // first row, refused at its own gap, exists after all: an error.)
            Err(CursorError::UnorderedKey) if placed > 0 => break,
            Err(e) => return Err(to_store_error(e)),
        }
        log.push(&Op::Insert {
            table: T_ENTITIES,
            key,
            value,
        });
        placed += 1;
    }
    cursor.close().map_err(to_store_error)?;
    Ok(placed)
}

/// Whether no key repeats.
fn distinct_keys(keys: &[Vec<u8>]) -> bool {
    let mut sorted: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    sorted.sort_unstable();
    sorted.windows(2).all(|w| w[0] != w[1])
}
