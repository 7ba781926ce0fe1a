//! What the writer does in a group transaction (`engine/group.rs`): the rules
//! every job follows (tables, ACLs, service properties, entity writes). The
//! transaction logs every change it makes.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::change_row::HeldValue;
use super::checksums::seal;
use super::commit::Pending;
use super::counts::{self, Counts};
use super::engine::entity_seal;
use super::engine::group::{GroupTx, Logged};
use super::engine::tree::{ReadTrees, Tree};
use super::feed::NewChange;
use super::index::IndexDefs;
use super::schema::*;
use super::{tables, Job};
use crate::error::{FailureKind, StoreError};
use crate::feed::{ChangeOp, FeedSettings};
use crate::key::EntityKey;
use crate::traits::{Decide, IndexEncoder, Mutation};

/// Applies jobs, logging every change it makes.
pub(super) struct Writer<'t, 'l> {
    pub(super) tx: GroupTx<'t, 'l>,
    /// Which accounts record their changes (`feed.rs`).
    pub(super) feed: &'l FeedSettings,
    /// The group's changes to tables' counters, written by [`Writer::finish`].
    pub(super) counts: Counts,
    /// The service's index encoder, once it gave one (`index.rs`).
    pub(super) index_encoder: Option<&'l IndexEncoder>,
    /// Tables' indexed properties, kept across groups (`index.rs`).
    pub(super) index_defs: &'l mut IndexDefs,
    /// How long a deleted table stays restorable (ns; 0: deleted at once).
    pub(super) keep_ns: u64,
    /// When the next kept table is due for removal (`deleted.rs`).
    pub(super) next_sweep: &'l std::sync::atomic::AtomicU64,
}

impl Writer<'_, '_> {
    /// Ends the group's jobs: writes what they did to the tables' counters. An
    /// error fails the group, so a change is never committed without its count.
    pub(super) fn finish(&mut self) -> Result<(), StoreError> {
        self.counts.flush(&mut self.tx)
    }

    pub(super) fn apply(&mut self, job: Job) -> Pending {
        match job {
            Job::CreateTable { account, name, reply } => Pending::Bool(reply, self.create_table(&account, &name)),
            Job::DeleteTable {
                account,
                name,
                feed_from,
                reply,
            } => Pending::Bool(reply, self.delete_table(&account, &name, feed_from)),
            Job::SetAcl {
                account,
                name,
                acl,
                reply,
            } => Pending::Bool(reply, self.set_acl(&account, &name, &acl)),
            Job::SetProps { account, value, reply } => {
                let key = props_key(&account);
                let r = self
                    .tx
                    .insert(Tree::Meta, key.as_bytes(), &seal(key.as_bytes(), &value));
                Pending::Unit(reply, r)
            }
            Job::Truncate {
                account,
                table,
                feed_from,
                reply,
            } => Pending::MaybeCount(reply, self.truncate(&account, &table, feed_from)),
            Job::Materialize {
                account,
                table,
                from,
                reply,
            } => Pending::MaybeCount(reply, self.materialize_step(&account, table.as_deref(), from)),
            Job::SetRecord { key, value, reply } => {
                Pending::Unit(reply, super::records::apply(&mut self.tx, &key, value))
            }
            Job::Write {
                account,
                table,
                keys,
                decide,
                reply,
            } => Pending::Unit(reply, self.write(&account, &table, &keys, decide)),
            Job::CreateIndex {
                account,
                table,
                property,
                reply,
            } => Pending::Bool(reply, self.create_index(&account, &table, &property)),
            Job::DropIndex {
                account,
                table,
                property,
                reply,
            } => Pending::Bool(reply, self.drop_index(&account, &table, &property)),
            Job::BuildIndex { time, reply } => {
                let r = self.build_step(time);
                if let Err(e) = &r {
                    tracing::warn!(error = %e, "an index build step failed; it is tried again in a second");
                }
                Pending::Unit(reply, r)
            }
            Job::RestoreTable {
                account,
                id,
                name,
                reply,
            } => {
                // A store failure fails the job as any job's does; the rest is the answer.
                let r = match self.restore_table(&account, id, name.as_deref()) {
                    Err(crate::undelete::UndeleteError::Store(e)) => Err(e),
                    other => Ok(other),
                };
                Pending::Name(reply, r)
            }
            Job::SweepDeleted { now_ns, reply } => Pending::Unit(reply, self.sweep_deleted(now_ns)),
            Job::ClearAccount { account, reply } => Pending::Count(reply, self.clear_account(&account)),
            Job::TrimChanges { now_ns, reply } => Pending::Unit(reply, self.trim_changes(now_ns)),
            // The writer loop runs these alone; one here is a bug.
            Job::Savepoint { reply, .. } => Pending::Savepoint(
                reply,
                Err(StoreError::failure(FailureKind::Internal, "a savepoint job in a group")),
            ),
        }
    }

