//! In memory a write's own thread runs its group when no one else is
//! (`engine/writer.rs`, `Queue`); checkpoints, groups run in redb's
//! transaction and savepoints stay the writer thread's.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::scan_tests::until;
use super::EmbeddedStore;
use crate::key::{EntityKey, KeyRange};
use crate::test_support::ScanEntities;
use crate::traits::{Mutation, ScanRequest, Store};

const ACCOUNT: &str = "acct";
const THREADS: u32 = 8;
const WRITES: u32 = 150;
/// Rows of each batch-sized write: past the size from which a group runs in
/// redb's transaction.
const BATCH: u32 = 100;

/// The in-memory log these tests fill: its half is 8 MiB.
const LOG: u64 = 16 << 20;

/// An in-memory store of `cap` bytes with a write buffer of `buffer`, and its table "t".
async fn store_with_table(cap: u64, buffer: usize) -> Arc<EmbeddedStore> {
    let store = Arc::new(EmbeddedStore::open_in_memory_with_log(cap, 4 << 20, buffer, LOG).expect("open"));
    store.create_table(ACCOUNT, "t").await.expect("create");
    store
}

async fn put(store: &EmbeddedStore, keys: Vec<EntityKey>, byte: u8) {
    let n = keys.len();
    store
        .write_entities(
            ACCOUNT,
            "t",
            keys,
            Box::new(move |_: &[Option<&[u8]>]| vec![Mutation::Put(vec![byte; 2000]); n]),
        )
        .await
        .expect("write");
}

/// Every row of the table, by a scan.
pub(super) async fn all_rows(store: &EmbeddedStore) -> Vec<(EntityKey, Vec<u8>)> {
    let request = ScanRequest {
        ranges: vec![KeyRange::all()],
        limit: usize::MAX,
        filter: None,
        deadline: None,
    };
    store.scan_entities(ACCOUNT, "t", request).await.expect("scan").rows
}

/// Single writes to `partition`, one row each, until `done`: how many. Fails
/// with `never` past 20,000.
async fn put_until(store: &EmbeddedStore, partition: &str, never: &str, done: impl Fn() -> bool) -> u32 {
    let mut written = 0u32;
    while !done() {
        assert!(written < 20_000, "{never}");
        put(store, vec![EntityKey::new(partition, &format!("{written:05}"))], 1).await;
        written += 1;
    }
    written
}

/// Four threads: writes come from several at once.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn writes_from_many_threads_in_memory_are_all_kept_and_only_the_writer_folds() {
    runtime().block_on(async {
        // A 256 KiB write buffer fills many times over: each fold is due on a write's thread.
        let store = store_with_table(256 << 20, 256 << 10).await;
        let mut tasks = Vec::new();
        for thread in 0..THREADS {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..WRITES {
                    let key = EntityKey::new(&format!("w{thread}"), &format!("{i:04}"));
                    put(&store, vec![key], (thread + i) as u8).await;
                    if i % 50 == 0 {
                        let rows = (0..BATCH).map(|r| EntityKey::new(&format!("b{thread}-{i}"), &format!("{r:04}")));
                        put(&store, rows.collect(), 1).await;
                    }
                    if thread == 0 && i % 40 == 0 {
                        store.save_savepoint(&format!("s{i}")).await.expect("savepoint");
                    }
                }
            }));
        }
        for task in tasks {
            task.await.expect("writes");
        }
        let rows = all_rows(&store).await;
        let batches = THREADS * WRITES.div_ceil(50) * BATCH;
        assert_eq!(
            rows.len() as u32,
            THREADS * WRITES + batches,
            "every acknowledged write is there"
        );
        for thread in 0..THREADS {
            for i in [0, WRITES / 2, WRITES - 1] {
                let key = EntityKey::new(&format!("w{thread}"), &format!("{i:04}"));
                let got = store.get_entity(ACCOUNT, "t", &key).await.expect("get");
                assert_eq!(got, Some(vec![(thread + i) as u8; 2000]));
            }
        }
        let stats = &store.inner.stats;
        // Folded aside, or by the batches' and savepoints' groups in redb's own
        // transaction, which fold what is buffered (and clear a fold aside under
        // way): how many of each is the machine's timing.
        assert!(stats.buffer_folds.load(Ordering::Relaxed) > 2, "the buffer was folded");
        assert_eq!(
            stats.direct_off_the_writer.load(Ordering::Relaxed),
            0,
            "a checkpoint or a group in redb's transaction ran on a write's thread"
        );
        store.shutdown().await.expect("shutdown");
    });
}

