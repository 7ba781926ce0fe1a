//! An entity as the store holds it: encoded key and value bytes. Reads hand these
//! out so responses are written straight from the stored bytes, without building
//! an owned [`Entity`](super::Entity) (a String per name and value) for every row.

use std::borrow::Cow;

use tafel_store::EntityKey;

use super::codec::{self, Corrupt, Properties};
use super::DateTime;

#[derive(Debug, Clone, PartialEq)]
pub struct StoredEntity {
    pub key: EntityKey,
    /// The value in the [`codec`] layout; not yet validated.
    pub bytes: Vec<u8>,
}

impl StoredEntity {
    pub fn new(partition_key: &str, row_key: &str, bytes: Vec<u8>) -> Self {
        StoredEntity {
            key: EntityKey::new(partition_key, row_key),
            bytes,
        }
    }

    /// PartitionKey and RowKey, borrowed from the key unless they hold remapped bytes.
    pub fn keys(&self) -> (Cow<'_, str>, Cow<'_, str>) {
        self.key.view().keys_cow()
    }

    pub fn timestamp(&self) -> Result<DateTime, Corrupt> {
        codec::timestamp(&self.bytes).ok_or(Corrupt)
    }

    /// The Timestamp and a borrowed walk over the properties.
    pub fn read(&self) -> Result<(DateTime, Properties<'_>), Corrupt> {
        codec::read(&self.bytes)
    }
}