    pub(super) fn table(&self, account: &str, name: &str) -> Result<Option<TableValue>, StoreError> {
        let key = table_key(account, name);
        let found = self.tx.get(Tree::Tables, &key)?;
        found.map(|v| decode_table(&key, v.bytes())).transpose()
    }

    fn create_table(&mut self, account: &str, name: &str) -> Result<bool, StoreError> {
        if self.table(account, name)?.is_some() {
            return Ok(false);
        }
        let id = match self.tx.get(Tree::Meta, NEXT_TABLE_ID.as_bytes())? {
            Some(v) => decode_u64(NEXT_TABLE_ID, v.bytes())?,
            None => 1,
        };
        self.tx.insert(
            Tree::Meta,
            NEXT_TABLE_ID.as_bytes(),
            &seal(NEXT_TABLE_ID.as_bytes(), &(id + 1).to_le_bytes()),
        )?;
        let key = table_key(account, name);
        self.tx
            .insert(Tree::Tables, &key, &seal(&key, &encode_table(id, name, &[])))?;
        counts::start(&mut self.tx, id)?;
        self.tx.insert(Tree::TableOrder, &order_key(account, name), &[])?;
        self.record(account, name, &[NewChange::table(ChangeOp::CreateTable)])?;
        Ok(true)
    }

    fn delete_table(&mut self, account: &str, name: &str, feed_from: u64) -> Result<bool, StoreError> {
        let Some(t) = self.table(account, name)? else {
            return Ok(false);
        };
        if self.keep_ns > 0 {
            self.soft_delete(account, &t, self.keep_ns)?;
            self.record(account, &t.record.name, &[NewChange::table(ChangeOp::DeleteTable)])?;
            return Ok(true);
        }
        self.tx.remove(Tree::Tables, &table_key(account, name))?;
        self.tx.remove(Tree::TableOrder, &order_key(account, &t.record.name))?;
        self.materialize_table(account, t.id, feed_from)?;
        self.tx
            .remove_range(Tree::Entities, &t.id.to_be_bytes(), &(t.id + 1).to_be_bytes())?;
        counts::remove(&mut self.tx, t.id)?;
        let _ = self.counts.forget(t.id);
        self.drop_indexes(t.id)?;
        self.record(account, &t.record.name, &[NewChange::table(ChangeOp::DeleteTable)])?;
        Ok(true)
    }

    /// Empties a table: its entity rows and index entries go by range (one
    /// removal each, however many rows), its counters restart at zero, and the
    /// feed records one `truncateTable`. How many entities there were.
    fn truncate(&mut self, account: &str, name: &str, feed_from: u64) -> Result<Option<u64>, StoreError> {
        let Some(t) = self.table(account, name)? else {
            return Ok(None);
        };
        let pending = self.counts.forget(t.id);
        let stored = match counts::read(&self.tx, t.id)? {
            Some((e, _)) => e,
            None => counts::recount(&self.tx, t.id)?.0,
        };
        let (lo, hi) = (t.id.to_be_bytes(), (t.id + 1).to_be_bytes());
        self.materialize_table(account, t.id, feed_from)?;
        self.tx.remove_range(Tree::Entities, &lo, &hi)?;
        self.tx.remove_range(Tree::Index, &lo, &hi)?;
        counts::start(&mut self.tx, t.id)?;
        self.record(account, &t.record.name, &[NewChange::table(ChangeOp::TruncateTable)])?;
        Ok(Some(stored.saturating_add_signed(pending)))
    }

