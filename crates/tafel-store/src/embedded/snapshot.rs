//! A backup's view of the embedded store: the published redb snapshot, which
//! holds every group acknowledged before it and nothing after (see `commit`).
//! Holding it keeps the pages it reads from being reused until it is dropped.

use std::ops::Bound;
use std::sync::Arc;

use async_trait::async_trait;
use redb::ReadableTable;

use super::checksums::{self, unseal};
use super::commit::ReadView;
use super::scan::entity_key;
use super::schema::{decode_table, guarded, row_key, table_key, to_store_error, META, TABLE_ORDER};
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
            let meta = self.view.txn.open_table(META).map_err(to_store_error)?;
            let mut out = Vec::new();
            for row in meta.range(PROPS_PREFIX..).map_err(to_store_error)? {
                let (k, v) = row.map_err(to_store_error)?;
                let Some(account) = k.value().strip_prefix(PROPS_PREFIX) else {
                    break;
                };
                out.push((account.to_owned(), unseal(k.value().as_bytes(), v.value())?.to_vec()));
            }
            Ok(out)
        })
    }

    async fn tables(&mut self) -> Result<Vec<SnapshotTable>, StoreError> {
        guarded(|| {
            let order = self.view.txn.open_table(TABLE_ORDER).map_err(to_store_error)?;
            let mut out = Vec::new();
            for row in order.iter().map_err(to_store_error)? {
                let (k, _) = row.map_err(to_store_error)?;
                let k = k.value();
                let split = k
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or_else(|| corrupt("table order key"))?;
                let account = std::str::from_utf8(&k[..split]).map_err(|_| corrupt("account name"))?;
                let name = std::str::from_utf8(&k[split + 1..]).map_err(|_| corrupt("table name"))?;
                let key = table_key(account, name);
                let stored = self
                    .view
                    .tables
                    .get(key.as_slice())
                    .map_err(to_store_error)?
                    .ok_or_else(|| corrupt("table listing: a listed table has no record"))?;
                let value = decode_table(&key, stored.value())?;
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
            for row in self
                .view
                .entities
                .range::<&[u8]>((lower, Bound::Unbounded))
                .map_err(to_store_error)?
            {
                let (k, v) = row.map_err(to_store_error)?;
                if n == limit || !k.value().starts_with(&prefix) {
                    break;
                }
                n += 1;
                if sink
                    .push(entity_key(k.value()), unseal(k.value(), v.value())?)
                    .is_break()
                {
                    break;
                }
            }
            Ok(n)
        })
    }
}
