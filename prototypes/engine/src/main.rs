//! Engine prototype for issue #58: the CPU a durable-path insert costs in three
//! designs, and the scan/point-read rate each gives, measured side by side.
//!
//!   redb      what Tafel does today: one non-durable redb commit per group, a
//!             durable one (checkpoint) every CHECKPOINT inserts; a log append per group.
//!   buffer    a log append and an ordered in-memory buffer (a skip list keyed by
//!             (key, seq)) per group; the buffer folded into redb in one sorted
//!             transaction when it passes BUFFER_MB.
//!   fjall     fjall 3 (an LSM tree): a write batch per group into its journal
//!             (no sync: every design's sync per group is the same wait), memtables
//!             flushed and compacted by its own threads.
//!
//! CPU is the process's user+system time (getrusage), so background threads count.
//! Usage: engine-proto DIR [entities] [value-bytes] [group]
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::ops::Bound;
use std::path::Path;
use std::time::Instant;

use crossbeam_skiplist::SkipMap;
use redb::{Database, Durability, ReadableDatabase, TableDefinition};

const T: TableDefinition<&[u8], &[u8]> = TableDefinition::new("entities");
const CHECKPOINT: usize = 48 << 20; // bytes between durable commits, as Tafel's small writes
const BUFFER_MB: usize = 64;

fn cpu() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// Tafel-shaped keys: a table id, a PartitionKey among 1,000, a RowKey; in a
/// scattered order (each insert lands on a different leaf, as concurrent clients' do).
fn key(i: u64) -> Vec<u8> {
    let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut k = Vec::with_capacity(40);
    k.extend_from_slice(&7u64.to_be_bytes());
    k.extend_from_slice(format!("p{:04}", h % 1000).as_bytes());
    k.push(0);
    k.extend_from_slice(format!("r{:016x}", h).as_bytes());
    k
}

/// Letters and digits from a xorshift stream: about as compressible as an
/// entity's JSON values (not its repeated property names), so LZ4 in fjall gets
/// no free ride from a run of one byte.
fn value(i: u64, len: usize) -> Vec<u8> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut x = i.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ALPHABET[(x % ALPHABET.len() as u64) as usize]
        })
        .collect()
}

struct Log(File);
impl Log {
    fn append(&mut self, rec: &[u8]) {
        self.0.write_all(rec).expect("log write");
    }
}

trait Engine {
    fn write_group(&mut self, group: &[(Vec<u8>, Vec<u8>)]);
    fn finish(&mut self);
    fn scan(&self) -> (usize, usize);
    fn get(&self, k: &[u8]) -> bool;
}

struct RedbNow {
    db: Database,
    log: Log,
    since: usize,
}

impl Engine for RedbNow {
    fn write_group(&mut self, group: &[(Vec<u8>, Vec<u8>)]) {
        let mut txn = self.db.begin_write().expect("begin");
        let mut bytes = 0;
        {
            let mut t = txn.open_table(T).expect("table");
            for (k, v) in group {
                t.insert(k.as_slice(), v.as_slice()).expect("insert");
                self.log.append(k);
                self.log.append(v);
                bytes += k.len() + v.len();
            }
        }
        self.since += bytes;
        let durable = self.since >= CHECKPOINT;
        if durable {
            self.since = 0;
        }
        txn.set_durability(if durable {
            Durability::Immediate
        } else {
            Durability::None
        })
        .expect("durability");
        txn.commit().expect("commit");
    }
    fn finish(&mut self) {
        let mut txn = self.db.begin_write().expect("begin");
        txn.set_durability(Durability::Immediate).expect("d");
        txn.commit().expect("commit");
    }
    fn scan(&self) -> (usize, usize) {
        let r = self.db.begin_read().expect("read");
        let t = r.open_table(T).expect("table");
        let (mut n, mut b) = (0, 0);
        for e in t.range::<&[u8]>(..).expect("range") {
            let (k, v) = e.expect("row");
            n += 1;
            b += k.value().len() + v.value().len();
        }
        (n, b)
    }
    fn get(&self, k: &[u8]) -> bool {
        let r = self.db.begin_read().expect("read");
        let t = r.open_table(T).expect("table");
        let found = t.get(k).expect("get").is_some();
        found
    }
}

