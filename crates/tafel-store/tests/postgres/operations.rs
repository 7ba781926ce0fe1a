//! Tables, entities and service properties, one operation at a time.

use super::*;

#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn tables_by_case_insensitive_name_listed_in_ordinal_order() {
    let url = url();
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
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn a_recreated_table_starts_empty() {
    let url = url();
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
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn entity_operations_and_their_edge_cases() {
    let url = url();
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
    let out = write_with(&s, &a, "Ent", vec![k2.clone(), k.clone()], Expect::Any, move |cur| {
        *seen2.lock().unwrap() = cur.iter().map(|c| c.map(<[u8]>::to_vec)).collect();
        (vec![Mutation::Put(b"new".to_vec()), Mutation::Delete], 7u32)
    })
    .await
    .unwrap();
    assert_eq!(out, 7);
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
        Box::new(|_| vec![Mutation::Keep, Mutation::Put(b"k".to_vec())]),
    )
    .await
    .unwrap();
    s.write_entities(&a, "Ent", vec![k2.clone()], Box::new(|_| Vec::new()))
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
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn service_properties_per_account() {
    let url = url();
    let s = pg(&url).await;
    let (a, b) = (account(), account());
    assert_eq!(s.get_service_properties(&a).await.unwrap(), None);
    s.set_service_properties(&a, vec![1]).await.unwrap();
    s.set_service_properties(&a, vec![2, 2]).await.unwrap();
    assert_eq!(s.get_service_properties(&a).await.unwrap(), Some(vec![2, 2]));
    assert_eq!(s.get_service_properties(&b).await.unwrap(), None);
}

/// An insert expecting its keys absent (what the service sends for inserts) that
/// finds one there decides again on the rows as they are, and writes nothing of a
/// batch that fails; into no table it is TableNotFound, as any write.
#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn an_insert_finding_its_key_taken_decides_on_the_row_that_is_there() {
    let url = url();
    let s = pg(&url).await;
    let a = account();
    let (k, k2) = (key("p", "r"), key("p", "s"));
    for table in ["none", "gone"] {
        if table == "gone" {
            s.create_table(&a, table).await.unwrap();
            s.delete_table(&a, table).await.unwrap();
        }
        let into_nothing = write_with(
            &s,
            &a,
            table,
            vec![k.clone()],
            Expect::Absent,
            insert_if_absent(vec![1]),
        )
        .await;
        assert!(matches!(into_nothing, Err(StoreError::TableNotFound)), "{table}");
    }
    s.create_table(&a, "Ins").await.unwrap();
    // No keys: a write that changes nothing, as through write_entities, not a missing table.
    s.insert_entities(&a, "ins", Vec::new(), put_all(Vec::new()))
        .await
        .unwrap();
    assert!(write_with(
        &s,
        &a,
        "ins",
        vec![k.clone()],
        Expect::Absent,
        insert_if_absent(b"first".to_vec())
    )
    .await
    .unwrap());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    // A batch of two inserts, one of them of the key now there: refused whole.
    let inserted = write_with(&s, &a, "Ins", vec![k2.clone(), k.clone()], Expect::Absent, move |cur| {
        *seen2.lock().unwrap() = cur.iter().map(|c| c.map(<[u8]>::to_vec)).collect();
        match cur {
            [None, None] => (vec![Mutation::Put(b"a".to_vec()), Mutation::Put(b"b".to_vec())], true),
            _ => (Vec::new(), false),
        }
    })
    .await
    .unwrap();
    assert!(!inserted);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![None, Some(b"first".to_vec())],
        "the last decision saw the row"
    );
    assert_eq!(
        s.get_entity(&a, "Ins", &k).await.unwrap().as_deref(),
        Some(&b"first"[..])
    );
    assert_eq!(
        s.get_entity(&a, "Ins", &k2).await.unwrap(),
        None,
        "nothing of the batch written"
    );
    // A decision that panics fails the write, on this path too.
    let panicked = write_with(
        &s,
        &a,
        "Ins",
        vec![k2.clone()],
        Expect::Absent,
        |_: &[Option<&[u8]>]| -> (Vec<Mutation>, ()) { panic!("decide panics") },
    )
    .await;
    assert!(matches!(panicked, Err(StoreError::Backend(_))));
}
