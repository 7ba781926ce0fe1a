//! What redb's own range gives a scan of issue #58's strings shape (~1 KiB rows,
//! a 1% filter on a string near each row's start), with nothing of Tafel's
//! around it: the rows in an in-memory redb (as `serve --in-memory`, with its
//! 256 MiB page cache), read through `Table::range` on one thread and on two.
//! It bounds what any scan through redb's public API can reach on a machine:
//! Tafel's scan reads its rows the same way (engine/rows_ahead.rs).
//!
//! Usage: scan-limit [entities] [value-bytes]
use std::time::Instant;

use redb::backends::InMemoryBackend;
use redb::{Database, ReadableDatabase, TableDefinition};

const T: TableDefinition<&[u8], &[u8]> = TableDefinition::new("entities");
const REPEATS: usize = 6;

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
            let start = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(|| {
                        for _ in 0..REPEATS {
                            assert_eq!(scan(&db), (rows, matched));
                        }
                    });
                }
            });
            let rate = (n * (REPEATS * threads) as u64) as f64 / start.elapsed().as_secs_f64();
            println!(
                "{name}: {leaves} leaf pages ({:.1} rows each), {threads} thread(s): {:.2} M rows/s ({matched} of {rows} match)",
                n as f64 / leaves as f64,
                rate / 1e6
            );
        }
    }
}
