//! Deterministic simulation of power loss, after SQLite's crash tests and
//! FoundationDB's simulation: a seed draws a workload (inserts, upserts,
//! merges, deletes, batches, table creates and deletes, secondary indexes
//! declared — built online when the table has rows — and dropped; a log small
//! enough that checkpoints come every few writes), which runs on a simulated
//! disk (`sim_disk.rs`) recording every write and sync. Then, at many points of
//! that trace, a power loss: the files as it would leave them must pass `tafel
//! check` (every index entry against its entity) and reopen as a store, which
//! must hold every acknowledged write, each unacknowledged write wholly or not
//! at all, and keep working.
//!
//! `TAFEL_SIM_SEEDS` (how many), `TAFEL_SIM_FIRST_SEED` and `TAFEL_SIM_CUTS`
//! (power losses per seed) widen the run; `scripts/simulate` sets them. A
//! failure names its seed and cut, and leaves the files the power loss left
//! under the temporary directory's `tafel-simulation/`, to open as a store.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use super::check::check_on_with;
use super::sim_disk::{Image, Mark, SimDisk};
use super::{EmbeddedOptions, EmbeddedStore};
use crate::key::{EntityKey, KeyRange};
use crate::test_support::ScanEntities;
use crate::traits::{IndexEncoder, Mutation, ScanRequest, Store};

const ACCOUNT: &str = "sim";
const TABLES: [&str; 3] = ["t0", "t1", "t2"];
const WAVES: usize = 120;

/// What the store holds: tables, the tables with an index on [`INDEXED`], and
/// rows by (table, key).
#[derive(Clone, Default, PartialEq, Debug)]
struct State {
    tables: BTreeSet<String>,
    indexed: BTreeSet<String>,
    rows: BTreeMap<(String, EntityKey), Arc<[u8]>>,
}

/// The one property the simulation indexes: a row's first two bytes (rows of
/// one byte have none), so puts and merges move entries and deletes drop them.
const INDEXED: &str = "x";

fn encoder() -> IndexEncoder {
    let x = |value: &[u8]| value.get(..2).map(<[u8]>::to_vec);
    IndexEncoder::new(
        move |value: &[u8], property: &str| (property == INDEXED).then(|| x(value)).flatten(),
        move |value: &[u8]| x(value).map(|v| (INDEXED.to_owned(), v)).into_iter().collect(),
    )
}

/// What one write does to one row, given the row's current value.
#[derive(Clone)]
enum Change {
    /// Insert or replace.
    Put(Arc<[u8]>),
    /// Insert only if absent.
    Insert(Arc<[u8]>),
    /// Insert-or-merge: the new value depends on the old.
    Merge(u64),
    Delete,
}

impl Change {
    fn decide(&self, current: Option<&[u8]>) -> Mutation {
        match (self, current) {
            (Change::Put(v), _) | (Change::Insert(v), None) => Mutation::Put(v.to_vec()),
            (Change::Insert(_), Some(_)) | (Change::Delete, None) => Mutation::Keep,
            (Change::Merge(salt), old) => {
                let mut v = salt.to_le_bytes().to_vec();
                v.extend_from_slice(&old.unwrap_or_default()[..old.map_or(0, |o| o.len().min(300))]);
                Mutation::Put(v)
            }
            (Change::Delete, Some(_)) => Mutation::Delete,
        }
    }
}

