//! The redb tables of the embedded store and how keys and table records are laid out in them.

use std::cell::Cell;

use redb::TableDefinition;

use super::checksums::unseal;
use crate::error::{kind_of_io, BackendError, FailureKind, StoreError};
use crate::traits::TableRecord;

/// `account 0x00 lowercase-table-name` → `id u64 LE, name len u16 LE, name, acl`.
pub(in crate::embedded) const TABLES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("tables");
/// `account 0x00 table-name-as-created` → nothing: the listing order, which is
/// ordinal on the stored name while lookups ignore case.
pub(in crate::embedded) const TABLE_ORDER: TableDefinition<&[u8], ()> = TableDefinition::new("table_order");
/// `table id u64 BE ++ EntityKey` of a block's first row → the block: entity
/// rows (that key → entity value), many to a value (`blocks.rs`).
pub(in crate::embedded) const ENTITIES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("entity_blocks");
/// The entity rows of a store from before blocks, a row a value; moved into
/// [`ENTITIES`] when it is opened.
pub(in crate::embedded) const ROW_ENTITIES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("entities");
/// `account 0x00 position u64 BE` → a recorded change (`crate::feed`), sealed.
pub(in crate::embedded) const CHANGES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("changes");
/// `table id u64 BE ++ property 0x00 ++ encoded value ++ EntityKey` → the
/// entity key's length, u16 BE: secondary-index entries (`embedded/index.rs`).
pub(in crate::embedded) const INDEX: TableDefinition<&[u8], &[u8]> = TableDefinition::new("index");
/// Counters and per-account settings.
pub(in crate::embedded) const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

pub(in crate::embedded) const NEXT_TABLE_ID: &str = "next_table_id";
/// META key of the number of the last log record the state includes.
pub(in crate::embedded) const WAL_SEQ: &str = "wal_seq";
/// Table tags in log records.
pub(in crate::embedded) const T_TABLES: u8 = 0;
pub(in crate::embedded) const T_ORDER: u8 = 1;
pub(in crate::embedded) const T_ENTITIES: u8 = 2;
pub(in crate::embedded) const T_META: u8 = 3;
pub(in crate::embedded) const T_CHANGES: u8 = 4;
pub(in crate::embedded) const T_INDEX: u8 = 5;

pub(in crate::embedded) fn order_key(account: &str, name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(account.len() + 1 + name.len());
    k.extend_from_slice(account.as_bytes());
    k.push(0);
    k.extend_from_slice(name.as_bytes());
    k
}

pub(in crate::embedded) fn table_key(account: &str, name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(account.len() + 1 + name.len());
    k.extend_from_slice(account.as_bytes());
    k.push(0);
    k.extend(name.bytes().map(|b| b.to_ascii_lowercase()));
    k
}

pub(in crate::embedded) fn props_key(account: &str) -> String {
    format!("props/{account}")
}

pub(in crate::embedded) struct TableValue {
    pub(in crate::embedded) id: u64,
    pub(in crate::embedded) record: TableRecord,
}

pub(in crate::embedded) fn encode_table(id: u64, name: &str, acl: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(10 + name.len() + acl.len());
    v.extend_from_slice(&id.to_le_bytes());
    v.extend_from_slice(&(name.len() as u16).to_le_bytes());
    v.extend_from_slice(name.as_bytes());
    v.extend_from_slice(acl);
    v
}

/// The table record stored under `key` (a [`table_key`]).
pub(in crate::embedded) fn decode_table(key: &[u8], stored: &[u8]) -> Result<TableValue, StoreError> {
    parse_table(unseal(key, stored)?)
}

/// A table record's value without its checksum.
pub(in crate::embedded) fn parse_table(v: &[u8]) -> Result<TableValue, StoreError> {
    let corrupt = || StoreError::failure(FailureKind::Corrupt, "corrupt table record");
    let id = u64::from_le_bytes(v.get(..8).ok_or_else(corrupt)?.try_into().map_err(|_| corrupt())?);
    let len = u16::from_le_bytes(v.get(8..10).ok_or_else(corrupt)?.try_into().map_err(|_| corrupt())?) as usize;
    let name = v.get(10..10 + len).ok_or_else(corrupt)?;
    let name = String::from_utf8(name.to_vec()).map_err(|_| corrupt())?;
    Ok(TableValue {
        id,
        record: TableRecord {
            name,
            acl: v[10 + len..].to_vec(),
        },
    })
}

