//! Deterministic simulation of power loss, after SQLite's crash tests and
//! FoundationDB's simulation: a seed draws a workload (inserts, upserts,
//! merges, deletes, batches, table creates and deletes, table ACLs set,
//! secondary indexes declared — built online when the table has rows — and
//! dropped, savepoints saved, restored and dropped; the change feed on from the
//! start or from a wave on; a log small enough that checkpoints come every few
//! writes; `simulation_model.rs`), which runs on a simulated disk
//! (`sim_disk.rs`) recording every write and sync. Then, at many points of that
//! trace, a power loss: the files as it would leave them must pass `tafel
//! check` (every index entry against its entity) and reopen as a store, which
//! must hold every acknowledged op (rows, tables and their ACLs, indexes, the
//! savepoint list, what a restore brought back), each unacknowledged op wholly
//! or not at all, a feed that is the acknowledged writes' changes as the live
//! store gave them out plus those of the unacknowledged ones the state shows
//! (`simulation_feed.rs`), and keep working.
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
use super::simulation_feed::{self as feed, Feed, Live, Wave};
use super::simulation_model::{draw_wave, encoder, read_state, Change, Op, Saved, State, ACCOUNT};
use super::{EmbeddedOptions, EmbeddedStore};
use crate::key::EntityKey;
use crate::traits::Store;

const WAVES: usize = 120;

/// The sizes a seed runs with: the log's, and the write buffer's bound (0: no
/// buffer, every group committed to redb; small: folds every few groups).
#[derive(Clone, Copy)]
struct Sizes {
    log: u64,
    buffer: usize,
}

fn open(disk: &SimDisk, sizes: Sizes) -> Result<EmbeddedStore, crate::StoreError> {
    let options = EmbeddedOptions {
        cache_size: 2 << 20,
        log_size: sizes.log,
        write_buffer: sizes.buffer,
    };
    let store = EmbeddedStore::open_on(Box::new(disk.clone()), options, None)?;
    store.set_index_encoder(encoder());
    Ok(store)
}

/// What one seed's power losses found.
#[derive(Default)]
struct Tally {
    crashes: usize,
    /// Unacknowledged ops found applied, and found absent.
    in_doubt_applied: usize,
    in_doubt_absent: usize,
    /// Of those, savepoint saves, restores and drops.
    savepoints_applied: usize,
    savepoints_absent: usize,
    /// Power losses that struck after at least one checkpoint.
    after_checkpoint: usize,
    /// Index entries `tafel check` compared with their entities.
    index_entries: u64,
    /// Changes of the recovered feeds, and tables with an ACL, checked.
    feed_changes: usize,
    acls: usize,
    failures: Vec<String>,
}

