//! The write-ahead log: how a group of writes becomes durable with one small
//! sequential write and one `fdatasync`, instead of a durable redb commit, which
//! writes every dirty B-tree page and costs far more CPU per group
//! (BENCHMARKS.md, "A log record against a durable commit per group").
//!
//! Protocol (see the writer in `writer.rs` and a group's sync in `commit.rs`):
//! - Each group's redb transaction records, besides its changes, `wal_seq = n`
//!   in META, and commits non-durably. Readers do not see that commit yet: they
//!   read published snapshots only. The writer appends the group's physical
//!   changes as record `n`, syncs, and only then publishes the snapshot and
//!   answers the writers.
//! - Now and then a group commits durably instead (a checkpoint): it needs no
//!   record, and the records after it go to the start of the log's other half.
//!   The log need not wait for the checkpoint to be on disk (its pages
//!   take tens of milliseconds; see `commit.rs` for when it does): a half's
//!   next round must, since until then the half holds the only durable copy of
//!   its records' writes. So at
//!   most the newest checkpoint is not on disk yet, and the records after the
//!   durable state lie in at most two runs: the rest of one half, then the
//!   start of the other.
//! - A checkpoint folded aside (`fold_aside.rs`) moves the log to its other
//!   half when it is set aside, before its commit: the half left holds the
//!   records it covers and is written over only once its commit is on disk,
//!   the same two runs after any durable state.
//! - On open, redb is back at its last durable commit, whose `wal_seq` is `s`;
//!   records `s+1, s+2, …`, while contiguous and intact, are replayed: from the
//!   start of the half that begins with `s+1`, and on at the start of the
//!   other half when that one begins with the next number. A record from an
//!   earlier round of a half has a smaller number, and a torn one fails its
//!   checksum, so either ends a run. Replay then
//!   commits `wal_seq` = the last number + [`SEQ_JUMP`] durably, and the new
//!   records count on from there: records left behind a torn one (written, never
//!   synced, never answered) have smaller numbers than every new record, so none
//!   can pass for a new one should the new records end right where it begins.
//!
//! Record framing, little-endian: `len u32 | crc32 u32 | seq u64 | payload`,
//! `len` counting the payload and the crc covering `len`, `seq` and the payload.
//! The payload is a run of [`Op`]s, each field `len u32 | bytes`; an
//! [`Op::InsertRepeat`] names bytes of an earlier op in the same payload
//! rather than carry them again.

use std::io;
use std::sync::Arc;

use super::disk::{Disk, DiskFile};
use super::log_op::Op;

const HEADER: usize = 16;
/// Bytes of log file, written with zeros up front: `fdatasync` of an overwrite
/// within the file's size need not update the inode, which keeps it cheap.
/// Each half holds the records between two checkpoints.
pub(in crate::embedded) const LOG_SIZE: u64 = 128 << 20;
pub(in crate::embedded) const FILE_NAME: &str = "tafel.wal";
/// How far record numbers move on at each open: further than a log can hold.
const SEQ_JUMP: u64 = 1 << 32;

pub(in crate::embedded) struct Wal {
    file: Arc<dyn DiskFile>,
    /// Where the next record goes.
    offset: u64,
    /// Where the half it goes to begins: a half filled to its last byte leaves
    /// `offset` at the other's start, which is no sign of being there.
    start: u64,
    size: u64,
    /// The redb sync that covers every record in the other half (0: none is
    /// needed; [`UNCOVERED`]: a fold set aside will): the other half is not
    /// written over before it is on disk.
    other_covered_by: u64,
    /// Number of the last record found on open (or of the one the durable state
    /// includes): the writer numbers the records after it.
    pub(in crate::embedded) last_seq: u64,
}

/// A record being built: room for its header, then the ops appended to it, so
/// the writer's log is written out without copying it into another buffer.
pub(in crate::embedded) struct LogBuf {
    bytes: Vec<u8>,
    /// Where the last insert's value lies in the payload.
    last_value: Option<Logged>,
    /// Bytes the record's [`Op::InsertRepeat`]s did not log again.
    repeated: u64,
}

/// Fewer bytes than this are logged again rather than repeated: a repeat's
/// own fields take 16.
const REPEAT_MIN: usize = 64;

/// Where a logged value lies in its record's payload: what a later insert of
/// the same record that repeats it logs in its place ([`LogBuf::push_repeat`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::embedded) struct Logged {
    pub(in crate::embedded) from: u32,
    pub(in crate::embedded) len: u32,
}

