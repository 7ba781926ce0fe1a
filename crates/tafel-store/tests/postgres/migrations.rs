//! The schema: brought up to date once however many nodes start together, held
//! back while another node holds the migration lease, an older database migrated,
//! a newer one refused.

use super::*;

use tafel_store::postgres::SCHEMA_VERSION;

async fn version(client: &tokio_postgres::Client) -> i64 {
    scalar(client, "SELECT value FROM tafel_meta WHERE name = 'schema_version'").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn nodes_starting_together_on_a_new_database_all_serve_it() {
    let url = url();
    let db = fresh_database(&url).await;
    let starts: Vec<_> = (0..8)
        .map(|_| {
            tokio::spawn({
                let db = db.clone();
                async move { pg(&db).await }
            })
        })
        .collect();
    let mut nodes = Vec::new();
    for s in starts {
        nodes.push(s.await.unwrap());
    }
    let a = account();
    assert!(nodes[0].create_table(&a, "t").await.unwrap());
    put(&nodes[3], &a, "t", "p", "r", b"v").await;
    assert_eq!(
        nodes[7].get_entity(&a, "t", &key("p", "r")).await.unwrap().as_deref(),
        Some(&b"v"[..])
    );
    let client = sql(&db).await;
    assert_eq!(version(&client).await, SCHEMA_VERSION);
    let lock = scalar(&client, "SELECT count(*) FROM tafel_meta WHERE name = 'migration_lock'").await;
    assert_eq!(lock, 0, "the lease is released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn a_node_waits_while_another_holds_the_migration_lease() {
    let url = url();
    let db = fresh_database(&url).await;
    let client = sql(&db).await;
    client
        .batch_execute(
            "CREATE TABLE tafel_meta (name TEXT PRIMARY KEY, value BIGINT NOT NULL);
             INSERT INTO tafel_meta VALUES ('migration_lock', CAST(extract(epoch FROM now()) * 1000 AS BIGINT) + 600000)",
        )
        .await
        .unwrap();
    let starting = tokio::spawn({
        let db = db.clone();
        async move { pg(&db).await }
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!starting.is_finished(), "a node migrated under another's lease");
    let tables = scalar(
        &client,
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'tafel_tables'",
    )
    .await;
    assert_eq!(tables, 0);
    // The holder is gone (its lease dropped): the waiting node migrates and serves.
    client
        .batch_execute("DELETE FROM tafel_meta WHERE name = 'migration_lock'")
        .await
        .unwrap();
    let node = tokio::time::timeout(Duration::from_secs(20), starting)
        .await
        .unwrap()
        .unwrap();
    assert!(node.create_table(&account(), "t").await.unwrap());
    assert_eq!(version(&client).await, SCHEMA_VERSION);
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn an_older_database_is_migrated_and_a_newer_one_refused() {
    let url = url();
    let db = fresh_database(&url).await;
    let a = account();
    {
        let node = pg(&db).await;
        assert!(node.create_table(&a, "kept").await.unwrap());
        put(&node, &a, "kept", "p", "r", b"v").await;
    }
    // Back to version 1, as a node of the release before it left the database.
    let client = sql(&db).await;
    client
        .batch_execute(
            "ALTER TABLE tafel_tables DROP COLUMN deleting; DROP TABLE tafel_table_counts; \
             UPDATE tafel_meta SET value = 1 WHERE name = 'schema_version'",
        )
        .await
        .unwrap();
    let node = pg(&db).await;
    assert_eq!(version(&client).await, SCHEMA_VERSION);
    assert_eq!(
        node.get_entity(&a, "kept", &key("p", "r")).await.unwrap().as_deref(),
        Some(&b"v"[..])
    );
    // The table from before the counters was counted by the migration.
    let stats = node.table_stats(&a, "kept").await.unwrap().expect("the table");
    assert_eq!(
        (stats.entities, stats.bytes),
        (1, (key("p", "r").as_bytes().len() + 1) as u64)
    );
    assert!(node.delete_table(&a, "kept").await.unwrap());
    drop(node);

    client
        .execute(
            "UPDATE tafel_meta SET value = $1 WHERE name = 'schema_version'",
            &[&(SCHEMA_VERSION + 1)],
        )
        .await
        .unwrap();
    let refused = PostgresStore::connect(&db, PostgresOptions::default()).await;
    let Err(e) = refused else {
        panic!("a node started on a newer schema")
    };
    let message = e.to_string();
    assert!(message.contains("newer than this node knows"), "{message}");
}
