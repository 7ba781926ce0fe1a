//! Scans of the embedded store: the read-ahead loop must keep the page
//! semantics exactly (order, limit, where the next page starts, table bounds).

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{EmbeddedOptions, EmbeddedStore};
use crate::key::{EntityKey, KeyRange, KeyRef};
use crate::test_support::ScanEntities;
use crate::traits::{Mutation, RowFilter, RowSink, ScanRequest, Store};

pub(super) const ACCOUNT: &str = "acct";

/// Waits until `cond` holds: the event a test needs has happened, however
/// loaded the machine (no fixed sleep standing in for it), `within` at most.
pub(super) async fn until(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

pub(super) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().expect("runtime")
}

pub(super) fn open(dir: &std::path::Path) -> EmbeddedStore {
    EmbeddedStore::open(
        dir,
        EmbeddedOptions {
            cache_size: 8 << 20,
            ..EmbeddedOptions::default()
        },
    )
    .expect("open")
}

/// Copies the store's files from `from` into `to` as they are on disk now: with
/// the flusher paused, the files a crash at this instant would leave.
pub(super) fn copy_store_files(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for f in ["tafel.redb", "tafel.wal"] {
        std::fs::copy(from.join(f), to.join(f)).expect("copy");
    }
}

/// Puts rows `pk`/`r000`.. with the value `[i as u8]` into `table`.
async fn fill(store: &EmbeddedStore, table: &str, pk: &str, n: usize) {
    let keys: Vec<EntityKey> = (0..n).map(|i| EntityKey::new(pk, &format!("r{i:03}"))).collect();
    store
        .write_entities(
            ACCOUNT,
            table,
            keys,
            Box::new(move |current: &[Option<&[u8]>]| {
                (0..current.len()).map(|i| Mutation::Put(vec![i as u8])).collect()
            }),
        )
        .await
        .expect("write");
}

fn request(limit: usize, filter: Option<RowFilter>) -> ScanRequest {
    ScanRequest {
        ranges: vec![KeyRange::all()],
        limit,
        filter,
        deadline: None,
    }
}

fn row_keys(rows: &[(EntityKey, Vec<u8>)]) -> Vec<String> {
    rows.iter().map(|(k, _)| k.keys().1).collect()
}

#[test]
fn open_ended_scan_stops_at_the_end_of_its_table() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        // Tables made one after another get neighbouring ids, so the rows of
        // "b" directly follow those of "a" in the store.
        for t in ["a", "b", "c"] {
            assert!(store.create_table(ACCOUNT, t).await.expect("create"));
        }
        fill(&store, "a", "p", 5).await;
        fill(&store, "b", "p", 20).await;
        fill(&store, "c", "p", 3).await;
        let page = store
            .scan_entities(ACCOUNT, "b", request(1000, None))
            .await
            .expect("scan");
        assert_eq!(page.rows.len(), 20);
        assert!(page.next.is_none());
        let page = store
            .scan_entities(ACCOUNT, "a", request(1000, None))
            .await
            .expect("scan");
        assert_eq!(row_keys(&page.rows), ["r000", "r001", "r002", "r003", "r004"]);
        assert!(page.next.is_none());
        store.shutdown().await.expect("shutdown");
    });
}

#[test]
fn limit_below_the_read_ahead_still_names_the_next_match() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        store.create_table(ACCOUNT, "t").await.expect("create");
        fill(&store, "t", "p", 40).await;
        // Every third row matches; the page ends after two matches and the next
        // one (r006) is where the following page starts.
        let every_third: RowFilter = Arc::new(|k: KeyRef<'_>, _v: &[u8]| {
            let (_, rk) = k.keys();
            rk[1..].parse::<u32>().is_ok_and(|i| i % 3 == 0)
        });
        let page = store
            .scan_entities(ACCOUNT, "t", request(2, Some(every_third.clone())))
            .await
            .expect("scan");
        assert_eq!(row_keys(&page.rows), ["r000", "r003"]);
        assert_eq!(page.next.map(|k| k.keys().1).as_deref(), Some("r006"));
        // Exactly `limit` matches in the table: no next page.
        let page = store
            .scan_entities(ACCOUNT, "t", request(14, Some(every_third)))
            .await
            .expect("scan");
        assert_eq!(page.rows.len(), 14);
        assert!(page.next.is_none(), "{:?}", page.next);
        // Values come back with their rows.
        assert_eq!(page.rows[1].1, vec![3u8]);
        store.shutdown().await.expect("shutdown");
    });
}

