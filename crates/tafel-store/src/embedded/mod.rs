//! The embedded backend: one redb file and one write-ahead log in the data directory.
//!
//! Invariants:
//! - Every write runs on the single writer thread, which takes all writes queued
//!   at that moment and applies them one after another in one redb transaction.
//!   This is group commit: concurrent writers share one sync, and each sees the
//!   effects of those queued before it exactly as if they ran alone.
//! - No writer is answered, and no reader sees a change, before it is durable:
//!   each group commits non-durably, and the writer publishes the snapshot
//!   after that commit only once the group's log record is synced; or the group
//!   commits durably itself (a checkpoint). See [`commit`] and [`wal`].
//! - Entity rows live under `table id (u64, big-endian) ++ EntityKey`; a table's
//!   id is never reused, so rows of a deleted table can never reappear under a new
//!   table of the same name.
//! - Reads use the published snapshot (redb MVCC) and never wait for the writer.
//!
//! Here: options and opening (replay included); `store_api.rs` the `Store`
//! methods, `tables.rs` the table catalog's reads. `engine/`
//! alone owns redb: `engine/schema.rs` the redb tables and key layouts,
//! `engine/writer.rs` the writer thread, `engine/commit.rs` a group's sync,
//! `engine/wal.rs` the log, `engine/page_file.rs` the file redb writes through.
//! Beside it, the store's logic: `scan.rs` the scans, `feed.rs` the change feed,
//! `savepoints.rs`, `snapshot.rs`, `stats.rs`, `check.rs`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

mod apply;
mod change_row;
mod check;
#[cfg(test)]
mod corruption_tests;
mod counts;
#[cfg(test)]
mod counts_tests;
mod deleted;
mod engine;
#[cfg(test)]
mod fault_tests;
mod feed;
mod feed_restore;
#[cfg(test)]
mod feed_tests;
#[cfg(test)]
mod feed_values_tests;
#[cfg(test)]
mod fold_aside_tests;
mod index;
mod index_build;
#[cfg(test)]
mod index_build_tests;
mod index_stream;
#[cfg(test)]
mod index_tests;
#[cfg(test)]
mod inline_writes_tests;
mod jobs;
mod records;
mod savepoints;
#[cfg(test)]
mod savepoints_tests;
mod scan;
#[cfg(test)]
mod scan_tests;
#[cfg(test)]
mod simulation;
#[cfg(test)]
mod simulation_feed;
#[cfg(test)]
mod simulation_model;
mod snapshot;
mod stats;
mod store_api;
mod table_ids;
mod tables;
#[cfg(test)]
mod write_tests;

pub use self::check::{check, check_with, CheckReport, Damage};

// The engine's modules under their old names, while the store's logic still
// reaches into them (docs/design/embedded-store.md, "The engine seam").
#[cfg(test)]
use self::engine::header_copy;
#[cfg(test)]
use self::engine::sim_disk;
use self::engine::{checksums, commit, disk, opening, reopen, schema, scratch_disk, wal};

use arc_swap::ArcSwapOption;

use self::disk::{Disk, OsDisk};
use self::jobs::{Job, Reply};
use self::opening::Opening;
use self::schema::{guarded, to_store_error, TableValue};
use self::scratch_disk::ScratchDisk;
use self::stats::EmbeddedStats;
use crate::error::{FailureKind, StoreError};
use crate::reset::ResetError;

pub struct EmbeddedOptions {
    /// Bytes of page cache redb may use.
    pub cache_size: usize,
    /// Bytes of the write-ahead log, when it is created: each half holds the
    /// records between two checkpoints. Tests make it small, for checkpoints
    /// every few writes.
    pub log_size: u64,
    /// Bytes of changes the write buffer holds before it is folded into the
    /// store file (`engine/buffer.rs`); 0 commits each group to it.
    pub write_buffer: usize,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        EmbeddedOptions {
            cache_size: 256 << 20,
            log_size: wal::LOG_SIZE,
            write_buffer: DEFAULT_WRITE_BUFFER,
        }
    }
}

/// The write buffer's default bound (`--write-buffer-mb`): above the 48 MiB of
/// small writes' records between two checkpoints, which fold it first.
pub const DEFAULT_WRITE_BUFFER: usize = 64 << 20;

/// The log of an in-memory store, which holds nothing: the records between two
/// checkpoints (the writer's group limit) count against half of it, so it sets
/// how often the buffer is folded. Merges scattered over a table rewrite a leaf
/// each when folded often; at 48 MiB (a fold every ~21 MiB of records) more of
/// them share one, for 1.00–1.08× the merges and their p99 1.59–2.37 → 1.42–2.06
/// ms, while inserts, which pay for a deeper buffer and fold cheaply anyway,
/// lose 1–5% (16, 32, 48 and 128 MiB measured, benchmark-history §52).
const IN_MEMORY_LOG_SIZE: u64 = 48 << 20;

/// The store's file redb keeps its B-trees in.
const STORE_FILE: &str = "tafel.redb";

pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

struct Inner {
    disk: Box<dyn Disk>,
    options: EmbeddedOptions,
    /// The open store; none while it is being opened again (`reopen.rs`).
    opening: ArcSwapOption<Opening>,
    stats: Arc<EmbeddedStats>,
    /// Bytes of pages earlier openings wrote: the counter goes on across a reopen.
    written_before: AtomicU64,
    /// Set while a reopen is under way or waiting for room.
    reopening: AtomicBool,
    /// Set by `shutdown`: no reopen after it.
    stopped: AtomicBool,
    /// The change feed's settings and wake-ups.
    feed: Arc<feed::FeedState>,
}

