//! Azure Cosmos DB for Table: where it answers differently from Table Storage, in
//! one place (docs/cosmos.md). A request is Cosmos's when its host is a Cosmos
//! account's (`<account>.table.cosmos.azure.com`, `.table.cosmosdb.azure.com`, as
//! the SDKs detect Cosmos) or when the server runs with `--cosmos`.

use std::sync::atomic::{AtomicBool, Ordering};

use tafel_service::model::{Entity, Property};
use tafel_service::validate::EntityLimit;
use tafel_service::{Error, ErrorCode, Result};

use crate::json::DecodedEntity;

/// Which service a request is answered as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    #[default]
    Storage,
    Cosmos,
}

/// The Cosmos DB emulator's well-known account and key: with `--cosmos`, a
/// connection string written for the emulator works unchanged.
pub const EMULATOR_ACCOUNT: &str = "localhost";
pub const EMULATOR_KEY: &str =
    "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==";
/// The emulator's Table API port.
pub const EMULATOR_PORT: u16 = 8902;

/// Set by `--cosmos`: every request is answered as Cosmos answers. Process-wide,
/// set once before serving.
static SERVER_COSMOS: AtomicBool = AtomicBool::new(false);

pub fn set_server_cosmos(on: bool) {
    SERVER_COSMOS.store(on, Ordering::Relaxed);
}

pub fn server_cosmos() -> bool {
    SERVER_COSMOS.load(Ordering::Relaxed)
}

impl Dialect {
    /// The dialect of a request for `hostname` (the `Host` header without its port).
    pub fn of_host(hostname: &str) -> Dialect {
        if server_cosmos() || is_cosmos_host(hostname) {
            Dialect::Cosmos
        } else {
            Dialect::Storage
        }
    }

    pub fn is_cosmos(self) -> bool {
        self == Dialect::Cosmos
    }
}

fn is_cosmos_host(hostname: &str) -> bool {
    let h = hostname.trim_end_matches('.');
    [".table.cosmos.azure.com", ".table.cosmosdb.azure.com"]
        .iter()
        .any(|suffix| {
            h.len() > suffix.len() && h.as_bytes()[h.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
        })
}

/// Cosmos's table-name rule: 1 to 254 characters, none of `/ \ # ?`, not ending in
/// a space. The codes and messages are Cosmos's, the ones the SDKs map to their
/// own naming error (azure-data-tables `_error._validate_tablename_error`).
pub fn table_name(name: &str) -> Result<()> {
    if let Some(c) = name.chars().find(|c| matches!(c, '/' | '\\' | '#' | '?')) {
        return Err(Error::with_message(
            ErrorCode::CosmosInternalServerError,
            format!("The resource name presented contains invalid character '{c}'."),
        ));
    }
    if name.ends_with(' ') {
        return Err(Error::with_message(
            ErrorCode::CosmosInternalServerError,
            "The resource name can't end with space.",
        ));
    }
    if name.is_empty() || name.chars().count() > 254 {
        return Err(Error::with_message(
            ErrorCode::CosmosBadRequest,
            "The input name is invalid.",
        ));
    }
    Ok(())
}

/// Cosmos's answer for a table name in a path (an entity operation, a delete): a
/// forbidden character is `InvalidInput`; a name too long for a table is simply not
/// found.
pub fn table_name_in_path(name: &str) -> Result<()> {
    if name.chars().any(|c| matches!(c, '/' | '\\' | '#' | '?')) {
        return Err(Error::with_message(
            ErrorCode::InvalidInput,
            "The table name contains an invalid character.",
        ));
    }
    if name.ends_with(' ') {
        return Err(Error::with_message(
            ErrorCode::InvalidInput,
            "Table name cannot end with a space.",
        ));
    }
    Ok(())
}

/// A table name for a URL in a header (`Location`): percent-escaped beyond
/// printable ASCII, as a Cosmos name may be any Unicode.
pub fn escape_name(name: &str) -> std::borrow::Cow<'_, str> {
    const ESCAPED: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS.add(b' ').add(b'%');
    percent_encoding::utf8_percent_encode(name, ESCAPED).into()
}

/// What Cosmos answers an operation it does not support with.
const NOT_SUPPORTED: &str = "The requested operation is not supported.";

