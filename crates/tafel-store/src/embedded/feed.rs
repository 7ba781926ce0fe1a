//! The embedded store's change feed (`crate::feed`): changes are rows of the
//! `changes` redb table, written by the same job as the data they record and
//! logged and replayed with it, so they are durable, visible and answered
//! together with their write, and a replay after a crash rebuilds the same rows
//! under the same positions. The per-account head (last position, bytes kept)
//! is a META row. A savepoint restore rewinds the feed's changes with the data
//! but never its positions (`feed_restore.rs`).

use std::time::Instant;

use arc_swap::{ArcSwap, ArcSwapOption};
use tokio::sync::Notify;

use super::apply::Writer;
use super::change_row::{self, HeldValue};
use super::checksums::{seal, seal_in_place, unseal};
use super::commit::ReadView;
use super::engine::entity_seal;
use super::engine::group::{Logged, Repeat};
use super::engine::tree::{ReadTrees, Tree};
use super::feed_restore;
use super::schema::row_key;
use crate::error::{FailureKind, StoreError};
use crate::feed::{
    check_from, decode_head, encode_head, Change, ChangeOp, ChangesFrom, ChangesPage, ChangesRead, ChangesRequest,
    FeedSettings,
};
use crate::traits::IndexEncoder;

/// Changes a read looks at, at most, when a table filter skips most of them:
/// the page ends there with `next_after` past them.
const MAX_SCANNED: usize = 20_000;

/// One change of a write, to record.
#[derive(Clone, Copy)]
pub(super) struct NewChange<'a> {
    pub(super) op: ChangeOp,
    /// The entity's key (none for table changes).
    pub(super) key: Option<&'a [u8]>,
    /// What it holds of its value after (nothing for table changes and deletes).
    pub(super) value: HeldValue<'a>,
    /// Where the write's own row logged a value it holds (sealed) in the
    /// group's record: the change's is logged as a repeat of it.
    pub(super) logged: Option<Logged>,
}

impl NewChange<'_> {
    /// A change of a whole table.
    pub(super) fn table(op: ChangeOp) -> Self {
        NewChange {
            op,
            key: None,
            value: HeldValue::None,
            logged: None,
        }
    }
}

/// What the store and the writer share about the feed.
#[derive(Default)]
pub(super) struct FeedState {
    pub(super) settings: ArcSwap<FeedSettings>,
    /// Woken whenever a new state is published: long polls wait on it.
    pub(super) published: Notify,
    /// Not the feed's, but shared the same way with the writer: the service's
    /// index encoder (`index.rs`), once it gave one.
    pub(super) index_encoder: ArcSwapOption<IndexEncoder>,
    /// Also shared with the writer: how long a deleted table stays restorable
    /// (ns; 0: deleted at once), and when the next kept one is due for removal
    /// (0 at opening: the first sweep finds out; `deleted.rs`).
    pub(super) soft_delete_ns: std::sync::atomic::AtomicU64,
    pub(super) next_sweep_ns: std::sync::atomic::AtomicU64,
    /// Tests only: how many more online build steps may run (`None`: any).
    #[cfg(test)]
    pub(super) build_steps: std::sync::Mutex<Option<u64>>,
    /// Tests only: how long a build step may read (`None`: no limit, steps of `STEP_ROWS`).
    #[cfg(test)]
    pub(super) build_step_time: std::sync::Mutex<Option<std::time::Duration>>,
}

/// META key of an account's feed head.
fn head_key(account: &str) -> String {
    format!("feed/{account}")
}

/// `account 0x00 position BE`.
fn change_key(account: &str, position: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(account.len() + 9);
    k.extend_from_slice(account.as_bytes());
    k.push(0);
    k.extend_from_slice(&position.to_be_bytes());
    k
}

fn account_end(account: &str) -> Vec<u8> {
    let mut k = account.as_bytes().to_vec();
    k.push(1);
    k
}

fn corrupt(what: &str) -> StoreError {
    StoreError::failure(FailureKind::Corrupt, format!("corrupt change feed {what}"))
}