    /// Deletes every table of `account` and its service properties; returns
    /// how many tables there were.
    fn clear_account(&mut self, account: &str) -> Result<u64, StoreError> {
        let (lo, hi) = tables::order_bounds(account, "");
        let mut names = Vec::new();
        for item in self.tx.range_of(Tree::TableOrder, &lo, &hi)? {
            let (k, _) = item?;
            let name = k.bytes().get(lo.len()..).unwrap_or_default();
            names.push(String::from_utf8(name.to_vec()).map_err(to_store_error)?);
        }
        // A reset empties the account: no table of it is kept restorable.
        let keep = std::mem::take(&mut self.keep_ns);
        let deleted = names
            .iter()
            .try_for_each(|name| self.delete_table(account, name, 0).map(drop));
        self.keep_ns = keep;
        deleted?;
        self.purge_account(account)?;
        let props = props_key(account);
        if self.tx.get(Tree::Meta, props.as_bytes())?.is_some() {
            self.tx.remove(Tree::Meta, props.as_bytes())?;
        }
        Ok(names.len() as u64)
    }

    fn set_acl(&mut self, account: &str, name: &str, acl: &[u8]) -> Result<bool, StoreError> {
        let Some(t) = self.table(account, name)? else {
            return Ok(false);
        };
        let key = table_key(account, name);
        self.tx.insert(
            Tree::Tables,
            &key,
            &seal(&key, &encode_table(t.id, &t.record.name, acl)),
        )?;
        Ok(true)
    }

    /// The stored rows `full` names, unsealed (`None`: absent), and their links
    /// to the change feed (`entity_seal.rs`).
    fn current_rows(&self, full: &[Vec<u8>]) -> Result<CurrentRows, StoreError> {
        let mut current = Vec::with_capacity(full.len());
        let mut links = Vec::with_capacity(full.len());
        for k in full {
            // A damaged row fails the write: nothing is built on what it holds.
            let found = self.tx.get(Tree::Entities, k)?;
            let row = found
                .map(|v| entity_seal::unseal_linked(k, v.bytes()).map(|(value, link)| (value.to_vec(), link)))
                .transpose()?;
            links.push(row.as_ref().and_then(|(_, link)| *link));
            current.push(row.map(|(value, _)| value));
        }
        Ok((current, links))
    }

