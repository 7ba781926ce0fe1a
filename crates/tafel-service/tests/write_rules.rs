//! The service's write rules over a real embedded store in a temp directory: ETag
//! conditions, merge against replace, upserts, missing entities, the property limit
//! after a merge, and all-or-nothing writes of several entities. The Python suite checks
//! the same rules through the SDKs; these run in milliseconds and name the rule that broke.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a failed step fails the test

use std::sync::Arc;

use tafel_service::model::{codec, etag_for, DateTime, Entity, Value};
use tafel_service::{Ctx, ErrorCode, IfMatch, Service, WriteKind, WriteOp};
use tafel_store::embedded::{EmbeddedOptions, EmbeddedStore};

const ACCOUNT: &str = "acct";
const TABLE: &str = "rules";

struct Fixture {
    service: Service,
    store: Arc<EmbeddedStore>,
    ctx: Ctx,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = EmbeddedStore::open(
        dir.path(),
        EmbeddedOptions {
            cache_size: 8 << 20,
            ..EmbeddedOptions::default()
        },
    )
    .expect("open");
    let store = Arc::new(store);
    let service = Service::new(store.clone());
    let ctx = Ctx::full(ACCOUNT);
    service.create_table(&ctx, TABLE).await.expect("create table");
    Fixture {
        service,
        store,
        ctx,
        _dir: dir,
    }
}

fn entity(rk: &str, props: &[(&str, Value)]) -> Entity {
    let mut e = Entity::new("p", rk);
    for (name, value) in props {
        e.set(*name, value.clone());
    }
    e
}

fn op(kind: WriteKind, e: Entity, if_match: IfMatch) -> WriteOp {
    WriteOp {
        kind,
        entity: e,
        if_match,
        limit: tafel_service::validate::EntityLimit::STORAGE,
    }
}

impl Fixture {
    async fn write(&self, kind: WriteKind, e: Entity, if_match: IfMatch) -> Result<DateTime, ErrorCode> {
        self.service
            .write_entity(&self.ctx, TABLE, op(kind, e, if_match))
            .await
            .map_err(|e| e.code)
    }

    /// The stored property names and the entity's ETag, or `None` if it is absent.
    async fn read(&self, rk: &str) -> Option<(Vec<String>, String)> {
        let stored = self.service.get_entity(&self.ctx, TABLE, "p", rk).await.ok()?;
        let e = codec::decode("p".into(), rk.into(), &stored.bytes).expect("decodes");
        let etag = etag_for(e.timestamp.expect("timestamp"));
        Some((e.properties.iter().map(|p| p.name.clone()).collect(), etag))
    }
}

fn weak(etag: &str) -> IfMatch {
    IfMatch::Etag(etag.trim_start_matches("W/").to_owned())
}

#[tokio::test]
async fn insert_of_an_existing_entity_is_entity_already_exists() {
    let f = fixture().await;
    let e = entity("1", &[("A", Value::Int32(1))]);
    f.write(WriteKind::Insert, e.clone(), IfMatch::None)
        .await
        .expect("insert");
    assert_eq!(
        f.write(WriteKind::Insert, e, IfMatch::None).await,
        Err(ErrorCode::EntityAlreadyExists)
    );
}

#[tokio::test]
async fn merge_keeps_other_properties_and_replace_drops_them() {
    let f = fixture().await;
    f.write(
        WriteKind::Insert,
        entity("1", &[("A", Value::Int32(1)), ("B", Value::Int32(2))]),
        IfMatch::None,
    )
    .await
    .expect("insert");
    f.write(WriteKind::Merge, entity("1", &[("C", Value::Int32(3))]), IfMatch::Any)
        .await
        .expect("merge");
    assert_eq!(f.read("1").await.expect("present").0, ["A", "B", "C"]);
    f.write(WriteKind::Replace, entity("1", &[("D", Value::Int32(4))]), IfMatch::Any)
        .await
        .expect("replace");
    assert_eq!(f.read("1").await.expect("present").0, ["D"]);
}

#[tokio::test]
async fn without_if_match_merge_and_replace_are_upserts() {
    let f = fixture().await;
    f.write(WriteKind::Merge, entity("m", &[("A", Value::Int32(1))]), IfMatch::None)
        .await
        .expect("upsert merge");
    f.write(
        WriteKind::Replace,
        entity("r", &[("B", Value::Int32(1))]),
        IfMatch::None,
    )
    .await
    .expect("upsert replace");
    assert_eq!(f.read("m").await.expect("inserted").0, ["A"]);
    assert_eq!(f.read("r").await.expect("inserted").0, ["B"]);
}

#[tokio::test]
async fn if_match_any_on_a_missing_entity_is_resource_not_found() {
    let f = fixture().await;
    for kind in [WriteKind::Merge, WriteKind::Replace, WriteKind::Delete] {
        assert_eq!(
            f.write(kind, entity("none", &[]), IfMatch::Any).await,
            Err(ErrorCode::ResourceNotFound),
            "{kind:?}"
        );
    }
    assert!(f.read("none").await.is_none(), "nothing was created");
}