impl LogBuf {
    pub(in crate::embedded) fn new() -> Self {
        LogBuf::over(vec![0; HEADER])
    }

    /// A record built in `bytes`, which hold its header's room.
    fn over(bytes: Vec<u8>) -> Self {
        LogBuf {
            bytes,
            last_value: None,
            repeated: 0,
        }
    }

    pub(in crate::embedded) fn payload_len(&self) -> usize {
        self.bytes.len() - HEADER
    }

    /// Bytes the record takes in the log, header included.
    pub(in crate::embedded) fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// Bytes the record would take had it logged every value in full: what a
    /// checkpoint counts, since that is what it writes to redb's pages.
    pub(in crate::embedded) fn written_len(&self) -> u64 {
        self.len() + self.repeated
    }

    pub(in crate::embedded) fn push(&mut self, op: &Op<'_>) {
        op.encode(&mut self.bytes);
        if let Op::Insert { value, .. } = op {
            // The value was encoded last. Past 4 GiB (more than a log holds)
            // nothing is offered for repeating.
            let from = self.bytes.len() - value.len() - HEADER;
            self.last_value = u32::try_from(from)
                .ok()
                .zip(u32::try_from(value.len()).ok())
                .map(|(from, len)| Logged { from, len });
        }
    }

    /// Where the last insert pushed logged its value.
    pub(in crate::embedded) fn last_value(&self) -> Option<Logged> {
        self.last_value
    }

    /// Logs the insert of `value` under `key`, whose bytes from `at` repeat
    /// those `logged` earlier in this record, as an [`Op::InsertRepeat`]: the
    /// change feed's row of an entity write holds the entity's value again
    /// (its after-image), and the log then carries that value once. A plain
    /// insert is logged if the bytes are not there after all.
    pub(in crate::embedded) fn push_repeat(&mut self, table: u8, key: &[u8], value: &[u8], at: usize, logged: Logged) {
        let (from, len) = (logged.from as usize, logged.len as usize);
        if len < REPEAT_MIN {
            return self.push(&Op::Insert { table, key, value });
        }
        let earlier = self
            .bytes
            .get(HEADER..)
            .and_then(|p| p.get(from..from.checked_add(len)?));
        let repeated = value.get(at..at.saturating_add(len));
        match (earlier, repeated) {
            (Some(earlier), Some(repeated)) if earlier == repeated => {
                Op::InsertRepeat {
                    table,
                    key,
                    head: &value[..at],
                    from: logged.from,
                    len: logged.len,
                    tail: &value[at + len..],
                }
                .encode(&mut self.bytes);
                self.repeated += len as u64;
                self.last_value = None;
            }
            _ => self.push(&Op::Insert { table, key, value }),
        }
    }

    #[cfg(test)]
    pub(in crate::embedded) fn payload(&self) -> &[u8] {
        &self.bytes[HEADER..]
    }

    #[cfg(test)]
    fn with_payload(payload: &[u8]) -> Self {
        let mut b = LogBuf::new();
        b.bytes.extend_from_slice(payload);
        b
    }
}

/// Emptied record buffers, kept for the writer's next records: a group's
/// record (megabytes under batch writes) is then built in memory that is
/// already mapped, not in fresh pages the kernel must fault in and zero.
#[derive(Default)]
pub(in crate::embedded) struct Spare(std::sync::Mutex<Vec<Vec<u8>>>);

/// Buffers [`Spare`] keeps, and the largest it keeps.
const SPARE_BUFS: usize = 4;
const SPARE_MAX: usize = 16 << 20;

impl Spare {
    /// An empty record, in a spare buffer if there is one.
    pub(in crate::embedded) fn take(&self) -> LogBuf {
        let buf = self.0.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match buf {
            Some(mut b) => {
                b.clear();
                b.resize(HEADER, 0);
                LogBuf::over(b)
            }
            None => LogBuf::new(),
        }
    }

    /// Keeps `record`'s buffer for a later [`Spare::take`].
    pub(in crate::embedded) fn give(&self, record: LogBuf) {
        if record.bytes.capacity() <= SPARE_MAX {
            let mut bufs = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if bufs.len() < SPARE_BUFS {
                bufs.push(record.bytes);
            }
        }
    }
}

/// What the log holds past the durable state.
pub(in crate::embedded) struct Found {
    /// The records to replay.
    pub(in crate::embedded) records: Vec<Record>,
    /// A record that failed its checksum while the next is intact (see
    /// `read_records`): replay stopped before it.
    pub(in crate::embedded) damaged: Option<u64>,
    /// A half that begins with a record newer than the last replayed one but
    /// one: records after a checkpoint that the store file does not hold, so
    /// it went back to an older state (see [`newer_half`]).
    pub(in crate::embedded) newer: Option<u64>,
}