/// The buffer's entries: newest sequence first within a key, so a reader at
/// sequence S takes the first entry at or below S.
type Buffered = SkipMap<(Vec<u8>, std::cmp::Reverse<u64>), Vec<u8>>;

struct Buffer {
    db: Database,
    log: Log,
    buf: Buffered,
    bytes: usize,
    seq: u64,
}

impl Buffer {
    fn fold(&mut self) {
        let mut txn = self.db.begin_write().expect("begin");
        {
            let mut t = txn.open_table(T).expect("table");
            let mut last: Option<&[u8]> = None;
            let entries: Vec<_> = self.buf.iter().collect();
            for e in &entries {
                let (k, _) = e.key();
                if last == Some(k.as_slice()) {
                    continue; // an older version of a key already folded
                }
                t.insert(k.as_slice(), e.value().as_slice()).expect("insert");
                last = Some(k.as_slice());
            }
        }
        txn.set_durability(Durability::Immediate).expect("d");
        txn.commit().expect("commit");
        self.buf = SkipMap::new();
        self.bytes = 0;
    }
}

impl Engine for Buffer {
    fn write_group(&mut self, group: &[(Vec<u8>, Vec<u8>)]) {
        self.seq += 1;
        for (k, v) in group {
            self.log.append(k);
            self.log.append(v);
            self.bytes += k.len() + v.len() + 64;
            self.buf.insert((k.clone(), std::cmp::Reverse(self.seq)), v.clone());
        }
        if self.bytes >= BUFFER_MB << 20 {
            self.fold();
        }
    }
    fn finish(&mut self) {}
    fn scan(&self) -> (usize, usize) {
        // The merged view a reader at the newest sequence sees: buffer over redb.
        let r = self.db.begin_read().expect("read");
        let t = r.open_table(T).expect("table");
        let mut tree = t.range::<&[u8]>(..).expect("range").map(|e| {
            let (k, v) = e.expect("row");
            (k.value().to_vec(), v.value().len())
        });
        let mut buf = self.buf.iter().peekable();
        let (mut n, mut b) = (0, 0);
        let mut next_tree = tree.next();
        loop {
            let from_buf = buf.peek().map(|e| e.key().0.clone());
            match (&next_tree, from_buf) {
                (None, None) => break,
                (Some((tk, tv)), fb) if fb.as_ref().is_none_or(|bk| tk < bk) => {
                    n += 1;
                    b += tk.len() + tv;
                    next_tree = tree.next();
                }
                (nt, Some(bk)) => {
                    if nt.as_ref().is_some_and(|(tk, _)| *tk == bk) {
                        next_tree = tree.next();
                    }
                    let e = buf.next().expect("peeked");
                    n += 1;
                    b += bk.len() + e.value().len();
                    while buf.peek().is_some_and(|e| e.key().0 == bk) {
                        buf.next();
                    }
                }
                _ => unreachable!(),
            }
        }
        (n, b)
    }
    fn get(&self, k: &[u8]) -> bool {
        let lo = (k.to_vec(), std::cmp::Reverse(u64::MAX));
        if let Some(e) = self.buf.lower_bound(Bound::Included(&lo)) {
            if e.key().0 == k {
                return true;
            }
        }
        let r = self.db.begin_read().expect("read");
        let t = r.open_table(T).expect("table");
        let found = t.get(k).expect("get").is_some();
        found
    }
}

struct Fjall {
    db: fjall::Database,
    ks: fjall::Keyspace,
}