fn position_of(key: &[u8]) -> Result<u64, StoreError> {
    let tail = key.len().checked_sub(8).ok_or_else(|| corrupt("key"))?;
    Ok(u64::from_be_bytes(key[tail..].try_into().map_err(|_| corrupt("key"))?))
}

impl Writer<'_, '_> {
    /// The account's feed head: the last position given out, the bytes kept.
    pub(super) fn feed_head(&self, account: &str) -> Result<(u64, u64), StoreError> {
        let key = head_key(account);
        head_in(&self.tx, &key)
    }

    fn set_feed_head(&mut self, account: &str, head: u64, bytes: u64) -> Result<(), StoreError> {
        let key = head_key(account);
        self.tx.insert(
            Tree::Meta,
            key.as_bytes(),
            &seal(key.as_bytes(), &encode_head(head, bytes)),
        )
    }

    /// Records the changes of one write (one transaction id) of `account`'s
    /// table `table`, when the account records its changes.
    pub(super) fn record(&mut self, account: &str, table: &str, changes: &[NewChange<'_>]) -> Result<(), StoreError> {
        if changes.is_empty() || self.feed.for_account(account).is_none() {
            return Ok(());
        }
        let (head, mut bytes) = self.feed_head(account)?;
        let (txn, time) = (head + 1, crate::feed::now_ns());
        let mut repeats = Vec::with_capacity(changes.len());
        let rows: Vec<(Vec<u8>, Vec<u8>)> = (txn..)
            .zip(changes)
            .map(|(position, c)| {
                let k = change_key(account, position);
                // Sealed where it was encoded (its spare room takes the checksum), not copied.
                let mut v = change_row::encode(txn, time, c.op, table, c.key, c.value);
                let value = match c.value {
                    HeldValue::Value(v) => Some(v),
                    _ => None,
                };
                // The value ends the encoding: where the write's row logged it, the
                // log repeats those bytes rather than carry them twice.
                repeats.push(c.logged.zip(value).map(|(logged, value)| Repeat {
                    at: v.len() - value.len(),
                    logged: Logged {
                        len: value.len() as u32,
                        ..logged
                    },
                }));
                seal_in_place(&k, &mut v);
                bytes += change_row::counted_len(&v);
                (k, v)
            })
            .collect();
        // Past the account's head, in order: one run packs them into full
        // leaves, where one by one each full leaf would split in half. Rows
        // that do not fit the run (there are none unless the head is behind)
        // are set one by one, as they were before.
        let placed = self.tx.insert_run_repeating(Tree::Changes, &rows, &repeats)?;
        for (k, v) in rows.get(placed..).unwrap_or_default() {
            self.tx.insert(Tree::Changes, k, v)?;
        }
        self.set_feed_head(account, head + changes.len() as u64, bytes)
    }

    /// Drops every account's changes past its retention (age, then size).
    pub(super) fn trim_changes(&mut self, now_ns: u64) -> Result<(), StoreError> {
        let mut accounts = Vec::new();
        for item in self.tx.range_of(Tree::Meta, b"feed/", b"feed0")? {
            let (k, _) = item?;
            let account = k.bytes().get("feed/".len()..).unwrap_or_default();
            accounts.push(String::from_utf8(account.to_vec()).map_err(|_| corrupt("head key"))?);
        }
        for account in accounts {
            let Some(retention) = self.feed.for_account(&account) else {
                continue;
            };
            let cutoff = now_ns.saturating_sub(retention.age.as_nanos() as u64);
            let (head, mut bytes) = self.feed_head(&account)?;
            let lo = change_key(&account, 0);
            let mut drop_to = None;
            for item in self.tx.range_of(Tree::Changes, &lo, &account_end(&account))? {
                let (k, v) = item?;
                let time = v.bytes().get(9..17).ok_or_else(|| corrupt("change"))?;
                let time = u64::from_le_bytes(time.try_into().map_err(|_| corrupt("change"))?);
                let too_big = retention.max_bytes.is_some_and(|max| bytes > max);
                if time >= cutoff && !too_big {
                    break;
                }
                bytes = bytes.saturating_sub(change_row::counted_len(v.bytes()));
                drop_to = Some(position_of(k.bytes())?);
            }
            if let Some(last) = drop_to {
                self.tx
                    .remove_range(Tree::Changes, &lo, &change_key(&account, last + 1))?;
                self.set_feed_head(&account, head, bytes)?;
            }
        }
        Ok(())
    }
}

/// The head of `account`'s feed as of `view`.
fn head(view: &ReadView, account: &str) -> Result<u64, StoreError> {
    Ok(head_in(view, &head_key(account))?.0)
}

/// The head a read of `account`'s feed as of `view` shows (see [`read`]).
fn shown_head(view: &ReadView, account: &str) -> Result<u64, StoreError> {
    let head = head(view, account)?;
    Ok(feed_restore::shown(&feed_restore::gaps(view, account)?, head))
}

/// The feed head (last position, bytes kept) stored under `key` in `trees`.
fn head_in(trees: &impl ReadTrees, key: &str) -> Result<(u64, u64), StoreError> {
    match trees.get(Tree::Meta, key.as_bytes())? {
        Some(v) => decode_head(unseal(key.as_bytes(), v.bytes())?).ok_or_else(|| corrupt("head")),
        None => Ok((0, 0)),
    }
}

/// One page of `account`'s feed as of `view`.
pub(super) fn read(view: &ReadView, account: &str, request: &ChangesRequest) -> Result<ChangesRead, StoreError> {
    let head = head(view, account)?;
    let (lo, hi) = (change_key(account, 0), account_end(account));
    let oldest = match view.range_of(Tree::Changes, &lo, &hi)?.next() {
        Some(item) => position_of(item?.0.bytes())?,
        None => head + 1,
    };
    let gaps = feed_restore::gaps(view, account)?;
    let checked = match request.from {
        ChangesFrom::After(p) => {
            if let Some(restored) = feed_restore::undone(&gaps, p) {
                return Ok(ChangesRead::Undone { restored });
            }
            ChangesFrom::After(feed_restore::past_gaps(&gaps, p))
        }
        from => from,
    };
    if let Some(refused) = check_from(checked, oldest, head) {
        return Ok(refused);
    }
    let shown = |p: u64| feed_restore::shown(&gaps, p);
    let start = match request.from {
        ChangesFrom::Oldest | ChangesFrom::Since(_) => shown(oldest.saturating_sub(1)),
        ChangesFrom::After(p) => p,
        ChangesFrom::Latest => shown(head),
    };
    let mut page = ChangesPage {
        changes: Vec::new(),
        next_after: start,
        head: shown(head),
    };
    if start >= head {
        return Ok(ChangesRead::Page(page));
    }
    let from = change_key(account, start + 1);
    for item in view.range_of(Tree::Changes, &from, &hi)?.take(MAX_SCANNED) {
        if page.changes.len() >= request.limit {
            break;
        }
        let (k, v) = item?;
        let position = position_of(k.bytes())?;
        let stored = unseal(k.bytes(), v.bytes())?;
        let mut change = change_row::decode(position, stored, None).ok_or_else(|| corrupt("change"))?;
        page.next_after = position;
        if let ChangesFrom::Since(t) = request.from {
            if change.time_ns < t {
                continue;
            }
        }
        if let Some(t) = &request.table {
            if !change.table.eq_ignore_ascii_case(t) {
                continue;
            }
        }
        change.value = value_of(view, &change, stored)?;
        page.changes.push(change);
    }
    Ok(ChangesRead::Page(page))
}

/// The value `change` (stored as `stored`) records: its own, or, for a
/// current change, its entity row's, which links back to it.
fn value_of(view: &ReadView, change: &Change, stored: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
    match change_row::held(stored).ok_or_else(|| corrupt("change"))? {
        HeldValue::None => Ok(None),
        HeldValue::Value(v) => Ok(Some(v.to_vec())),
        HeldValue::Current { table_id, .. } => {
            let key = change.key.as_ref().ok_or_else(|| corrupt("change"))?;
            current_value(view, table_id, key.as_bytes(), change.position).map(Some)
        }
    }
}

/// The value of the entity row (`table_id`, `key`) that links to the change at `position`.
pub(super) fn current_value(
    trees: &impl ReadTrees,
    table_id: u64,
    key: &[u8],
    position: u64,
) -> Result<Vec<u8>, StoreError> {
    let row = row_key(table_id, key);
    let stored = trees.get(Tree::Entities, &row)?;
    match stored.as_ref().map(|s| entity_seal::unseal_linked(&row, s.bytes())).transpose()? {
        Some((value, Some(link))) if link == position => Ok(value.to_vec()),
        _ => Err(StoreError::failure(
            FailureKind::Corrupt,
            format!("the change feed's change {position} holds its entity's current value, but the entity's row does not link to it"),
        )),
    }
}

/// Whether `account`'s feed keeps any change as of `view`.
pub(super) fn keeps_changes(view: &ReadView, account: &str) -> Result<bool, StoreError> {
    let (lo, hi) = (change_key(account, 0), account_end(account));
    Ok(view.range_of(Tree::Changes, &lo, &hi)?.next().transpose()?.is_some())
}

/// The changes (account, position) that hold their entity's current value
/// while the entity's row does not link to them (`tafel check`). Rows that
/// fail their checksum are the check's own walk's to report.
pub(super) fn unlinked(view: &ReadView) -> Result<Vec<(String, u64)>, StoreError> {
    let mut found = Vec::new();
    for item in view.range(Tree::Changes, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)? {
        let (k, v) = item?;
        let Ok(stored) = unseal(k.bytes(), v.bytes()) else {
            continue;
        };
        let Some(HeldValue::Current { table_id, .. }) = change_row::held(stored) else {
            continue;
        };
        let position = position_of(k.bytes())?;
        let account = k.bytes().get(..k.bytes().len().saturating_sub(9)).unwrap_or_default();
        let account = String::from_utf8_lossy(account).into_owned();
        let key = change_row::decode(position, stored, None).and_then(|c| c.key);
        let linked = key.is_some_and(|key| current_value(view, table_id, key.as_bytes(), position).is_ok());
        if !linked {
            found.push((account, position));
        }
    }
    Ok(found)
}

/// Rows a materializing walk reads before it writes what it found.
const MATERIALIZE_SLICE: usize = 256;
/// How far a materializing walk goes: changes read, bytes of values written
/// (checked between slices of [`MATERIALIZE_SLICE`] changes).
#[derive(Clone, Copy)]
struct Bound {
    changes: usize,
    bytes: usize,
}

impl Bound {
    const MAX: Bound = Bound {
        changes: usize::MAX,
        bytes: usize::MAX,
    };
}

/// A [`super::jobs::Job::Materialize`] step's bound: its group stays a few
/// MiB, however many changes there are.
const STEP: Bound = Bound {
    changes: 8192,
    bytes: 4 << 20,
};

impl Writer<'_, '_> {
    /// Gives the change at `position` of `account`'s feed, if it is still
    /// kept and holds its entity's current value, that value (`value`, the
    /// entity row's before it changes) in full.
    pub(super) fn materialize(&mut self, account: &str, position: u64, value: &[u8]) -> Result<(), StoreError> {
        let k = change_key(account, position);
        let whole = match self.tx.get(Tree::Changes, &k)? {
            Some(stored) => change_row::materialized(unseal(&k, stored.bytes())?, value),
            None => None,
        };
        let Some(mut v) = whole else {
            return Ok(());
        };
        seal_in_place(&k, &mut v);
        self.tx.insert(Tree::Changes, &k, &v)
    }

