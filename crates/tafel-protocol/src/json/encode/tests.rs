use super::*;
use tafel_service::model::{codec, etag_for, Guid, Property, StoredEntity, Value};

fn ts(s: &str) -> DateTime {
    DateTime::parse(s).unwrap_or_else(|| panic!("not a DateTime: {s}"))
}

/// Every EDM type, the Double special values, integral doubles, Int64 beyond
/// 2^53, binaries of every padding length and strings that need escaping.
fn samples() -> Vec<Entity> {
    let p = |n: &str, value| Property { name: n.into(), value };
    let guid = Guid::parse("3F2504E0-4F89-11D3-9A0C-0305E82C3301").unwrap_or(Guid([0; 16]));
    let everything = Entity {
        partition_key: "p'1 ü/\"x\"".into(),
        row_key: "r\\2\n\u{1F600}%".into(),
        timestamp: Some(ts("2024-06-04T08:15:30.1234567Z")),
        properties: vec![
            p("Name", Value::String("Ada \"the\" \\ Countess\u{1}\t✓".into())),
            p("Empty", Value::String(String::new())),
            p("Age", Value::Int32(-36)),
            p("MaxI", Value::Int32(i32::MAX)),
            p("Big", Value::Int64(9_007_199_254_740_993)),
            p("MinL", Value::Int64(i64::MIN)),
            p("Score", Value::Double(97.5)),
            p("Five", Value::Double(5.0)),
            p("Tiny", Value::Double(-1e-300)),
            p("NegZero", Value::Double(-0.0)),
            p("Nan", Value::Double(f64::NAN)),
            p("Inf", Value::Double(f64::INFINITY)),
            p("NegInf", Value::Double(f64::NEG_INFINITY)),
            p("Yes", Value::Boolean(true)),
            p("No", Value::Boolean(false)),
            p("When", Value::DateTime(DateTime::MIN)),
            p("Until", Value::DateTime(DateTime::MAX)),
            p("Id", Value::Guid(guid)),
            p("Blob0", Value::Binary(vec![])),
            p("Blob1", Value::Binary(vec![0xFF])),
            p("Blob2", Value::Binary(vec![0, 1])),
            p("Blob3", Value::Binary(vec![0xFB, 0xEF, 0xBE])),
            p("Blob4", Value::Binary((0..=255).collect())),
        ],
    };
    let bare = Entity {
        timestamp: Some(ts("1999-12-31T23:59:59.0000001Z")),
        ..Entity::new("", "")
    };
    // U+E000.. is remapped in the store key: keys_cow must decode it.
    let remapped = Entity {
        timestamp: Some(ts("2000-02-29T00:00:00Z")),
        properties: vec![p("X", Value::Int32(1))],
        ..Entity::new("\u{E000}pk", "rk\u{FFFF}")
    };
    vec![everything, bare, remapped]
}

fn stored(e: &Entity) -> StoredEntity {
    let ts = e.timestamp.expect("every fixture has a Timestamp");
    StoredEntity::new(&e.partition_key, &e.row_key, codec::encode(ts, &e.properties))
}

fn selects() -> Vec<Option<Vec<String>>> {
    let list = |names: &[&str]| Some(names.iter().map(|n| n.to_string()).collect());
    vec![
        None,
        list(&["Name"]),
        list(&["Timestamp", "Big", "Nan", "Blob2", "Missing"]),
        list(&["PartitionKey", "RowKey", "Id", "When", "Five"]),
        list(&[]),
    ]
}

const LEVELS: [MetadataLevel; 3] = [MetadataLevel::No, MetadataLevel::Minimal, MetadataLevel::Full];

/// What the writer wrote at each metadata level for every case of [`cases`],
/// captured when it still matched, byte for byte, the writer from before
/// entities could be written from stored bytes. After a deliberate change to
/// the output, `TAFEL_BLESS_GOLDEN=1 cargo test -p tafel-protocol golden`
/// rewrites them (review the diff).
const GOLDEN: [(MetadataLevel, &str, &str); 3] = [
    (
        MetadataLevel::No,
        "nometadata",
        include_str!("../golden/nometadata.txt"),
    ),
    (
        MetadataLevel::Minimal,
        "minimalmetadata",
        include_str!("../golden/minimalmetadata.txt"),
    ),
    (
        MetadataLevel::Full,
        "fullmetadata",
        include_str!("../golden/fullmetadata.txt"),
    ),
];

/// One entity written one way: a line naming the case, and the owned writer's
/// bytes; `stored` is what the stored-bytes writer made of the same entity
/// (`None` for an entity not yet written, which exists only owned).
struct Case {
    context: String,
    owned: Vec<u8>,
    stored: Option<Vec<u8>>,
}

