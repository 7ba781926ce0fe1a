//! When the writer makes a checkpoint: a durable redb commit, after which the
//! log's records before it are no longer needed (see `commit.rs`).

use std::time::{Duration, Instant};

/// A checkpoint at most this long after the first write it will cover, so the
/// log's replay stays short and redb can reuse the pages that non-durable
/// commits freed. Counted from that write, not from the last checkpoint: the
/// first write after a quiet spell must not be followed by a checkpoint at once
/// (see [`SinceCheckpoint::first`]).
const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(5);
/// A checkpoint once this much log was written since the last, if the writes
/// were large ones (batches): it writes every page changed since, and that grows
/// with the bytes, and so does the wait it costs the writes in flight, each of
/// which is a large share of the writes in the meantime.
const CHECKPOINT_BYTES: u64 = 16 << 20;
/// The same for small writes, whose pages a checkpoint writes anyway: under
/// scattered updates it rewrites about the same pages however long it waited,
/// so waiting longer saves disk and CPU, and its wait reaches only the writes
/// in flight, a tiny share of those in the meantime (BENCHMARKS.md,
/// "Checkpoints every 48 MiB against 16 under small writes and batches").
const SMALL_CHECKPOINT_BYTES: u64 = 48 << 20;
/// Writes with at most this many bytes of log each, on average, are small.
const SMALL_WRITE: u64 = 8 << 10;

/// The non-durable commits since the last checkpoint, which the next one covers.
#[derive(Default)]
pub(in crate::embedded) struct SinceCheckpoint {
    /// Bytes of their log records.
    pub(in crate::embedded) bytes: u64,
    /// Jobs in their groups.
    jobs: u64,
    /// When the first of them was made; `None` while there is none.
    ///
    /// The interval counts from this first write, not from the last
    /// checkpoint, so that a write after a quiet spell is not followed by a
    /// checkpoint at once: a durable commit and a wait for the disk, to cover
    /// one group, and the trigger of the redb slowdown `commit::wait_published`
    /// tells of.
    first: Option<Instant>,
}

impl SinceCheckpoint {
    pub(in crate::embedded) fn add(&mut self, bytes: u64, jobs: u64, now: Instant) {
        self.bytes += bytes;
        self.jobs += jobs;
        self.first.get_or_insert(now);
    }

    pub(in crate::embedded) fn any(&self) -> bool {
        self.first.is_some()
    }

    /// Whether the writes since the last checkpoint were small ones.
    pub(in crate::embedded) fn small_writes(&self) -> bool {
        self.bytes <= self.jobs.saturating_mul(SMALL_WRITE)
    }

    /// Whether a checkpoint is due, with `half` bytes in the log's half. Large
    /// writes also once a third of it is used: in memory, where a half is
    /// 24 MiB, a checkpoint after 16 MiB of batches held the batches behind it
    /// longer than one every ~8 (benchmark-history §52); on disk 16 MiB comes first.
    pub(in crate::embedded) fn checkpoint_due(&self, now: Instant, half: u64) -> bool {
        let bytes = if self.small_writes() {
            SMALL_CHECKPOINT_BYTES
        } else {
            CHECKPOINT_BYTES.min(half / 3)
        };
        self.first
            .is_some_and(|first| self.bytes >= bytes || now.duration_since(first) >= CHECKPOINT_INTERVAL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORD: u64 = 1200;
    /// The half of a log on disk.
    const HALF: u64 = 64 << 20;

    #[test]
    fn a_write_after_a_quiet_spell_is_not_followed_by_a_checkpoint_at_once() {
        let start = Instant::now();
        let mut since = SinceCheckpoint::default();
        assert!(!since.checkpoint_due(start + Duration::from_secs(60), HALF));
        // The last checkpoint was a minute ago; this is the first write since.
        let first = start + Duration::from_secs(60);
        since.add(RECORD, 1, first);
        assert!(!since.checkpoint_due(first, HALF));
        since.add(RECORD, 1, first + Duration::from_secs(1));
        assert!(!since.checkpoint_due(first + CHECKPOINT_INTERVAL - Duration::from_millis(1), HALF));
        assert!(since.checkpoint_due(first + CHECKPOINT_INTERVAL, HALF));
    }

    #[test]
    fn small_writes_are_checkpointed_less_often_than_batches() {
        let now = Instant::now();
        let mut small = SinceCheckpoint::default();
        while small.bytes < CHECKPOINT_BYTES {
            small.add(RECORD, 1, now);
        }
        assert!(small.small_writes());
        assert!(!small.checkpoint_due(now, HALF));
        while small.bytes < SMALL_CHECKPOINT_BYTES {
            small.add(RECORD, 1, now);
        }
        assert!(small.checkpoint_due(now, HALF));

        let mut batches = SinceCheckpoint::default();
        while batches.bytes < CHECKPOINT_BYTES {
            batches.add(100 * RECORD, 1, now);
        }
        assert!(!batches.small_writes());
        assert!(batches.checkpoint_due(now, HALF));
    }

    #[test]
    fn batches_in_a_small_log_are_checkpointed_once_a_third_of_its_half_is_used() {
        let now = Instant::now();
        let half = 24 << 20;
        let mut batches = SinceCheckpoint::default();
        while batches.bytes < half / 3 - 100 * RECORD {
            batches.add(100 * RECORD, 1, now);
        }
        assert!(!batches.checkpoint_due(now, half));
        batches.add(100 * RECORD, 1, now);
        assert!(batches.checkpoint_due(now, half));
        assert!(!batches.checkpoint_due(now, HALF), "on disk, 16 MiB of them");
        let mut small = SinceCheckpoint::default();
        while small.bytes < half / 2 {
            small.add(RECORD, 1, now);
        }
        assert!(!small.checkpoint_due(now, half));
    }
}