    fn write(&mut self, account: &str, table: &str, keys: &[EntityKey], decide: Decide) -> Result<(), StoreError> {
        let Some(t) = self.table(account, table)? else {
            return Err(StoreError::TableNotFound);
        };
        let full: Vec<Vec<u8>> = keys.iter().map(|k| row_key(t.id, k.as_bytes())).collect();
        let (current, links) = self.current_rows(&full)?;
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
            // A new entity's change holds no copy of its value but marks it
            // current, and its row links to it (docs/design/feed-values.md),
            // when each key is written once: `first` is the position of the
            // job's first change.
            let first = match recording {
                true => self.feed_head(account)?.0 + 1,
                false => 0,
            };
            let current_of = (recording && (runs || full.len() == 1)).then_some(t.id);
            // Changes a link of a row this job changes points to, given their value.
            let mut materialized: Vec<u64> = Vec::new();
            let mut changes = Vec::new();
            // New rows of a batch whose changes are recorded: their keys and changes' indexes.
            let mut fresh_changes: Vec<(&[u8], usize)> = Vec::new();
            let indexed = self.indexed(t.id)?;
            // Each key's stored form as this write left it so far: a batch may
            // name a key twice, and its entries follow the last change.
            let mut latest: HashMap<&[u8], Option<Vec<u8>>> = HashMap::new();
            // What each row was and is: a repeated key is counted once, from
            // its state before the job to its state after its last mutation.
            let mut after: Vec<Option<usize>> = current.iter().map(|c| c.as_ref().map(Vec::len)).collect();
            for (i, (((k, m), old), key)) in full.iter().zip(mutations).zip(&current).zip(keys).enumerate() {
                let state = match &m {
                    Mutation::Put(v) | Mutation::Merge(v) => Some(Some(v.len())),
                    Mutation::Delete | Mutation::Expire => Some(None),
                    Mutation::Keep => None,
                };
                if let Some(state) = state {
                    // A repeated key's state is kept at its first position.
                    let at = match runs {
                        true => i,
                        false => full[..i].iter().position(|f| f == k).unwrap_or(i),
                    };
                    after[at] = state;
                }
                // The change the old row links to gets its value before the row changes.
                if let (Some(p), Some(old), true) = (links[i], old, m != Mutation::Keep) {
                    if !materialized.contains(&p) {
                        self.materialize(account, p, old)?;
                        materialized.push(p);
                    }
                }
                if !indexed.is_empty() && m != Mutation::Keep {
                    let before = match latest.get(k.as_slice()) {
                        Some(v) => v.clone(),
                        None => old.clone(),
                    };
                    let now = match &m {
                        Mutation::Put(v) | Mutation::Merge(v) => Some(v.clone()),
                        Mutation::Delete | Mutation::Expire | Mutation::Keep => None,
                    };
                    self.reindex(t.id, &indexed, key.as_bytes(), before.as_deref(), now.as_deref())?;
                    latest.insert(k.as_slice(), now);
                }
                // The change this mutation records, if any, by its index.
                // Only a new entity's value is marked current: an update's would
                // give the change before it its value back at every update, its
                // bytes logged again (benchmark-history §64), where an update's
                // own change repeats its row's bytes in the log.
                let current = current_of.filter(|_| old.is_none());
                let recorded = match recording.then(|| feed_change(&m, key.as_bytes(), old.is_some(), current)) {
                    Some(Some(change)) => {
                        changes.push(change);
                        Some(changes.len() - 1)
                    }
                    _ => None,
                };
                let link = recorded
                    .filter(|&c| changes[c].current.is_some())
                    .map(|c| first + c as u64);
                match m {
                    Mutation::Put(mut v) | Mutation::Merge(mut v) => {
                        entity_seal::seal_in_place(k, &mut v, link);
                        if runs && old.is_none() {
                            fresh.push((k, v));
                            if let Some(c) = recorded {
                                fresh_changes.push((k, c));
                            }
                            continue;
                        }
                        self.tx.insert(Tree::Entities, k, &v)?;
                        // The change's value is this row's: the log carries it once.
                        if let Some(c) = recorded {
                            changes[c].logged = self.tx.last_logged();
                        }
                    }
                    Mutation::Delete | Mutation::Expire => self.tx.remove(Tree::Entities, k)?,
                    Mutation::Keep => {}
                }
            }
            let logged = self.insert_new_rows(&mut fresh, !fresh_changes.is_empty())?;
            for (k, c) in fresh_changes {
                // `fresh` is sorted now, and `logged` lies beside it.
                if let Ok(i) = fresh.binary_search_by(|(key, _)| key.cmp(&k)) {
                    changes[c].logged = logged.get(i).copied().flatten();
                }
            }
            let (entities, bytes) = count_change(&current, &after, keys);
            self.counts.add(t.id, entities, bytes);
            let changes: Vec<_> = changes.iter().map(Change::to_record).collect();
            self.record(account, &t.record.name, &changes)?;
        }
        Ok(())
    }

    /// Inserts entity rows whose keys are absent and distinct. Two or more go in
    /// as one sorted run: the engine writes each entity block it touches once
    /// (`engine/blocks.rs`), where row by row it would rewrite a block per row.
    ///
    /// Sorts `rows`; with `logged`, answers where each row's value lies in the
    /// group's log record, in that order.
    fn insert_new_rows(
        &mut self,
        rows: &mut [(&[u8], Vec<u8>)],
        logged: bool,
    ) -> Result<Vec<Option<Logged>>, StoreError> {
        rows.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut spans = Vec::with_capacity(if logged { rows.len() } else { 0 });
        let mut rest = &rows[..];
        while rest.len() >= 2 {
            let placed = match logged {
                true => self.tx.insert_run_logged(Tree::Entities, rest, &mut spans)?,
                false => self.tx.insert_run(Tree::Entities, rest)?,
            };
            if placed == 0 {
                // The first row, refused at its own gap, exists after all.
                return Err(StoreError::failure(
                    FailureKind::Internal,
                    format!("a new row that exists: {:?}", rest[0].0),
                ));
            }
            rest = &rest[placed..];
            if placed == 1 {
                // New rows alternate with existing ones: a run of one costs a
                // third more than a plain insert, so the rest go in one by one.
                break;
            }
        }
        for (key, value) in rest {
            self.tx.insert(Tree::Entities, key, value)?;
            if logged {
                spans.push(self.tx.last_logged());
            }
        }
        Ok(spans)
    }
}