#[test]
fn every_row_is_filtered_once_and_rows_past_the_table_never() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        for t in ["a", "b"] {
            assert!(store.create_table(ACCOUNT, t).await.expect("create"));
        }
        // Fewer rows than the read-ahead and more, with "b"'s rows right behind.
        for n in [3, 37] {
            fill(&store, "a", &format!("p{n}"), n).await;
        }
        fill(&store, "b", "p", 20).await;
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        // Matches on the value, which the scan filters ahead of offering the row.
        let even_value: RowFilter = Arc::new(move |_k: KeyRef<'_>, v: &[u8]| {
            counted.fetch_add(1, Ordering::Relaxed);
            v.first().is_some_and(|b| b % 2 == 0)
        });
        let page = store
            .scan_entities(ACCOUNT, "a", request(1000, Some(even_value)))
            .await
            .expect("scan");
        assert_eq!(calls.load(Ordering::Relaxed), 40);
        // Partition "p3" sorts before "p37".
        let want: Vec<String> = (0..3)
            .step_by(2)
            .chain((0..37).step_by(2))
            .map(|i| format!("r{i:03}"))
            .collect();
        assert_eq!(row_keys(&page.rows), want);
        assert!(page.rows.iter().all(|(_, v)| v[0] % 2 == 0));
        assert!(page.next.is_none());
        store.shutdown().await.expect("shutdown");
    });
}

#[test]
fn bounded_ranges_are_visited_in_order() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        store.create_table(ACCOUNT, "t").await.expect("create");
        for pk in ["p1", "p2", "p3"] {
            fill(&store, "t", pk, 10).await;
        }
        let req = ScanRequest {
            ranges: vec![KeyRange::point("p1", "r009"), KeyRange::partition("p3")],
            limit: 1000,
            filter: None,
            deadline: None,
        };
        let page = store.scan_entities(ACCOUNT, "t", req).await.expect("scan");
        let keys: Vec<(String, String)> = page.rows.iter().map(|(k, _)| k.keys()).collect();
        assert_eq!(keys.len(), 11);
        assert_eq!(keys[0], ("p1".to_owned(), "r009".to_owned()));
        assert!(keys[1..].iter().all(|(pk, _)| pk == "p3"));
        store.shutdown().await.expect("shutdown");
    });
}

#[test]
fn passed_deadline_returns_a_continuation_inside_the_table() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        store.create_table(ACCOUNT, "t").await.expect("create");
        store.create_table(ACCOUNT, "u").await.expect("create");
        fill(&store, "t", "p", 600).await;
        fill(&store, "u", "p", 600).await;
        let none: RowFilter = Arc::new(|_: KeyRef<'_>, _: &[u8]| false);
        let req = ScanRequest {
            deadline: Some(Instant::now() - Duration::from_millis(1)),
            ..request(1000, Some(none))
        };
        let page = store.scan_entities(ACCOUNT, "t", req).await.expect("scan");
        assert!(page.rows.is_empty());
        // The deadline is checked every 512 rows: the scan stops at the 512th.
        assert_eq!(page.next.map(|k| k.keys().1).as_deref(), Some("r511"));
        store.shutdown().await.expect("shutdown");
    });
}

/// Records, per row it is given, whether `flag` was set by then.
struct Witness {
    flag: Arc<AtomicBool>,
    seen: Vec<(String, bool)>,
}

impl RowSink for Witness {
    fn push(&mut self, key: KeyRef<'_>, _value: &[u8]) -> ControlFlow<()> {
        self.seen.push((key.keys().1, self.flag.load(Ordering::SeqCst)));
        ControlFlow::Continue(())
    }
}

