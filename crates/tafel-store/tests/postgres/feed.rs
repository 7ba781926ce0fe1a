//! The change feed on PostgreSQL: writes racing on two nodes are each recorded
//! once, at contiguous positions in commit order (a reader following the feed
//! meanwhile misses none), table changes too, and retention drops old changes.

use std::collections::HashSet;

use tafel_store::feed::{ChangeOp, ChangesFrom, ChangesRead, ChangesRequest, FeedSettings, Retention};

use super::*;

/// Turns the feed on for `account` alone: every node's retention sweeps every
/// account it has settings for, so a test's short retention given to all
/// accounts would trim the changes of tests running beside it.
fn feed_on(store: &PostgresStore, account: &str, age: Duration) {
    let settings = FeedSettings {
        accounts: [(account.to_owned(), Retention { age, max_bytes: None })].into(),
        ..FeedSettings::default()
    };
    store.set_change_feed(settings).unwrap();
}

async fn read(store: &PostgresStore, account: &str, from: ChangesFrom) -> ChangesRead {
    let request = ChangesRequest {
        from,
        limit: 1000,
        table: None,
    };
    store.read_changes(account, &request).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn racing_writes_on_two_nodes_are_recorded_once_in_commit_order() {
    let url = url();
    let s = Arc::new(pg(&url).await);
    let other = Arc::new(pg(&url).await);
    let a = account();
    feed_on(&s, &a, Duration::from_secs(3600));
    feed_on(&other, &a, Duration::from_secs(3600));
    s.create_table(&a, "Feed").await.unwrap();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // A reader following the feed while the writes race: a position it passes
    // must never be filled in later.
    let follower = {
        let (s, a, done) = (s.clone(), a.clone(), done.clone());
        tokio::spawn(async move {
            let (mut after, mut seen) = (0u64, Vec::new());
            loop {
                let finished = done.load(Ordering::Acquire);
                let ChangesRead::Page(p) = read(&s, &a, ChangesFrom::After(after)).await else {
                    panic!("not a page")
                };
                seen.extend(p.changes.iter().map(|c| c.position));
                after = p.next_after;
                if finished && p.changes.is_empty() {
                    return seen;
                }
            }
        })
    };
    let mut tasks = Vec::new();
    for w in 0..16 {
        let store = if w % 2 == 0 { s.clone() } else { other.clone() };
        let a = a.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..15 {
                let expect = if i % 2 == 0 { Expect::Absent } else { Expect::Any };
                let keys = vec![
                    key(&format!("w{w}"), &format!("{i}a")),
                    key(&format!("w{w}"), &format!("{i}b")),
                ];
                let decide =
                    |_: &[Option<&[u8]>]| (vec![Mutation::Put(b"v".to_vec()), Mutation::Put(b"w".to_vec())], ());
                write_with(&*store, &a, "feed", keys, expect, decide).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    done.store(true, Ordering::Release);
    let seen = follower.await.unwrap();
    let ChangesRead::Page(p) = read(&s, &a, ChangesFrom::After(0)).await else {
        panic!("not a page")
    };
    let positions: Vec<u64> = p.changes.iter().map(|c| c.position).collect();
    assert_eq!(positions, (1..=481).collect::<Vec<u64>>(), "contiguous, in order");
    assert_eq!(seen, positions, "the follower saw every change, in order");
    assert_eq!(p.changes[0].op, ChangeOp::CreateTable);
    assert_eq!(p.changes[0].table, "Feed");
    let keys: HashSet<_> = p.changes[1..].iter().map(|c| c.key.clone().unwrap()).collect();
    assert_eq!(keys.len(), 480, "each write once");
    // Each write's two changes share its txn, the first's position.
    for pair in p.changes[1..].chunks(2) {
        assert_eq!((pair[0].txn, pair[1].txn), (pair[0].position, pair[0].position));
        assert!(pair.iter().all(|c| c.op == ChangeOp::Insert));
    }
    // Replace and delete, and the table's deletion.
    put(&*s, &a, "feed", "w0", "0a", b"again").await;
    s.write_entities(&a, "feed", vec![key("w0", "0b")], Box::new(|_| vec![Mutation::Delete]))
        .await
        .unwrap();
    assert!(s.delete_table(&a, "FEED").await.unwrap());
    let ChangesRead::Page(p) = read(&s, &a, ChangesFrom::After(481)).await else {
        panic!("not a page")
    };
    let ops: Vec<ChangeOp> = p.changes.iter().map(|c| c.op).collect();
    assert_eq!(ops, [ChangeOp::Replace, ChangeOp::Delete, ChangeOp::DeleteTable]);
    assert_eq!(p.changes[0].value.as_deref(), Some(&b"again"[..]));
    assert!(p.changes[1].value.is_none());
    assert!(matches!(
        read(&s, &a, ChangesFrom::After(999)).await,
        ChangesRead::Rewound { head: 484 }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn retention_drops_old_changes_and_an_account_without_the_feed_records_none() {
    let url = url();
    let s = pg(&url).await;
    let a = account();
    s.create_table(&a, "t").await.unwrap();
    assert!(matches!(
        read(&s, &a, ChangesFrom::Oldest).await,
        ChangesRead::NotEnabled
    ));
    feed_on(&s, &a, Duration::from_secs(1));
    put(&s, &a, "t", "p", "r", b"x").await;
    let ChangesRead::Page(p) = read(&s, &a, ChangesFrom::Oldest).await else {
        panic!("not a page")
    };
    assert_eq!(p.changes.len(), 1, "nothing from before the feed was on");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match read(&s, &a, ChangesFrom::After(0)).await {
            ChangesRead::Expired { oldest: 2 } => break,
            other if Instant::now() > deadline => panic!("retention dropped nothing: {other:?}"),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}