impl Engine for Fjall {
    fn write_group(&mut self, group: &[(Vec<u8>, Vec<u8>)]) {
        let mut b = self.db.batch();
        for (k, v) in group {
            b.insert(&self.ks, k.clone(), v.clone());
        }
        b.commit().expect("commit");
    }
    fn finish(&mut self) {
        self.db.persist(fjall::PersistMode::SyncAll).expect("persist");
        // Count the background work the inserts caused: wait for it to settle.
        while self.db.outstanding_flushes() > 0 || self.db.active_compactions() > 0 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    fn scan(&self) -> (usize, usize) {
        let (mut n, mut b) = (0, 0);
        for g in self.ks.iter() {
            let (k, v) = g.into_inner().expect("row");
            n += 1;
            b += k.len() + v.len();
        }
        (n, b)
    }
    fn get(&self, k: &[u8]) -> bool {
        self.ks.get(k).expect("get").is_some()
    }
}

fn open_redb(dir: &Path) -> Database {
    Database::builder()
        .set_cache_size(cache_mb() << 20)
        .create(dir.join("t.redb"))
        .expect("redb")
}

/// Both engines' page/block cache: CACHE_MB, default Tafel's 256 MiB.
fn cache_mb() -> usize {
    std::env::var("CACHE_MB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256)
}

fn log(dir: &Path) -> Log {
    Log(File::create(dir.join("t.wal")).expect("log"))
}

fn run(name: &str, mut e: Box<dyn Engine>, n: u64, vlen: usize, group: usize) -> BTreeMap<&'static str, f64> {
    let rows: Vec<_> = (0..n).map(|i| (key(i), value(i, vlen))).collect();
    let (c0, t0) = (cpu(), Instant::now());
    for g in rows.chunks(group) {
        e.write_group(g);
    }
    e.finish();
    let (c1, t1) = (cpu(), t0.elapsed().as_secs_f64());
    let mut best_scan = f64::MAX;
    let mut scanned = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let (s, _) = e.scan();
        scanned = s;
        best_scan = best_scan.min(t.elapsed().as_secs_f64());
    }
    assert_eq!(scanned as u64, n, "{name}: scan saw every entity");
    let t = Instant::now();
    let mut hits = 0;
    for i in (0..n).step_by(7) {
        hits += usize::from(e.get(&rows[i as usize].0));
    }
    let gets = t.elapsed().as_secs_f64();
    assert_eq!(hits as u64, n.div_ceil(7));
    let mut m = BTreeMap::new();
    m.insert("cpu_us_per_insert", (c1 - c0) * 1e6 / n as f64);
    m.insert("inserts_per_s_wall", n as f64 / t1);
    m.insert("scan_entities_per_s", n as f64 / best_scan);
    m.insert("point_reads_per_s", n.div_ceil(7) as f64 / gets);
    m
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let root = Path::new(args.get(1).map(String::as_str).unwrap_or("/tmp/engine-proto"));
    let n: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let vlen: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1024);
    let group: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(1);
    let which = args.get(5).cloned().unwrap_or_else(|| "redb,buffer,fjall".into());
    println!("entities {n}, value {vlen} B, group {group}");
    for name in which.split(',') {
        let dir = root.join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let e: Box<dyn Engine> = match name {
            "redb" => Box::new(RedbNow {
                db: open_redb(&dir),
                log: log(&dir),
                since: 0,
            }),
            "buffer" => Box::new(Buffer {
                db: open_redb(&dir),
                log: log(&dir),
                buf: SkipMap::new(),
                bytes: 0,
                seq: 0,
            }),
            "fjall" => {
                let db = fjall::Database::builder(dir.join("fjall"))
                    .cache_size((cache_mb() as u64) << 20)
                    .open()
                    .expect("fjall");
                let ks = db
                    .keyspace("entities", fjall::KeyspaceCreateOptions::default)
                    .expect("keyspace");
                Box::new(Fjall { db, ks })
            }
            other => panic!("unknown engine {other}"),
        };
        let m = run(name, e, n, vlen, group);
        let line: Vec<String> = m.iter().map(|(k, v)| format!("{k} {v:.1}")).collect();
        println!("{name:7} {}", line.join("  "));
    }
}