/// Cosmos's answers that come before the operation's own: an account URL that ends
/// in a table name (`/t/Tables`, `/t/Tables('x')`) is an invalid URL to Cosmos,
/// which Table Storage takes as a request on table `t`. Service properties
/// (analytics, CORS) cannot be set and there are no service stats: Azure's
/// recorded answers are 405 `MethodNotAllowed` (Set Service Properties,
/// azure-data-tables' `test_too_many_cors_rules`, 2026) and 501 `NotImplemented`
/// (Get Service Stats, `test_table_service_stats_f`).
pub(crate) fn admit(resource: &crate::resource::Resource<'_>, req: &crate::request::Request) -> Result<()> {
    use crate::resource::Resource;
    match resource {
        Resource::BelowTable(_) | Resource::KeyedBelowTable(_) => {
            Err(Error::with_message(ErrorCode::InvalidInput, "Request url is invalid."))
        }
        Resource::Service if req.param("restype") == Some("service") => match (&req.method, req.param("comp")) {
            (&http::Method::PUT, Some("properties")) => {
                Err(Error::with_message(ErrorCode::MethodNotAllowed, NOT_SUPPORTED))
            }
            (&http::Method::GET | &http::Method::HEAD, Some("stats")) => {
                Err(Error::with_message(ErrorCode::NotImplemented, NOT_SUPPORTED))
            }
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

/// A failed changeset's error as Cosmos words it: a missing table is
/// `ResourceNotFound` there (the SDK's tests assert it), `TableNotFound` in Table Storage.
pub(crate) fn batch_error(e: &Error) -> Error {
    match e.code {
        ErrorCode::TableNotFound => Error::new(ErrorCode::ResourceNotFound),
        _ => e.clone(),
    }
}

impl Dialect {
    /// An entity a write's body gave (not a delete's), as this dialect takes it.
    /// Cosmos refuses an empty PartitionKey or RowKey, which Table Storage takes
    /// (the SDK's Cosmos tests expect a message holding "PartitionKey/RowKey cannot
    /// be empty"); refuses an update or upsert whose body types its keys
    /// (`PartitionKey@odata.type: Edm.DateTime`, Guid, Binary), which Table Storage
    /// takes with the URL's keys (Azure's recorded answer to
    /// `test_encoder_upsert_entity_complex_keys`: 400 `InvalidInput` "One of the
    /// input values is invalid."); and of properties named `etag` in any case keeps
    /// the first (recorded for `test_etag_duplicate_field`: `etag` and `Etag`
    /// written, `etag` read back), where Table Storage keeps each. Only `etag`: the
    /// same recordings' entities keep both `Birthday` and `birthday`.
    pub(crate) fn admit_entity(self, decoded: DecodedEntity) -> Result<Entity> {
        let DecodedEntity { mut entity, typed_keys } = decoded;
        if !self.is_cosmos() {
            return Ok(entity);
        }
        if typed_keys {
            return Err(Error::with_message(
                ErrorCode::InvalidInput,
                "One of the input values is invalid.",
            ));
        }
        if entity.partition_key.is_empty() || entity.row_key.is_empty() {
            return Err(Error::with_message(
                ErrorCode::InvalidInput,
                "PartitionKey/RowKey cannot be empty.",
            ));
        }
        keep_first_etag(&mut entity.properties);
        Ok(entity)
    }
}

/// Cosmos DB for Table's largest entity: 2 MB (its FAQ and service limits), where
/// Table Storage's is 1 MiB.
const COSMOS_MAX_ENTITY_BYTES: usize = 2 << 20;

impl Dialect {
    /// How large an entity this dialect takes.
    pub(crate) fn entity_limit(self) -> EntityLimit {
        match self {
            Dialect::Storage => EntityLimit::STORAGE,
            Dialect::Cosmos => EntityLimit {
                bytes: COSMOS_MAX_ENTITY_BYTES,
                name: "2MB",
            },
        }
    }
}

/// Keeps the first of the properties named `etag` without regard to case.
fn keep_first_etag(properties: &mut Vec<Property>) {
    let mut seen = false;
    properties.retain(|p| {
        if !p.name.eq_ignore_ascii_case("etag") {
            return true;
        }
        !std::mem::replace(&mut seen, true)
    });
}

/// Whether writes are taken at the account's `-secondary` host: Cosmos's is a
/// regional endpoint of the same account (the SDK's Cosmos tests write through it
/// with `location_mode=SECONDARY`); Table Storage's is a read-only replica.
pub fn secondary_writes(dialect: Dialect) -> bool {
    dialect.is_cosmos()
}

/// How long a throttled client is told to wait, in `x-ms-retry-after-ms`: the
/// throttle counts per second, and a tenth of one lets most retries land in time.
pub const RETRY_AFTER_MS: &str = "100";

impl Dialect {
    /// The throttle's refusal as this dialect answers it: Cosmos refuses a request
    /// over its request units with 429 `TooManyRequests`, where Table Storage
    /// answers 503 `ServerBusy`; the SDKs' retry policies take each differently.
    pub fn throttled(self, e: Error) -> Error {
        match self {
            Dialect::Cosmos if matches!(e.code, ErrorCode::ServerBusy | ErrorCode::AccountOverLimit) => {
                Error::new(ErrorCode::TooManyRequests)
            }
            _ => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        assert_eq!(Dialect::of_host("acct.table.cosmos.azure.com"), Dialect::Cosmos);
        assert_eq!(
            Dialect::of_host("acct-secondary.table.COSMOSDB.azure.com"),
            Dialect::Cosmos
        );
        assert_eq!(Dialect::of_host("acct.table.core.windows.net"), Dialect::Storage);
        assert_eq!(Dialect::of_host("table.cosmos.azure.com"), Dialect::Storage);
        assert_eq!(Dialect::of_host("127.0.0.1"), Dialect::Storage);
    }

    #[test]
    fn only_the_first_etag_in_any_case_is_kept() {
        use tafel_service::model::Value;
        let prop = |name: &str, v: i32| Property {
            name: name.to_owned(),
            value: Value::Int32(v),
        };
        let mut props = vec![
            prop("etag", 1),
            prop("Birthday", 2),
            prop("Etag", 3),
            prop("birthday", 4),
            prop("ETAG", 5),
        ];
        keep_first_etag(&mut props);
        let names: Vec<_> = props.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["etag", "Birthday", "birthday"]);
    }

    #[test]
    fn names() {
        assert!(table_name("my_table").is_ok());
        assert!(table_name("啊齄丂狛狜").is_ok());
        assert!(table_name("a").is_ok());
        let e = table_name("a/b").expect_err("slash");
        assert_eq!(e.code, ErrorCode::CosmosInternalServerError);
        assert!(table_name("ends ").is_err());
        let e = table_name(&"a".repeat(255)).expect_err("long");
        assert_eq!(e.code, ErrorCode::CosmosBadRequest);
    }
}
