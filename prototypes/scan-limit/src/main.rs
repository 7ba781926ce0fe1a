//! What redb's own range gives a scan of issue #58's strings shape (~1 KiB rows,
//! a 1% filter on a string near each row's start), with nothing of Tafel's
//! around it: the rows in an in-memory redb (as `serve --in-memory`, with its
//! 256 MiB page cache), read through `Table::range` on one thread and on two.
//! It bounds what any scan through redb's public API can reach on a machine:
//! Tafel's scan reads its rows the same way (engine/rows_ahead.rs).
//!
//! The same rows are then packed into blocks (many rows to one redb value, in
//! key order, `BLOCK_SIZES`), the layout an engine that reads whole runs of rows
//! at a time would have, and scanned and point-read the same way: what one redb
//! page lookup per block instead of per leaf of three rows gives.
//!
//! Usage: scan-limit [entities] [value-bytes]
use std::time::Instant;

use redb::backends::InMemoryBackend;
use redb::{Database, ReadableDatabase, TableDefinition};

const T: TableDefinition<&[u8], &[u8]> = TableDefinition::new("entities");
const REPEATS: usize = 6;
/// Bytes of rows packed into one value, for the block layout.
const BLOCK_SIZES: [usize; 6] = [8 << 10, 16 << 10, (16 << 10) - 256, 32 << 10, (32 << 10) - 256, 64 << 10];
/// Point reads timed per layout.
const POINT_READS: usize = 200_000;

/// Entity `i`'s row: a table id, PartitionKey and RowKey as Tafel's keys hold
/// them, and a value whose `Category` (one of 100) sits 20 bytes in.
fn row(i: u64, value_bytes: usize) -> (Vec<u8>, Vec<u8>) {
    let mut key = 7u64.to_be_bytes().to_vec();
    key.extend_from_slice(format!("p{:04}\0r{:010}", i % 100, i).as_bytes());
    let mut value = vec![b' '; value_bytes.max(40)];
    value[20..27].copy_from_slice(format!("cat-{:03}", i * 31 % 100).as_bytes());
    for (j, b) in value.iter_mut().enumerate().skip(40) {
        *b = b'a' + ((i as usize * 13 + j * 7) % 26) as u8;
    }
    (key, value)
}

/// One full scan: (rows read, rows matching the filter).
fn scan(db: &Database) -> (u64, u64) {
    let tx = db.begin_read().expect("read");
    let table = tx.open_table(T).expect("table");
    let (mut rows, mut matched) = (0, 0);
    for entry in table.range::<&[u8]>(..).expect("range") {
        let (_key, value) = entry.expect("row");
        rows += 1;
        if value.value().get(20..27) == Some(b"cat-042".as_slice()) {
            matched += 1;
        }
    }
    (rows, matched)
}

/// Loads `order` into a new in-memory store, `group` rows a transaction.
fn load(order: &[u64], group: usize, value_bytes: usize) -> Database {
    let db = Database::builder()
        .set_cache_size(256 << 20)
        .create_with_backend(InMemoryBackend::new())
        .expect("create");
    for chunk in order.chunks(group) {
        let tx = db.begin_write().expect("write");
        {
            let mut table = tx.open_table(T).expect("table");
            for &i in chunk {
                let (k, v) = row(i, value_bytes);
                table.insert(k.as_slice(), v.as_slice()).expect("insert");
            }
        }
        tx.commit().expect("commit");
    }
    db
}

/// Runs `f` on `threads` threads `REPEATS` times each; rows per second.
fn timed(threads: usize, rows_per_run: u64, f: impl Fn() + Sync) -> f64 {
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..REPEATS {
                    f();
                }
            });
        }
    });
    (rows_per_run * (REPEATS * threads) as u64) as f64 / start.elapsed().as_secs_f64()
}

/// Keys of `POINT_READS` random entities among `n`.
fn random_keys(n: u64) -> Vec<Vec<u8>> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..POINT_READS)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            row(x % n, 40).0
        })
        .collect()
}

/// Point reads per second of the row-per-entry layout (`Table::get`).
fn point_rows(db: &Database, keys: &[Vec<u8>]) -> f64 {
    let tx = db.begin_read().expect("read");
    let table = tx.open_table(T).expect("table");
    let start = Instant::now();
    for k in keys {
        let v = table.get(k.as_slice()).expect("get").expect("present");
        assert!(v.value().len() > 20);
    }
    keys.len() as f64 / start.elapsed().as_secs_f64()
}

