//! What every case of the matrix shares: the server it runs against, outcomes, and the
//! helpers that read pages and keys.

use azure_core::error::ErrorKind;
use azure_core::StatusCode;
use azure_data_tables::clients::TableServiceClientBuilder;
use azure_data_tables::prelude::*;
use azure_storage::{CloudLocation, StorageCredentials};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Outcome;

/// Where the server is, and a name unique to this run for every table.
#[derive(Clone)]
pub(crate) struct Env {
    pub(crate) url: String,
    pub(crate) account: String,
    pub(crate) key: String,
    pub(crate) run: String,
}

impl Env {
    pub(crate) fn from_env() -> Result<Self, String> {
        let var = |name: &str| std::env::var(name).map_err(|_| format!("{name} is not set"));
        Ok(Env {
            url: var("TAFEL_TABLE_URL")?,
            account: var("TAFEL_ACCOUNT")?,
            key: var("TAFEL_KEY")?,
            run: uuid::Uuid::new_v4().simple().to_string()[..8].to_owned(),
        })
    }

    pub(crate) fn location(&self) -> CloudLocation {
        CloudLocation::Custom {
            account: self.account.clone(),
            uri: self.url.clone(),
        }
    }

    pub(crate) fn service(&self) -> TableServiceClient {
        self.service_with(StorageCredentials::access_key(self.account.clone(), self.key.clone()))
    }

    pub(crate) fn service_with(&self, credentials: StorageCredentials) -> TableServiceClient {
        TableServiceClientBuilder::with_location(self.location(), credentials).build()
    }

    /// A new table named for the case.
    pub(crate) async fn table(&self, stem: &str) -> Result<TableClient, String> {
        let client = self.service().table_client(format!("rs{}{stem}", self.run));
        client.create().await.map_err(|e| format!("create table: {e}"))?;
        Ok(client)
    }
}

/// The HTTP status of a failed call.
pub(crate) fn status(e: &azure_core::Error) -> Option<StatusCode> {
    match e.kind() {
        ErrorKind::HttpResponse { status, .. } => Some(*status),
        _ => None,
    }
}

pub(crate) fn expect_status<T: std::fmt::Debug>(r: azure_core::Result<T>, want: StatusCode, what: &str) -> Outcome {
    match r {
        Ok(v) => Err(format!("{what}: succeeded ({v:?}), expected {want}")),
        Err(e) if status(&e) == Some(want) => Ok(()),
        Err(e) => Err(format!("{what}: {e}, expected {want}")),
    }
}

pub(crate) fn check(cond: bool, what: impl FnOnce() -> String) -> Outcome {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}

pub(crate) fn fail(what: &str) -> impl Fn(azure_core::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Person {
    #[serde(rename = "PartitionKey")]
    pub(crate) pk: String,
    #[serde(rename = "RowKey")]
    pub(crate) rk: String,
    #[serde(rename = "Name")]
    pub(crate) name: String,
    #[serde(rename = "Age")]
    pub(crate) age: i32,
}

pub(crate) fn person(pk: &str, rk: &str, name: &str, age: i32) -> Person {
    Person {
        pk: pk.into(),
        rk: rk.into(),
        name: name.into(),
        age,
    }
}

/// Every entity a query returns, through every continuation page; and the page count.
pub(crate) async fn query_all(
    table: &TableClient,
    filter: Option<String>,
    top: Option<u32>,
) -> Result<(Vec<Value>, usize), String> {
    let mut query = table.query();
    if let Some(f) = filter {
        query = query.filter(f);
    }
    if let Some(t) = top {
        query = query.top(t);
    }
    let mut stream = query.into_stream::<Value>();
    let (mut rows, mut pages) = (Vec::new(), 0);
    while let Some(page) = stream.next().await {
        rows.extend(page.map_err(fail("query"))?.entities);
        pages += 1;
    }
    Ok((rows, pages))
}

pub(crate) fn keys(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .map(|r| r["RowKey"].as_str().unwrap_or("?").to_owned())
        .collect()
}
