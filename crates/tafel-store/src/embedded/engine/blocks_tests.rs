//! Entity blocks against a plain ordered map: every write, removal and range
//! removal, in groups of every size, then every read (point, ranges with each
//! kind of bound) and the blocks' own shape.

use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};

use redb::backends::InMemoryBackend;
use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata};

use super::super::rows_ahead::LOOKAHEAD;
use super::super::schema::{ENTITIES, ROW_ENTITIES};
use super::{self as blocks, BLOCK_BYTES};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn db() -> Database {
    Database::builder()
        .create_with_backend(InMemoryBackend::new())
        .expect("db")
}

/// A row key of table `table`: its 8-byte id, then the entity key.
fn key(table: u64, i: u64) -> Vec<u8> {
    let mut k = table.to_be_bytes().to_vec();
    k.extend_from_slice(format!("p{:03}\0r{:06}", i % 7, i).as_bytes());
    k
}

/// A value of 200–2,400 bytes that names its key and version.
fn value(i: u64, version: u64) -> Vec<u8> {
    let len = 200 + (i * 7919 + version * 31) % 2200;
    let mut v = format!("{i}/{version}/").into_bytes();
    v.resize(len as usize, b'a' + (i % 26) as u8);
    v
}

/// A range's rows taken as a scan's ring takes them (`rows_ahead.rs`): handed
/// out `LOOKAHEAD` ahead without a count on their block, each read as it leaves.
fn as_a_ring_reads<T>(table: &T, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Vec<(Vec<u8>, Vec<u8>)>
where
    T: ReadableTable<&'static [u8], &'static [u8]>,
{
    let mut range = blocks::range(table, lo, hi).expect("range");
    let mut ahead = std::collections::VecDeque::new();
    let mut rows = Vec::new();
    loop {
        while ahead.len() < LOOKAHEAD {
            match range.next_at() {
                Some(row) => ahead.push_back(row.expect("row")),
                None => break,
            }
        }
        let Some(front) = ahead.pop_front() else {
            return rows;
        };
        let (k, v) = range.row(&front).expect("a row ahead whose block was let go");
        rows.push((k.to_vec(), v.to_vec()));
    }
}

/// xorshift: the tests' own numbers, the same every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Every read of the blocks matches the model, and every block is whole: one
/// table's rows, in order, under its first key, none over the size unless alone.
fn check(db: &Database, model: &Model, rng: &mut Rng) {
    let txn = db.begin_read().expect("read");
    let table = txn.open_table(ENTITIES).expect("table");
    let mut all = Vec::new();
    for block in table.iter().expect("iter") {
        let (first, block) = block.expect("block");
        let rows: Vec<(Vec<u8>, Vec<u8>)> = blocks::rows(block.value())
            .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).expect("row"))
            .collect();
        assert!(!rows.is_empty(), "an empty block");
        assert_eq!(rows[0].0, first.value(), "a block not under its first key");
        assert!(rows.windows(2).all(|w| w[0].0 < w[1].0), "rows out of order");
        assert!(
            rows.iter().all(|(k, _)| k[..8] == rows[0].0[..8]),
            "a block over two tables"
        );
        assert!(
            rows.len() == 1 || block.value().len() <= BLOCK_BYTES,
            "an overfull block"
        );
        all.extend(rows);
    }
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(all, expected);
    let read = |lo: Bound<&[u8]>, hi: Bound<&[u8]>| -> Vec<(Vec<u8>, Vec<u8>)> {
        let rows: Vec<(Vec<u8>, Vec<u8>)> = blocks::range(&table, lo, hi)
            .expect("range")
            .map(|r| r.map(|row| (row.key().to_vec(), row.value().to_vec())).expect("row"))
            .collect();
        assert_eq!(as_a_ring_reads(&table, lo, hi), rows, "the ring's way differs");
        rows
    };
    for _ in 0..40 {
        let (t, a, b) = (rng.below(3), rng.below(400), rng.below(400));
        let (lo, hi) = (key(t, a.min(b)), key(t + rng.below(2), a.max(b)));
        let bound = |k: &[u8], kind: u64| match kind {
            0 => Bound::Included(k.to_vec()),
            1 => Bound::Excluded(k.to_vec()),
            _ => Bound::Unbounded,
        };
        let (lo, hi) = (bound(&lo, rng.below(3)), bound(&hi, rng.below(3)));
        let got = read(lo.as_ref().map(Vec::as_slice), hi.as_ref().map(Vec::as_slice));
        // Bounds may cross (BTreeMap's range would panic): nothing is in them.
        let inside = |k: &Vec<u8>| RangeBounds::<Vec<u8>>::contains(&(lo.clone(), hi.clone()), k);
        let want: Vec<_> = model
            .iter()
            .filter(|(k, _)| inside(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(got, want, "range {lo:?}..{hi:?}");
        let probe = key(rng.below(3), rng.below(400));
        let found = blocks::get(&table, &probe)
            .expect("get")
            .map(|(g, s, e)| g.value()[s..e].to_vec());
        assert_eq!(found.as_ref(), model.get(&probe), "get {probe:?}");
    }
}

#[test]
fn entity_blocks_read_back_what_any_mix_of_writes_left() {
    let db = db();
    let mut model = Model::new();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..120u64 {
        let txn = db.begin_write().expect("write");
        {
            let mut table = txn.open_table(ENTITIES).expect("table");
            match rng.below(10) {
                // A range removal: part of a table, or all of one.
                0 => {
                    let t = rng.below(3);
                    let (a, b) = (rng.below(400), rng.below(400));
                    let (lo, hi) = if rng.below(3) == 0 {
                        (t.to_be_bytes().to_vec(), (t + 1).to_be_bytes().to_vec())
                    } else {
                        (key(t, a.min(b)), key(t, a.max(b)))
                    };
                    blocks::remove_range(&mut table, &lo, &hi).expect("remove range");
                    model.retain(|k, _| *k < lo || *k >= hi);
                }
                // A group of changes, sorted: one to a few hundred, over three
                // tables, appended in key order or scattered.
                _ => {
                    let n = [1, 2, 5, 40, 300][rng.below(5) as usize];
                    let appended = rng.below(2) == 0;
                    let mut changes: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
                    for j in 0..n {
                        let t = rng.below(3);
                        let i = if appended { 400 - n + j } else { rng.below(400) };
                        let v = (rng.below(5) != 0).then(|| value(i, round));
                        changes.insert(key(t, i), v);
                    }
                    let list: Vec<(&[u8], Option<&[u8]>)> =
                        changes.iter().map(|(k, v)| (k.as_slice(), v.as_deref())).collect();
                    blocks::write(&mut table, &list).expect("write");
                    for (k, v) in changes {
                        match v {
                            Some(v) => model.insert(k, v),
                            None => model.remove(&k),
                        };
                    }
                }
            }
        }
        txn.commit().expect("commit");
        check(&db, &model, &mut rng);
    }
    assert!(
        model.len() > 300,
        "the test wrote too little to split blocks: {}",
        model.len()
    );
}

/// Rows appended in key order fill their blocks: a table loaded so takes no
/// more blocks than its bytes need, plus one.
#[test]
fn rows_appended_in_order_fill_their_blocks() {
    let db = db();
    let mut bytes = 0;
    for i in 0..2_000u64 {
        let txn = db.begin_write().expect("write");
        {
            let mut table = txn.open_table(ENTITIES).expect("table");
            let mut k = 1u64.to_be_bytes().to_vec();
            k.extend_from_slice(format!("p\0r{i:06}").as_bytes());
            let v = value(i, 0);
            bytes += k.len() + v.len() + 8;
            blocks::write(&mut table, &[(k.as_slice(), Some(v.as_slice()))]).expect("write");
        }
        txn.commit().expect("commit");
    }
    let txn = db.begin_read().expect("read");
    let n = txn.open_table(ENTITIES).expect("table").len().expect("len") as usize;
    // Each block is full to within one row of BLOCK_BYTES (rows are ≤ 2.4 KiB).
    assert!(n <= bytes / (BLOCK_BYTES - 2_500) + 1, "{n} blocks for {bytes} bytes");
}

/// A store from before blocks has its rows moved into them, in order, and its
/// old table dropped.
#[test]
fn a_store_of_rows_is_moved_into_blocks() {
    let db = db();
    let mut model = Model::new();
    let txn = db.begin_write().expect("write");
    {
        let mut old = txn.open_table(ROW_ENTITIES).expect("old table");
        for t in 0..3u64 {
            for i in 0..150u64 {
                let (k, v) = (key(t, i), value(i, t));
                old.insert(k.as_slice(), v.as_slice()).expect("insert");
                model.insert(k, v);
            }
        }
    }
    txn.commit().expect("commit");
    let txn = db.begin_write().expect("write");
    assert_eq!(
        blocks::convert(&txn, ROW_ENTITIES, ENTITIES).expect("convert"),
        Some(450)
    );
    txn.commit().expect("commit");
    check(&db, &model, &mut Rng(7));
    let txn = db.begin_write().expect("write");
    assert_eq!(blocks::convert(&txn, ROW_ENTITIES, ENTITIES).expect("again"), None);
    let old: Vec<_> = txn
        .list_tables()
        .expect("tables")
        .map(|t| redb::TableHandle::name(&t).to_owned())
        .collect();
    assert!(!old.iter().any(|t| t == "entities"), "the old table is left: {old:?}");
}

/// Rows of a block each (larger than half a block) are the most blocks a scan's
/// ring spans: each of its rows ahead still reads from its own block.
#[test]
fn a_ring_of_rows_a_block_each_reads_every_row() {
    let db = db();
    let txn = db.begin_write().expect("txn");
    let mut model = Model::new();
    {
        let mut table = txn.open_table(ENTITIES).expect("table");
        for i in 0..40 {
            let mut v = value(i, 0);
            v.resize(BLOCK_BYTES / 2 + 100 + i as usize, b'x');
            model.insert(key(1, i), v);
        }
        let changes: Vec<(&[u8], Option<&[u8]>)> = model.iter().map(|(k, v)| (&k[..], Some(&v[..]))).collect();
        blocks::write(&mut table, &changes).expect("write");
        assert_eq!(table.len().expect("len"), 40, "a row a block");
    }
    txn.commit().expect("commit");
    let read = db.begin_read().expect("read");
    let table = read.open_table(ENTITIES).expect("table");
    let from = key(1, 3);
    let after: Vec<(Vec<u8>, Vec<u8>)> = model
        .range(from.clone()..)
        .skip(1)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let all: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
    // Compared without printing: the rows are ~16 KiB each.
    assert!(
        as_a_ring_reads(&table, Bound::Unbounded, Bound::Unbounded) == all,
        "the whole range"
    );
    assert!(
        as_a_ring_reads(&table, Bound::Excluded(&from[..]), Bound::Unbounded) == after,
        "the range after a key"
    );
}
