//! The client matrix for the Rust SDK (`azure_data_tables` 0.21) against the Tafel server
//! named by TAFEL_TABLE_URL / TAFEL_ACCOUNT / TAFEL_KEY (tests/clients/README.md). Each
//! case prints `ok - name` or `not ok - name: why`; the last line is `N passed, N failed`.

use std::future::Future;
use std::pin::Pin;

use azure_core::StatusCode;
use azure_data_tables::operations::InsertEntityResponse;
use azure_data_tables::prelude::*;
use azure_storage::shared_access_signature::account_sas::{
    AccountSasPermissions, AccountSasResource, AccountSasResourceType, AccountSharedAccessSignature,
};
use azure_storage::shared_access_signature::SasToken;
use azure_storage::StorageCredentials;
use base64::Engine as _;
use futures::StreamExt;
use serde_json::{json, Value};

mod support;

use support::*;

type Outcome = Result<(), String>;
type Case = fn(Env) -> Pin<Box<dyn Future<Output = Outcome>>>;

async fn quickstart(env: Env) -> Outcome {
    let table = env.table("quick").await?;
    for p in [person("people", "1", "Ada", 36), person("people", "2", "Alan", 41)] {
        let _: InsertEntityResponse<Person> = table
            .insert(&p)
            .map_err(fail("insert"))?
            .await
            .map_err(fail("insert"))?;
    }
    let got = table
        .partition_key_client("people")
        .entity_client("1")
        .get::<Person>()
        .await
        .map_err(fail("get"))?;
    check(got.entity == person("people", "1", "Ada", 36), || {
        format!("get: {:?}", got.entity)
    })?;
    // The SDK form-encodes the query string: spaces go as '+'.
    let (rows, _) = query_all(&table, Some("PartitionKey eq 'people' and Age gt 38".into()), None).await?;
    check(keys(&rows) == ["2"], || format!("query: {rows:?}"))?;
    let again: azure_core::Result<InsertEntityResponse<Person>> = table
        .insert(person("people", "1", "Ada", 36))
        .map_err(fail("insert"))?
        .await;
    expect_status(again.map(|_| ()), StatusCode::Conflict, "second insert")?;
    table
        .partition_key_client("people")
        .entity_client("1")
        .delete()
        .await
        .map_err(fail("delete"))?;
    let gone = table
        .partition_key_client("people")
        .entity_client("1")
        .get::<Person>()
        .await;
    expect_status(gone.map(|r| r.entity), StatusCode::NotFound, "get deleted")?;
    let listed = {
        let mut names = Vec::new();
        let mut stream = env.service().list().into_stream();
        while let Some(page) = stream.next().await {
            names.extend(page.map_err(fail("list tables"))?.tables.into_iter().map(|t| t.name));
        }
        names
    };
    check(listed.contains(&table.table_name().to_owned()), || {
        "table not listed".into()
    })?;
    table.delete().await.map_err(fail("delete table"))?;
    expect_status(
        table.delete().await.map(|_| ()),
        StatusCode::NotFound,
        "delete missing table",
    )
}

/// All eight EDM types, written with explicit annotations where JSON cannot say the type.
fn typed(rk: &str) -> Value {
    json!({
        "PartitionKey": "t", "RowKey": rk,
        "Str": "Zoë 東京 'quoted' + & # %",
        "Int32": -2147483648i64,
        "Int64": "9007199254740993", "Int64@odata.type": "Edm.Int64",
        "Double": 2.0, "Double@odata.type": "Edm.Double",
        "Bool": true,
        "When": "2024-01-02T03:04:05.1234567Z", "When@odata.type": "Edm.DateTime",
        "Id": "12345678-1234-5678-9abc-def012345678", "Id@odata.type": "Edm.Guid",
        "Bytes": base64::engine::general_purpose::STANDARD.encode([0u8, 1, 254, 255]), "Bytes@odata.type": "Edm.Binary",
    })
}

