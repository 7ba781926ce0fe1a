//! Operator records (`Store::put_record`): both backends keep, list and delete
//! them alike; on PostgreSQL one owner at a time holds a record's lease, and
//! another takes it once it expires.

use super::*;

async fn round_trip(store: &dyn Store, kind: &str) {
    assert_eq!(store.get_record(kind, "b").await.unwrap(), None);
    store.put_record(kind, "b", b"two".to_vec()).await.unwrap();
    store.put_record(kind, "a", b"one".to_vec()).await.unwrap();
    store.put_record(kind, "b", b"2".to_vec()).await.unwrap();
    // Another kind's record, and one whose kind starts with this one's, stay apart.
    store
        .put_record(&format!("{kind}x"), "a", b"other".to_vec())
        .await
        .unwrap();
    assert_eq!(store.get_record(kind, "b").await.unwrap(), Some(b"2".to_vec()));
    assert_eq!(
        store.list_records(kind).await.unwrap(),
        vec![("a".to_owned(), b"one".to_vec()), ("b".to_owned(), b"2".to_vec())]
    );
    store.delete_record(kind, "a").await.unwrap();
    store.delete_record(kind, "a").await.unwrap();
    assert_eq!(
        store.list_records(kind).await.unwrap(),
        vec![("b".to_owned(), b"2".to_vec())]
    );
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn records_round_trip_alike_on_both_backends() {
    let kind = account();
    round_trip(&pg(&url()).await, &kind).await;
    let (store, dir) = embedded();
    round_trip(&store, &kind).await;
    store.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn one_owner_holds_a_record_until_its_lease_expires() {
    let (a, b) = (pg(&url()).await, pg(&url()).await);
    let kind = account();
    let lease = Duration::from_millis(800);
    // No record, nothing to claim.
    assert!(!a.claim_record(&kind, "j", "a", lease).await.unwrap());
    a.put_record(&kind, "j", b"job".to_vec()).await.unwrap();
    assert!(a.claim_record(&kind, "j", "a", lease).await.unwrap());
    assert!(!b.claim_record(&kind, "j", "b", lease).await.unwrap());
    // Renewing keeps it; rewriting the value does not release it.
    assert!(a.claim_record(&kind, "j", "a", lease).await.unwrap());
    a.put_record(&kind, "j", b"job, later".to_vec()).await.unwrap();
    assert!(!b.claim_record(&kind, "j", "b", lease).await.unwrap());
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(b.claim_record(&kind, "j", "b", lease).await.unwrap());
    assert!(!a.claim_record(&kind, "j", "a", lease).await.unwrap());
    assert_eq!(b.get_record(&kind, "j").await.unwrap(), Some(b"job, later".to_vec()));
}

async fn truncate(store: &dyn Store, account: &str) {
    store.create_table(account, "Trunc").await.unwrap();
    for i in 0..30 {
        put(
            store,
            account,
            "Trunc",
            &format!("p{}", i % 3),
            &format!("r{i:02}"),
            b"value",
        )
        .await;
    }
    assert_eq!(store.truncate_table(account, "trunc").await.unwrap(), Some(30));
    assert_eq!(store.count_entities(account, "Trunc").await.unwrap(), 0);
    let stats = store
        .table_stats(account, "Trunc")
        .await
        .unwrap()
        .expect("the table stays");
    assert_eq!((stats.entities, stats.bytes), (0, 0));
    put(store, account, "Trunc", "p", "again", b"v").await;
    assert_eq!(store.count_entities(account, "Trunc").await.unwrap(), 1);
    assert_eq!(store.truncate_table(account, "Trunc").await.unwrap(), Some(1));
    assert_eq!(store.truncate_table(account, "missing").await.unwrap(), None);
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn a_truncate_empties_a_table_and_its_counters_on_both_backends() {
    truncate(&pg(&url()).await, &account()).await;
    let (store, dir) = embedded();
    truncate(&store, &account()).await;
    store.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}
