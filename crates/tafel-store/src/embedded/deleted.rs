//! Deleted tables kept restorable (`serve --table-soft-delete`, docs/lifecycle.md).
//!
//! A soft delete takes the table's record out of `TABLES` and the listing (so
//! the name is free at once and every read answers TableNotFound) and keeps it
//! as a META record `deleted/ACCOUNT/ID` (`until ns, deleted ns, table record`).
//! The table's entity rows, counters and index entries stay under its id, which
//! no other table ever takes. A restore puts the record back under a free name;
//! the writer's sweep (`engine/writer.rs`, each second once one is due) removes
//! a kept table past its time, one table per group.

use std::ops::Bound;
use std::sync::atomic::Ordering;

use super::apply::Writer;
use super::checksums::{seal, unseal};
use super::counts;
use super::engine::tree::{ReadTrees, Tree};
use super::schema::*;
use crate::error::{FailureKind, StoreError};
use crate::feed::ChangeOp;
use crate::undelete::{DeletedTable, UndeleteError};

const PREFIX: &str = "deleted/";

fn account_prefix(account: &str) -> String {
    format!("{PREFIX}{account}/")
}

fn record_key(account: &str, id: u64) -> String {
    format!("{PREFIX}{account}/{id:020}")
}

/// One kept table, as its META record holds it.
pub(super) struct Kept {
    pub(super) account: String,
    pub(super) deleted_ns: u64,
    pub(super) until_ns: u64,
    pub(super) table: TableValue,
}

fn corrupt() -> StoreError {
    StoreError::failure(FailureKind::Corrupt, "corrupt deleted-table record")
}

fn decode(key: &[u8], stored: &[u8], sealed: bool) -> Result<Kept, StoreError> {
    let v = match sealed {
        true => unseal(key, stored)?,
        false => stored,
    };
    let text = std::str::from_utf8(key).map_err(|_| corrupt())?;
    let rest = text.strip_prefix(PREFIX).ok_or_else(corrupt)?;
    let account = rest.rsplit_once('/').ok_or_else(corrupt)?.0.to_owned();
    let word = |at: usize| -> Result<u64, StoreError> {
        let b = v.get(at..at + 8).ok_or_else(corrupt)?;
        Ok(u64::from_le_bytes(b.try_into().map_err(|_| corrupt())?))
    };
    Ok(Kept {
        account,
        until_ns: word(0)?,
        deleted_ns: word(8)?,
        table: parse_table(v.get(16..).ok_or_else(corrupt)?)?,
    })
}

/// Every kept table (of `account`, or of all), read from `trees`; `sealed`:
/// whether the store's values carry checksums (`tafel check` reads old stores).
pub(super) fn kept(trees: &impl ReadTrees, account: Option<&str>, sealed: bool) -> Result<Vec<Kept>, StoreError> {
    let lo = account.map_or_else(|| PREFIX.to_owned(), account_prefix);
    let mut hi = lo.clone().into_bytes();
    if let Some(last) = hi.last_mut() {
        *last += 1;
    }
    let mut found = Vec::new();
    for row in trees.range(Tree::Meta, Bound::Included(lo.as_bytes()), Bound::Excluded(&hi))? {
        let (k, v) = row?;
        found.push(decode(k.bytes(), v.bytes(), sealed)?);
    }
    Ok(found)
}

/// When the first kept table is due for removal, if one is kept.
pub(super) fn next_due(trees: &impl ReadTrees) -> Result<Option<u64>, StoreError> {
    Ok(kept(trees, None, true)?.iter().map(|k| k.until_ns).min())
}

/// What the admin API lists: most recently deleted first.
pub(super) fn list(trees: &impl ReadTrees, account: &str) -> Result<Vec<DeletedTable>, StoreError> {
    let mut list = Vec::new();
    for k in kept(trees, Some(account), true)? {
        let (entities, bytes) = counts::read(trees, k.table.id)?.unwrap_or_default();
        list.push(DeletedTable {
            id: k.table.id,
            name: k.table.record.name,
            deleted_ns: k.deleted_ns,
            until_ns: k.until_ns,
            entities,
            bytes,
        });
    }
    list.sort_by(|a, b| b.deleted_ns.cmp(&a.deleted_ns).then(b.id.cmp(&a.id)));
    Ok(list)
}

impl super::EmbeddedStore {
    pub(super) fn keep_deleted(&self, keep: Option<std::time::Duration>) {
        let ns = keep.map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        self.inner.feed.soft_delete_ns.store(ns, Ordering::Release);
    }

    pub(super) fn kept_deleted(&self) -> Option<std::time::Duration> {
        let ns = self.inner.feed.soft_delete_ns.load(Ordering::Acquire);
        (ns > 0).then(|| std::time::Duration::from_nanos(ns))
    }