/// Every base URL, `$select` and single/list form, with each sample entity and
/// one not yet written (no Timestamp, so no ETag), at `level`.
fn cases(level: MetadataLevel) -> Vec<Case> {
    let mut out = Vec::new();
    for base_url in ["http://127.0.0.1:10002/devstoreaccount1", "http://h\"o\\st/acc ount"] {
        for select in selects() {
            for single in [true, false] {
                let sel = select.clone().map(Select::new);
                let sel = sel.as_ref();
                let f = EntityFormat::new(level, base_url, "acct", "Tbl1", sel);
                let context = |entity: &str| format!("# {base_url} select={select:?} single={single} entity={entity}");
                for (i, e) in samples().iter().enumerate() {
                    let mut owned = Vec::new();
                    f.write(&mut owned, e, single);
                    let mut from_store = Vec::new();
                    f.write_stored(&mut from_store, stored(e).view(), single)
                        .expect("valid bytes");
                    out.push(Case {
                        context: context(&i.to_string()),
                        owned,
                        stored: Some(from_store),
                    });
                }
                let mut owned = Vec::new();
                f.write(&mut owned, &Entity::new("p", "r"), single);
                out.push(Case {
                    context: context("unwritten"),
                    owned,
                    stored: None,
                });
            }
        }
    }
    out
}

#[test]
fn owned_and_stored_write_the_golden_bytes() {
    let bless = std::env::var_os("TAFEL_BLESS_GOLDEN").is_some();
    for (level, name, golden) in GOLDEN {
        let cases = cases(level);
        for case in &cases {
            let parsed: serde_json::Value = serde_json::from_slice(&case.owned).expect("valid JSON");
            assert!(parsed.is_object(), "{}", case.context);
        }
        if bless {
            let text: String = cases
                .iter()
                .map(|c| format!("{}\n{}\n", c.context, String::from_utf8_lossy(&c.owned)))
                .collect();
            let path = format!("{}/src/json/golden/{name}.txt", env!("CARGO_MANIFEST_DIR"));
            std::fs::write(&path, text).expect("write golden file");
            continue;
        }
        let mut lines = golden.split_terminator('\n');
        for case in &cases {
            assert_eq!(lines.next(), Some(case.context.as_str()), "{name}: cases differ");
            let want = lines
                .next()
                .unwrap_or_else(|| panic!("{name}: golden file ends early"))
                .as_bytes();
            let ctx = format!("{name} {}", case.context);
            assert_eq!(
                String::from_utf8_lossy(&case.owned),
                String::from_utf8_lossy(want),
                "{ctx}"
            );
            assert_eq!(case.owned, want, "{ctx}");
            if let Some(stored) = &case.stored {
                assert_eq!(stored.as_slice(), want, "{ctx} (from stored bytes)");
            }
        }
        assert_eq!(lines.next(), None, "{name}: the golden file has more cases");
    }
}

#[test]
fn etag_member_is_the_json_of_etag_for() {
    for t in [
        "2024-06-04T08:15:30.1234567Z",
        "1601-01-01T00:00:00Z",
        "9999-12-31T23:59:59.9999999Z",
    ] {
        let mut direct = Vec::new();
        etag_str(&mut direct, &ts(t).iso());
        let mut via_string = Vec::new();
        write_json_str(&mut via_string, &etag_for(ts(t)));
        assert_eq!(direct, via_string, "{t}");
    }
}

#[test]
fn corrupt_stored_bytes_are_an_error_not_a_panic() {
    let e = &samples()[0];
    let good = stored(e);
    for level in LEVELS {
        let f = EntityFormat::new(level, "http://x/a", "a", "t", None);
        for cut in 0..good.bytes.len() {
            let bad = StoredEntity {
                key: good.key.clone(),
                bytes: good.bytes[..cut].to_vec(),
            };
            let mut out = Vec::new();
            let err = f.write_stored(&mut out, bad.view(), false).err().map(|e| e.code);
            assert_eq!(err, Some(tafel_service::ErrorCode::InternalError), "cut at {cut}");
        }
        let mut bad_utf8 = good.clone();
        // The first property's name starts after the 11-byte header, tag and length.
        bad_utf8.bytes[14] = 0xFF;
        let err = f
            .write_stored(&mut Vec::new(), bad_utf8.view(), true)
            .err()
            .map(|e| e.code);
        assert_eq!(err, Some(tafel_service::ErrorCode::InternalError));
    }
}

fn json(s: &str) -> String {
    let mut out = Vec::new();
    write_json_str(&mut out, s);
    String::from_utf8(out).expect("the writer writes UTF-8")
}

#[test]
fn strings_are_valid_json_on_both_paths() {
    for s in [
        "plain",
        "",
        "ünïcode ✓ \u{1F600}",
        "quote\"d",
        "back\\slash",
        "line\nbreak\t",
        "\u{1}\u{1f}",
        "</script>",
    ] {
        let written = json(s);
        let back: String = serde_json::from_str(&written).unwrap_or_else(|e| panic!("{written}: {e}"));
        assert_eq!(back, s);
    }
    assert_eq!(json("plain"), "\"plain\"");
}

#[test]
fn escape_scan_agrees_with_the_bytewise_rule() {
    for b in 0..=255u8 {
        for len in [1, 15, 16, 17, 40] {
            for at in [0, len / 2, len - 1] {
                let mut v = vec![b'a'; len];
                v[at] = b;
                assert_eq!(needs_escape(&v), escaped(b), "byte {b} at {at} of {len}");
            }
        }
    }
    assert!(!needs_escape(b""));
}

#[test]
fn guids_are_written_canonically() {
    let g = tafel_service::model::Guid::parse("3F2504E0-4F89-11D3-9A0C-0305E82C3301").expect("valid guid");
    let mut out = Vec::new();
    g.write_canonical(&mut out);
    assert_eq!(out, b"3f2504e0-4f89-11d3-9a0c-0305e82c3301");
}