    /// Materializes every change of `account`'s feed from position `from` on
    /// that holds the current value of an entity of table `id`, before the
    /// table's rows go. From 0, walks the table's rows or the account's
    /// changes, whichever are fewer.
    pub(super) fn materialize_table(&mut self, account: &str, id: u64, from: u64) -> Result<(), StoreError> {
        let (head, _) = self.feed_head(account)?;
        let (lo, hi) = (change_key(account, from), account_end(account));
        let oldest = match self.tx.range_of(Tree::Changes, &lo, &hi)?.next() {
            Some(item) => position_of(item?.0.bytes())?,
            None => return Ok(()),
        };
        let rows = match from {
            0 => super::counts::read(&self.tx, id)?.map_or(u64::MAX, |(e, _)| e),
            _ => u64::MAX,
        };
        if rows < head.saturating_sub(oldest) {
            self.materialize_rows(account, id)
        } else {
            self.materialize_changes(account, Some(id), oldest, Bound::MAX)
                .map(drop)
        }
    }

    /// A [`super::jobs::Job::Materialize`] step: from position `from`, up to
    /// [`STEP`]'s changes read or bytes of values written.
    pub(super) fn materialize_step(
        &mut self,
        account: &str,
        table: Option<&str>,
        from: u64,
    ) -> Result<Option<u64>, StoreError> {
        let id = match table {
            Some(name) => match self.table(account, name)? {
                Some(t) => Some(t.id),
                None => return Ok(None),
            },
            None => None,
        };
        self.materialize_changes(account, id, from, STEP)
    }