/// Packs `n` rows, in key order, into blocks of about `block` bytes: each block
/// stored under its first row's key, its rows as (key length u16, key, value
/// length u32, value).
fn load_blocks(n: u64, value_bytes: usize, block: usize) -> Database {
    let db = Database::builder()
        .set_cache_size(256 << 20)
        .create_with_backend(InMemoryBackend::new())
        .expect("create");
    let mut rows: Vec<_> = (0..n).map(|i| row(i, value_bytes)).collect();
    rows.sort();
    let tx = db.begin_write().expect("write");
    {
        let mut table = tx.open_table(T).expect("table");
        let mut first: Option<Vec<u8>> = None;
        let mut packed = Vec::with_capacity(block + 2048);
        for (k, v) in rows {
            if packed.len() + k.len() + v.len() + 6 > block && !packed.is_empty() {
                table.insert(first.take().expect("first").as_slice(), packed.as_slice()).expect("insert");
                packed.clear();
            }
            first.get_or_insert_with(|| k.clone());
            packed.extend_from_slice(&(k.len() as u16).to_le_bytes());
            packed.extend_from_slice(&k);
            packed.extend_from_slice(&(v.len() as u32).to_le_bytes());
            packed.extend_from_slice(&v);
        }
        if let Some(k) = first {
            table.insert(k.as_slice(), packed.as_slice()).expect("insert");
        }
    }
    tx.commit().expect("commit");
    db
}

/// The rows of a block, in order.
fn block_rows(mut b: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    std::iter::from_fn(move || {
        let kl = u16::from_le_bytes(b.get(..2)?.try_into().ok()?) as usize;
        let key = b.get(2..2 + kl)?;
        let at = 2 + kl;
        let vl = u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize;
        let value = b.get(at + 4..at + 4 + vl)?;
        b = &b[at + 4 + vl..];
        Some((key, value))
    })
}

/// One full scan of the block layout: (rows read, rows matching the filter).
fn scan_blocks(db: &Database) -> (u64, u64) {
    let tx = db.begin_read().expect("read");
    let table = tx.open_table(T).expect("table");
    let (mut rows, mut matched) = (0, 0);
    for entry in table.range::<&[u8]>(..).expect("range") {
        let (_first, block) = entry.expect("block");
        for (_key, value) in block_rows(block.value()) {
            rows += 1;
            if value.get(20..27) == Some(b"cat-042".as_slice()) {
                matched += 1;
            }
        }
    }
    (rows, matched)
}

/// Point reads per second of the block layout: the block at or before the key,
/// then its rows in order.
fn point_blocks(db: &Database, keys: &[Vec<u8>]) -> f64 {
    let tx = db.begin_read().expect("read");
    let table = tx.open_table(T).expect("table");
    let start = Instant::now();
    for k in keys {
        let (_first, block) = table.range::<&[u8]>(..=k.as_slice()).expect("range").next_back().expect("a block").expect("block");
        let found = block_rows(block.value()).find(|(rk, _)| *rk == k.as_slice()).map(|(_, v)| v.len());
        assert!(found.is_some_and(|l| l > 20));
    }
    keys.len() as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let value_bytes: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(977);
    let sorted: Vec<u64> = (0..n).collect();
    // A fixed permutation: rows arrive scattered, as concurrent clients' inserts do.
    let mut scattered = sorted.clone();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..scattered.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        scattered.swap(i, (x % (i as u64 + 1)) as usize);
    }
    println!("{n} rows of {value_bytes} bytes, in memory, 256 MiB cache");
    for (name, order, group) in [("in key order, 1,000 a transaction", &sorted, 1000), ("scattered, 100 a transaction", &scattered, 100)] {
        let db = load(order, group, value_bytes);
        let leaves = {
            let tx = db.begin_write().expect("write");
            let stats = tx.stats().expect("stats");
            stats.leaf_pages()
        };
        let (rows, matched) = scan(&db);
        assert_eq!(rows, n, "a scan must read every row");
        scan(&db);
        for threads in [1usize, 2] {
            let rate = timed(threads, n, || assert_eq!(scan(&db), (rows, matched)));
            println!(
                "{name}: {leaves} leaf pages ({:.1} rows each), {threads} thread(s): {:.2} M rows/s ({matched} of {rows} match)",
                n as f64 / leaves as f64,
                rate / 1e6
            );
        }
        println!("{name}: point reads, 1 thread: {:.2} M/s", point_rows(&db, &random_keys(n)) / 1e6);
    }
    for block in BLOCK_SIZES {
        let db = load_blocks(n, value_bytes, block);
        let leaves = {
            let tx = db.begin_write().expect("write");
            let stats = tx.stats().expect("stats");
            (stats.leaf_pages(), stats.stored_bytes(), stats.fragmented_bytes())
        };
        let (rows, matched) = scan_blocks(&db);
        assert_eq!(rows, n, "a scan must read every row");
        for threads in [1usize, 2] {
            let rate = timed(threads, n, || assert_eq!(scan_blocks(&db), (rows, matched)));
            println!(
                "blocks of {} KiB: {} leaf pages ({} MB stored, {} MB fragmented), {threads} thread(s): {:.2} M rows/s",
                block >> 10,
                leaves.0, leaves.1 >> 20, leaves.2 >> 20,
                rate / 1e6
            );
        }
        println!("blocks of {} KiB: point reads, 1 thread: {:.2} M/s", block >> 10, point_blocks(&db, &random_keys(n)) / 1e6);
    }
}
