//! The log's tests: records encoded, replayed from the right half, a torn record ending the replay.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::*;
use crate::embedded::disk::OsDisk;
use crate::embedded::engine::log_op::{decode_ops, Decoded};

#[test]
fn a_spare_buffer_comes_back_empty() {
    let spare = Spare::default();
    let mut used = spare.take();
    used.bytes.extend_from_slice(&[7; 5000]);
    let capacity = used.bytes.capacity();
    spare.give(used);
    let again = spare.take();
    assert_eq!(again.payload_len(), 0, "a reused buffer must not carry the last record");
    assert_eq!(again.bytes.capacity(), capacity, "the buffer was reused");
    let mut huge = LogBuf::new();
    huge.bytes.reserve(SPARE_MAX + 1);
    spare.give(huge);
    assert!(
        spare.0.lock().expect("lock").is_empty(),
        "an oversized buffer is not kept"
    );
}

fn dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "tafel-wal-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn open(d: &Path, applied: u64) -> io::Result<(Wal, Vec<Record>)> {
    Wal::open(&OsDisk::new(d)?, applied, LOG_SIZE).map(|(wal, found)| (wal, found.records))
}

/// A new log in `d`, numbered as if the durable state's `wal_seq` were 0.
fn fresh(d: &Path) -> Wal {
    let (mut wal, recs) = open(d, 0).expect("open");
    assert!(recs.is_empty());
    wal.last_seq = 0;
    wal
}

/// Spoils one byte of the log, as a torn write would.
fn tear(d: &Path, offset: usize) {
    let f = OpenOptions::new()
        .write(true)
        .open(d.join(FILE_NAME))
        .expect("open file");
    f.write_all_at(&[0xAA], offset as u64).expect("write");
}

/// Writes and syncs `payload` as the record after the last.
fn append(wal: &mut Wal, payload: &[u8]) -> u64 {
    let seq = wal.last_seq + 1;
    wal.write(&mut LogBuf::with_payload(payload), seq).expect("write");
    wal.sync().expect("sync");
    wal.last_seq = seq;
    seq
}