/// Rows as a write found them: their values (`None`: absent), and their links.
type CurrentRows = (Vec<Option<Vec<u8>>>, Vec<Option<u64>>);

/// Whether no key repeats.
fn distinct_keys(keys: &[Vec<u8>]) -> bool {
    let mut sorted: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    sorted.sort_unstable();
    sorted.windows(2).all(|w| w[0] != w[1])
}

/// One row's change as the feed records it: its op, key and new value (or,
/// when the row holds it, the row's table id and the value's length), and
/// where the entity write logged that value in the group's record.
struct Change<'k> {
    op: ChangeOp,
    key: &'k [u8],
    value: Option<Vec<u8>>,
    current: Option<(u64, u32)>,
    logged: Option<Logged>,
}

impl Change<'_> {
    /// The change as [`Writer::record`] takes it.
    fn to_record(&self) -> NewChange<'_> {
        let value = match (self.current, &self.value) {
            (Some((table_id, len)), _) => HeldValue::Current { table_id, len },
            (None, Some(v)) => HeldValue::Value(v),
            (None, None) => HeldValue::None,
        };
        NewChange {
            op: self.op,
            key: Some(self.key),
            value,
            logged: self.logged,
        }
    }
}

/// A write's change of one row as the feed records it (`None`: it recorded
/// nothing); with `current_of`, a new value is marked current in that table's row.
fn feed_change<'k>(m: &Mutation, key: &'k [u8], existed: bool, current_of: Option<u64>) -> Option<Change<'k>> {
    let (op, value) = ChangeOp::of(m, existed)?;
    let current = current_of.zip(value).map(|(id, v)| (id, v.len() as u32));
    Some(Change {
        op,
        key,
        value: value.filter(|_| current.is_none()).map(<[u8]>::to_vec),
        current,
        logged: None,
    })
}

/// The change of a table's (entities, bytes) from rows of the lengths
/// `before` to `after` (`None`: absent).
fn count_change(before: &[Option<Vec<u8>>], after: &[Option<usize>], keys: &[EntityKey]) -> (i64, i64) {
    let (mut entities, mut bytes) = (0i64, 0i64);
    for ((before, now), key) in before.iter().zip(after).zip(keys) {
        let size = |len: usize| counts::row_bytes(key.as_bytes().len(), len);
        match (before.as_ref().map(Vec::len), *now) {
            (None, Some(n)) => (entities, bytes) = (entities + 1, bytes + size(n)),
            (Some(o), None) => (entities, bytes) = (entities - 1, bytes - size(o)),
            (Some(o), Some(n)) => bytes += size(n) - size(o),
            (None, None) => {}
        }
    }
    (entities, bytes)
}
