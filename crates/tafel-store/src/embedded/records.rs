//! Operator records (`Store::put_record`): META keys `record/{kind}/{id}`,
//! sealed like every META value (so `tafel check` verifies them) and written in
//! the writer's group transaction, durable like any write.

use std::ops::Bound;

use super::checksums::{seal, unseal};
use super::commit::ReadView;
use super::engine::group::GroupTx;
use super::engine::tree::{ReadTrees, Tree};
use super::schema::guarded;
use crate::error::{FailureKind, StoreError};

const PREFIX: &str = "record/";

pub(super) fn key(kind: &str, id: &str) -> String {
    format!("{PREFIX}{kind}/{id}")
}

pub(super) fn apply(tx: &mut GroupTx<'_, '_>, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError> {
    match value {
        Some(v) => tx.insert(Tree::Meta, key.as_bytes(), &seal(key.as_bytes(), &v)),
        None if tx.get(Tree::Meta, key.as_bytes())?.is_some() => tx.remove(Tree::Meta, key.as_bytes()),
        None => Ok(()),
    }
}

pub(super) fn get(view: &ReadView, kind: &str, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
    guarded(|| {
        let key = key(kind, id);
        let found = view.get(Tree::Meta, key.as_bytes())?;
        found
            .map(|v| unseal(key.as_bytes(), v.bytes()).map(<[u8]>::to_vec))
            .transpose()
    })
}

pub(super) fn list(view: &ReadView, kind: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
    guarded(|| {
        // `0` follows `/`: the end of the kind's keys.
        let (lo, hi) = (format!("{PREFIX}{kind}/"), format!("{PREFIX}{kind}0"));
        let mut out = Vec::new();
        for row in view.range(
            Tree::Meta,
            Bound::Included(lo.as_bytes()),
            Bound::Excluded(hi.as_bytes()),
        )? {
            let (k, v) = row?;
            let id = k
                .bytes()
                .strip_prefix(lo.as_bytes())
                .and_then(|id| std::str::from_utf8(id).ok())
                .ok_or_else(|| StoreError::failure(FailureKind::Corrupt, "corrupt record key"))?
                .to_owned();
            out.push((id, unseal(k.bytes(), v.bytes())?.to_vec()));
        }
        Ok(out)
    })
}