fn payload(ops: &[Op<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for op in ops {
        op.encode(&mut out);
    }
    out
}

#[test]
fn ops_round_trip() {
    let ops = [
        Op::Insert {
            table: 2,
            key: b"k",
            value: b"",
        },
        Op::Remove {
            table: 0,
            key: b"\x00\xff",
        },
        Op::RemoveRange {
            table: 2,
            lo: b"a",
            hi: b"b",
        },
    ];
    let p = payload(&ops);
    let decoded = decode_ops(&p).expect("decodes");
    assert_eq!(decoded.iter().map(Decoded::op).collect::<Vec<_>>(), ops);
    for cut in 0..p.len() {
        // A truncated payload is refused or decodes to fewer ops, never panics.
        if let Some(d) = decode_ops(&p[..cut]) {
            assert!(d.len() < ops.len());
        }
    }
}

#[test]
fn a_repeat_is_logged_once_and_decodes_to_the_insert_it_stands_for() {
    let entity: Vec<u8> = (0..200u8).collect();
    let mut record = LogBuf::new();
    record.push(&Op::Insert {
        table: 2,
        key: b"e",
        value: &entity,
    });
    let logged = record.last_value().expect("an insert's value");
    let before = record.len();
    // The change row: a head, the entity's first 196 bytes, a tail.
    let change = [&b"head"[..], &entity[..196], b"tl"].concat();
    let repeat = Logged { len: 196, ..logged };
    record.push_repeat(4, b"c", &change, 4, repeat);
    assert!(record.len() - before < 64, "the value is not logged again");
    assert_eq!(record.written_len() - record.len(), 196);
    // Bytes that differ from what was logged there are logged in full.
    let other = [&b"head"[..], &[7; 196], b"tl"].concat();
    record.push_repeat(4, b"d", &other, 4, repeat);
    let decoded = decode_ops(record.payload()).expect("decodes");
    let ops: Vec<Op<'_>> = decoded.iter().map(Decoded::op).collect();
    assert_eq!(
        ops[1..],
        [
            Op::Insert {
                table: 4,
                key: b"c",
                value: &change,
            },
            Op::Insert {
                table: 4,
                key: b"d",
                value: &other,
            },
        ]
    );
}

#[test]
fn a_repeat_of_bytes_not_before_it_is_refused() {
    let mut p = payload(&[Op::Insert {
        table: 2,
        key: b"e",
        value: &[1; 100],
    }]);
    let start = p.len() as u32;
    for (from, len) in [(start - 4, 8), (start, 1), (u32::MAX, 2)] {
        let mut bad = p.clone();
        Op::InsertRepeat {
            table: 4,
            key: b"c",
            head: b"",
            from,
            len,
            tail: b"",
        }
        .encode(&mut bad);
        assert_eq!(decode_ops(&bad), None, "from {from} len {len}");
    }
    Op::InsertRepeat {
        table: 4,
        key: b"c",
        head: b"h",
        from: start - 100,
        len: 100,
        tail: b"t",
    }
    .encode(&mut p);
    let decoded = decode_ops(&p).expect("decodes");
    assert_eq!(
        decoded[1].op(),
        Op::Insert {
            table: 4,
            key: b"c",
            value: &[&b"h"[..], &[1; 100], b"t"].concat(),
        }
    );
    for cut in 0..p.len() {
        if let Some(d) = decode_ops(&p[..cut]) {
            assert!(d.len() < 2);
        }
    }
}

#[test]
fn replays_the_records_after_the_applied_one() {
    let d = dir();
    let mut wal = fresh(&d);
    for i in 1..=3u8 {
        assert_eq!(append(&mut wal, &[i; 10]), u64::from(i));
    }
    drop(wal);
    let (_, recs) = open(&d, 0).expect("reopen");
    assert_eq!(recs.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(recs[2].payload, [3; 10]);
    // All three already in the durable state: nothing to replay.
    let (wal, recs) = open(&d, 3).expect("reopen");
    assert!(recs.is_empty());
    assert_eq!(wal.last_seq, 3 + SEQ_JUMP);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn after_a_checkpoint_old_records_are_not_replayed() {
    let d = dir();
    let mut wal = fresh(&d);
    for _ in 0..3 {
        append(&mut wal, &[9; 100]);
    }
    // Checkpoint 1 covers 1..=3: record 4 goes to the second half.
    assert_eq!(wal.next_half(1), 0, "the second half was never written");
    assert_eq!(append(&mut wal, &[4; 1]), 4);
    assert_eq!(wal.offset, wal.half() + (HEADER + 1) as u64);
    drop(wal);
    let (wal, recs) = open(&d, 3).expect("reopen");
    assert_eq!(recs.iter().map(|r| r.seq).collect::<Vec<_>>(), [4]);
    assert_eq!(wal.last_seq, 4 + SEQ_JUMP);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn replay_goes_on_from_one_half_into_the_other() {
    let d = dir();
    let mut wal = fresh(&d);
    for i in 1..=3u8 {
        append(&mut wal, &[i; 100]);
    }
    assert_eq!(wal.next_half(1), 0);
    append(&mut wal, &[4; 100]);
    append(&mut wal, &[5; 100]);
    // Back to the first half, once checkpoint 1 (covering 1..=3) is on disk;
    // record 6 lands over record 1.
    assert_eq!(wal.next_half(2), 1, "the first half waits for checkpoint 1");
    append(&mut wal, &[6; 10]);
    drop(wal);
    let seqs = |applied| {
        let (_, recs) = open(&d, applied).expect("reopen");
        recs.iter().map(|r| r.seq).collect::<Vec<_>>()
    };
    // Checkpoint 2 not on disk: the second half, then the first again.
    assert_eq!(seqs(3), [4, 5, 6]);
    // Checkpoint 2 on disk: the first half alone.
    assert_eq!(seqs(5), [6]);
    // A state the log no longer continues finds nothing to replay.
    assert_eq!(seqs(1), Vec::<u64>::new());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_half_left_for_a_fold_waits_for_the_folds_commit_or_a_checkpoint_after_it() {
    let d = dir();
    let mut wal = fresh(&d);
    append(&mut wal, &[1; 100]);
    // A fold set aside: on into the second half, which never held a record.
    assert_eq!(wal.leave_half().expect("leave"), 0);
    append(&mut wal, &[2; 100]);
    // Back into the first before the fold covers it: refused.
    assert!(wal.leave_half().is_err());
    wal.covered(7);
    assert_eq!(wal.leave_half().expect("leave"), 7, "the first half waits for the fold");
    append(&mut wal, &[3; 10]);
    // A checkpoint overtaking the second fold covers the half itself.
    assert_eq!(wal.next_half(9), 9);
    wal.covered(8);
    assert_eq!(wal.next_half(10), 9, "a late fold's commit changes nothing");
    drop(wal);
    // The first fold's commit (covering 1) on disk, the second's not: the
    // second half, then the first again, where record 3 went over record 1.
    let (_, recs) = open(&d, 1).expect("reopen");
    assert_eq!(recs.iter().map(|r| r.seq).collect::<Vec<_>>(), [2, 3]);
    let (_, recs) = open(&d, 2).expect("reopen");
    assert_eq!(recs.iter().map(|r| r.seq).collect::<Vec<_>>(), [3]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_torn_record_ends_the_replay() {
    let d = dir();
    let mut wal = fresh(&d);
    append(&mut wal, &[1; 50]);
    append(&mut wal, &[2; 50]);
    drop(wal);
    // Corrupt one payload byte of record 2.
    tear(&d, HEADER + 50 + HEADER + 7);
    let (wal, recs) = open(&d, 0).expect("reopen");
    assert_eq!(recs.iter().map(|r| r.seq).collect::<Vec<_>>(), [1]);
    assert_eq!(wal.last_seq, 1 + SEQ_JUMP);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_record_left_behind_a_torn_one_is_not_replayed_after_the_next_crash() {
    let d = dir();
    let mut wal = fresh(&d);
    append(&mut wal, &[1; 40]);
    append(&mut wal, &[2; 40]);
    append(&mut wal, &[3; 40]);
    drop(wal);
    // A crash tore record 2 and left record 3 whole behind it (never synced,
    // so never answered).
    tear(&d, HEADER + 40 + HEADER + 7);
    let (mut wal, recs) = open(&d, 0).expect("reopen");
    assert_eq!(recs.iter().map(|r| r.seq).collect::<Vec<_>>(), [1]);
    // The store makes record 1 and the new numbering durable; then one new
    // record, from the start of the file, that ends exactly where the old
    // record 3 begins.
    let applied = wal.last_seq;
    append(&mut wal, &[4; 40 + HEADER + 40]);
    drop(wal);
    let (_, recs) = open(&d, applied).expect("reopen after a second crash");
    assert_eq!(
        recs.iter().map(|r| r.seq).collect::<Vec<_>>(),
        [applied + 1],
        "the old record 3 came back"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_half_filled_to_its_last_byte_turns_to_the_other_half() {
    let disk = crate::embedded::engine::sim_disk::SimDisk::default();
    let (mut wal, _) = Wal::open(&disk, 0, 64 << 10).expect("open");
    wal.last_seq = 0;
    let mut record = LogBuf::with_payload(&vec![1; (wal.half() as usize) - HEADER]);
    wal.write(&mut record, 1).expect("write");
    assert_eq!(wal.offset, wal.half());
    // The checkpoint covering record 1 is not on disk yet: record 2 must not
    // go over it, at the start of the half it fills.
    wal.next_half(1);
    assert_eq!(wal.offset, wal.half(), "the log went back to the half it filled");
    let mut next = LogBuf::with_payload(&[2; 10]);
    wal.write(&mut next, 2).expect("write");
    drop(wal);
    let (_, found) = Wal::open(&disk, 0, 64 << 10).expect("reopen");
    assert_eq!(found.records.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2]);
}
