//! Checksums of stored values: every value in the store's redb tables is
//! followed by a CRC-32 of its key and itself, checked on every read. redb
//! checks its pages' checksums only when it repairs a file after a crash (or
//! in a full integrity check), not on reads: without this a flipped bit in a
//! page would be returned as data, or merged into a new version of a row.
//! Covering the key too catches a value found under a damaged key.
//!
//! Stores from before checksums have none: the first open seals every value
//! in one durable transaction ([`migrate`]), after the log is replayed (its
//! records hold values as they were stored).
//!
//! Entity rows are sealed their own way (`entity_seal.rs`, store format 2): a
//! format-1 store has them resealed at its first open by a build that knows
//! format 2 ([`upgrade`]); a build that knows only format 1 refuses a format-2
//! store rather than read a row's link as part of its value.

use redb::{Database, Durability, ReadableTable, TableDefinition};

use super::schema::{to_store_error, ENTITIES, META, TABLES, WAL_SEQ};
use crate::error::{FailureKind, StoreError};

/// Bytes of the checksum after every stored value.
pub(in crate::embedded) const SEAL: usize = 4;
/// META key saying every value carries a checksum; its value is [`FORMAT`], sealed.
pub(in crate::embedded) const FORMAT_KEY: &str = "format";
const FORMAT: &[u8] = &[2];
const FORMAT_1: &[u8] = &[1];

/// What a store's values carry, as found at its opening.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::embedded) enum Format {
    /// From before checksums: [`migrate`] seals it.
    Unsealed,
    /// Checksums, entity rows in format 1: [`upgrade`] reseals them.
    V1,
    /// This build's.
    V2,
}

impl Format {
    pub(in crate::embedded) fn sealed(self) -> bool {
        self != Format::Unsealed
    }
}

pub(in crate::embedded) fn checksum(key: &[u8], value: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(key);
    h.update(value);
    h.finalize()
}

/// [`checksum`] of a key and value that lie together in `key_and_value`.
#[inline(always)]
pub(in crate::embedded) fn checksum_joined(key_and_value: &[u8]) -> u32 {
    crc32fast::hash(key_and_value)
}

/// Appends the checksum of `key` and `value` to `value`: it is now as stored.
pub(in crate::embedded) fn seal_in_place(key: &[u8], value: &mut Vec<u8>) {
    let crc = checksum(key, value);
    value.extend_from_slice(&crc.to_le_bytes());
}

/// `value` as stored under `key`.
pub(in crate::embedded) fn seal(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(value.len() + SEAL);
    v.extend_from_slice(value);
    seal_in_place(key, &mut v);
    v
}

/// The value stored under `key`, if its checksum holds.
pub(in crate::embedded) fn checked<'a>(key: &[u8], stored: &'a [u8]) -> Option<&'a [u8]> {
    let (value, crc) = stored.split_at_checked(stored.len().checked_sub(SEAL)?)?;
    let crc = u32::from_le_bytes(crc.try_into().ok()?);
    (checksum(key, value) == crc).then_some(value)
}

/// The value stored under `key`, or the error a damaged one is.
pub(in crate::embedded) fn unseal<'a>(key: &[u8], stored: &'a [u8]) -> Result<&'a [u8], StoreError> {
    checked(key, stored).ok_or_else(|| damaged(key))
}

/// The value of a row already checked, without checking it again.
pub(in crate::embedded) fn payload(stored: &[u8]) -> &[u8] {
    &stored[..stored.len().saturating_sub(SEAL)]
}

pub(in crate::embedded) fn damaged(key: &[u8]) -> StoreError {
    StoreError::failure(
        FailureKind::Corrupt,
        format!(
            "the value stored under key {} failed its checksum: the store file is damaged \
             (`tafel check` lists what is)",
            printable(key)
        ),
    )
}

/// A key's bytes for a message: text as is, other bytes escaped.
pub(in crate::embedded) fn printable(key: &[u8]) -> String {
    key.escape_ascii().to_string()
}

/// What the store's values carry. A store nothing was ever written to (no
/// log position recorded yet) is marked as this build's format.
/// Called in the transaction that creates the tables.
pub(in crate::embedded) fn prepare(txn: &redb::WriteTransaction) -> Result<Format, StoreError> {
    let mut meta = txn.open_table(META).map_err(to_store_error)?;
    if let Some(v) = meta.get(FORMAT_KEY).map_err(to_store_error)? {
        return match checked(FORMAT_KEY.as_bytes(), v.value()) {
            Some(FORMAT) => Ok(Format::V2),
            Some(FORMAT_1) => Ok(Format::V1),
            _ => Err(StoreError::failure(
                FailureKind::Corrupt,
                "the store's format marker is damaged or from a newer Tafel",
            )),
        };
    }
    // Every open records a log position, so only a new store has none.
    let fresh = meta.get(WAL_SEQ).map_err(to_store_error)?.is_none();
    if !fresh {
        return Ok(Format::Unsealed);
    }
    meta.insert(FORMAT_KEY, seal(FORMAT_KEY.as_bytes(), FORMAT).as_slice())
        .map_err(to_store_error)?;
    Ok(Format::V2)
}

