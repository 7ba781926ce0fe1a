//! The power-loss simulation's change feed (`simulation.rs`): reading a
//! store's feed, and what it must hold. While the workload runs, each wave's
//! new changes are read from the live store and checked against the ops (write
//! by write, in some commit order, at consecutive positions past the head); the
//! feed so read is what each power loss's store is held to: before the wave
//! struck, exactly as read then; of the wave, the changes of the ops the
//! recovered state shows applied, as the live store gave them out.
//!
//! Positions promise (`feed.rs`, `feed_restore.rs`): a write's changes at
//! consecutive positions, its txn the first's; each write's right after the
//! head; a restore brings the saved feed back but never the head, and a replay
//! after a crash rebuilds the same changes under the same positions.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use super::simulation_model::{Op, Recorded, ACCOUNT};
use super::EmbeddedStore;
use crate::feed::{Change, ChangesFrom, ChangesRead, ChangesRequest, FeedSettings, Retention};
use crate::traits::Store;

/// A feed as read: every change, in position order.
pub(super) type Feed = Arc<Vec<Arc<Change>>>;

/// Long enough that retention drops nothing.
pub(super) fn settings() -> FeedSettings {
    FeedSettings {
        all: Some(Retention {
            age: Duration::from_secs(86_400),
            max_bytes: None,
        }),
        ..FeedSettings::default()
    }
}

/// Ops that run together, on distinct rows; the state and feed before them.
pub(super) struct Wave {
    pub(super) first: usize,
    pub(super) ops: Vec<Op>,
    pub(super) before: super::simulation_model::State,
    /// What each op records in the feed (nothing while the feed is off).
    pub(super) recorded: Vec<Vec<Recorded>>,
    pub(super) feed_before: Feed,
    pub(super) feed_after: Feed,
    /// The last position given out before the wave.
    pub(super) given_before: u64,
}

impl Wave {
    fn restore(&self) -> bool {
        matches!(self.ops.as_slice(), [Op::Restore(..)])
    }
}

/// The feed past `after` (`None`: all of it), its head, and where to read on
/// from (the last page's `next_after`, as a reader would).
pub(super) async fn read(store: &EmbeddedStore, mut after: Option<u64>) -> Result<(Vec<Change>, u64, u64), String> {
    let mut out = Vec::new();
    loop {
        let from = after.map_or(ChangesFrom::Oldest, ChangesFrom::After);
        let request = ChangesRequest {
            from,
            limit: 1000,
            table: None,
        };
        match store.read_changes(ACCOUNT, &request).await {
            Ok(ChangesRead::Page(p)) if p.changes.is_empty() => return Ok((out, p.head, p.next_after)),
            Ok(ChangesRead::Page(p)) => {
                after = Some(p.next_after);
                out.extend(p.changes);
            }
            Ok(other) => return Err(format!("the feed answered {other:?} from {from:?}")),
            Err(e) => return Err(format!("reading the feed: {e}")),
        }
    }
}

/// `new` follows position `head`: each write's changes at consecutive
/// positions from `head + 1` on, its txn the first's.
pub(super) fn check_positions(new: &[Change], mut head: u64) -> Result<(), String> {
    let mut txn = 0;
    for c in new {
        if c.position != head + 1 || (c.txn != c.position && c.txn != txn) {
            return Err(format!(
                "the feed has position {} (txn {}) after {head} (txn {txn})",
                c.position, c.txn
            ));
        }
        (head, txn) = (c.position, c.txn);
    }
    Ok(())
}

/// Which ops of `recorded` the writes (txns) of `changes` are, each wholly.
fn writes_of(changes: &[Change], recorded: &[Vec<Recorded>]) -> Result<BTreeSet<usize>, String> {
    let mut found = BTreeSet::new();
    for write in changes.chunk_by(|a, b| a.txn == b.txn) {
        let got: Vec<Recorded> = write
            .iter()
            .map(|c| (c.op, c.table.clone(), c.key.clone(), c.value.clone()))
            .collect();
        let op = (0..recorded.len()).find(|&i| !found.contains(&i) && recorded[i] == got);
        let Some(op) = op else {
            return Err(format!(
                "the feed's write at {} ({} changes, first {:?}) is no op's of the wave",
                write[0].txn,
                got.len(),
                got.first().map(|(op, t, k, _)| (op, t, k))
            ));
        };
        found.insert(op);
    }
    Ok(found)
}

