//! Tables' counters: the same writes on both backends leave the same counts, equal
//! to what a scan finds; concurrent writers of one table lose no change, and
//! their change rows are folded; a deleted table's counters go with it.

use super::*;

/// What the counters should say: (entities, bytes of keys and values), by a scan.
async fn truth(store: &dyn Store, account: &str, table: &str) -> (u64, u64) {
    let rows = store
        .scan_entities(account, table, all(1_000_000, None))
        .await
        .unwrap()
        .rows;
    (
        rows.len() as u64,
        rows.iter().map(|(k, v)| (k.as_bytes().len() + v.len()) as u64).sum(),
    )
}

async fn counted(store: &dyn Store, account: &str, table: &str) -> (u64, u64) {
    let s = store.table_stats(account, table).await.unwrap().expect("the table");
    assert_eq!(store.count_entities(account, table).await.unwrap(), s.entities);
    (s.entities, s.bytes)
}

/// Inserts (the one-statement path), replaces, merges and deletes, one by one and
/// in multi-key writes.
async fn writes(store: &dyn Store, account: &str) {
    store.create_table(account, "t").await.unwrap();
    let keys: Vec<EntityKey> = (0..40)
        .map(|i| key(&format!("p{}", i % 4), &format!("r{i:02}")))
        .collect();
    let values: Vec<Vec<u8>> = (0..40).map(|i| vec![1; 10 + i]).collect();
    store
        .insert_entities(account, "t", keys.clone(), put_all(values))
        .await
        .unwrap();
    put(store, account, "t", "solo", "1", b"hello").await;
    assert_eq!(counted(store, account, "t").await, truth(store, account, "t").await);
    // One write that grows a row, deletes two (one absent) and inserts one.
    let mixed = vec![key("p0", "r00"), key("p1", "r01"), key("p1", "zz"), key("p9", "new")];
    store
        .write_entities(
            account,
            "t",
            mixed,
            Box::new(|_| {
                vec![
                    Mutation::Merge(vec![2; 500]),
                    Mutation::Delete,
                    Mutation::Delete,
                    Mutation::Put(vec![3; 7]),
                ]
            }),
        )
        .await
        .unwrap();
    assert_eq!(counted(store, account, "t").await, truth(store, account, "t").await);
    assert_eq!(counted(store, account, "t").await.0, 41);
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn counters_match_the_rows_on_both_backends() {
    let url = url();
    let p = pg(&url).await;
    let (e, dir) = embedded();
    let acct = account();
    writes(&p, &acct).await;
    writes(&e, &acct).await;
    assert_eq!(counted(&p, &acct, "t").await, counted(&e, &acct, "t").await);
    let sizes = p.table_sizes().await.unwrap();
    let mine = sizes.iter().find(|s| s.account == acct).expect("listed");
    assert_eq!((mine.table.as_str(), mine.entities), ("t", 41));
    // Deleted: no counters, no table; made again, nothing from before.
    assert!(p.delete_table(&acct, "t").await.unwrap());
    assert!(matches!(
        p.count_entities(&acct, "t").await,
        Err(StoreError::TableNotFound)
    ));
    assert_eq!(p.table_stats(&acct, "t").await.unwrap(), None);
    create_when_free(&p, &acct, "t", Duration::from_secs(10)).await;
    assert_eq!(counted(&p, &acct, "t").await, (0, 0));
    e.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn concurrent_writers_of_one_table_lose_no_count() {
    let url = url();
    let p = Arc::new(pg(&url).await);
    let acct = account();
    p.create_table(&acct, "t").await.unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|w| {
            let (p, acct) = (p.clone(), acct.clone());
            tokio::spawn(async move {
                for i in 0..25 {
                    let k = key(&format!("w{w}"), &format!("{i:03}"));
                    write_with(
                        &*p,
                        &acct,
                        "t",
                        vec![k.clone()],
                        Expect::Any,
                        insert_if_absent(vec![w; 9]),
                    )
                    .await
                    .unwrap();
                    if i % 5 == 0 {
                        p.write_entities(&acct, "t", vec![k], Box::new(|_| vec![Mutation::Delete]))
                            .await
                            .unwrap();
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(counted(&*p, &acct, "t").await, truth(&*p, &acct, "t").await);
    assert_eq!(counted(&*p, &acct, "t").await.0, 8 * 20);
    // 240 writes, a change row each: the reaper (every 5 s) folds a table's rows once
    // there are more than 32 (schema::COUNTS_TO_FOLD), the counts unchanged. A fold
    // may run while the last writes still add rows: up to 32 may be left unfolded.
    let client = sql(&url).await;
    let rows = format!(
        "SELECT count(*) FROM tafel_table_counts WHERE table_id = \
         (SELECT id FROM tafel_tables WHERE account = '{acct}' AND lname = 't')"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while scalar(&client, &rows).await > 32 {
        assert!(Instant::now() < deadline, "the change rows were not folded");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(counted(&*p, &acct, "t").await, truth(&*p, &acct, "t").await);
}
