//! The PostgreSQL backend against a real PostgreSQL (`TAFEL_TEST_POSTGRES_URL`,
//! which `scripts/with-postgres` provides). Every test works in an account of its
//! own, so tests share the database without seeing each other. Where the contract
//! leaves a choice (paging, ordering, edge cases), the answer is compared with the
//! embedded store's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tafel_store::embedded::{EmbeddedOptions, EmbeddedStore};
use tafel_store::postgres::{PostgresOptions, PostgresStore};
use tafel_store::{Decide, Decision, EntityKey, KeyRange, Mutation, RowFilter, ScanRequest, Store, StoreError};

// Scans into owned pages, as the unit tests do.
#[path = "../src/test_support.rs"]
mod test_support;
use test_support::{ScanEntities, ScanPage};

/// The database URL, or `None` (said loudly) when the tests cannot run. With
/// `TAFEL_REQUIRE_POSTGRES=1` a missing URL fails instead.
fn url() -> Option<String> {
    match std::env::var("TAFEL_TEST_POSTGRES_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            let msg = "TAFEL_TEST_POSTGRES_URL is not set: the PostgreSQL backend tests did NOT run \
                       (run them with scripts/with-postgres cargo test -p tafel-store --test postgres)";
            if std::env::var("TAFEL_REQUIRE_POSTGRES").is_ok_and(|v| v == "1") {
                panic!("{msg}");
            }
            eprintln!("\n!!!!!!!! SKIPPED: {msg} !!!!!!!!\n");
            None
        }
    }
}

async fn pg(url: &str) -> PostgresStore {
    PostgresStore::connect(url, PostgresOptions { pool_size: 8 })
        .await
        .expect("connect to the test database")
}

fn account() -> String {
    format!("acct{:016x}", fastrand::u64(..))
}

fn embedded() -> (EmbeddedStore, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("tafel-pg-parity-{:016x}", fastrand::u64(..)));
    let store = EmbeddedStore::open(&dir, EmbeddedOptions { cache_size: 8 << 20 }).expect("open embedded");
    (store, dir)
}

fn key(pk: &str, rk: &str) -> EntityKey {
    EntityKey::new(pk, rk)
}

/// Puts `values[i]` under `keys[i]`.
fn put_all(values: Vec<Vec<u8>>) -> Decide {
    Box::new(move |_| Decision {
        mutations: values.iter().cloned().map(Mutation::Put).collect(),
        outcome: Box::new(()),
    })
}

async fn put(store: &dyn Store, account: &str, table: &str, pk: &str, rk: &str, value: &[u8]) {
    store
        .write_entities(account, table, vec![key(pk, rk)], put_all(vec![value.to_vec()]))
        .await
        .expect("put");
}

/// Inserts `key` if absent; `true` if this call inserted it.
fn insert_if_absent(value: Vec<u8>) -> Decide {
    Box::new(move |current| match current[0] {
        Some(_) => Decision {
            mutations: Vec::new(),
            outcome: Box::new(false),
        },
        None => Decision {
            mutations: vec![Mutation::Put(value.clone())],
            outcome: Box::new(true),
        },
    })
}

/// Adds one to a little-endian u64 counter (absent = 0); returns the new value.
fn increment() -> Decide {
    Box::new(|current| {
        let n = current[0].map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap_or([0; 8]))) + 1;
        Decision {
            mutations: vec![Mutation::Put(n.to_le_bytes().to_vec())],
            outcome: Box::new(n),
        }
    })
}

fn names(records: &[tafel_store::TableRecord]) -> Vec<&str> {
    records.iter().map(|r| r.name.as_str()).collect()
}