/// Reseals the entity rows of a format-1 store (those whose CRC has its top
/// bit set: `entity_seal.rs`) and marks it format 2, in one durable
/// transaction; drops its saved states, which would bring format-1 rows back.
pub(in crate::embedded) fn upgrade(db: &Database) -> Result<(), StoreError> {
    let mut txn = db.begin_write().map_err(to_store_error)?;
    txn.set_durability(Durability::Immediate).map_err(to_store_error)?;
    let saved: Vec<u64> = txn.list_persistent_savepoints().map_err(to_store_error)?.collect();
    for id in &saved {
        txn.delete_persistent_savepoint(*id).map_err(to_store_error)?;
    }
    let resealed = {
        let mut entities = txn.open_table(ENTITIES).map_err(to_store_error)?;
        let resealed = std::cell::Cell::new(0u64);
        super::blocks::map_values(&mut entities, |k, v| match super::entity_seal::reseal_v1(k, v) {
            Some(new) => {
                resealed.set(resealed.get() + 1);
                new
            }
            None => v.to_vec(),
        })?;
        resealed.get()
    };
    {
        let mut meta = txn.open_table(META).map_err(to_store_error)?;
        meta.insert(FORMAT_KEY, seal(FORMAT_KEY.as_bytes(), FORMAT).as_slice())
            .map_err(to_store_error)?;
    }
    txn.commit().map_err(to_store_error)?;
    tracing::info!(
        resealed,
        savepoints_dropped = saved.len(),
        "resealed the entity rows of a store from an older Tafel (store format 2)"
    );
    Ok(())
}

/// Seals every value of a store from before checksums, and marks it, in one
/// durable transaction: a crash leaves it as it was, to be sealed at the next open.
pub(in crate::embedded) fn migrate(db: &Database) -> Result<(), StoreError> {
    let mut txn = db.begin_write().map_err(to_store_error)?;
    txn.set_durability(Durability::Immediate).map_err(to_store_error)?;
    let mut rows = 0u64;
    rows += seal_all(&txn, TABLES)?;
    {
        let mut entities = txn.open_table(ENTITIES).map_err(to_store_error)?;
        rows += super::blocks::map_values(&mut entities, |k, v| {
            let mut sealed = v.to_vec();
            super::entity_seal::seal_in_place(k, &mut sealed, None);
            sealed
        })?;
    }
    {
        let mut meta = txn.open_table(META).map_err(to_store_error)?;
        let old: Vec<(String, Vec<u8>)> = meta
            .iter()
            .map_err(to_store_error)?
            .map(|r| r.map(|(k, v)| (k.value().to_owned(), v.value().to_vec())))
            .collect::<Result<_, _>>()
            .map_err(to_store_error)?;
        for (k, v) in old {
            meta.insert(k.as_str(), seal(k.as_bytes(), &v).as_slice())
                .map_err(to_store_error)?;
        }
        meta.insert(FORMAT_KEY, seal(FORMAT_KEY.as_bytes(), FORMAT).as_slice())
            .map_err(to_store_error)?;
    }
    txn.commit().map_err(to_store_error)?;
    tracing::info!(rows, "added checksums to the values of a store from an older Tafel");
    Ok(())
}

/// Seals every value of one byte-keyed table, a slice of keys at a time (the
/// table cannot be written while it is iterated).
fn seal_all(txn: &redb::WriteTransaction, def: TableDefinition<&[u8], &[u8]>) -> Result<u64, StoreError> {
    const SLICE: usize = 4096;
    let mut table = txn.open_table(def).map_err(to_store_error)?;
    let mut after: Option<Vec<u8>> = None;
    let mut n = 0;
    loop {
        let lower = match &after {
            Some(k) => std::ops::Bound::Excluded(k.as_slice()),
            None => std::ops::Bound::Unbounded,
        };
        let slice: Vec<(Vec<u8>, Vec<u8>)> = table
            .range::<&[u8]>((lower, std::ops::Bound::Unbounded))
            .map_err(to_store_error)?
            .take(SLICE)
            .map(|r| r.map(|(k, v)| (k.value().to_vec(), v.value().to_vec())))
            .collect::<Result<_, _>>()
            .map_err(to_store_error)?;
        let Some((last, _)) = slice.last() else {
            return Ok(n);
        };
        after = Some(last.clone());
        for (k, v) in &slice {
            table
                .insert(k.as_slice(), seal(k, v).as_slice())
                .map_err(to_store_error)?;
            n += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_under_its_own_key_and_unchanged() {
        let sealed = seal(b"key", b"value");
        assert_eq!(checked(b"key", &sealed), Some(&b"value"[..]));
        assert_eq!(checked(b"kez", &sealed), None);
        for bit in 0..sealed.len() * 8 {
            let mut flipped = sealed.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(checked(b"key", &flipped), None, "bit {bit}");
        }
        assert_eq!(checked(b"key", &sealed[..3]), None);
        assert_eq!(checked(b"", &seal(b"", b"")), Some(&b""[..]));
        assert_eq!(payload(&sealed), b"value");
    }
}