#[derive(Clone)]
enum Op {
    CreateTable(&'static str),
    DeleteTable(&'static str),
    CreateIndex(&'static str),
    DropIndex(&'static str),
    /// One atomic write of rows of one partition (a batch if more than one).
    Write {
        table: &'static str,
        rows: Vec<(EntityKey, Change)>,
    },
}

impl Op {
    fn apply(&self, state: &mut State) {
        match self {
            Op::CreateTable(t) => {
                state.tables.insert((*t).to_owned());
            }
            Op::DeleteTable(t) => {
                state.tables.remove(*t);
                state.indexed.remove(*t);
                state.rows.retain(|(table, _), _| table != t);
            }
            Op::CreateIndex(t) => {
                state.indexed.insert((*t).to_owned());
            }
            Op::DropIndex(t) => {
                state.indexed.remove(*t);
            }
            Op::Write { table, rows } => {
                for (key, change) in rows {
                    let at = ((*table).to_owned(), key.clone());
                    match change.decide(state.rows.get(&at).map(|v| &v[..])) {
                        Mutation::Put(v) | Mutation::Merge(v) => {
                            state.rows.insert(at, v.into());
                        }
                        Mutation::Delete | Mutation::Expire => {
                            state.rows.remove(&at);
                        }
                        Mutation::Keep => {}
                    }
                }
            }
        }
    }

    async fn run(&self, store: &EmbeddedStore) -> Result<(), crate::StoreError> {
        match self {
            Op::CreateTable(t) => store.create_table(ACCOUNT, t).await.map(drop),
            Op::DeleteTable(t) => store.delete_table(ACCOUNT, t).await.map(drop),
            Op::CreateIndex(t) => store
                .create_index(ACCOUNT, t, INDEXED)
                .await
                .map(drop)
                .map_err(index_error),
            Op::DropIndex(t) => store
                .drop_index(ACCOUNT, t, INDEXED)
                .await
                .map(drop)
                .map_err(index_error),
            Op::Write { table, rows } => {
                let keys = rows.iter().map(|(k, _)| k.clone()).collect();
                let changes: Vec<Change> = rows.iter().map(|(_, c)| c.clone()).collect();
                let decide =
                    move |current: &[Option<&[u8]>]| changes.iter().zip(current).map(|(c, v)| c.decide(*v)).collect();
                store.write_entities(ACCOUNT, table, keys, Box::new(decide)).await
            }
        }
    }
}

/// Ops that run together, on distinct partitions; the state before them.
struct Wave {
    first: usize,
    ops: Vec<Op>,
    before: State,
}

fn value(rng: &mut fastrand::Rng) -> Arc<[u8]> {
    let len = if rng.u8(..) < 20 {
        rng.usize(2000..16000)
    } else {
        rng.usize(1..300)
    };
    let mut v = vec![0; len];
    rng.fill(&mut v);
    v.into()
}

/// The next wave's ops, drawn from `rng` given the state they start from.
fn draw_wave(rng: &mut fastrand::Rng, state: &State) -> Vec<Op> {
    let table = |rng: &mut fastrand::Rng| TABLES[rng.usize(..TABLES.len())];
    if state.tables.is_empty() || rng.u8(..100) < 4 {
        let t = table(rng);
        return vec![if state.tables.contains(t) {
            Op::DeleteTable(t)
        } else {
            Op::CreateTable(t)
        }];
    }
    let live: Vec<&'static str> = TABLES.into_iter().filter(|t| state.tables.contains(*t)).collect();
    let mut partitions = BTreeSet::new();
    let mut ops = Vec::new();
    // An index declared or dropped beside the wave's writes, which it races.
    if rng.u8(..100) < 6 {
        let t = live[rng.usize(..live.len())];
        ops.push(if state.indexed.contains(t) {
            Op::DropIndex(t)
        } else {
            Op::CreateIndex(t)
        });
    }
    for _ in 0..rng.usize(1..=4) {
        let (table, pk) = (live[rng.usize(..live.len())], rng.usize(..8));
        if !partitions.insert((table, pk)) {
            continue;
        }
        let n = if rng.bool() { 1 } else { rng.usize(2..=40) };
        let row_keys: BTreeSet<usize> = (0..n).map(|_| rng.usize(..150)).collect();
        let rows = row_keys
            .into_iter()
            .map(|rk| {
                let key = EntityKey::new(&format!("p{pk}"), &format!("r{rk:03}"));
                let change = match rng.u8(..10) {
                    0..=3 => Change::Put(value(rng)),
                    4..=5 => Change::Insert(value(rng)),
                    6..=7 => Change::Merge(rng.u64(..)),
                    _ => Change::Delete,
                };
                (key, change)
            })
            .collect();
        ops.push(Op::Write { table, rows });
    }
    ops
}

fn open(disk: &SimDisk, log_size: u64) -> Result<EmbeddedStore, crate::StoreError> {
    let options = EmbeddedOptions {
        cache_size: 2 << 20,
        log_size,
    };
    let store = EmbeddedStore::open_on(Box::new(disk.clone()), options, None)?;
    store.set_index_encoder(encoder());
    Ok(store)
}

fn index_error(e: crate::IndexError) -> crate::StoreError {
    match e {
        crate::IndexError::Store(e) => e,
        other => crate::StoreError::failure(crate::error::FailureKind::Internal, other.to_string()),
    }
}

async fn read_state(store: &EmbeddedStore) -> Result<State, crate::StoreError> {
    let mut state = State::default();
    for t in store.list_tables(ACCOUNT, None, 1000).await? {
        let request = ScanRequest {
            ranges: vec![KeyRange::all()],
            limit: usize::MAX,
            filter: None,
            deadline: None,
        };
        for (key, v) in store.scan_entities(ACCOUNT, &t.name, request).await?.rows {
            state.rows.insert((t.name.clone(), key), v.into());
        }
        if !store
            .list_indexes(ACCOUNT, &t.name)
            .await
            .map_err(index_error)?
            .is_empty()
        {
            state.indexed.insert(t.name.clone());
        }
        state.tables.insert(t.name);
    }
    Ok(state)
}

/// What one seed's power losses found.
#[derive(Default)]
struct Tally {
    crashes: usize,
    /// Unacknowledged ops found applied, and found absent.
    in_doubt_applied: usize,
    in_doubt_absent: usize,
    /// Power losses that struck after at least one checkpoint.
    after_checkpoint: usize,
    /// Index entries `tafel check` compared with their entities.
    index_entries: u64,
    failures: Vec<String>,
}

/// Runs seed `seed`'s workload, then `cuts` power losses at random points of it.
async fn simulate(seed: u64, cuts: usize) -> Tally {
    let mut rng = fastrand::Rng::with_seed(seed);
    let log_size = [64 << 10, 256 << 10, 1 << 20][rng.usize(..3)];
    let disk = SimDisk::default();
    let mut tally = Tally::default();
    let store = match open(&disk, log_size) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            tally
                .failures
                .push(format!("seed {seed}: a new store did not open: {e}"));
            return tally;
        }
    };
    let opened = disk.syncs(disk.trace_len(), super::STORE_FILE);
    let mut state = State::default();
    let mut waves = Vec::new();
    let mut next = 0;
    for _ in 0..WAVES {
        let ops = draw_wave(&mut rng, &state);
        let wave = Wave {
            first: next,
            ops,
            before: state.clone(),
        };
        next += wave.ops.len();
        wave.ops.iter().for_each(|op| op.apply(&mut state));
        let mut running = tokio::task::JoinSet::new();
        for (i, op) in wave.ops.iter().enumerate() {
            let (store, disk, op, n) = (store.clone(), disk.clone(), op.clone(), wave.first + i);
            running.spawn(async move {
                disk.mark(Mark::Sent(n));
                let result = op.run(&store).await;
                if result.is_ok() {
                    disk.mark(Mark::Acked(n));
                }
                result.map_err(|e| format!("op {n} failed: {e}"))
            });
        }
        while let Some(done) = running.join_next().await {
            if let Err(e) = done.map_err(|e| e.to_string()).and_then(|r| r) {
                tally.failures.push(format!("seed {seed}: {e}"));
                return tally;
            }
        }
        waves.push(wave);
    }
    if let Err(e) = store.shutdown().await {
        tally.failures.push(format!("seed {seed}: shutdown: {e}"));
    }
    drop(store);

    let mut crash_rng = fastrand::Rng::with_seed(seed ^ 0x5eed_c0de);
    let len = disk.trace_len();
    for _ in 0..cuts {
        let cut = crash_rng.usize(..=len);
        let image = disk.power_loss(cut, &mut crash_rng);
        tally.crashes += 1;
        tally.after_checkpoint += usize::from(disk.syncs(cut, super::STORE_FILE) > opened);
        if let Err(e) = check(&waves, &disk.marks(cut), &image, log_size, &mut tally).await {
            let kept = keep(seed, cut, &image, &disk.describe(cut));
            tally.failures.push(format!(
                "seed {seed}, power loss after event {cut} of {len}: {e} (files in {kept})"
            ));
        }
    }
    tally
}

/// Opens the store a power loss left and checks it against the workload.
async fn check(waves: &[Wave], marks: &[Mark], image: &Image, log_size: u64, tally: &mut Tally) -> Result<(), String> {
    // `tafel check` first, on a copy (it replays the log into what it reads).
    let report = check_on_with(&SimDisk::with(image.clone()), Some(&encoder()), &mut |_| {});
    if !report.damage.is_empty() {
        return Err(format!("tafel check found damage: {:?}", report.damage));
    }
    tally.index_entries += report.index_entries;
    let disk = SimDisk::with(image.clone());
    let store = open(&disk, log_size).map_err(|e| format!("the store did not open: {e}"))?;
    let actual = read_state(&store).await.map_err(|e| format!("reading failed: {e}"))?;
    let sent = marks.iter().filter_map(|m| match m {
        Mark::Sent(n) => Some(*n),
        Mark::Acked(_) => None,
    });
    let acked: BTreeSet<usize> = marks
        .iter()
        .filter_map(|m| match m {
            Mark::Acked(n) => Some(*n),
            Mark::Sent(_) => None,
        })
        .collect();
    // Waves run one after another: the last one sent to is the one the power
    // loss struck; every op before it was acknowledged.
    let wave = match sent.max() {
        Some(last) => waves.iter().rev().find(|w| w.first <= last),
        None => None,
    };
    let mut expected = State::default();
    let mut in_doubt = Vec::new();
    if let Some(wave) = wave {
        expected = wave.before.clone();
        for (i, op) in wave.ops.iter().enumerate() {
            let n = wave.first + i;
            if acked.contains(&n) {
                op.apply(&mut expected);
            } else if marks.contains(&Mark::Sent(n)) {
                in_doubt.push(op);
            }
        }
    }
    // Each unacknowledged op wholly applied or not at all: one of the 2^k states.
    let mut candidates = Vec::new();
    for applied in 0..1usize << in_doubt.len() {
        let mut s = expected.clone();
        for (i, op) in in_doubt.iter().enumerate() {
            if applied & (1 << i) != 0 {
                op.apply(&mut s);
            }
        }
        candidates.push(s);
    }
    let found = expect_one_of(&actual, &candidates)?;
    // Count by op whose outcome the state shows (an op that changed nothing shows none).
    for (i, op) in in_doubt.iter().enumerate() {
        let mut with = expected.clone();
        op.apply(&mut with);
        if with != expected {
            if found & (1 << i) != 0 {
                tally.in_doubt_applied += 1;
            } else {
                tally.in_doubt_absent += 1;
            }
        }
    }
    keeps_working(&store).await?;
    store
        .shutdown()
        .await
        .map_err(|e| format!("shutdown after recovery: {e}"))
}

/// The index of the candidate `actual` equals, or what differs from the first.
fn expect_one_of(actual: &State, candidates: &[State]) -> Result<usize, String> {
    if let Some(i) = candidates.iter().position(|c| c == actual) {
        return Ok(i);
    }
    let want = &candidates[0];
    if want.tables != actual.tables {
        return Err(format!("tables {:?}, expected {:?}", actual.tables, want.tables));
    }
    let differs = want
        .rows
        .iter()
        .filter(|(k, v)| actual.rows.get(*k) != Some(v))
        .map(|(k, _)| format!("{k:?} lost or changed"))
        .chain(
            actual
                .rows
                .keys()
                .filter(|k| !want.rows.contains_key(*k))
                .map(|k| format!("{k:?} unexpected")),
        )
        .take(5)
        .collect::<Vec<_>>();
    Err(format!(
        "no acknowledged-writes-plus-whole-unacknowledged-ones state matches ({} candidates); against the first: {}",
        candidates.len(),
        differs.join(", ")
    ))
}

/// A recovered store takes a write and reads it back.
async fn keeps_working(store: &EmbeddedStore) -> Result<(), String> {
    let op = Op::Write {
        table: "after",
        rows: vec![(EntityKey::new("p", "r"), Change::Put(Arc::from(&b"after"[..])))],
    };
    store.create_table(ACCOUNT, "after").await.map_err(|e| e.to_string())?;
    op.run(store)
        .await
        .map_err(|e| format!("a write after recovery failed: {e}"))?;
    let got = store
        .get_entity(ACCOUNT, "after", &EntityKey::new("p", "r"))
        .await
        .map_err(|e| e.to_string())?;
    if got.as_deref() != Some(&b"after"[..]) {
        return Err(format!("a write after recovery read back as {got:?}"));
    }
    Ok(())
}

/// Leaves a failing power loss's files and the trace for a look; returns where.
fn keep(seed: u64, cut: usize, image: &Image, trace: &str) -> String {
    let dir = std::env::temp_dir()
        .join("tafel-simulation")
        .join(format!("seed-{seed}-cut-{cut}"));
    let _ = std::fs::create_dir_all(&dir);
    for (name, bytes) in image {
        let _ = std::fs::write(dir.join(name), bytes);
    }
    let _ = std::fs::write(dir.join("trace.txt"), trace);
    dir.display().to_string()
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A new store's log was written while its file's header, magic number last,
/// still waited for the page flusher: a power loss then could leave a file
/// without the magic number beside a log no longer all zeros (a torn sector),
/// which is not taken for a creation that never finished, and the store did
/// not open. The flusher is slowed here to let the log run ahead.
#[test]
fn a_new_store_has_its_header_on_disk_before_its_log_is_written() {
    let disk = SimDisk::default();
    disk.set_faults(super::sim_disk::Faults {
        slow_writes: Some((super::STORE_FILE, std::time::Duration::from_millis(20))),
        ..Default::default()
    });
    let store = open(&disk, 64 << 10).expect("a new store");
    drop(store);
    let first = disk.first_write_to(super::wal::FILE_NAME).expect("the log was written");
    let files = disk.synced(first);
    let header = files.get(super::STORE_FILE).map(Vec::as_slice).unwrap_or_default();
    assert!(
        header.starts_with(&super::header_copy::MAGIC),
        "the log's first write came before the store's header was synced:\n{}",
        disk.describe(first)
    );
}

#[test]
fn power_loss_anywhere_loses_no_acknowledged_write_and_tears_no_batch() {
    let seeds = env_or("TAFEL_SIM_SEEDS", 64);
    let first = env_or("TAFEL_SIM_FIRST_SEED", 1);
    let cuts = env_or("TAFEL_SIM_CUTS", 64) as usize;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let started = Instant::now();
    let tallies: Vec<(u64, Tally)> = runtime.block_on(async {
        let mut all = Vec::new();
        // Two seeds at a time: each is mostly one writer thread and this check.
        let seeds: Vec<u64> = (first..first + seeds).collect();
        for pair in seeds.chunks(2) {
            let runs: Vec<_> = pair
                .iter()
                .map(|&s| tokio::spawn(async move { (s, simulate(s, cuts).await) }))
                .collect();
            for r in runs {
                all.push(r.await.expect("a seed's run panicked"));
            }
        }
        all
    });
    let mut total = Tally::default();
    for (seed, t) in tallies {
        if std::env::var_os("TAFEL_SIM_VERBOSE").is_some() {
            eprintln!(
                "seed {seed}: {} power losses, {} after a checkpoint, unacknowledged ops found applied {} / absent {}",
                t.crashes, t.after_checkpoint, t.in_doubt_applied, t.in_doubt_absent
            );
        }
        total.crashes += t.crashes;
        total.after_checkpoint += t.after_checkpoint;
        total.in_doubt_applied += t.in_doubt_applied;
        total.in_doubt_absent += t.in_doubt_absent;
        total.index_entries += t.index_entries;
        total.failures.extend(t.failures);
    }
    eprintln!(
        "simulation: seeds {first}..{}: {} power losses ({} after a checkpoint) in {:.1} s; \
         unacknowledged ops found applied {}, absent {}; {} index entries checked; {} failures",
        first + seeds,
        total.crashes,
        total.after_checkpoint,
        started.elapsed().as_secs_f64(),
        total.in_doubt_applied,
        total.in_doubt_absent,
        total.index_entries,
        total.failures.len()
    );
    assert!(total.failures.is_empty(), "{}", total.failures.join("\n"));
    // The power losses must have struck where it matters: some after
    // checkpoints, some that lost a write in flight and some that kept one, and
    // stores with index entries.
    assert!(total.after_checkpoint > 0 && total.in_doubt_applied > 0 && total.in_doubt_absent > 0);
    assert!(total.index_entries > 0, "no power loss left a store with index entries");
}
