//! Scans page exactly like the embedded store's.

use super::*;

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
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn scans_page_exactly_like_the_embedded_store() {
    let url = url();
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

/// A panic in the service's filter during a scan went up through the backend
/// and took the request's task with it; it is answered as a bug of ours.
#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn a_panicking_filter_is_reported_as_a_bug() {
    let url = url();
    let s = pg(&url).await;
    let a = account();
    s.create_table(&a, "t").await.unwrap();
    for r in ["a", "b", "c"] {
        put(&s, &a, "t", "p", r, &[1]).await;
    }
    let filter: RowFilter = Arc::new(|k, _| if k.keys().1 == "b" { panic!("filter bug") } else { true });
    match s.scan_entities(&a, "t", all(100, Some(filter))).await {
        Err(StoreError::Backend(b)) => assert_eq!(b.kind, tafel_store::FailureKind::Internal, "{b}"),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a panicking filter failed no scan"),
    }
    assert_eq!(s.scan_entities(&a, "t", all(100, None)).await.unwrap().rows.len(), 3);
}

/// Refuses the `fail_at`th row it is offered (as a sink whose encoder failed).
struct FailsAt {
    fail_at: usize,
    offered: usize,
}

impl tafel_store::RowSink for FailsAt {
    fn push(&mut self, _key: tafel_store::KeyRef<'_>, _value: &[u8]) -> std::ops::ControlFlow<()> {
        self.offered += 1;
        if self.offered == self.fail_at {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    }
}

/// A scan whose sink failed went on handing it the rest of its page.
#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn a_scan_stops_at_the_row_its_sink_fails_on() {
    let url = url();
    let store = pg(&url).await;
    let a = account();
    assert!(store.create_table(&a, "t").await.unwrap());
    for i in 0..20 {
        put(&store, &a, "t", "p", &format!("r{i:02}"), b"v").await;
    }
    let mut sink = FailsAt { fail_at: 5, offered: 0 };
    let request = ScanRequest {
        ranges: vec![KeyRange::all()],
        limit: 1000,
        filter: None,
        deadline: None,
    };
    let end = store.scan_into(&a, "t", request, &mut sink).await.unwrap();
    assert_eq!(sink.offered, 5, "rows offered after the sink failed");
    assert!(end.next.is_none(), "no continuation after the sink failed");
}