    /// [`Self::materialize_table`] by the table's rows: each linked one.
    fn materialize_rows(&mut self, account: &str, id: u64) -> Result<(), StoreError> {
        let hi = (id + 1).to_be_bytes();
        let mut from = id.to_be_bytes().to_vec();
        loop {
            let mut linked = Vec::new();
            let mut read = 0;
            for item in self.tx.range_of(Tree::Entities, &from, &hi)?.take(MATERIALIZE_SLICE) {
                let (k, v) = item?;
                read += 1;
                from = [k.bytes(), &[0]].concat();
                if let (value, Some(p)) = entity_seal::unseal_linked(k.bytes(), v.bytes())? {
                    linked.push((p, value.to_vec()));
                }
            }
            for (p, value) in linked {
                self.materialize(account, p, &value)?;
            }
            if read < MATERIALIZE_SLICE {
                return Ok(());
            }
        }
    }

    /// Materializes the current changes of table `id` (any table: `None`)
    /// among `account`'s changes from position `from` on, within `bound`;
    /// answers where to go on from (`None`: the end).
    fn materialize_changes(
        &mut self,
        account: &str,
        id: Option<u64>,
        mut from: u64,
        bound: Bound,
    ) -> Result<Option<u64>, StoreError> {
        let hi = account_end(account);
        let (mut left, mut bytes) = (bound.changes, 0);
        while left > 0 && bytes < bound.bytes {
            let mut found: Vec<(u64, Vec<u8>)> = Vec::new();
            let mut read = 0;
            let slice = left.min(MATERIALIZE_SLICE);
            for item in self
                .tx
                .range_of(Tree::Changes, &change_key(account, from), &hi)?
                .take(slice)
            {
                let (k, v) = item?;
                read += 1;
                let position = position_of(k.bytes())?;
                from = position + 1;
                let stored = unseal(k.bytes(), v.bytes())?;
                if let Some(HeldValue::Current { table_id, .. }) = change_row::held(stored) {
                    if id.is_none_or(|id| id == table_id) {
                        let change = change_row::decode(position, stored, None).ok_or_else(|| corrupt("change"))?;
                        let key = change.key.ok_or_else(|| corrupt("change"))?;
                        found.push((position, current_value(&self.tx, table_id, key.as_bytes(), position)?));
                    }
                }
            }
            for (p, value) in found {
                bytes += value.len();
                self.materialize(account, p, &value)?;
            }
            if read < slice {
                return Ok(None);
            }
            left -= read;
        }
        Ok(Some(from))
    }
}

/// Waits until a state past `seen` (a head [`read`] showed) is published for
/// `account`, or `until`.
pub(super) async fn wait(
    feed: &FeedState,
    view: impl Fn() -> std::sync::Arc<ReadView>,
    account: &str,
    seen: u64,
    until: Instant,
) {
    let notified = feed.published.notified();
    tokio::pin!(notified);
    notified.as_mut().enable();
    // Checked after enabling: a publication between the caller's read and
    // here is not missed.
    if shown_head(&view(), account).map_or(true, |h| h > seen) {
        return;
    }
    let _ = tokio::time::timeout_at(until.into(), notified).await;
}