/// `actual` is `want`, change for change (position, time and all).
fn same(actual: &[Change], want: &[Arc<Change>]) -> Result<(), String> {
    if let Some(i) = (0..actual.len().min(want.len())).find(|&i| actual[i] != *want[i]) {
        return Err(format!(
            "the feed's change {i} is {:?} at {}, expected {:?} at {}",
            actual[i].op, actual[i].position, want[i].op, want[i].position
        ));
    }
    if actual.len() != want.len() {
        return Err(format!(
            "the feed has {} changes, expected {}",
            actual.len(),
            want.len()
        ));
    }
    Ok(())
}

/// The live store's feed as the workload goes: the last position given out,
/// the head its reads show (the restored one right after a restore), and where
/// the next read starts.
#[derive(Default)]
pub(super) struct Live {
    given: u64,
    shown: u64,
    cursor: u64,
}

impl Live {
    pub(super) fn given(&self) -> u64 {
        self.given
    }

    /// Reads and checks what `wave` (every op acknowledged) did to the feed;
    /// the feed after it. `saved` holds the feed each savepoint saved.
    pub(super) async fn observe(
        &mut self,
        store: &EmbeddedStore,
        wave: &Wave,
        saved: &BTreeMap<u32, Feed>,
    ) -> Result<Feed, String> {
        if let [Op::Restore(n, _)] = wave.ops.as_slice() {
            let (all, shown, next) = read(store, None).await?;
            same(&all, &saved[n]).map_err(|e| format!("after restoring s{n}: {e}"))?;
            let last = all.last().map_or(0, |c| c.position);
            if shown < last || shown > self.given || next > shown {
                return Err(format!(
                    "after restoring s{n}: head {shown}, read on from {next}, last change {last}, {} given out",
                    self.given
                ));
            }
            (self.shown, self.cursor) = (shown, next);
            return Ok(saved[n].clone());
        }
        let (new, shown, next) = read(store, Some(self.cursor)).await?;
        check_positions(&new, self.given)?;
        let want = new.last().map_or(self.shown, |c| c.position);
        if shown != want {
            return Err(format!("the feed's head is {shown}, expected {want}"));
        }
        let found = writes_of(&new, &wave.recorded)?;
        let all: BTreeSet<usize> = (0..wave.ops.len()).filter(|&i| !wave.recorded[i].is_empty()).collect();
        if found != all {
            return Err(format!("the feed holds the wave's ops {found:?}, expected {all:?}"));
        }
        if let Some(c) = new.last() {
            self.given = c.position;
        }
        (self.shown, self.cursor) = (shown, next);
        let feed = wave.feed_before.iter().cloned().chain(new.into_iter().map(Arc::new));
        Ok(Arc::new(feed.collect()))
    }
}

/// The feed a power loss in `wave` left, `actual`, is what the live store gave
/// out up to the ops `applied` (by index in the wave): a restore's before or
/// after; of other waves, a prefix of the feed after the wave holding those
/// ops' writes and no other.
pub(super) fn holds(wave: &Wave, applied: impl Fn(usize) -> bool, actual: &[Change]) -> Result<(), String> {
    if wave.restore() {
        return same(
            actual,
            if applied(0) {
                &wave.feed_after
            } else {
                &wave.feed_before
            },
        );
    }
    let (before, after) = (wave.feed_before.len(), wave.feed_after.len());
    if actual.len() < before || actual.len() > after {
        return Err(format!(
            "the feed has {} changes, expected {before} to {after}",
            actual.len()
        ));
    }
    same(actual, &wave.feed_after[..actual.len()])?;
    let found = writes_of(&actual[before..], &wave.recorded)?;
    let want: BTreeSet<usize> = (0..wave.ops.len())
        .filter(|&i| applied(i) && !wave.recorded[i].is_empty())
        .collect();
    if found != want {
        return Err(format!("the feed holds the wave's ops {found:?}, the state {want:?}"));
    }
    Ok(())
}
