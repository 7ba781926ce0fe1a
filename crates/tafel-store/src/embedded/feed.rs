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
use super::checksums::{seal, seal_in_place, unseal};
use super::commit::ReadView;
use super::engine::group::{Logged, Repeat};
use super::engine::tree::{ReadTrees, Tree};
use super::feed_restore;
use crate::error::{FailureKind, StoreError};
use crate::feed::{
    check_from, decode_change, decode_head, encode_change, encode_head, ChangeOp, ChangesFrom, ChangesPage,
    ChangesRead, ChangesRequest, FeedSettings,
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
    /// Its value after (none for table changes and deletes).
    pub(super) value: Option<&'a [u8]>,
    /// Where the write's own row logged that value (sealed) in the group's
    /// record: the change's is logged as a repeat of it.
    pub(super) logged: Option<Logged>,
}

impl NewChange<'_> {
    /// A change of a whole table.
    pub(super) fn table(op: ChangeOp) -> Self {
        NewChange {
            op,
            key: None,
            value: None,
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
    fn feed_head(&self, account: &str) -> Result<(u64, u64), StoreError> {
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
                let mut v = encode_change(txn, time, c.op, table, c.key, c.value);
                // The value ends the encoding: where the write's row logged it, the
                // log repeats those bytes rather than carry them twice.
                repeats.push(c.logged.zip(c.value).map(|(logged, value)| Repeat {
                    at: v.len() - value.len(),
                    logged: Logged {
                        len: value.len() as u32,
                        ..logged
                    },
                }));
                seal_in_place(&k, &mut v);
                bytes += v.len() as u64;
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
                bytes = bytes.saturating_sub(v.bytes().len() as u64);
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
        let change = decode_change(position, unseal(k.bytes(), v.bytes())?).ok_or_else(|| corrupt("change"))?;
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
        page.changes.push(change);
    }
    Ok(ChangesRead::Page(page))
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
