//! A backup's view of the embedded store: the published redb snapshot, which
//! holds every group acknowledged before it and nothing after (see `commit`).
//! Holding it keeps the pages it reads from being reused until it is dropped.

use std::ops::Bound;
use std::sync::Arc;

use async_trait::async_trait;

use super::checksums::{self, unseal};
use super::commit::ReadView;
use super::engine::entity_seal;
use super::engine::tree::{ReadTrees, Tree};
use super::scan::entity_key;
use super::schema::{decode_table, guarded, row_key, table_key};
use crate::error::{FailureKind, StoreError};
use crate::key::EntityKey;
use crate::snapshot::{Snapshot, SnapshotTable};
use crate::traits::RowSink;

/// META keys of service properties start with this (`props/<account>`).
const PROPS_PREFIX: &str = "props/";

pub(super) struct EmbeddedSnapshot {
    view: Arc<ReadView>,
}

impl EmbeddedSnapshot {
    pub(super) fn new(view: Arc<ReadView>) -> Self {
        EmbeddedSnapshot { view }
    }
}

fn corrupt(what: &str) -> StoreError {
    StoreError::failure(FailureKind::Corrupt, format!("corrupt {what}"))
}

#[async_trait]
impl Snapshot for EmbeddedSnapshot {
    async fn service_properties(&mut self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        guarded(|| {
            let mut out = Vec::new();
            let from = Bound::Included(PROPS_PREFIX.as_bytes());
            for row in self.view.range(Tree::Meta, from, Bound::Unbounded)? {
                let (k, v) = row?;
                let Some(account) = k.bytes().strip_prefix(PROPS_PREFIX.as_bytes()) else {
                    break;
                };
                let account = std::str::from_utf8(account).map_err(|_| corrupt("account name"))?;
                out.push((account.to_owned(), unseal(k.bytes(), v.bytes())?.to_vec()));
            }
            Ok(out)
        })
    }

    async fn indexes(&mut self, table: &SnapshotTable) -> Result<Vec<String>, StoreError> {
        guarded(|| {
            let defs = super::index::definitions(&*self.view, table.id())?;
            Ok(defs.into_iter().map(|(property, _)| property).collect())
        })
    }

    async fn tables(&mut self) -> Result<Vec<SnapshotTable>, StoreError> {
        guarded(|| {
            let mut out = Vec::new();
            for row in self.view.range(Tree::TableOrder, Bound::Unbounded, Bound::Unbounded)? {
                let (k, _) = row?;
                let k = k.bytes();
                let split = k
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or_else(|| corrupt("table order key"))?;
                let account = std::str::from_utf8(&k[..split]).map_err(|_| corrupt("account name"))?;
                let name = std::str::from_utf8(&k[split + 1..]).map_err(|_| corrupt("table name"))?;
                let key = table_key(account, name);
                let stored = self
                    .view
                    .get(Tree::Tables, &key)?
                    .ok_or_else(|| corrupt("table listing: a listed table has no record"))?;
                let value = decode_table(&key, stored.bytes())?;
                if value.record.name != name {
                    return Err(checksums::damaged(k));
                }
                out.push(SnapshotTable::new(account.to_owned(), value.record, value.id));
            }
            Ok(out)
        })
    }

    async fn rows(
        &mut self,
        table: &SnapshotTable,
        after: Option<&EntityKey>,
        limit: usize,
        sink: &mut (dyn RowSink + '_),
    ) -> Result<usize, StoreError> {
        guarded(|| {
            let id = table.id();
            let lo = row_key(id, after.map_or(&[][..], EntityKey::as_bytes));
            let lower = match after {
                Some(_) => Bound::Excluded(lo.as_slice()),
                None => Bound::Included(lo.as_slice()),
            };
            let prefix = id.to_be_bytes();
            let mut n = 0;
            for row in self.view.range(Tree::Entities, lower, Bound::Unbounded)? {
                let (k, v) = row?;
                if n == limit || !k.bytes().starts_with(&prefix) {
                    break;
                }
                n += 1;
                if sink
                    .push(entity_key(k.bytes()), entity_seal::unseal(k.bytes(), v.bytes())?)
                    .is_break()
                {
                    break;
                }
            }
            Ok(n)
        })
    }
}