#[test]
fn a_long_scan_lets_the_other_tasks_of_its_thread_run() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        store.create_table(ACCOUNT, "t").await.expect("create");
        fill(&store, "t", "p", 600).await;
        // 100 µs per row: the scan outlasts its time slice within the first rows
        // it checks the clock after, and must then let the spawned task run.
        let slow: RowFilter = Arc::new(|_: KeyRef<'_>, _: &[u8]| {
            std::thread::sleep(Duration::from_micros(100));
            true
        });
        let flag = Arc::new(AtomicBool::new(false));
        let set = flag.clone();
        tokio::spawn(async move { set.store(true, Ordering::SeqCst) });
        let mut sink = Witness { flag, seen: Vec::new() };
        let end = store
            .scan_into(ACCOUNT, "t", request(1000, Some(slow)), &mut sink)
            .await
            .expect("scan");
        assert!(end.next.is_none());
        // Every row once, in order, to the sink as it was found.
        let keys: Vec<&str> = sink.seen.iter().map(|(k, _)| k.as_str()).collect();
        let want: Vec<String> = (0..600).map(|i| format!("r{i:03}")).collect();
        assert_eq!(keys, want);
        assert!(!sink.seen[0].1, "the other task ran before the scan began");
        assert!(sink.seen[599].1, "the scan never let the other task run");
        store.shutdown().await.expect("shutdown");
    });
}

pub(super) use tempfile::{tempdir, TempDir};

#[test]
fn a_page_of_large_rows_ends_early_at_its_byte_limit() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        store.create_table(ACCOUNT, "big").await.expect("create");
        let mib = vec![7u8; 1 << 20];
        for i in 0..24 {
            let value = mib.clone();
            let keys = vec![EntityKey::new("p", &format!("r{i:03}"))];
            store
                .write_entities(
                    ACCOUNT,
                    "big",
                    keys,
                    Box::new(move |_| vec![Mutation::Put(value.clone())]),
                )
                .await
                .expect("write");
        }
        let page = store
            .scan_entities(ACCOUNT, "big", request(1000, None))
            .await
            .expect("scan");
        let per_page = crate::paging::MAX_PAGE_BYTES >> 20;
        assert_eq!(
            page.rows.len(),
            per_page,
            "a page holds its byte limit's worth, not 1,000 MiB"
        );
        let next = page.next.expect("a continuation to the rest");
        assert_eq!(next.keys().1, format!("r{per_page:03}"));
    });
}

/// A panic in the service's filter ran inside the scan's guard against damaged
/// pages and was reported as a corrupt store, sending operators to `tafel check`
/// for a bug of ours.
#[test]
fn a_panicking_filter_is_reported_as_a_bug_not_as_damage() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        assert!(store.create_table(ACCOUNT, "t").await.expect("create"));
        fill(&store, "t", "p", 30).await;
        for at in [0u8, 20] {
            let filter: RowFilter = Arc::new(move |_, v: &[u8]| if v[0] == at { panic!("filter bug") } else { true });
            match store.scan_entities(ACCOUNT, "t", request(1000, Some(filter))).await {
                Err(crate::StoreError::Backend(b)) => assert_eq!(b.kind, crate::error::FailureKind::Internal, "{b}"),
                Err(other) => panic!("{other}"),
                Ok(_) => panic!("a panicking filter failed no scan"),
            }
        }
        // The store itself is fine: the same scan without the filter reads every row.
        let page = store
            .scan_entities(ACCOUNT, "t", request(1000, None))
            .await
            .expect("scan");
        assert_eq!(page.rows.len(), 30);
        store.shutdown().await.expect("shutdown");
    });
}

/// Takes rows until the `fail_at`th, which it refuses (as a sink whose encoder
/// failed), counting every row it is offered.
struct FailsAt {
    fail_at: usize,
    offered: usize,
}

impl RowSink for FailsAt {
    fn push(&mut self, _key: KeyRef<'_>, _value: &[u8]) -> ControlFlow<()> {
        self.offered += 1;
        if self.offered == self.fail_at {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}

/// A scan whose sink failed (an encoder error) went on to the end of its page,
/// encoding rows for an answer that was already an error.
#[test]
fn a_scan_stops_at_the_row_its_sink_fails_on() {
    let dir = tempdir().expect("temp dir");
    runtime().block_on(async {
        let store = open(dir.path());
        store.create_table(ACCOUNT, "t").await.expect("create");
        fill(&store, "t", "p", 300).await;
        let mut sink = FailsAt { fail_at: 7, offered: 0 };
        let end = store
            .scan_into(ACCOUNT, "t", request(1000, None), &mut sink)
            .await
            .expect("scan");
        assert_eq!(sink.offered, 7, "rows offered after the sink failed");
        assert!(end.next.is_none(), "no continuation after the sink failed");
    });
}
