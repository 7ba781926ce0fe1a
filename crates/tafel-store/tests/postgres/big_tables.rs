//! A large table: deleting it answers at once, its name answers TableBeingDeleted
//! until its entities are gone, and they go in short transactions, carried on by
//! whichever node runs next if the deleting one stops.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn a_large_table_deletes_at_once_and_its_entities_go_in_short_transactions() {
    let url = url();
    let rows: i64 = std::env::var("TAFEL_BIG_TABLE_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let db = fresh_database(&url).await;
    let a = account();
    let node = pg(&db).await;
    assert!(node.create_table(&a, "big").await.unwrap());
    put(&node, &a, "big", "p", "kept", b"x").await;
    let client = sql(&db).await;
    let loaded = client
        .execute(
            "INSERT INTO tafel_entities (table_id, key, value)
             SELECT t.id, convert_to('z' || lpad(n::text, 10, '0'), 'UTF8'), '\\x00'::bytea
             FROM tafel_tables t, generate_series(1, $3::BIGINT) n WHERE t.account = $1 AND t.lname = $2",
            &[&a, &b"big".as_slice(), &rows],
        )
        .await
        .unwrap();
    assert_eq!(loaded, rows as u64);

    // The longest transaction any other session of the database holds meanwhile.
    let watch = sql(&db).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut longest = 0f64;
            while !stop.load(Ordering::Relaxed) {
                let row = watch
                    .query_one(
                        "SELECT COALESCE(max(extract(epoch FROM clock_timestamp() - xact_start)), 0)::float8
                         FROM pg_stat_activity
                         WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL",
                        &[],
                    )
                    .await
                    .unwrap();
                longest = longest.max(row.get::<_, f64>(0));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            longest
        })
    };

    let started = Instant::now();
    assert!(node.delete_table(&a, "big").await.unwrap());
    let answered = started.elapsed();
    assert!(answered < Duration::from_secs(2), "the delete took {answered:?}");
    // Gone at once for every operation; the name stays taken until the entities go.
    assert!(node.get_table(&a, "big").await.unwrap().is_none());
    assert!(matches!(
        node.get_entity(&a, "big", &key("p", "kept")).await,
        Err(StoreError::TableNotFound)
    ));
    assert!(node.list_tables(&a, None, 10).await.unwrap().is_empty());
    assert!(matches!(
        node.create_table(&a, "BIG").await,
        Err(StoreError::TableBeingDeleted)
    ));
    // The node stops mid-way; another, started later, carries on.
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(node);
    let next = pg(&db).await;
    create_when_free(&next, &a, "big", Duration::from_secs(600)).await;
    let gone = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let longest = watcher.await.unwrap();
    let left = scalar(&client, "SELECT count(*) FROM tafel_entities").await;
    assert_eq!(left, 0, "entities outlived their table");
    assert!(next
        .scan_entities(&a, "big", all(10, None))
        .await
        .unwrap()
        .rows
        .is_empty());
    eprintln!(
        "{rows} entities: delete answered in {answered:?}, all gone after {gone:?}, \
         longest transaction meanwhile {longest:.3} s"
    );
    assert!(longest < 2.0, "a transaction stayed open {longest:.3} s");
}