#[tokio::test]
async fn tables_by_case_insensitive_name_listed_in_ordinal_order() {
    let Some(url) = url() else { return };
    let s = pg(&url).await;
    let a = account();
    assert!(s.create_table(&a, "Orders").await.unwrap());
    assert!(!s.create_table(&a, "oRDERS").await.unwrap());
    let t = s.get_table(&a, "ORDERS").await.unwrap().expect("found ignoring case");
    assert_eq!((t.name.as_str(), t.acl.as_slice()), ("Orders", &[][..]));
    assert_eq!(s.get_table(&a, "missing").await.unwrap(), None);
    // Another account does not see it.
    assert_eq!(s.get_table(&account(), "Orders").await.unwrap(), None);

    for n in ["aa", "AB", "Bb", "b0"] {
        assert!(s.create_table(&a, n).await.unwrap());
    }
    let all = s.list_tables(&a, None, 100).await.unwrap();
    assert_eq!(
        names(&all),
        ["AB", "Bb", "Orders", "aa", "b0"],
        "ordinal order of stored names"
    );
    assert_eq!(
        names(&s.list_tables(&a, Some("Bb"), 2).await.unwrap()),
        ["Bb", "Orders"]
    );
    assert_eq!(
        names(&s.list_tables(&a, Some("Bc"), 100).await.unwrap()),
        ["Orders", "aa", "b0"]
    );
    assert_eq!(
        names(&s.list_tables(&a, Some("zz"), 100).await.unwrap()),
        Vec::<&str>::new()
    );
    assert!(s.list_tables(&a, None, 0).await.unwrap().is_empty());

    assert!(s.set_table_acl(&a, "orders", vec![1, 2, 3]).await.unwrap());
    assert!(!s.set_table_acl(&a, "nope", vec![1]).await.unwrap());
    assert_eq!(s.get_table(&a, "Orders").await.unwrap().unwrap().acl, [1, 2, 3]);
    assert_eq!(s.list_tables(&a, Some("Orders"), 1).await.unwrap()[0].acl, [1, 2, 3]);

    assert!(s.delete_table(&a, "ORDERS").await.unwrap());
    assert!(!s.delete_table(&a, "Orders").await.unwrap());
    assert_eq!(s.get_table(&a, "Orders").await.unwrap(), None);
}

#[tokio::test]
async fn a_recreated_table_starts_empty() {
    let Some(url) = url() else { return };
    let s = pg(&url).await;
    let a = account();
    s.create_table(&a, "t1").await.unwrap();
    put(&s, &a, "t1", "p", "r", b"old").await;
    assert!(s.delete_table(&a, "T1").await.unwrap());
    assert!(matches!(
        s.get_entity(&a, "t1", &key("p", "r")).await,
        Err(StoreError::TableNotFound)
    ));
    assert!(s.create_table(&a, "T1").await.unwrap());
    assert_eq!(s.get_entity(&a, "t1", &key("p", "r")).await.unwrap(), None);
    let page = s.scan_entities(&a, "t1", all(10, None)).await.unwrap();
    assert!(page.rows.is_empty() && page.next.is_none());
}

