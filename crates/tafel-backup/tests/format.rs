//! The backup file refuses every truncation of a small backup, and every
//! flipped byte that changes what it holds, and reads back exactly what was written.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a failed step fails the test

use tafel_backup::format::{Item, Writer};
use tafel_backup::{info_now, BackupError, Reader};
use tafel_store::{EntityKey, RowSink, TableRecord};

fn backup() -> Vec<u8> {
    let mut w = Writer::new(&info_now("embedded")).unwrap();
    w.properties("acct", b"<StorageServiceProperties/>").unwrap();
    w.table(
        "acct",
        &TableRecord {
            name: "Orders".into(),
            acl: b"policy".to_vec(),
        },
    )
    .unwrap();
    for i in 0..3 {
        let key = EntityKey::new("p", &format!("r{i}"));
        assert!(w.push(key.view(), format!("value {i}").as_bytes()).is_continue());
    }
    let mut out = w.take_output().unwrap();
    out.extend(w.finish().unwrap());
    out
}

fn read_all(data: &[u8]) -> Result<Vec<Item>, BackupError> {
    let mut r = Reader::new(data)?;
    let mut items = Vec::new();
    while let Some(item) = r.next_item()? {
        items.push(item);
    }
    Ok(items)
}

#[test]
fn a_backup_reads_back_what_was_written() {
    let items = read_all(&backup()).unwrap();
    assert_eq!(items.len(), 3);
    assert!(matches!(&items[0], Item::Properties { account, .. } if account == "acct"));
    assert!(matches!(&items[1], Item::Table { record, .. } if record.name == "Orders" && record.acl == b"policy"));
    let Item::Rows(rows) = &items[2] else {
        panic!("rows expected")
    };
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[2].0, EntityKey::new("p", "r2"));
    assert_eq!(rows[2].1, b"value 2");
}

#[test]
fn every_truncation_is_refused() {
    let good = backup();
    for len in 0..good.len() {
        assert!(
            read_all(&good[..len]).is_err(),
            "a backup cut to {len} of {} bytes was read",
            good.len()
        );
    }
}

#[test]
fn every_flipped_bit_is_refused_or_changes_nothing() {
    let good = backup();
    let expected = format!("{:?}", read_all(&good).unwrap());
    for at in 0..good.len() {
        for bit in 0..8 {
            let mut bad = good.clone();
            bad[at] ^= 1 << bit;
            // A few bits of zstd's frame header (a window size the data never
            // needs) change nothing decoded; every other flip must be refused.
            if let Ok(items) = read_all(&bad) {
                assert_eq!(
                    format!("{items:?}"),
                    expected,
                    "byte {at} bit {bit} flipped was read differently"
                );
            }
        }
    }
}