    pub(super) fn list_deleted(&self, account: &str) -> Result<Vec<DeletedTable>, UndeleteError> {
        let snapshot = self.opening()?.view();
        let now = crate::feed::now_ns();
        let mut list = guarded(|| list(&*snapshot, account))?;
        // Past its time but not yet swept: gone for the API already.
        list.retain(|t| t.until_ns > now);
        Ok(list)
    }

    pub(super) async fn restore_deleted(
        &self,
        account: &str,
        id: u64,
        name: Option<&str>,
    ) -> Result<String, UndeleteError> {
        let (account, name) = (account.to_owned(), name.map(str::to_owned));
        self.submit(|reply| super::Job::RestoreTable {
            account,
            id,
            name,
            reply,
        })
        .await?
    }
}

impl Writer<'_, '_> {
    /// Deletes table `t` of `account` from sight, keeping it until `keep_ns` from now.
    pub(super) fn soft_delete(&mut self, account: &str, t: &TableValue, keep_ns: u64) -> Result<(), StoreError> {
        let now = crate::feed::now_ns();
        let until = now.saturating_add(keep_ns);
        self.tx.remove(Tree::Tables, &table_key(account, &t.record.name))?;
        self.tx.remove(Tree::TableOrder, &order_key(account, &t.record.name))?;
        let key = record_key(account, t.id);
        let mut v = Vec::with_capacity(16 + t.record.name.len() + t.record.acl.len() + 10);
        v.extend_from_slice(&until.to_le_bytes());
        v.extend_from_slice(&now.to_le_bytes());
        v.extend_from_slice(&encode_table(t.id, &t.record.name, &t.record.acl));
        self.tx.insert(Tree::Meta, key.as_bytes(), &seal(key.as_bytes(), &v))?;
        self.next_sweep.fetch_min(until, Ordering::AcqRel);
        Ok(())
    }

    /// Restores kept table `id` of `account` under `name` (its own if `None`).
    pub(super) fn restore_table(
        &mut self,
        account: &str,
        id: u64,
        name: Option<&str>,
    ) -> Result<String, UndeleteError> {
        let key = record_key(account, id);
        let Some(stored) = self.tx.get(Tree::Meta, key.as_bytes())? else {
            return Err(UndeleteError::NotFound);
        };
        let kept = decode(key.as_bytes(), stored.bytes(), true)?;
        drop(stored);
        if kept.until_ns <= crate::feed::now_ns() {
            return Err(UndeleteError::NotFound);
        }
        let name = name.unwrap_or(&kept.table.record.name).to_owned();
        if let Some(t) = self.table(account, &name)? {
            return Err(UndeleteError::NameTaken(t.record.name));
        }
        let tkey = table_key(account, &name);
        let record = encode_table(id, &name, &kept.table.record.acl);
        self.tx.insert(Tree::Tables, &tkey, &seal(&tkey, &record))?;
        self.tx.insert(Tree::TableOrder, &order_key(account, &name), &[])?;
        self.tx.remove(Tree::Meta, key.as_bytes())?;
        self.record(account, &name, &[super::feed::NewChange::table(ChangeOp::CreateTable)])?;
        Ok(name)
    }

    /// Removes the first kept table past its time, if any; sets when the next
    /// one is due.
    pub(super) fn sweep_deleted(&mut self, now_ns: u64) -> Result<(), StoreError> {
        let all = kept(&self.tx, None, true)?;
        let mut next = u64::MAX;
        let mut removed = false;
        for k in all {
            if k.until_ns > now_ns {
                next = next.min(k.until_ns);
            } else if !removed {
                self.purge_kept(&k.account, k.table.id)?;
                removed = true;
            } else {
                // Another is due: the next sweep runs at once.
                next = 0;
            }
        }
        self.next_sweep.store(next, Ordering::Release);
        Ok(())
    }

    /// Removes kept table `id` of `account` for good: rows, counters, indexes.
    pub(super) fn purge_kept(&mut self, account: &str, id: u64) -> Result<(), StoreError> {
        self.materialize_table(account, id, 0)?;
        self.tx
            .remove_range(Tree::Entities, &id.to_be_bytes(), &(id + 1).to_be_bytes())?;
        counts::remove(&mut self.tx, id)?;
        self.counts.forget(id);
        self.drop_indexes(id)?;
        self.tx.remove(Tree::Meta, record_key(account, id).as_bytes())
    }

    /// Removes every kept table of `account` (a reset).
    pub(super) fn purge_account(&mut self, account: &str) -> Result<(), StoreError> {
        for k in kept(&self.tx, Some(account), true)? {
            self.purge_kept(account, k.table.id)?;
        }
        Ok(())
    }
}