/// A write buffer larger than the log: in memory the log's half (8 MiB) fills
/// first. The group whose record no longer fit used to run that checkpoint on
/// the write's own thread, stalling every read served there for the fold
/// (`tafel-bench --workloads read-while-merging`: reads' p99.9 ~50 ms).
#[test]
fn a_full_log_in_memory_is_folded_by_the_writer_not_on_a_writes_thread() {
    runtime().block_on(async {
        let store = store_with_table(512 << 20, 256 << 20).await;
        // ~19 MB of records: the log's half fills twice.
        let tasks: Vec<_> = (0..THREADS)
            .map(|thread| {
                let store = store.clone();
                tokio::spawn(async move {
                    for i in 0..1200u32 {
                        let key = EntityKey::new(&format!("w{thread}"), &format!("{i:04}"));
                        put(&store, vec![key], i as u8).await;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("writes");
        }
        let stats = &store.inner.stats;
        // The second fold, set aside with ~5 MB still to write, may still be
        // under way when they end (it was, on a loaded machine).
        until("the log filled and was folded twice", Duration::from_secs(30), || {
            stats.checkpoint_seconds.snapshot().count >= 2
        })
        .await;
        assert_eq!(
            stats.direct_off_the_writer.load(Ordering::Relaxed),
            0,
            "a checkpoint ran on a write's thread"
        );
        let key = EntityKey::new("w3", "1199");
        assert_eq!(
            store.get_entity(ACCOUNT, "t", &key).await.expect("get"),
            Some(vec![1199u32 as u8; 2000])
        );
        store.shutdown().await.expect("shutdown");
    });
}

/// A write queued as the store stops is run or refused, never left waiting:
/// the writer thread's last turn closes the queue.
#[test]
fn writes_racing_a_shutdown_in_memory_all_end() {
    runtime().block_on(async {
        for round in 0..20u32 {
            let store = store_with_table(64 << 20, 1 << 20).await;
            let tasks: Vec<_> = (0..8u32)
                .map(|thread| {
                    let store = store.clone();
                    tokio::spawn(async move {
                        for i in 0.. {
                            let key = EntityKey::new(&format!("w{thread}"), &format!("{i:06}"));
                            let put = store.write_entities(
                                ACCOUNT,
                                "t",
                                vec![key],
                                Box::new(|_: &[Option<&[u8]>]| vec![Mutation::Put(vec![1])]),
                            );
                            if put.await.is_err() {
                                return i;
                            }
                        }
                        unreachable!("a write after the shutdown was taken")
                    })
                })
                .collect();
            tokio::time::sleep(Duration::from_millis(u64::from(round % 5))).await;
            store.shutdown().await.expect("shutdown");
            let ended = tokio::time::timeout(Duration::from_secs(20), async {
                for task in tasks {
                    task.await.expect("writes");
                }
            })
            .await;
            assert!(
                ended.is_ok(),
                "round {round}: a write was left waiting after the shutdown"
            );
        }
    });
}

/// In memory a checkpoint is folded aside: the buffer as it was is folded on a
/// thread of its own while writes go on. The writer thread used to fold it holding the
/// core, and every write waited for the whole fold (20–100 ms under merges
/// spread over a large table: `tafel-bench --workloads merge-upsert`'s p99.9).
#[test]
fn writes_go_on_while_the_buffer_is_folded_aside() {
    runtime().block_on(async {
        let store = store_with_table(512 << 20, 256 << 20).await;
        let stats = &store.inner.stats;
        stats.hold_folds.store(true, Ordering::Release);
        // Writes until the log's half (8 MiB) is nearly full and a fold is set
        // aside; it commits, and waits at the pause before it becomes the
        // buffer's. No more are written until then: on a busy machine the fold
        // thread (`engine/pace.rs`) is slow, and writes filling the log again
        // would wait for the held fold.
        let written = put_until(&store, "before", "no fold was set aside", || {
            stats.folds_set_aside.load(Ordering::Relaxed) > 0
        })
        .await;
        let at_set_aside = written;
        until("the fold committed", Duration::from_secs(20), || {
            stats.at_fold_pause.load(Ordering::Acquire)
        })
        .await;
        // With the fold held, writes (new rows and rows the fold holds) are answered.
        let during = async {
            for i in 0..200u32 {
                put(&store, vec![EntityKey::new("during", &format!("{i:05}"))], 2).await;
                put(&store, vec![EntityKey::new("before", &format!("{i:05}"))], 3).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(20), during)
            .await
            .expect("writes waited for the fold");
        assert_eq!(stats.checkpoint_seconds.snapshot().count, 0, "the fold ran while held");
        stats.hold_folds.store(false, Ordering::Release);
        until("the fold let go ran", Duration::from_secs(20), || {
            stats.checkpoint_seconds.snapshot().count > 0
        })
        .await;
        // The fold is in redb; the buffer keeps only what was written since it
        // was set aside: the 400 writes above and those of the loop after the
        // set-aside (plus one write the set-aside may have raced). The ~7 MiB
        // written before it are in redb.
        let buffered = stats.write_buffer_bytes.load(Ordering::Relaxed);
        let folded = u64::from(at_set_aside) * 2000;
        let since = u64::from(written - at_set_aside + 401) * 2000;
        assert!(folded > 4 << 20, "the fold was set aside after only {folded} bytes");
        assert!(
            buffered < since + since / 4 + (64 << 10),
            "{buffered} bytes still buffered after the fold of about {folded}; \
             about {since} written since it was set aside"
        );
        for (pk, i, byte) in [
            ("before", 0, 3),
            ("before", 199, 3),
            ("before", 200, 1),
            ("during", 0, 2),
        ] {
            let key = EntityKey::new(pk, &format!("{i:05}"));
            let got = store.get_entity(ACCOUNT, "t", &key).await.expect("get");
            assert_eq!(got, Some(vec![byte; 2000]), "{pk} {i}");
        }
        let last = EntityKey::new("before", &format!("{:05}", written - 1));
        assert_eq!(
            store.get_entity(ACCOUNT, "t", &last).await.expect("get"),
            Some(vec![1; 2000])
        );
        let rows = all_rows(&store).await;
        assert_eq!(rows.len() as u32, written + 200, "every row once");
        store.shutdown().await.expect("shutdown");
    });
}

/// While a fold aside runs, writes fill the log's half again: the group whose
/// record no longer fit folded everything itself, on its write's own thread.
/// Once the log is nearly full again, writes are left to the writer thread,
/// which finishes the fold itself (`engine/pace.rs`). The fold thread is held
/// here until then: without the hand-over the writes wait for ever.
#[test]
fn writes_filling_the_log_during_a_fold_aside_wait_for_it() {
    runtime().block_on(async {
        let store = store_with_table(512 << 20, 256 << 20).await;
        let stats = store.inner.stats.clone();
        stats.hold_paced.store(true, Ordering::Release);
        // ~24 MB of records: the log's half (8 MiB) fills behind the held fold.
        let writes = async {
            for i in 0..12_000u32 {
                put(&store, vec![EntityKey::new("p", &format!("{i:05}"))], 1).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(60), writes)
            .await
            .expect("writes waited for the held fold");
        assert!(
            stats.folds_hurried.load(Ordering::Relaxed) >= 1,
            "the log filled without a fold to finish"
        );
        assert_eq!(
            stats.direct_off_the_writer.load(Ordering::Relaxed),
            0,
            "a write's thread folded the buffer"
        );
        stats.hold_paced.store(false, Ordering::Release);
        for i in [0, 5_999, 11_999] {
            let key = EntityKey::new("p", &format!("{i:05}"));
            assert_eq!(
                store.get_entity(ACCOUNT, "t", &key).await.expect("get"),
                Some(vec![1; 2000])
            );
        }
        store.shutdown().await.expect("shutdown");
    });
}

/// In memory the fold runs at a lower priority (`engine/pace.rs`). A batch, run
/// in redb's own transaction, must wait for it: it finishes the fold itself
/// rather than wait on a thread that a busy machine starves (with two
/// CPU-bound processes beside the server, merges' p99.9 went 12 → 62 ms,
/// benchmark-history §45). Held here, the fold thread never folds: without
/// the hand-over the batch waits for ever.
#[test]
fn a_batch_behind_a_starved_fold_finishes_the_fold_itself() {
    runtime().block_on(async {
        let store = store_with_table(512 << 20, 256 << 20).await;
        let stats = &store.inner.stats;
        stats.hold_paced.store(true, Ordering::Release);
        let written = put_until(&store, "single", "no fold was handed to the fold thread", || {
            stats.at_paced_hold.load(Ordering::Acquire)
        })
        .await;
        let rows = (0..BATCH).map(|r| EntityKey::new("batch", &format!("{r:04}")));
        tokio::time::timeout(Duration::from_secs(20), put(&store, rows.collect(), 2))
            .await
            .expect("the batch waited for the held fold");
        assert_eq!(
            stats.folds_hurried.load(Ordering::Relaxed),
            1,
            "the batch's thread finished the fold"
        );
        until("the fold became the buffer's", Duration::from_secs(20), || {
            stats.checkpoint_seconds.snapshot().count > 0
        })
        .await;
        stats.hold_paced.store(false, Ordering::Release);
        let rows = all_rows(&store).await;
        assert_eq!(rows.len() as u32, written + BATCH, "every row once");
        for (pk, rk, byte) in [
            ("single", "00000".to_string(), 1),
            ("batch", format!("{:04}", BATCH - 1), 2),
        ] {
            let key = EntityKey::new(pk, &rk);
            let got = store.get_entity(ACCOUNT, "t", &key).await.expect("get");
            assert_eq!(got, Some(vec![byte; 2000]), "{pk} {rk}");
        }
        store.shutdown().await.expect("shutdown");
    });
}