/// Runs seed `seed`'s workload, then `cuts` power losses at random points of it.
async fn simulate(seed: u64, cuts: usize) -> Tally {
    let mut rng = fastrand::Rng::with_seed(seed);
    let sizes = Sizes {
        log: [64 << 10, 256 << 10, 1 << 20][rng.usize(..3)],
        buffer: [0, 8 << 10, 64 << 10, super::DEFAULT_WRITE_BUFFER][rng.usize(..4)],
    };
    // The feed records from the start, or from a wave on.
    let feed_from = if rng.u8(..4) == 0 { rng.usize(..WAVES) } else { 0 };
    let disk = SimDisk::default();
    let mut tally = Tally::default();
    let store = match open(&disk, sizes) {
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
    let mut saved = Saved::default();
    let (mut live, mut feed, mut saved_feeds) = (Live::default(), Feed::default(), BTreeMap::new());
    let mut waves = Vec::new();
    let mut next = 0;
    for w in 0..WAVES {
        if w == feed_from {
            if let Err(e) = store.set_change_feed(feed::settings()) {
                tally.failures.push(format!("seed {seed}: feed on: {e}"));
                return tally;
            }
        }
        let ops = draw_wave(&mut rng, &state, &mut saved);
        let recorded = ops
            .iter()
            .map(|op| {
                if w >= feed_from {
                    op.recorded(&state)
                } else {
                    Vec::new()
                }
            })
            .collect();
        let mut wave = Wave {
            first: next,
            ops,
            before: state.clone(),
            recorded,
            feed_before: feed.clone(),
            feed_after: feed.clone(),
            given_before: live.given(),
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
        if let [Op::Save(n)] = wave.ops.as_slice() {
            saved_feeds.insert(*n, feed.clone());
        }
        if w >= feed_from {
            match live.observe(&store, &wave, &saved_feeds).await {
                Ok(f) => feed = f,
                Err(e) => {
                    tally.failures.push(format!("seed {seed}, live, wave {w}: {e}"));
                    return tally;
                }
            }
        }
        wave.feed_after = feed.clone();
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
        if let Err(e) = check(&waves, &disk.marks(cut), &image, sizes, &mut tally).await {
            let trace = disk.describe(cut);
            // CI keeps only what is printed: the trace up to the cut says how it came about.
            let upto = trace.find("---- power loss ----").unwrap_or(trace.len());
            eprintln!("seed {seed}, cut {cut}: {e}; the trace up to it:\n{}", &trace[..upto]);
            let kept = keep(seed, cut, &image, &trace);
            tally.failures.push(format!(
                "seed {seed}, power loss after event {cut} of {len}: {e} (files in {kept})"
            ));
        }
    }
    tally
}

/// Opens the store a power loss left and checks it against the workload.
async fn check(waves: &[Wave], marks: &[Mark], image: &Image, sizes: Sizes, tally: &mut Tally) -> Result<(), String> {
    // `tafel check` first, on a copy (it replays the log into what it reads).
    let report = check_on_with(&SimDisk::with(image.clone()), Some(&encoder()), &mut |_| {});
    if !report.damage.is_empty() {
        return Err(format!("tafel check found damage: {:?}", report.damage));
    }
    tally.index_entries += report.index_entries;
    let disk = SimDisk::with(image.clone());
    let store = open(&disk, sizes).map_err(|e| format!("the store did not open: {e}"))?;
    store.set_change_feed(feed::settings()).map_err(|e| e.to_string())?;
    let actual = read_state(&store).await.map_err(|e| format!("reading failed: {e}"))?;
    let (changes, _, next) = feed::read(&store, None).await?;
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
    let ops: &[Op] = wave.map_or(&[], |w| &w.ops);
    let mut expected = State::default();
    // The unacknowledged ops sent, by index in the wave.
    let mut in_doubt = Vec::new();
    if let Some(wave) = wave {
        expected = wave.before.clone();
        for (i, op) in wave.ops.iter().enumerate() {
            let n = wave.first + i;
            if acked.contains(&n) {
                op.apply(&mut expected);
            } else if marks.contains(&Mark::Sent(n)) {
                in_doubt.push(i);
            }
        }
    }
    // Each unacknowledged op wholly applied or not at all: one of the 2^k
    // states, the k-bit mask saying which.
    let mut candidates = Vec::new();
    for applied in 0..1usize << in_doubt.len() {
        let mut s = expected.clone();
        for (b, &i) in in_doubt.iter().enumerate() {
            if applied & (1 << b) != 0 {
                ops[i].apply(&mut s);
            }
        }
        candidates.push(s);
    }
    let matching = expect_one_of(&actual, &candidates)?;
    // The feed, with the ops one of those states applied.
    let found = match wave {
        None if changes.is_empty() => 0,
        None => return Err(format!("the feed has {} changes before any op", changes.len())),
        Some(wave) => {
            let applied = |mask: usize, i: usize| {
                acked.contains(&(wave.first + i))
                    || in_doubt
                        .iter()
                        .position(|&j| j == i)
                        .is_some_and(|b| mask & (1 << b) != 0)
            };
            let mut first_error = None;
            let found =
                matching
                    .iter()
                    .copied()
                    .find(|&mask| match feed::holds(wave, |i| applied(mask, i), &changes) {
                        Ok(()) => true,
                        Err(e) => {
                            first_error.get_or_insert(e);
                            false
                        }
                    });
            found.ok_or_else(|| first_error.unwrap_or_default())?
        }
    };
    tally.feed_changes += changes.len();
    tally.acls += actual.tables.values().filter(|acl| !acl.is_empty()).count();
    // Count by op whose outcome the state shows (an op that changed nothing shows none).
    for (b, &i) in in_doubt.iter().enumerate() {
        let op = &ops[i];
        let mut with = expected.clone();
        op.apply(&mut with);
        if with != expected {
            let savepoint = matches!(op, Op::Save(_) | Op::Restore(..) | Op::DropSavepoint(_));
            if found & (1 << b) != 0 {
                tally.in_doubt_applied += 1;
                tally.savepoints_applied += usize::from(savepoint);
            } else {
                tally.in_doubt_absent += 1;
                tally.savepoints_absent += usize::from(savepoint);
            }
        }
    }
    // What the recovered store gave out last: before the wave, or of it (a
    // restore gives out none, and its head never goes back).
    let given = wave
        .map_or(0, |w| w.given_before)
        .max(changes.last().map_or(0, |c| c.position));
    keeps_working(&store, next, given).await?;
    store
        .shutdown()
        .await
        .map_err(|e| format!("shutdown after recovery: {e}"))
}

/// The indexes of the candidates `actual` equals, or what differs from the first.
fn expect_one_of(actual: &State, candidates: &[State]) -> Result<Vec<usize>, String> {
    let matching: Vec<usize> = (0..candidates.len()).filter(|&i| candidates[i] == *actual).collect();
    if !matching.is_empty() {
        return Ok(matching);
    }
    let want = &candidates[0];
    if want.tables != actual.tables {
        // ACLs by length and first bytes: the whole of them is no help.
        let short = |t: &BTreeMap<String, Vec<u8>>| {
            let acl = |a: &Vec<u8>| format!("{} bytes {:02x?}", a.len(), &a[..a.len().min(4)]);
            t.iter().map(|(n, a)| format!("{n}: {}", acl(a))).collect::<Vec<_>>()
        };
        return Err(format!(
            "tables {:?}, expected {:?}",
            short(&actual.tables),
            short(&want.tables)
        ));
    }
    if want.indexed != actual.indexed || want.savepoints != actual.savepoints {
        return Err(format!(
            "indexed {:?} and savepoints {:?}, expected {:?} and {:?}",
            actual.indexed, actual.savepoints, want.indexed, want.savepoints
        ));
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

/// A recovered store takes a write and reads it back, and its feed records
/// it right past `given`, read from `cursor` (where its reader was).
async fn keeps_working(store: &EmbeddedStore, cursor: u64, given: u64) -> Result<(), String> {
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
    let (new, _, _) = feed::read(store, Some(cursor)).await?;
    feed::check_positions(&new, given).map_err(|e| format!("after recovery: {e}"))?;
    if new.len() != 2 {
        return Err(format!("after recovery the feed took {} changes, not 2", new.len()));
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
    let store = open(
        &disk,
        Sizes {
            log: 64 << 10,
            buffer: 0,
        },
    )
    .expect("a new store");
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
        total.savepoints_applied += t.savepoints_applied;
        total.savepoints_absent += t.savepoints_absent;
        total.index_entries += t.index_entries;
        total.feed_changes += t.feed_changes;
        total.acls += t.acls;
        total.failures.extend(t.failures);
    }
    eprintln!(
        "simulation: seeds {first}..{}: {} power losses ({} after a checkpoint) in {:.1} s; \
         unacknowledged ops found applied {}, absent {} (savepoint jobs {} / {}); {} index entries, \
         {} feed changes, {} table ACLs checked; {} failures",
        first + seeds,
        total.crashes,
        total.after_checkpoint,
        started.elapsed().as_secs_f64(),
        total.in_doubt_applied,
        total.in_doubt_absent,
        total.savepoints_applied,
        total.savepoints_absent,
        total.index_entries,
        total.feed_changes,
        total.acls,
        total.failures.len()
    );
    assert!(total.failures.is_empty(), "{}", total.failures.join("\n"));
    // The power losses must have struck where it matters: some after
    // checkpoints, some that lost a write in flight and some that kept one,
    // some in a savepoint job, and stores with index entries, a feed and ACLs.
    assert!(total.after_checkpoint > 0 && total.in_doubt_applied > 0 && total.in_doubt_absent > 0);
    assert!(
        total.savepoints_applied + total.savepoints_absent > 0,
        "no power loss struck a savepoint job"
    );
    assert!(
        total.feed_changes > 0 && total.acls > 0,
        "no power loss left a feed or an ACL"
    );
    assert!(total.index_entries > 0, "no power loss left a store with index entries");
}
