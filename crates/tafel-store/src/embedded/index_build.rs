//! Online index builds (docs/design/indexes.md, "Online build"). A definition
//! made on a table with entities is `building`, with a cursor: the last
//! entity key whose entries the build has written. Writes keep the index's
//! entries from the definition's commit on, as for a ready index, so only the
//! entities past the cursor lack theirs. The writer thread runs build steps
//! between its groups of writes (`engine/writer.rs`): each step reads up to
//! [`STEP_ROWS`] entities after the cursor, for [`STEP_TIME`] at most, in the
//! group's transaction, writes
//! their entries and the new cursor in the same commit, and at the table's end
//! marks the index ready. So a build survives `kill -9` as any commit does, and
//! a write waits for one step at most.

use std::time::{Duration, Instant};

use super::apply::Writer;
use super::checksums::{seal, unseal};
use super::commit::ReadView;
use super::engine::entity_seal;
use super::engine::tree::{ReadTrees, Tree};
use super::index::{def_key, entity_entries};
use super::schema::row_key;
use crate::error::StoreError;
use crate::traits::IndexProgress;

/// Entities one build step reads at most.
pub(super) const STEP_ROWS: usize = 4096;
/// How long one step may read, with its clock read every [`CLOCK_EVERY`]
/// entities: what a write queued behind a step waits for. Rows alone do not
/// bound it: 4,096 small entities of one property take about 14 ms, but `*` on
/// entities of ten properties costs ~100 µs each (`INDEXES='*'
/// scripts/cpu-per-op`), 0.4 s a step.
#[cfg_attr(test, allow(dead_code))]
const STEP_TIME: Duration = Duration::from_millis(5);
pub(super) const CLOCK_EVERY: usize = 64;

/// How long the writer waits before trying a build that could not step (no
/// encoder yet, a damaged row).
const RETRY: Duration = Duration::from_secs(1);

/// The state byte of an index whose entries are all written.
const READY: u8 = 1;
/// The state byte of an index being built; the cursor follows it, if any.
const BUILDING: u8 = 2;

/// An index definition's state (its META value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum State {
    Ready,
    /// Entries are written for every entity up to the cursor (an entity key;
    /// `None`: none yet).
    Building(Option<Vec<u8>>),
}

impl State {
    pub(super) fn decode(value: &[u8]) -> State {
        match value {
            [READY] => State::Ready,
            [BUILDING, cursor @ ..] if !cursor.is_empty() => State::Building(Some(cursor.to_vec())),
            // An unknown state is built again from the start: never used unbuilt.
            _ => State::Building(None),
        }
    }

    pub(super) fn encode(&self) -> Vec<u8> {
        match self {
            State::Ready => vec![READY],
            State::Building(cursor) => [&[BUILDING][..], cursor.as_deref().unwrap_or_default()].concat(),
        }
    }
}

/// Whether the writer has build steps to run.
#[derive(Clone, Copy, Debug, Default)]
pub(in crate::embedded) enum Build {
    /// There may be a building index (at opening, after a create or a savepoint).
    #[default]
    Look,
    /// None is building.
    Idle,
    /// One is, but its last step could not run: try again after this.
    Wait(Instant),
}

impl Build {
    pub(in crate::embedded) fn due(self, now: Instant) -> bool {
        match self {
            Build::Look => true,
            Build::Idle => false,
            Build::Wait(at) => now >= at,
        }
    }
}

/// Whether the writer may run a build step now, and takes it: always, but in
/// tests that hold the build (`FeedState::build_steps`).
#[cfg(not(test))]
pub(in crate::embedded) fn take_step(_: &super::feed::FeedState) -> bool {
    true
}

/// How long the writer's next build step may read: [`STEP_TIME`]; in tests,
/// unbounded (steps of [`STEP_ROWS`]) unless one sets `FeedState::build_step_time`.
#[cfg(not(test))]
pub(in crate::embedded) fn step_time(_: &super::feed::FeedState) -> Option<Duration> {
    Some(STEP_TIME)
}

#[cfg(test)]
pub(in crate::embedded) fn step_time(feed: &super::feed::FeedState) -> Option<Duration> {
    feed.build_step_time.lock().ok().and_then(|t| *t)
}