async fn every_edm_type_round_trips(env: Env) -> Outcome {
    let table = env.table("types").await?;
    let sent = typed("1");
    let _: InsertEntityResponse<Value> = table
        .insert(&sent)
        .map_err(fail("insert"))?
        .await
        .map_err(fail("insert"))?;
    let got = table
        .partition_key_client("t")
        .entity_client("1")
        .get::<Value>()
        .await
        .map_err(fail("get"))?
        .entity;
    for (name, want_type) in [
        ("Int64", Some("Edm.Int64")),
        ("When", Some("Edm.DateTime")),
        ("Id", Some("Edm.Guid")),
        ("Bytes", Some("Edm.Binary")),
        ("Double", Some("Edm.Double")),
        ("Str", None),
        ("Bool", None),
        ("Int32", None),
    ] {
        let annotation = got.get(format!("{name}@odata.type")).and_then(Value::as_str);
        if let Some(t) = want_type {
            check(annotation == Some(t), || {
                format!("{name}: type {annotation:?}, want {t}")
            })?;
        }
        let (g, s) = (&got[name], &sent[name]);
        let same = match name {
            "Double" => g.as_f64() == Some(2.0),
            _ => g == s,
        };
        check(same, || format!("{name}: got {g}, sent {s}"))?;
    }
    table.delete().await.map_err(fail("delete table"))?;
    Ok(())
}

const AWKWARD: [&str; 8] = [
    "with space",
    "it's quoted",
    "a+b",
    "x&y=z",
    "#hash",
    "100%",
    "%2B encoded",
    "Zoë 東京",
];

async fn filters_on_every_type(env: Env) -> Outcome {
    let table = env.table("filters").await?;
    let mut tx = table.partition_key_client("f").transaction();
    for (i, s) in AWKWARD.iter().enumerate() {
        let row = json!({
            "PartitionKey": "f", "RowKey": format!("{i:02}"), "S": s, "I": i,
            "L": (1u64 << 40 | i as u64).to_string(), "L@odata.type": "Edm.Int64",
            "D": i as f64 + 0.5, "B": i % 2 == 0,
            "T": format!("2020-01-0{}T00:00:00Z", i + 1), "T@odata.type": "Edm.DateTime",
            "G": format!("00000000-0000-0000-0000-00000000000{i}"), "G@odata.type": "Edm.Guid",
        });
        tx = tx.insert(row).map_err(fail("batch"))?;
    }
    tx.await.map_err(fail("batch"))?;
    for (i, s) in AWKWARD.iter().enumerate() {
        let quoted = s.replace('\'', "''");
        let (rows, _) = query_all(&table, Some(format!("S eq '{quoted}'")), None).await?;
        check(keys(&rows) == [format!("{i:02}")], || {
            format!("S eq '{quoted}': {:?}", keys(&rows))
        })?;
    }
    for (filter, want) in [
        ("I ge 6", vec!["06", "07"]),
        ("L eq 1099511627779L", vec!["03"]),
        ("D lt 1.6", vec!["00", "01"]),
        ("B eq false and I lt 4", vec!["01", "03"]),
        ("T ge datetime'2020-01-07T00:00:00Z'", vec!["06", "07"]),
        ("G eq guid'00000000-0000-0000-0000-000000000005'", vec!["05"]),
        ("not (I lt 7)", vec!["07"]),
    ] {
        let (rows, _) = query_all(&table, Some(filter.into()), None).await?;
        check(keys(&rows) == want, || format!("{filter}: {:?}", keys(&rows)))?;
    }
    let mut stream = table.query().filter("I eq 3").select("S,I").into_stream::<Value>();
    let page = stream.next().await.ok_or("no page")?.map_err(fail("select"))?;
    let row = page.entities.first().ok_or("select: no row")?;
    let names: Vec<&String> = row
        .as_object()
        .map(|o| o.keys().filter(|k| !k.starts_with("odata.")).collect())
        .unwrap_or_default();
    check(names.len() == 2 && row["S"] == "x&y=z" && row["I"] == 3, || {
        format!("select: {row}")
    })?;
    table.delete().await.map_err(fail("delete table"))?;
    Ok(())
}