impl EmbeddedStore {
    /// Opens (or creates) the store in `dir`.
    pub fn open(dir: &Path, options: EmbeddedOptions) -> Result<Self, StoreError> {
        Self::open_on(Box::new(OsDisk::new(dir).map_err(to_store_error)?), options, None)
    }

    /// A store that lives in memory only (`serve --in-memory`): no file is
    /// made and nothing is synced; it is gone when the process ends. Its store
    /// file may hold `cap` bytes; a write past them fails as on a full disk, for
    /// good (nothing frees room while writes fail). The log's records go
    /// nowhere: with nothing to recover after, replay has nothing to read.
    ///
    /// The write buffer (`write_buffer` bytes at most) counts in `cap`: the
    /// store's pages get the rest.
    pub fn open_in_memory(cap: u64, cache_size: usize, write_buffer: usize) -> Result<Self, StoreError> {
        Self::open_in_memory_with_log(cap, cache_size, write_buffer, IN_MEMORY_LOG_SIZE)
    }

    /// [`EmbeddedStore::open_in_memory`] with a (virtual) log of `log_size`
    /// bytes: tests fill a small one's half quickly.
    fn open_in_memory_with_log(
        cap: u64,
        cache_size: usize,
        write_buffer: usize,
        log_size: u64,
    ) -> Result<Self, StoreError> {
        let options = EmbeddedOptions {
            cache_size,
            log_size,
            write_buffer,
        };
        let pages = cap.saturating_sub(write_buffer as u64);
        Self::open_on(Box::new(ScratchDisk::memory(pages)), options, None)
    }

    /// [`EmbeddedStore::open`] on `disk`, where no group becomes durable (nor
    /// visible, nor answered) while `hold` is locked (for tests of the commit
    /// pipeline).
    fn open_on(
        disk: Box<dyn Disk>,
        options: EmbeddedOptions,
        hold: Option<Arc<std::sync::Mutex<()>>>,
    ) -> Result<Self, StoreError> {
        let stats = Arc::new(EmbeddedStats::default());
        let feed = Arc::new(feed::FeedState::default());
        let opening = Opening::open(&*disk, &options, stats.clone(), &feed, hold)?;
        Ok(EmbeddedStore {
            inner: Arc::new(Inner {
                disk,
                options,
                opening: ArcSwapOption::from_pointee(opening),
                stats,
                written_before: AtomicU64::new(0),
                reopening: AtomicBool::new(false),
                stopped: AtomicBool::new(false),
                feed,
            }),
        })
    }

    /// The open store, or ServerBusy while it is opened again.
    fn opening(&self) -> Result<Arc<Opening>, StoreError> {
        self.inner
            .opening
            .load_full()
            .ok_or_else(|| StoreError::Busy("the store is reopening after its disk was full; retry in a moment".into()))
    }

    #[cfg(test)]
    fn opening_now(&self) -> Arc<Opening> {
        self.opening().expect("an open store")
    }

    /// Leaf pages of the entity rows as of the published snapshot.
    #[cfg(test)]
    fn entity_leaf_pages(&self) -> u64 {
        self.opening_now().view().entity_leaf_pages()
    }

    /// Leaf pages of the change feed's rows as of the published snapshot.
    #[cfg(test)]
    fn change_leaf_pages(&self) -> u64 {
        self.opening_now().view().change_leaf_pages()
    }

    /// Bytes in the write buffer as of the published snapshot.
    #[cfg(test)]
    fn buffered_bytes(&self) -> usize {
        self.opening_now().view().buffer.bytes()
    }

    /// Gives the changes of `account`'s feed that hold the current values of
    /// `table`'s entities (every table's: `None`) their values, in bounded
    /// steps, ahead of a job that drops those rows: that job then has only
    /// the changes from the position answered on to see to.
    async fn materialize_ahead(&self, account: &str, table: Option<&str>) -> Result<u64, StoreError> {
        // An account that keeps no changes costs its drops no step. One kept
        // since this look is the dropping job's to see to (from 0).
        let view = self.opening()?.view();
        if !guarded(|| feed::keeps_changes(&view, account))? {
            return Ok(0);
        }
        let mut from = 0;
        loop {
            let (account, table) = (account.to_owned(), table.map(str::to_owned));
            match self
                .submit(|reply| Job::Materialize {
                    account,
                    table,
                    from,
                    reply,
                })
                .await?
            {
                Some(next) => from = next,
                None => return Ok(from),
            }
        }
    }

    /// Hands a write to the writer; once a full disk has broken the store,
    /// starts opening it again as soon as there is room.
    async fn submit<T>(&self, make: impl FnOnce(Reply<T>) -> Job) -> Result<T, StoreError> {
        let opening = self.opening()?;
        let result = opening.submit(make).await;
        if result.is_err()
            && matches!(opening.broken(), Some((FailureKind::DiskFull, _)))
            && !self.inner.disk.files_in_memory()
        {
            reopen::start(&self.inner);
        }
        result
    }

    async fn savepoint(&self, op: savepoints::Op) -> Result<(), ResetError> {
        let name = op.name().to_owned();
        match self.submit(|reply| Job::Savepoint { op, reply }).await? {
            savepoints::Outcome::Done => Ok(()),
            savepoints::Outcome::NotFound => Err(ResetError::NotFound(name)),
            savepoints::Outcome::Exists => Err(ResetError::Exists(name)),
        }
    }

    fn read_table(&self, account: &str, name: &str) -> Result<Option<TableValue>, StoreError> {
        let opening = self.opening()?;
        guarded(|| opening.read_table(account, name))
    }
}
