//! An entity as the store holds it: encoded key and value bytes. Reads hand these
//! out so responses are written straight from the stored bytes, without building
//! an owned [`Entity`](super::Entity) (a String per name and value) for every row.

use std::borrow::Cow;

use tafel_store::{EntityKey, KeyRef};

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

    pub fn view(&self) -> StoredRef<'_> {
        StoredRef {
            key: self.key.view(),
            bytes: &self.bytes,
        }
    }
}

/// A [`StoredEntity`] borrowed, e.g. from the store's own pages during a scan.
#[derive(Clone, Copy)]
pub struct StoredRef<'a> {
    pub key: KeyRef<'a>,
    /// The value in the [`codec`] layout; not yet validated.
    pub bytes: &'a [u8],
}

impl<'a> StoredRef<'a> {
    /// PartitionKey and RowKey, borrowed from the key unless they hold remapped bytes.
    pub fn keys(self) -> (Cow<'a, str>, Cow<'a, str>) {
        self.key.keys_cow()
    }

    pub fn timestamp(self) -> Result<DateTime, Corrupt> {
        codec::timestamp(self.bytes).ok_or(Corrupt)
    }

    /// The Timestamp and a borrowed walk over the properties.
    pub fn read(self) -> Result<(DateTime, Properties<'a>), Corrupt> {
        codec::read(self.bytes)
    }
}