/// A record read back: its number and its payload.
pub(in crate::embedded) struct Record {
    pub(in crate::embedded) seq: u64,
    pub(in crate::embedded) payload: Vec<u8>,
}

impl Wal {
    /// Opens or creates the log (of `log_size` bytes if new) on `disk` and
    /// returns the intact records numbered `applied + 1, applied + 2, …` for
    /// replay. The caller makes `last_seq` (past them by [`SEQ_JUMP`]) the
    /// durable state's `wal_seq` along with them, before writing any record.
    pub(in crate::embedded) fn open(disk: &dyn Disk, applied: u64, log_size: u64) -> io::Result<(Wal, Found)> {
        let file = disk.open(FILE_NAME)?;
        let mut size = file.len()?;
        if size < log_size {
            write_zeros(&*file, size, log_size)?;
            file.sync_data()?;
            disk.sync_dir()?;
            size = log_size;
        }
        let (records, damaged) = read_records(&*file, size, applied)?;
        let end = records.last().map_or(applied, |r| r.seq);
        let newer = newer_half(&*file, size, end)?;
        let wal = Wal {
            file,
            offset: 0,
            start: 0,
            size,
            other_covered_by: 0,
            last_seq: end + SEQ_JUMP,
        };
        Ok((
            wal,
            Found {
                records,
                damaged,
                newer,
            },
        ))
    }

    /// Bytes a half holds: the records written since a checkpoint must fit.
    pub(in crate::embedded) fn half(&self) -> u64 {
        self.size / 2
    }

    /// Writes `record` as number `seq` after the records written since the last
    /// checkpoint. Not durable until [`Wal::sync`]; the writer checked that it fits.
    pub(in crate::embedded) fn write(&mut self, record: &mut LogBuf, seq: u64) -> io::Result<()> {
        let buf = &mut record.bytes;
        let len = (buf.len() - HEADER) as u32;
        buf[0..4].copy_from_slice(&len.to_le_bytes());
        buf[8..16].copy_from_slice(&seq.to_le_bytes());
        let crc = checksum(buf);
        buf[4..8].copy_from_slice(&crc.to_le_bytes());
        self.file.pwrite(buf, self.offset)?;
        self.offset += buf.len() as u64;
        Ok(())
    }

    /// Makes every record written so far durable.
    pub(in crate::embedded) fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// At a checkpoint, whose redb sync is number `sync` and covers every record
    /// written so far: the next record goes to the start of the other half.
    /// Returns the sync that must be on disk before that record is written:
    /// this one's if no commit covers the other half yet (a fold set aside that
    /// this checkpoint overtook, [`Wal::leave_half`]).
    pub(in crate::embedded) fn next_half(&mut self, sync: u64) -> u64 {
        self.turn();
        match std::mem::replace(&mut self.other_covered_by, sync) {
            UNCOVERED => sync,
            covered => covered,
        }
    }

    /// When a fold is set aside to cover every record written so far: the next
    /// record goes to the start of the other half, now, and the half left is
    /// covered once the fold commits ([`Wal::covered`]). Returns the sync that
    /// must be on disk before that record is written; fails if the half it
    /// goes to is not covered yet (the writer sets nothing aside until then).
    pub(in crate::embedded) fn leave_half(&mut self) -> io::Result<u64> {
        if self.other_covered_by == UNCOVERED {
            return Err(io::Error::other(
                "the log's other half is not covered by a checkpoint yet",
            ));
        }
        self.turn();
        Ok(std::mem::replace(&mut self.other_covered_by, UNCOVERED))
    }

    /// The fold set aside when the log last left a half is committed as redb's
    /// sync `sync`, which covers that half's records. A checkpoint since then
    /// ([`Wal::next_half`]) already covered them.
    pub(in crate::embedded) fn covered(&mut self, sync: u64) {
        if self.other_covered_by == UNCOVERED {
            self.other_covered_by = sync;
        }
    }

    /// Moves on to the start of the other half.
    fn turn(&mut self) {
        self.start = if self.start == 0 { self.half() } else { 0 };
        self.offset = self.start;
    }
}

/// `Wal::other_covered_by` between a fold set aside and its commit.
const UNCOVERED: u64 = u64::MAX;