#[tokio::test]
async fn a_stale_etag_is_update_condition_not_satisfied_and_changes_nothing() {
    let f = fixture().await;
    f.write(WriteKind::Insert, entity("1", &[("V", Value::Int32(1))]), IfMatch::None)
        .await
        .expect("insert");
    let (_, first) = f.read("1").await.expect("present");
    f.write(WriteKind::Merge, entity("1", &[("V", Value::Int32(2))]), weak(&first))
        .await
        .expect("current ETag");
    let (_, second) = f.read("1").await.expect("present");
    assert_ne!(first, second, "every write moves the ETag");
    for kind in [WriteKind::Merge, WriteKind::Replace, WriteKind::Delete] {
        let r = f
            .write(kind, entity("1", &[("W", Value::Int32(9))]), weak(&first))
            .await;
        assert_eq!(r, Err(ErrorCode::UpdateConditionNotSatisfied), "{kind:?}");
    }
    assert_eq!(
        f.read("1").await.expect("still there"),
        (vec!["V".to_owned()], second.clone())
    );
    // The ETag matches by value, however its colons are encoded.
    f.write(WriteKind::Delete, entity("1", &[]), weak(&second.replace("%3A", ":")))
        .await
        .expect("delete");
    assert!(f.read("1").await.is_none());
}

#[tokio::test]
async fn a_merge_that_would_exceed_the_property_limit_is_refused() {
    let f = fixture().await;
    let many = |prefix: &str, n: i32| {
        let mut e = Entity::new("p", "1");
        for i in 0..n {
            e.set(format!("{prefix}{i}"), Value::Int32(i));
        }
        e
    };
    f.write(WriteKind::Insert, many("A", 200), IfMatch::None)
        .await
        .expect("200 properties");
    // Each write alone is within 252 properties; merged they are not.
    let r = f.write(WriteKind::Merge, many("B", 60), IfMatch::Any).await;
    assert_eq!(r, Err(ErrorCode::TooManyProperties));
    assert_eq!(
        f.read("1").await.expect("present").0.len(),
        200,
        "the refused merge changed nothing"
    );
}

#[tokio::test]
async fn several_entities_are_written_all_or_nothing() {
    let f = fixture().await;
    f.write(WriteKind::Insert, entity("exists", &[]), IfMatch::None)
        .await
        .expect("insert");
    let ops = vec![
        op(
            WriteKind::Insert,
            entity("new", &[("A", Value::Int32(1))]),
            IfMatch::None,
        ),
        op(WriteKind::Merge, entity("other", &[]), IfMatch::None),
        op(WriteKind::Insert, entity("exists", &[]), IfMatch::None),
    ];
    let failure = f.service.write(&f.ctx, TABLE, ops).await.expect_err("the third fails");
    assert_eq!((failure.index, failure.error.code), (2, ErrorCode::EntityAlreadyExists));
    assert!(
        f.read("new").await.is_none() && f.read("other").await.is_none(),
        "nothing applied"
    );
    let ops = vec![
        op(WriteKind::Insert, entity("new", &[]), IfMatch::None),
        op(WriteKind::Delete, entity("exists", &[]), IfMatch::Any),
    ];
    let ts = f.service.write(&f.ctx, TABLE, ops).await.expect("applies");
    let (_, etag) = f.read("new").await.expect("inserted");
    assert_eq!(
        etag,
        etag_for(ts),
        "every entity of the write gets the returned Timestamp"
    );
    assert!(f.read("exists").await.is_none());
}

/// Regression: a merge decoded a damaged stored entity as one with no properties and
/// overwrote the row with only the merged ones, losing the rest without a word.
#[tokio::test]
async fn a_merge_onto_a_damaged_entity_fails_and_leaves_it_alone() {
    let f = fixture().await;
    let props = [("A", Value::Int32(1)), ("B", Value::String("kept".into()))];
    f.write(WriteKind::Insert, entity("r", &props), IfMatch::None)
        .await
        .expect("insert");
    // The stored bytes lose their tail: the header (Timestamp, property count) still reads.
    let key = tafel_store::EntityKey::new("p", "r");
    let stored = tafel_store::Store::get_entity(&*f.store, ACCOUNT, TABLE, &key)
        .await
        .expect("get")
        .expect("stored");
    let damaged = stored[..stored.len() - 3].to_vec();
    assert!(codec::timestamp(&damaged).is_some() && codec::decode(String::new(), String::new(), &damaged).is_none());
    let put = damaged.clone();
    tafel_store::write_with(
        &*f.store,
        ACCOUNT,
        TABLE,
        vec![key.clone()],
        tafel_store::Expect::Any,
        move |_| (vec![tafel_store::Mutation::Put(put.clone())], ()),
    )
    .await
    .expect("damage");

    for if_match in [IfMatch::None, IfMatch::Any] {
        let merged = f
            .write(WriteKind::Merge, entity("r", &[("C", Value::Int32(3))]), if_match)
            .await;
        assert_eq!(merged, Err(ErrorCode::InternalError));
    }
    let now = tafel_store::Store::get_entity(&*f.store, ACCOUNT, TABLE, &key)
        .await
        .expect("get");
    assert_eq!(now, Some(damaged), "the damaged row was written over");
}