#[tokio::test]
async fn entity_operations_and_their_edge_cases() {
    let Some(url) = url() else { return };
    let s = pg(&url).await;
    let a = account();
    let k = key("p", "r");
    assert!(matches!(
        s.get_entity(&a, "none", &k).await,
        Err(StoreError::TableNotFound)
    ));
    assert!(matches!(
        s.write_entities(&a, "none", vec![k.clone()], put_all(vec![vec![1]]))
            .await,
        Err(StoreError::TableNotFound)
    ));
    assert!(matches!(
        s.scan_entities(&a, "none", all(10, None)).await,
        Err(StoreError::TableNotFound)
    ));
    s.create_table(&a, "Ent").await.unwrap();
    assert_eq!(s.get_entity(&a, "ENT", &k).await.unwrap(), None);
    put(&s, &a, "ent", "p", "r", b"v1").await;
    assert_eq!(s.get_entity(&a, "Ent", &k).await.unwrap().as_deref(), Some(&b"v1"[..]));

    // The decision sees the current rows, in the order of the keys asked for.
    let k2 = key("p", "s");
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let out = s
        .write_entities(
            &a,
            "Ent",
            vec![k2.clone(), k.clone()],
            Box::new(move |cur| {
                *seen2.lock().unwrap() = cur.iter().map(|c| c.map(<[u8]>::to_vec)).collect();
                Decision {
                    mutations: vec![Mutation::Put(b"new".to_vec()), Mutation::Delete],
                    outcome: Box::new(7u32),
                }
            }),
        )
        .await
        .unwrap();
    assert_eq!(*out.downcast::<u32>().unwrap(), 7);
    assert_eq!(*seen.lock().unwrap(), vec![None, Some(b"v1".to_vec())]);
    assert_eq!(s.get_entity(&a, "Ent", &k).await.unwrap(), None);
    assert_eq!(
        s.get_entity(&a, "Ent", &k2).await.unwrap().as_deref(),
        Some(&b"new"[..])
    );

    // Keep and "change nothing".
    s.write_entities(
        &a,
        "Ent",
        vec![k2.clone(), k.clone()],
        Box::new(|_| Decision {
            mutations: vec![Mutation::Keep, Mutation::Put(b"k".to_vec())],
            outcome: Box::new(()),
        }),
    )
    .await
    .unwrap();
    s.write_entities(
        &a,
        "Ent",
        vec![k2.clone()],
        Box::new(|_| Decision {
            mutations: Vec::new(),
            outcome: Box::new(()),
        }),
    )
    .await
    .unwrap();
    assert_eq!(
        s.get_entity(&a, "Ent", &k2).await.unwrap().as_deref(),
        Some(&b"new"[..])
    );
    assert_eq!(s.get_entity(&a, "Ent", &k).await.unwrap().as_deref(), Some(&b"k"[..]));

    // A decision that does not cover every key, or panics, writes nothing.
    let short = s
        .write_entities(&a, "Ent", vec![k.clone(), k2.clone()], put_all(vec![b"x".to_vec()]))
        .await;
    assert!(matches!(short, Err(StoreError::Backend(_))));
    let panicked = s
        .write_entities(&a, "Ent", vec![k.clone()], Box::new(|_| panic!("decide panics")))
        .await;
    assert!(matches!(panicked, Err(StoreError::Backend(_))));
    assert_eq!(s.get_entity(&a, "Ent", &k).await.unwrap().as_deref(), Some(&b"k"[..]));

    // Empty and large values, binary keys.
    let big = vec![0xabu8; 1 << 20];
    put(&s, &a, "Ent", "p\u{0}x", "\u{10000}", &big).await;
    put(&s, &a, "Ent", "p", "empty", b"").await;
    assert_eq!(
        s.get_entity(&a, "Ent", &key("p\u{0}x", "\u{10000}")).await.unwrap(),
        Some(big)
    );
    assert_eq!(
        s.get_entity(&a, "Ent", &key("p", "empty")).await.unwrap(),
        Some(Vec::new())
    );
}

#[tokio::test]
async fn service_properties_per_account() {
    let Some(url) = url() else { return };
    let s = pg(&url).await;
    let (a, b) = (account(), account());
    assert_eq!(s.get_service_properties(&a).await.unwrap(), None);
    s.set_service_properties(&a, vec![1]).await.unwrap();
    s.set_service_properties(&a, vec![2, 2]).await.unwrap();
    assert_eq!(s.get_service_properties(&a).await.unwrap(), Some(vec![2, 2]));
    assert_eq!(s.get_service_properties(&b).await.unwrap(), None);
}

fn all(limit: usize, filter: Option<RowFilter>) -> ScanRequest {
    ScanRequest {
        ranges: vec![KeyRange::all()],
        limit,
        filter,
        deadline: None,
    }
}

fn every_third() -> RowFilter {
    Arc::new(|_, v| v.first().is_some_and(|b| b % 3 == 0))
}

