//! The table catalog's reads: listing an account's tables in name order,
//! counting them, and every table's size. Tables live in the `Tables` tree under
//! `account \0 name`; `TableOrder` lists them in Azure's name order.

use super::checksums;
use super::engine::tree::{ReadTrees, Tree};
use super::schema::{decode_table, order_key, table_key, to_store_error};
use crate::error::StoreError;
use crate::traits::{TableRecord, TableSize};

/// The bounds of `account`'s listing keys, from the name `from` on.
pub(super) fn order_bounds(account: &str, from: &str) -> (Vec<u8>, Vec<u8>) {
    let mut hi = account.as_bytes().to_vec();
    hi.push(1);
    (order_key(account, from), hi)
}

/// Up to `limit` of `account`'s tables from the name `from` on, in name order.
pub(super) fn list(
    trees: &impl ReadTrees,
    account: &str,
    from: Option<&str>,
    limit: usize,
) -> Result<Vec<TableRecord>, StoreError> {
    let (lo, hi) = order_bounds(account, from.unwrap_or(""));
    let prefix = account.len() + 1;
    let mut out = Vec::new();
    for item in trees.range_of(Tree::TableOrder, &lo, &hi)? {
        if out.len() >= limit {
            break;
        }
        let (k, _) = item?;
        let name = std::str::from_utf8(k.bytes().get(prefix..).unwrap_or_default()).map_err(to_store_error)?;
        let key = table_key(account, name);
        if let Some(v) = trees.get(Tree::Tables, &key)? {
            let table = decode_table(&key, v.bytes())?;
            // A damaged listing key would show a name no table has.
            if table.record.name != name {
                return Err(checksums::damaged(k.bytes()));
            }
            out.push(table.record);
        }
    }
    Ok(out)
}

/// How many tables `account` has.
pub(super) fn count(trees: &impl ReadTrees, account: &str) -> Result<u64, StoreError> {
    let (lo, hi) = order_bounds(account, "");
    let mut n = 0;
    for item in trees.range_of(Tree::TableOrder, &lo, &hi)? {
        item?;
        n += 1;
    }
    Ok(n)
}

/// Every table of every account, with its entities and bytes.
pub(super) fn sizes(trees: &impl ReadTrees) -> Result<Vec<TableSize>, StoreError> {
    let mut out = Vec::new();
    for row in trees.range(Tree::Tables, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)? {
        let (k, v) = row?;
        let t = decode_table(k.bytes(), v.bytes())?;
        let account = k.bytes().split(|&b| b == 0).next().unwrap_or_default();
        let (entities, bytes) = super::counts::read(trees, t.id)?.unwrap_or_default();
        out.push(TableSize {
            account: String::from_utf8_lossy(account).into_owned(),
            table: t.record.name,
            entities,
            bytes,
        });
    }
    Ok(out)
}