#[cfg(test)]
pub(in crate::embedded) fn take_step(feed: &super::feed::FeedState) -> bool {
    let Ok(mut steps) = feed.build_steps.lock() else {
        return false;
    };
    match &mut *steps {
        None => true,
        Some(0) => false,
        Some(n) => {
            *n -= 1;
            true
        }
    }
}

/// A building index: its table's id, its property, its cursor.
type Building = (u64, String, Option<Vec<u8>>);

/// The first building index of the store.
fn first_building(trees: &impl ReadTrees) -> Result<Option<Building>, StoreError> {
    // Every definition's key is `index/{id:020}/{property}`; `'0'` follows `'/'`.
    for item in trees.range_of(Tree::Meta, b"index/", b"index0")? {
        let (k, v) = item?;
        let State::Building(cursor) = State::decode(unseal(k.bytes(), v.bytes())?) else {
            continue;
        };
        let name = std::str::from_utf8(k.bytes()).unwrap_or_default();
        let parsed = name
            .strip_prefix("index/")
            .and_then(|rest| rest.split_once('/'))
            .and_then(|(id, property)| Some((id.parse::<u64>().ok()?, property.to_owned())));
        if let Some((id, property)) = parsed {
            return Ok(Some((id, property, cursor)));
        }
    }
    Ok(None)
}

impl Writer<'_, '_> {
    /// One step of the first building index: the entries of up to
    /// [`STEP_ROWS`] entities after its cursor (fewer when `time` runs out),
    /// and the cursor past them (or the state `ready` at the table's end). Sets
    /// whether more steps are due.
    pub(super) fn build_step(&mut self, time: Option<Duration>) -> Result<(), StoreError> {
        let Some((id, property, cursor)) = first_building(&self.tx)? else {
            self.index_defs.build = Build::Idle;
            return Ok(());
        };
        // A failed step is tried again later, not at once.
        self.index_defs.build = Build::Wait(Instant::now() + RETRY);
        let Some(encoder) = self.index_encoder else {
            return Ok(());
        };
        let lo = match &cursor {
            // The first key after the cursor's.
            Some(c) => [row_key(id, c).as_slice(), &[0]].concat(),
            None => id.to_be_bytes().to_vec(),
        };
        let definition = std::slice::from_ref(&property);
        let (mut entries, mut last, mut more) = (Vec::new(), None, false);
        let started = Instant::now();
        let out_of_time =
            |read: usize| read.is_multiple_of(CLOCK_EVERY) && read > 0 && time.is_some_and(|t| started.elapsed() >= t);
        for item in self.tx.range_of(Tree::Entities, &lo, &(id + 1).to_be_bytes())? {
            if entries.len() == STEP_ROWS || out_of_time(entries.len()) {
                more = true;
                break;
            }
            let (k, v) = item?;
            let (k, v) = (k.bytes(), v.bytes());
            let key = k.get(8..).unwrap_or_default();
            // One place per entity, with its entries (none without the property;
            // every property's for `*`).
            entries.push(entity_entries(
                encoder,
                id,
                definition,
                key,
                entity_seal::unseal(k, v)?,
            )?);
            last = Some(key.to_vec());
        }
        // A write ahead of the cursor already made its entry: this is the same one.
        for (k, v) in entries.into_iter().flatten() {
            self.tx.insert(Tree::Index, &k, &v)?;
        }
        let state = match more {
            true => State::Building(last.or(cursor)),
            false => {
                tracing::info!(table = id, property, "index built online");
                State::Ready
            }
        };
        let def = def_key(id, &property);
        self.tx
            .insert(Tree::Meta, def.as_bytes(), &seal(def.as_bytes(), &state.encode()))?;
        self.index_defs.build = Build::Look;
        Ok(())
    }
}

/// How far a build with `cursor` on table `id` has come: the entities up to
/// the cursor, of the table's counter.
pub(super) fn progress(view: &ReadView, id: u64, cursor: Option<&[u8]>) -> Result<IndexProgress, StoreError> {
    let total = match super::counts::read(view, id)? {
        Some((entities, _)) => entities,
        None => super::counts::recount(view, id)?.0,
    };
    let mut done = 0u64;
    if let Some(c) = cursor {
        let hi = [row_key(id, c).as_slice(), &[0]].concat();
        for item in view.range_of(Tree::Entities, &id.to_be_bytes(), &hi)? {
            item?;
            done += 1;
        }
    }
    Ok(IndexProgress {
        done: done.min(total),
        total,
    })
}