/// The scans whose answers both backends must agree on.
fn scan_cases() -> Vec<(&'static str, ScanRequest)> {
    let past = Instant::now() - Duration::from_secs(1);
    vec![
        ("everything", all(10_000, None)),
        ("limit 10", all(10, None)),
        ("limit exactly the rows", all(1200, None)),
        ("limit 0", all(0, None)),
        ("filter, limit 5", all(5, Some(every_third()))),
        ("filter, limit = matches", all(400, Some(every_third()))),
        ("filter nothing matches", all(10, Some(Arc::new(|_, _| false)))),
        (
            "deadline passed",
            ScanRequest {
                deadline: Some(past),
                ..all(10_000, None)
            },
        ),
        (
            "deadline passed, filter",
            ScanRequest {
                deadline: Some(past),
                ..all(10_000, Some(every_third()))
            },
        ),
        (
            "ranges, one empty",
            ScanRequest {
                ranges: vec![
                    KeyRange::partition("a"),
                    KeyRange {
                        start: KeyRange::pk_lower("b"),
                        end: Some(KeyRange::pk_lower("b")),
                    },
                    KeyRange::rows(
                        "c",
                        std::ops::Bound::Included("r0100"),
                        std::ops::Bound::Excluded("r0110"),
                    ),
                    KeyRange::point("c", "r0300"),
                    KeyRange::rows("c", std::ops::Bound::Excluded("r0390"), std::ops::Bound::Unbounded),
                ],
                limit: 1000,
                filter: None,
                deadline: None,
            },
        ),
        (
            "ranges, page ends in the second",
            ScanRequest {
                ranges: vec![KeyRange::partition("a"), KeyRange::partition("c")],
                limit: 450,
                filter: Some(every_third()),
                deadline: None,
            },
        ),
    ]
}

fn summary(page: &ScanPage) -> (Vec<(EntityKey, Vec<u8>)>, Option<EntityKey>) {
    (page.rows.clone(), page.next.clone())
}