pub(in crate::embedded) fn row_key(id: u64, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + key.len());
    k.extend_from_slice(&id.to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// A redb (or other) error as a backend failure, kept as its cause. Its kind
/// comes from the `io::Error` inside: redb's errors hold it without exposing
/// it as their `source()`, so they are looked into here.
pub(in crate::embedded) fn to_store_error<E: std::error::Error + Send + Sync + 'static>(e: E) -> StoreError {
    StoreError::Backend(backend_error(e))
}

pub(in crate::embedded) fn backend_error<E: std::error::Error + Send + Sync + 'static>(e: E) -> BackendError {
    let kind = redb_failure(&e).unwrap_or(FailureKind::Internal);
    BackendError::caused_by(kind, "embedded store", e)
}

/// A store error as a backend failure, for the writer's commits.
pub(in crate::embedded) fn as_backend(e: StoreError) -> BackendError {
    match e {
        StoreError::Backend(b) => b,
        other => BackendError::new(FailureKind::Internal, other.to_string()),
    }
}

/// Runs a read of the store file, taking a panic in it for damage. redb
/// verifies its pages' checksums only in repairs and integrity checks: a plain
/// read of a page holding garbage may panic (an offset out of bounds) instead
/// of failing, and a panic must not take a request, or the writer, with it.
pub(in crate::embedded) fn guarded<T>(read: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)).unwrap_or_else(|_| Err(garbage().into()))
}

/// [`guarded`], for a read that also runs our own code (the service's filter,
/// the encoder): a panic while `ours` is set is a bug, reported as one.
pub(in crate::embedded) fn guarded_from<T>(
    ours: &Cell<bool>,
    read: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)).unwrap_or_else(|_| {
        Err(match ours.replace(false) {
            true => StoreError::failure(FailureKind::Internal, "a scan's filter or encoder panicked (a bug)"),
            false => garbage().into(),
        })
    })
}

pub(in crate::embedded) fn garbage() -> BackendError {
    BackendError::new(
        FailureKind::Corrupt,
        "reading the store file failed: a page of it holds garbage (`tafel check` lists the damage)",
    )
}

pub(in crate::embedded) fn poisoned<T>(_: std::sync::PoisonError<T>) -> StoreError {
    StoreError::failure(FailureKind::Internal, "a store lock was poisoned by a panic")
}

fn redb_failure(e: &(dyn std::error::Error + 'static)) -> Option<FailureKind> {
    let storage = |s: &redb::StorageError| match s {
        redb::StorageError::Io(io) => Some(kind_of_io(io.kind())),
        redb::StorageError::Corrupted(_) => Some(FailureKind::Corrupt),
        _ => None,
    };
    if let Some(e) = e.downcast_ref::<redb::Error>() {
        return match e {
            redb::Error::Io(io) => Some(kind_of_io(io.kind())),
            redb::Error::Corrupted(_) => Some(FailureKind::Corrupt),
            _ => None,
        };
    }
    if let Some(s) = e.downcast_ref::<redb::StorageError>() {
        return storage(s);
    }
    if let Some(redb::CommitError::Storage(s)) = e.downcast_ref() {
        return storage(s);
    }
    if let Some(redb::TransactionError::Storage(s)) = e.downcast_ref() {
        return storage(s);
    }
    if let Some(redb::TableError::Storage(s)) = e.downcast_ref() {
        return storage(s);
    }
    match e.downcast_ref() {
        Some(redb::DatabaseError::Storage(s)) => storage(s),
        _ => None,
    }
}

/// The counter stored under META `key`.
pub(in crate::embedded) fn decode_u64(key: &str, stored: &[u8]) -> Result<u64, StoreError> {
    let v = unseal(key.as_bytes(), stored)?;
    Ok(u64::from_le_bytes(v.try_into().map_err(to_store_error)?))
}