async fn paging_over_a_thousand_rows(env: Env) -> Outcome {
    let table = env.table("paging").await?;
    const N: usize = 1205;
    for start in (0..N).step_by(100) {
        let mut tx = table.partition_key_client("p").transaction();
        for i in start..(start + 100).min(N) {
            tx = tx
                .insert(json!({"PartitionKey": "p", "RowKey": format!("{i:05}"), "N": i}))
                .map_err(fail("batch"))?;
        }
        let done = tx.await.map_err(fail("batch"))?;
        check(
            done.operation_responses
                .iter()
                .all(|r| r.status_code == StatusCode::NoContent || r.status_code == StatusCode::Created),
            || "a batch insert failed".into(),
        )?;
    }
    let (rows, pages) = query_all(&table, None, None).await?;
    let got: Vec<u64> = rows.iter().filter_map(|r| r["N"].as_u64()).collect();
    check(got == (0..N as u64).collect::<Vec<_>>(), || {
        format!("{} rows, not each once in order", got.len())
    })?;
    check(pages >= 2, || format!("{pages} page(s) for {N} rows"))?;
    let (rows, pages) = query_all(&table, Some("N ge 5".into()), Some(400)).await?;
    check(rows.len() == N - 5 && pages == 3, || {
        format!("$top 400: {} rows in {pages} pages", rows.len())
    })?;
    table.delete().await.map_err(fail("delete table"))?;
    Ok(())
}

async fn writes_with_etags(env: Env) -> Outcome {
    let table = env.table("writes").await?;
    let e = table.partition_key_client("p").entity_client("e");
    e.insert_or_replace(json!({"PartitionKey": "p", "RowKey": "e", "A": 1, "B": 2}))
        .map_err(fail("upsert"))?
        .await
        .map_err(fail("upsert"))?;
    e.insert_or_merge(json!({"PartitionKey": "p", "RowKey": "e", "C": 3}))
        .map_err(fail("upsert merge"))?
        .await
        .map_err(fail("upsert merge"))?;
    let got = e.get::<Value>().await.map_err(fail("get"))?;
    check(got.entity["A"] == 1 && got.entity["C"] == 3, || {
        format!("after merge: {}", got.entity)
    })?;
    let stale = got.etag.clone();
    e.merge(
        json!({"PartitionKey": "p", "RowKey": "e", "D": 4}),
        IfMatchCondition::Etag(stale.clone()),
    )
    .map_err(fail("merge"))?
    .await
    .map_err(fail("merge with the current ETag"))?;
    let r = e
        .update(
            json!({"PartitionKey": "p", "RowKey": "e", "X": 0}),
            IfMatchCondition::Etag(stale.clone()),
        )
        .map_err(fail("update"))?
        .await;
    expect_status(
        r.map(|_| ()),
        StatusCode::PreconditionFailed,
        "replace with a stale ETag",
    )?;
    let r = e
        .merge(
            json!({"PartitionKey": "p", "RowKey": "e", "X": 0}),
            IfMatchCondition::Etag(stale.clone()),
        )
        .map_err(fail("merge"))?
        .await;
    expect_status(r.map(|_| ()), StatusCode::PreconditionFailed, "merge with a stale ETag")?;
    let r = e.delete().if_match(IfMatchCondition::Etag(stale)).await;
    expect_status(
        r.map(|_| ()),
        StatusCode::PreconditionFailed,
        "delete with a stale ETag",
    )?;
    let current = e.get::<Value>().await.map_err(fail("get"))?;
    check(current.entity["D"] == 4 && current.entity.get("X").is_none(), || {
        format!("{}", current.entity)
    })?;
    e.update(
        json!({"PartitionKey": "p", "RowKey": "e", "Z": 9}),
        IfMatchCondition::Etag(current.etag),
    )
    .map_err(fail("update"))?
    .await
    .map_err(fail("replace with the current ETag"))?;
    let replaced = e.get::<Value>().await.map_err(fail("get"))?;
    check(replaced.entity["Z"] == 9 && replaced.entity.get("A").is_none(), || {
        format!("{}", replaced.entity)
    })?;
    e.delete()
        .if_match(IfMatchCondition::Etag(replaced.etag))
        .await
        .map_err(fail("delete"))?;
    let missing = table.partition_key_client("p").entity_client("none");
    let r = missing
        .merge(json!({"PartitionKey": "p", "RowKey": "none"}), IfMatchCondition::Any)
        .map_err(fail("merge"))?
        .await;
    expect_status(r.map(|_| ()), StatusCode::NotFound, "merge of a missing entity")?;
    table.delete().await.map_err(fail("delete table"))?;
    Ok(())
}

