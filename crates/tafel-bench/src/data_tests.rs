//! The bench's entities: their size, bodies, filters and the counts a run expects.

use super::*;

#[test]
fn entity_is_about_one_kib_and_verifies() {
    // Annotations: Int64, DateTime, and Guid and Binary in the typed shape.
    for (shape, annotations) in [(Shape::Typed, 4), (Shape::Strings, 2)] {
        let v = Values::new(shape, 12345, 0);
        let body = v.entity_json(&data_pk(12345), &rk(12345));
        assert!((950..=1150).contains(&body.len()), "{shape:?}: size {}", body.len());
        let parsed: Value = serde_json::from_str(&body).expect("json");
        let obj = parsed.as_object().expect("object");
        assert_eq!(obj.len(), 2 + 10 + annotations, "{shape:?}");
        verify_entity(obj, "p0000012", "0000000012345", &v).expect("verifies");
        let other = Values::new(shape, 12345, 1);
        assert!(verify_entity(obj, "p0000012", "0000000012345", &other).is_err());
    }
    let strings = Values::new(Shape::Strings, 12345, 0).entity_json("p", "r");
    let typed: Value = serde_json::from_str(&strings).expect("json");
    let v = Values::new(Shape::Typed, 12345, 0);
    let err = verify_entity(typed.as_object().expect("object"), "p", "r", &v);
    assert!(err.is_err(), "one shape's entity passed as the other's");
}

/// The typed shape's body, byte for byte as the bench wrote it before shapes.
#[test]
fn the_typed_body_is_the_one_every_earlier_run_sent() {
    let v = Values::new(Shape::Typed, 12345, 2);
    let Text::Typed {
        name,
        description,
        guid,
        binary,
    } = &v.text
    else {
        panic!("typed");
    };
    let want = format!(
        "{{\"PartitionKey\":\"p\",\"RowKey\":\"r\",\"Name\":\"{name}\",\"Int32Prop\":{},\"BoolProp\":{},\
         \"GuidProp@odata.type\":\"Edm.Guid\",\"GuidProp\":\"{guid}\",\
         \"BinProp@odata.type\":\"Edm.Binary\",\"BinProp\":\"{}\",\
         \"Description\":\"{description}\",\"Int64Prop@odata.type\":\"Edm.Int64\",\"Int64Prop\":\"{}\",\
         \"DoubleProp\":{:?},\"DateProp@odata.type\":\"Edm.DateTime\",\"DateProp\":\"{}\",\"Version\":{}}}",
        v.int32,
        v.boolean,
        STANDARD.encode(binary),
        v.int64,
        v.double,
        v.date,
        v.version
    );
    assert_eq!(v.entity_json("p", "r"), want);
}

#[test]
fn merge_body_changes_the_mutable_properties() {
    for shape in [Shape::Typed, Shape::Strings] {
        let v1 = Values::new(shape, 7, 1);
        let merged: Value = serde_json::from_str(&v1.merge_json("p0000000", &rk(7))).expect("json");
        let base = Values::new(shape, 7, 0).entity_json("p0000000", &rk(7));
        let mut full: Value = serde_json::from_str(&base).expect("json");
        for (k, val) in merged.as_object().expect("object") {
            full[k] = val.clone();
        }
        verify_entity(full.as_object().expect("object"), "p0000000", &rk(7), &v1).expect("merged verifies");
    }
}

#[test]
fn the_strings_scan_is_selective_and_the_filter_names_its_category() {
    let n = 100_000;
    let matched = scan_expected(Shape::Strings, n);
    assert!((800..=1200).contains(&matched), "{matched} of {n}");
    assert_eq!(Shape::Strings.scan_filter(), "Category eq 'cat-042'");
    let id = (0..n).find(|&id| Shape::Strings.scan_matches(id)).expect("a match");
    let body = Values::new(Shape::Strings, id, 0).entity_json("p", "r");
    assert!(body.contains("\"Category\":\"cat-042\""), "{body}");
    assert_eq!(
        scan_expected(Shape::Typed, n),
        (0..n).filter(|&i| int32_of(i) < 50).count() as u64
    );
}

#[test]
fn doubles_are_never_integral() {
    for id in 0..20_000 {
        let d = Values::new(Shape::Typed, id, (id % 3) as u32).double;
        assert!(d.fract() != 0.0, "id {id}: {d}");
    }
}

#[test]
fn datetime_formatting() {
    assert_eq!(format_datetime(0, 1), "1970-01-01T00:00:00.0000001Z");
    assert_eq!(format_datetime(951_782_400, 0), "2000-02-29T00:00:00.0000000Z");
    assert_eq!(norm_datetime("2000-02-29T00:00:00.1200000Z"), "2000-02-29T00:00:00.12");
    assert_eq!(norm_datetime("2000-02-29T00:00:00Z"), "2000-02-29T00:00:00");
}

#[test]
fn page_helpers() {
    let page =
        br#"{"value":[{"PartitionKey":"p","RowKey":"0000000000007"},{"PartitionKey":"p","RowKey":"0000000000042"}]}"#;
    assert_eq!(count_entities(page), 2);
    assert_eq!(last_row_id(page), Some(42));
    assert_eq!(last_row_id(b"{\"value\":[]}"), None);
}

#[test]
fn expected_counts_are_consistent() {
    let n = 2500;
    let parts: u64 = (0..3).map(|p| partition_expected(p, n)).sum();
    let direct = (0..n).filter(|&id| int32_of(id) > PARTITION_PREDICATE_MIN).count() as u64;
    assert_eq!(parts, direct);
    assert!(scan_expected(Shape::Typed, n) > 0);
}