#[tokio::test]
async fn scans_page_exactly_like_the_embedded_store() {
    let Some(url) = url() else { return };
    let s = pg(&url).await;
    let (e, dir) = embedded();
    let a = account();
    for store in [&s as &dyn Store, &e] {
        store.create_table(&a, "scan").await.unwrap();
        for pk in ["a", "b", "c"] {
            // 400 rows per partition, written 100 to a transaction.
            for chunk in 0..4 {
                let keys: Vec<EntityKey> = (chunk * 100..chunk * 100 + 100)
                    .map(|i| key(pk, &format!("r{i:04}")))
                    .collect();
                let values = (chunk * 100..chunk * 100 + 100)
                    .map(|i| vec![(i % 256) as u8, 1])
                    .collect();
                store.write_entities(&a, "scan", keys, put_all(values)).await.unwrap();
            }
        }
    }
    for (name, request) in scan_cases() {
        let (name2, request2) = scan_cases().into_iter().find(|(n, _)| *n == name).expect("same case");
        let want = e.scan_entities(&a, "scan", request2).await.unwrap();
        let got = s.scan_entities(&a, "scan", request).await.unwrap();
        assert_eq!(summary(&got), summary(&want), "{name2}");
    }
    // Paging to the end with a filter visits every match once.
    let mut seen = 0;
    let mut from = Vec::new();
    loop {
        let page = s
            .scan_entities(
                &a,
                "scan",
                ScanRequest {
                    ranges: vec![KeyRange { start: from, end: None }],
                    limit: 37,
                    filter: Some(every_third()),
                    deadline: None,
                },
            )
            .await
            .unwrap();
        seen += page.rows.len();
        match page.next {
            Some(k) => from = k.as_bytes().to_vec(),
            None => break,
        }
    }
    let matches = (0..400).filter(|i| (i % 256) % 3 == 0).count() * 3;
    assert_eq!(seen, matches);
    e.shutdown().await.unwrap();
    drop(e);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_inserts_of_one_key_exactly_one_wins() {
    let Some(url) = url() else { return };
    let s = Arc::new(pg(&url).await);
    let other = Arc::new(pg(&url).await); // a second node
    let a = account();
    s.create_table(&a, "race").await.unwrap();
    for round in 0..5 {
        let rk = format!("r{round}");
        let mut tasks = Vec::new();
        for i in 0..24 {
            let store = if i % 2 == 0 { s.clone() } else { other.clone() };
            let (a, rk) = (a.clone(), rk.clone());
            tasks.push(tokio::spawn(async move {
                let out = store
                    .write_entities(&a, "race", vec![key("p", &rk)], insert_if_absent(vec![i as u8]))
                    .await
                    .expect("insert");
                *out.downcast::<bool>().expect("bool")
            }));
        }
        let mut wins = 0;
        for t in tasks {
            wins += usize::from(t.await.unwrap());
        }
        assert_eq!(wins, 1, "round {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_counters_lose_no_update() {
    let Some(url) = url() else { return };
    let s = Arc::new(pg(&url).await);
    let other = Arc::new(pg(&url).await);
    let a = account();
    s.create_table(&a, "count").await.unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let busy = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..16 {
        let store = if i % 2 == 0 { s.clone() } else { other.clone() };
        let (a, done, busy) = (a.clone(), done.clone(), busy.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..20 {
                // Two counters in one transaction: each increment moves both.
                let keys = vec![key("c", "one"), key("c", "two")];
                let both: Decide = Box::new(|cur| {
                    let mut muts = Vec::new();
                    for c in cur {
                        let n = c.map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap_or([0; 8]))) + 1;
                        muts.push(Mutation::Put(n.to_le_bytes().to_vec()));
                    }
                    Decision {
                        mutations: muts,
                        outcome: Box::new(()),
                    }
                });
                match store.write_entities(&a, "count", keys, both).await {
                    Ok(_) => {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    // Giving up under contention is allowed (a 503); losing an update is not.
                    Err(StoreError::Busy(_)) => {
                        busy.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let done = done.load(Ordering::Relaxed) as u64;
    eprintln!(
        "counters: {done} increments, {} gave up busy",
        busy.load(Ordering::Relaxed)
    );
    assert!(done > 0);
    for rk in ["one", "two"] {
        let v = s.get_entity(&a, "count", &key("c", rk)).await.unwrap().unwrap();
        assert_eq!(u64::from_le_bytes(v.try_into().unwrap()), done, "{rk}");
    }
    // A single counter through `increment` returns each value once.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = if i % 2 == 0 { s.clone() } else { other.clone() };
        let a = a.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..10 {
                if let Ok(out) = store
                    .write_entities(&a, "count", vec![key("c", "seq")], increment())
                    .await
                {
                    got.push(*out.downcast::<u64>().unwrap());
                }
            }
            got
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort_unstable();
    let n = all.len() as u64;
    assert_eq!(
        all,
        (1..=n).collect::<Vec<_>>(),
        "every increment saw the one before it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_share_tables_and_see_deletes_at_once() {
    let Some(url) = url() else { return };
    let (a_node, b_node) = (pg(&url).await, pg(&url).await);
    let a = account();
    a_node.create_table(&a, "Shared").await.unwrap();
    assert_eq!(b_node.get_table(&a, "shared").await.unwrap().unwrap().name, "Shared");
    put(&b_node, &a, "shared", "p", "r", b"from b").await;
    assert_eq!(
        a_node
            .get_entity(&a, "Shared", &key("p", "r"))
            .await
            .unwrap()
            .as_deref(),
        Some(&b"from b"[..])
    );
    assert!(a_node.delete_table(&a, "Shared").await.unwrap());
    assert!(matches!(
        b_node
            .write_entities(&a, "shared", vec![key("p", "r")], put_all(vec![vec![1]]))
            .await,
        Err(StoreError::TableNotFound)
    ));
    assert!(b_node.create_table(&a, "shared").await.unwrap());
    assert_eq!(a_node.get_entity(&a, "SHARED", &key("p", "r")).await.unwrap(), None);
    assert_eq!(a_node.get_table(&a, "SHARED").await.unwrap().unwrap().name, "shared");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn table_delete_racing_writes_leaves_no_orphans() {
    let Some(url) = url() else { return };
    let s = Arc::new(pg(&url).await);
    let a = account();
    for round in 0..5 {
        s.create_table(&a, "gone").await.unwrap();
        let mut tasks = Vec::new();
        for i in 0..8 {
            let (s, a) = (s.clone(), a.clone());
            tasks.push(tokio::spawn(async move {
                let r = s
                    .write_entities(
                        &a,
                        "gone",
                        vec![key("p", &format!("{round}-{i}"))],
                        put_all(vec![vec![1]]),
                    )
                    .await;
                assert!(matches!(
                    r,
                    Ok(_) | Err(StoreError::TableNotFound) | Err(StoreError::Busy(_))
                ));
            }));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert!(s.delete_table(&a, "gone").await.unwrap());
        for t in tasks {
            t.await.unwrap();
        }
        // Whatever landed before the delete went with it: no row of any table
        // outlives its table.
        assert_eq!(orphans(&url).await, 0, "round {round}");
    }
}

async fn orphans(url: &str) -> i64 {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let row = client
        .query_one(
            "SELECT count(*) FROM tafel_entities e WHERE NOT EXISTS (SELECT 1 FROM tafel_tables t WHERE t.id = e.table_id)",
            &[],
        )
        .await
        .unwrap();
    row.get(0)
}

#[tokio::test]
async fn shutdown_refuses_further_work() {
    let Some(url) = url() else { return };
    let s = pg(&url).await;
    s.shutdown().await.unwrap();
    assert!(matches!(
        s.get_table(&account(), "x").await,
        Err(StoreError::Backend(_))
    ));
}

/// Regression: a connection opened while serving a request on one serving
/// thread's runtime was driven by that runtime, so requests on the other threads
/// that later drew it from the pool stalled whenever that runtime did not run,
/// and failed with "connection closed" once it stopped (SIGTERM under load).
#[tokio::test]
async fn pooled_connections_do_not_depend_on_the_runtime_that_opened_them() {
    let Some(url) = url() else { return };
    let store = Arc::new(
        PostgresStore::connect(&url, PostgresOptions { pool_size: 2 })
            .await
            .unwrap(),
    );
    let acct = account();
    let (s, a) = (store.clone(), acct.clone());
    // Two concurrent requests on another runtime: the second opens the pool's
    // second connection there. That runtime is then left idle, never driven again.
    let idle = tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (x, y) = rt.block_on(async { tokio::join!(s.get_table(&a, "t"), s.get_table(&a, "t")) });
        assert!(x.unwrap().is_none() && y.unwrap().is_none());
        rt
    })
    .await
    .unwrap();
    // Both pooled connections serve here, whichever runtime opened them.
    let both = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(store.get_table(&acct, "t"), store.get_table(&acct, "t"))
    })
    .await
    .expect("a pooled connection stalled with the runtime that opened it");
    assert!(both.0.unwrap().is_none() && both.1.unwrap().is_none());
    tokio::task::spawn_blocking(move || drop(idle)).await.unwrap();
}

/// Regression: under SERIALIZABLE, inserts of neighbouring keys conflicted on the
/// index page they share until they gave up with Busy (503 in test_paging_2500_entities).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_inserts_of_neighbouring_keys_never_give_up() {
    let Some(url) = url() else { return };
    let s = Arc::new(pg(&url).await);
    let a = account();
    s.create_table(&a, "seq").await.unwrap();
    let mut tasks = Vec::new();
    for t in 0..16 {
        let (s, a) = (s.clone(), a.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..50 {
                let rk = format!("{:05}", i * 16 + t);
                let out = s
                    .write_entities(&a, "seq", vec![key("p", &rk)], insert_if_absent(vec![1]))
                    .await
                    .unwrap_or_else(|e| panic!("insert {rk}: {e}"));
                assert!(*out.downcast::<bool>().unwrap(), "{rk} inserted once");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let page = s.scan_entities(&a, "seq", all(1000, None)).await.unwrap();
    assert_eq!(page.rows.len(), 800);
}