async fn a_transaction_of_every_kind_and_a_failing_one(env: Env) -> Outcome {
    let table = env.table("batch").await?;
    let pk = table.partition_key_client("b");
    for rk in ["upd", "mrg", "del"] {
        let _: InsertEntityResponse<Value> = table
            .insert(json!({"PartitionKey": "b", "RowKey": rk, "V": 1, "Keep": "x"}))
            .map_err(fail("insert"))?
            .await
            .map_err(fail("insert"))?;
    }
    let done = pk
        .transaction()
        .insert(json!({"PartitionKey": "b", "RowKey": "new", "V": "a b+c&d"}))
        .and_then(|t| t.update("upd", json!({"PartitionKey": "b", "RowKey": "upd", "V": 2}), None))
        .and_then(|t| t.merge("mrg", json!({"PartitionKey": "b", "RowKey": "mrg", "V": 2}), None))
        .and_then(|t| t.insert_or_merge("ups", json!({"PartitionKey": "b", "RowKey": "ups", "V": 3})))
        .and_then(|t| t.insert_or_replace("upr", json!({"PartitionKey": "b", "RowKey": "upr", "V": 4})))
        .and_then(|t| t.delete("del", None))
        .map_err(fail("build transaction"))?
        .await
        .map_err(fail("transaction"))?;
    check(done.operation_responses.len() == 6, || {
        format!("{} responses", done.operation_responses.len())
    })?;
    let (rows, _) = query_all(&table, None, None).await?;
    check(keys(&rows) == ["mrg", "new", "upd", "upr", "ups"], || {
        format!("{:?}", keys(&rows))
    })?;
    let by = |rk: &str| rows.iter().find(|r| r["RowKey"] == rk).cloned().unwrap_or_default();
    check(
        by("new")["V"] == "a b+c&d" && by("upd")["V"] == 2 && by("upd").get("Keep").is_none(),
        || "insert/replace in batch".into(),
    )?;
    check(by("mrg")["V"] == 2 && by("mrg")["Keep"] == "x", || {
        "merge in batch".into()
    })?;
    // An insert of an existing key fails the whole changeset: nothing of it is applied.
    let failed = pk
        .transaction()
        .insert(json!({"PartitionKey": "b", "RowKey": "first"}))
        .and_then(|t| t.insert(json!({"PartitionKey": "b", "RowKey": "new"})))
        .map_err(fail("build transaction"))?
        .await;
    let statuses: Vec<StatusCode> = match failed {
        Ok(r) => r.operation_responses.iter().map(|o| o.status_code).collect(),
        Err(e) => status(&e).into_iter().collect(),
    };
    check(statuses.contains(&StatusCode::Conflict), || {
        format!("failing batch answered {statuses:?}")
    })?;
    let (rows, _) = query_all(&table, None, None).await?;
    check(!keys(&rows).contains(&"first".to_owned()), || {
        "the failed batch's first insert was applied".into()
    })?;
    table.delete().await.map_err(fail("delete table"))?;
    Ok(())
}

fn account_sas(
    env: &Env,
    resource_type: AccountSasResourceType,
    permissions: AccountSasPermissions,
) -> Result<String, String> {
    let key = azure_core::auth::Secret::new(env.key.clone());
    let expiry = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
    AccountSharedAccessSignature::new(
        env.account.clone(),
        key,
        AccountSasResource::Table,
        resource_type,
        expiry,
        permissions,
    )
    .token()
    .map_err(fail("account SAS"))
}