/// Whether no record was ever written to the log on `disk` (both halves start
/// with zeros, as the log is made).
pub(in crate::embedded) fn never_written(disk: &dyn Disk) -> io::Result<bool> {
    let file = disk.open(FILE_NAME)?;
    let size = file.len()?;
    for at in [0, size / 2] {
        let mut header = [0u8; HEADER];
        if at + HEADER as u64 <= size {
            file.pread(&mut header, at)?;
        }
        if header.iter().any(|&b| b != 0) {
            return Ok(false);
        }
    }
    Ok(true)
}

fn checksum(record: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&record[..4]);
    h.update(&record[8..]);
    h.finalize()
}

fn write_zeros(file: &dyn DiskFile, from: u64, to: u64) -> io::Result<()> {
    let chunk = vec![0u8; 1 << 20];
    let mut at = from;
    while at < to {
        let n = chunk.len().min((to - at) as usize);
        file.pwrite(&chunk[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

/// The intact records numbered from `applied + 1` on, in at most two runs (see
/// the module comment): when a run ends, the chain goes on at the start of the
/// other half if the record there is the next one.
///
/// Also returns the number of a record that failed its checksum while the
/// next record after it is intact: bit rot, not a record torn by a power loss
/// — unless the power went while both were on their way to the disk. Replay
/// stops there either way: a later record may depend on it.
fn read_records(file: &dyn DiskFile, size: u64, applied: u64) -> io::Result<(Vec<Record>, Option<u64>)> {
    let half = size / 2;
    let mut records = Vec::new();
    let mut offset = 0u64;
    // The first run may start at either half; then one more run at most.
    let mut jumps = 2;
    loop {
        let seq = applied + 1 + records.len() as u64;
        match read_record(file, size, offset, seq)? {
            Some(r) => {
                offset += (HEADER + r.payload.len()) as u64;
                records.push(r);
            }
            None if followed_by(file, size, offset, seq + 1)? => return Ok((records, Some(seq))),
            None if jumps > 0 => {
                jumps -= 1;
                offset = if offset < half { half } else { 0 };
            }
            None => break,
        }
    }
    Ok((records, None))
}

/// The number of an intact record beginning a half, if it is past `end + 1`.
/// A half begins with the first record after a checkpoint. When the store
/// file's state is older than a checkpoint whose half has begun, the records
/// between are replayed up to it, and on into that half; if none is there, the
/// file went back past a checkpoint whose records it no longer has: redb
/// fell back to an older commit because the newer one's pages were damaged.
fn newer_half(file: &dyn DiskFile, size: u64, end: u64) -> io::Result<Option<u64>> {
    for at in [0, size / 2] {
        let mut header = [0u8; HEADER];
        if at + HEADER as u64 > size {
            continue;
        }
        file.pread(&mut header, at)?;
        let seq = u64::from_le_bytes(header[8..16].try_into().unwrap_or_default());
        if seq > end + 1 && read_record(file, size, at, seq)?.is_some() {
            return Ok(Some(seq));
        }
    }
    Ok(None)
}

/// Whether, after the (damaged) record at `offset`, as long as its header
/// says, comes the intact record `next`.
fn followed_by(file: &dyn DiskFile, size: u64, offset: u64, next: u64) -> io::Result<bool> {
    let mut len = [0u8; 4];
    if offset + HEADER as u64 > size {
        return Ok(false);
    }
    file.pread(&mut len, offset)?;
    let after = offset + HEADER as u64 + u32::from_le_bytes(len) as u64;
    Ok(read_record(file, size, after, next)?.is_some())
}

/// The record at `offset` if it is intact and numbered `seq`.
fn read_record(file: &dyn DiskFile, size: u64, offset: u64, seq: u64) -> io::Result<Option<Record>> {
    let mut header = [0u8; HEADER];
    if offset + HEADER as u64 > size {
        return Ok(None);
    }
    file.pread(&mut header, offset)?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as u64;
    let found = u64::from_le_bytes(header[8..16].try_into().unwrap_or_default());
    if found != seq || offset + HEADER as u64 + len > size {
        return Ok(None);
    }
    let mut buf = vec![0u8; HEADER + len as usize];
    file.pread(&mut buf, offset)?;
    if checksum(&buf) != u32::from_le_bytes([header[4], header[5], header[6], header[7]]) {
        return Ok(None);
    }
    buf.drain(..HEADER);
    Ok(Some(Record { seq, payload: buf }))
}

#[cfg(test)]
#[path = "wal_tests.rs"]
mod tests;