async fn account_sas_reads_and_cannot_write(env: Env) -> Outcome {
    let table = env.table("sas").await?;
    let _: InsertEntityResponse<Person> = table
        .insert(person("a", "1", "Ada", 36))
        .map_err(fail("insert"))?
        .await
        .map_err(fail("insert"))?;
    let read = AccountSasPermissions {
        read: true,
        list: true,
        ..Default::default()
    };
    let sas = account_sas(&env, AccountSasResourceType::Object, read)?;
    let creds = StorageCredentials::sas_token(sas).map_err(fail("sas credential"))?;
    let reader = env.service_with(creds).table_client(table.table_name());
    let (rows, _) = query_all(&reader, None, None).await?;
    check(keys(&rows) == ["1"], || format!("SAS query: {rows:?}"))?;
    let got = reader
        .partition_key_client("a")
        .entity_client("1")
        .get::<Person>()
        .await
        .map_err(fail("SAS get"))?;
    check(got.entity.name == "Ada", || "SAS get".into())?;
    let r: azure_core::Result<InsertEntityResponse<Person>> =
        reader.insert(person("a", "2", "Bo", 1)).map_err(fail("insert"))?.await;
    expect_status(r.map(|_| ()), StatusCode::Forbidden, "insert with a read-only SAS")?;
    // A SAS for entities does not reach table operations.
    let tables = AccountSasPermissions {
        read: true,
        list: true,
        ..Default::default()
    };
    let sas = account_sas(&env, AccountSasResourceType::Container, tables)?;
    let lister = env.service_with(StorageCredentials::sas_token(sas).map_err(fail("sas credential"))?);
    let mut stream = lister.list().into_stream();
    let page = stream
        .next()
        .await
        .ok_or("no page")?
        .map_err(fail("list tables with a container SAS"))?;
    check(page.tables.iter().any(|t| t.name == table.table_name()), || {
        "table not listed".into()
    })?;
    let r = lister
        .table_client(table.table_name())
        .query()
        .into_stream::<Value>()
        .next()
        .await
        .ok_or("no page")?;
    expect_status(
        r.map(|p| p.entities.len()),
        StatusCode::Forbidden,
        "query with a container-only SAS",
    )?;
    table.delete().await.map_err(fail("delete table"))?;
    Ok(())
}

async fn a_wrong_key_is_refused(env: Env) -> Outcome {
    let table = env.table("wrongkey").await?;
    let wrong = env.service_with(StorageCredentials::access_key(
        env.account.clone(),
        "d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXk=",
    ));
    let r = wrong
        .table_client(table.table_name())
        .partition_key_client("a")
        .entity_client("1")
        .get::<Value>()
        .await;
    expect_status(r.map(|g| g.entity), StatusCode::Forbidden, "get with a wrong key")?;
    table.delete().await.map_err(fail("delete table"))?;
    Ok(())
}

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        [$((stringify!($name), (|env| Box::pin($name(env))) as Case)),*]
    };
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let env = match Env::from_env() {
        Ok(env) => env,
        Err(e) => {
            eprintln!("rust-data-tables: {e}");
            std::process::exit(2);
        }
    };
    let (mut passed, mut failed) = (0, 0);
    for (name, case) in cases![
        quickstart,
        every_edm_type_round_trips,
        filters_on_every_type,
        paging_over_a_thousand_rows,
        writes_with_etags,
        a_transaction_of_every_kind_and_a_failing_one,
        account_sas_reads_and_cannot_write,
        a_wrong_key_is_refused,
    ] {
        match case(env.clone()).await {
            Ok(()) => {
                passed += 1;
                println!("ok - {name}");
            }
            Err(why) => {
                failed += 1;
                println!("not ok - {name}: {why}");
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    std::process::exit(i32::from(failed > 0));
}
