//! Writing the entity blocks ([`super`] holds their format and reads): a group's
//! changes merged into the blocks they fall in, each rewritten once; a range of
//! rows dropped; a store of one row per value converted; every value rewritten.

use std::cmp::Ordering;
use std::ops::Bound;

use redb::{ReadableTable, TableDefinition};

use super::{damaged, encode, row_len, rows, same_table, table_end, Blocks, Guard, BLOCK_BYTES, BLOCK_HEADER};
use crate::embedded::engine::schema::to_store_error;
use crate::error::StoreError;

/// Applies `changes` (sorted by key, each key once; `None` removes) to the
/// entity blocks in `table`: each block they fall in is rewritten once.
pub(in crate::embedded) fn write(table: &mut Blocks<'_>, changes: &[(&[u8], Option<&[u8]>)]) -> Result<(), StoreError> {
    let mut rest = changes;
    while let Some(&(key, _)) = rest.first() {
        let end = table_end(key)?;
        // The block the key falls in, its first key and a copy of it (the table
        // is written while it is read): the last at or before it in its
        // table, else its table's first (which it will lead).
        let copy = |found: Option<Result<(Guard<'_>, Guard<'_>), redb::StorageError>>| {
            Ok::<_, StoreError>(
                found
                    .transpose()
                    .map_err(to_store_error)?
                    .map(|(first, block)| (first.value().to_vec(), block.value().to_vec()))
                    .filter(|(first, _)| same_table(first, key)),
            )
        };
        let home = match copy(table.range::<&[u8]>(..=key).map_err(to_store_error)?.next_back())? {
            Some(home) => Some(home),
            None => copy(
                table
                    .range::<&[u8]>((Bound::Excluded(key), Bound::Unbounded))
                    .map_err(to_store_error)?
                    .next(),
            )?,
        };
        // Its keys end where the next block's begin, or with the table.
        let next = match &home {
            Some((first, _)) => table
                .range::<&[u8]>((Bound::Excluded(first.as_slice()), Bound::Unbounded))
                .map_err(to_store_error)?
                .next()
                .transpose()
                .map_err(to_store_error)?
                .map(|(first, _)| first.value().to_vec())
                .filter(|next| end.as_ref().is_none_or(|end| next < end)),
            None => None,
        };
        let last_of_table = next.is_none();
        let upper = next.or(end);
        let n = rest
            .iter()
            .position(|(k, _)| upper.as_ref().is_some_and(|u| *k >= u.as_slice()))
            .unwrap_or(rest.len())
            .max(1);
        let (mine, after) = rest.split_at(n);
        rewrite(table, home, mine, last_of_table)?;
        rest = after;
    }
    Ok(())
}

/// A copy of the block under `first`: the table is written while it is read.
fn copied(table: &Blocks<'_>, first: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
    Ok(table.get(first).map_err(to_store_error)?.map(|b| b.value().to_vec()))
}

/// Rewrites the block `home` (its first key and bytes; none: a table with no
/// block yet) with `changes` merged in.
fn rewrite(
    table: &mut Blocks<'_>,
    home: Option<(Vec<u8>, Vec<u8>)>,
    changes: &[(&[u8], Option<&[u8]>)],
    last_of_table: bool,
) -> Result<(), StoreError> {
    let (first, old) = home.unzip();
    let old = old.unwrap_or_default();
    let mut merged: Vec<(&[u8], &[u8])> = Vec::with_capacity(changes.len() + old.len() / 512);
    let mut olds = rows(&old).peekable();
    let mut news = changes.iter().peekable();
    loop {
        let order = match (olds.peek(), news.peek()) {
            (None, None) => break,
            (Some(Err(_)), _) => return Err(damaged()),
            (Some(Ok(_)), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(Ok((k, _))), Some((c, _))) => k.cmp(c),
        };
        if order != Ordering::Greater {
            let (k, v) = olds.next().transpose()?.ok_or_else(damaged)?;
            if order == Ordering::Less {
                merged.push((k, v));
                continue;
            }
        }
        if let Some(&(k, Some(v))) = news.next() {
            merged.push((k, v));
        }
    }
    put_blocks(table, first.as_deref(), &merged, last_of_table)
}

/// Stores `rows` (sorted, one table's) as blocks in place of the one under
/// `old`. Filled in order; unless they end the table, a small last block shares
/// the rows of the one before it, so that blocks split in the middle of a table
/// are left half full rather than one full and one nearly empty.
fn put_blocks(
    table: &mut Blocks<'_>,
    old: Option<&[u8]>,
    rows: &[(&[u8], &[u8])],
    last_of_table: bool,
) -> Result<(), StoreError> {
    let mut cuts = vec![0];
    let mut filled = 0;
    for (i, (k, v)) in rows.iter().enumerate() {
        let len = row_len(k, v);
        if filled > 0 && BLOCK_HEADER + filled + len > BLOCK_BYTES {
            cuts.push(i);
            filled = 0;
        }
        filled += len;
    }
    if !last_of_table && cuts.len() > 1 && filled < BLOCK_BYTES / 4 {
        // Move the last cut to halve what the last two blocks hold.
        let from = cuts[cuts.len() - 2];
        let total: usize = rows[from..].iter().map(|(k, v)| row_len(k, v)).sum();
        let mut acc = 0;
        let mut cut = from + 1;
        for (i, (k, v)) in rows.iter().enumerate().skip(from) {
            acc += row_len(k, v);
            if acc >= total / 2 {
                cut = (i + 1).min(rows.len() - 1).max(from + 1);
                break;
            }
        }
        let last = cuts.len() - 1;
        cuts[last] = cut;
    }
    if let Some(old) = old {
        if rows.first().is_none_or(|(first, _)| *first != old) {
            table.remove(old).map_err(to_store_error)?;
        }
    }
    if rows.is_empty() {
        return Ok(());
    }
    cuts.push(rows.len());
    let mut block = Vec::with_capacity(BLOCK_BYTES + 4096);
    for pair in cuts.windows(2) {
        encode(&rows[pair[0]..pair[1]], &mut block);
        table
            .insert(rows[pair[0]].0, block.as_slice())
            .map_err(to_store_error)?;
    }
    Ok(())
}

/// Removes the entity rows with keys in `lo..hi`: blocks wholly inside go
/// unread, the two at its edges are rewritten with what lies outside it.
pub(in crate::embedded) fn remove_range(table: &mut Blocks<'_>, lo: &[u8], hi: &[u8]) -> Result<(), StoreError> {
    let first_key =
        |r: Option<Result<(Guard<'_>, Guard<'_>), redb::StorageError>>| -> Result<Option<Vec<u8>>, StoreError> {
            Ok(r.transpose().map_err(to_store_error)?.map(|(k, _)| k.value().to_vec()))
        };
    let before = first_key(table.range::<&[u8]>(..lo).map_err(to_store_error)?.next_back())?;
    let inside: Vec<Vec<u8>> = table
        .range::<&[u8]>(lo..hi)
        .map_err(to_store_error)?
        .map(|r| r.map(|(k, _)| k.value().to_vec()).map_err(to_store_error))
        .collect::<Result<_, _>>()?;
    // Every block inside but the last ends before the next one's first key, in the range.
    let (edge, whole) = match inside.split_last() {
        Some((last, whole)) => (Some(last.clone()), whole),
        None => (None, &[][..]),
    };
    for first in whole {
        table.remove(first.as_slice()).map_err(to_store_error)?;
    }
    for first in before.into_iter().chain(edge) {
        let Some(old) = copied(table, &first)? else {
            continue;
        };
        let all: Vec<(&[u8], &[u8])> = rows(&old).collect::<Result<_, _>>()?;
        let kept: Vec<(&[u8], &[u8])> = all.iter().copied().filter(|(k, _)| *k < lo || *k >= hi).collect();
        if kept.len() != all.len() {
            put_blocks(table, Some(&first), &kept, true)?;
        }
    }
    Ok(())
}

/// Moves the rows of a store from before blocks (a row a value in `rows_table`)
/// into `blocks_table`, in key order, and drops the old table; answers how many
/// moved. Nothing is done if there is no old table.
pub(in crate::embedded) fn convert(
    txn: &redb::WriteTransaction,
    rows_table: TableDefinition<&[u8], &[u8]>,
    blocks_table: TableDefinition<&[u8], &[u8]>,
) -> Result<Option<u64>, StoreError> {
    use redb::TableHandle;
    let old_exists = txn
        .list_tables()
        .map_err(to_store_error)?
        .any(|t| t.name() == rows_table.name());
    if !old_exists {
        return Ok(None);
    }
    let mut moved = 0u64;
    {
        let old = txn.open_table(rows_table).map_err(to_store_error)?;
        let mut blocks = txn.open_table(blocks_table).map_err(to_store_error)?;
        let mut rows: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut filled = 0;
        let mut block: Vec<u8> = Vec::with_capacity(BLOCK_BYTES + 4096);
        let mut flush = |rows: &mut Vec<(Vec<u8>, Vec<u8>)>| -> Result<(), StoreError> {
            if let Some((first, _)) = rows.first() {
                let refs: Vec<(&[u8], &[u8])> = rows.iter().map(|(k, v)| (k.as_slice(), v.as_slice())).collect();
                encode(&refs, &mut block);
                blocks
                    .insert(first.as_slice(), block.as_slice())
                    .map_err(to_store_error)?;
            }
            rows.clear();
            Ok(())
        };
        for row in old.iter().map_err(to_store_error)? {
            let (k, v) = row.map_err(to_store_error)?;
            let (k, v) = (k.value(), v.value());
            let full = BLOCK_HEADER + filled + row_len(k, v) > BLOCK_BYTES;
            if rows.first().is_some_and(|(first, _)| full || !same_table(first, k)) {
                flush(&mut rows)?;
                filled = 0;
            }
            filled += row_len(k, v);
            rows.push((k.to_vec(), v.to_vec()));
            moved += 1;
        }
        flush(&mut rows)?;
    }
    txn.delete_table(rows_table).map_err(to_store_error)?;
    Ok(Some(moved))
}

/// Rewrites every row's value as `f` maps it (key, value), block by block;
/// answers how many rows.
pub(in crate::embedded) fn map_values(
    table: &mut Blocks<'_>,
    f: impl Fn(&[u8], &[u8]) -> Vec<u8>,
) -> Result<u64, StoreError> {
    const SLICE: usize = 64;
    let mut after: Option<Vec<u8>> = None;
    let mut n = 0;
    loop {
        let lower = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let firsts: Vec<Vec<u8>> = table
            .range::<&[u8]>((lower, Bound::Unbounded))
            .map_err(to_store_error)?
            .take(SLICE)
            .map(|r| r.map(|(k, _)| k.value().to_vec()).map_err(to_store_error))
            .collect::<Result<_, _>>()?;
        let Some(last) = firsts.last() else {
            return Ok(n);
        };
        after = Some(last.clone());
        for first in &firsts {
            let Some(old) = copied(table, first)? else {
                continue;
            };
            let mapped: Vec<(&[u8], Vec<u8>)> = rows(&old)
                .map(|r| r.map(|(k, v)| (k, f(k, v))))
                .collect::<Result<_, _>>()?;
            n += mapped.len() as u64;
            let refs: Vec<(&[u8], &[u8])> = mapped.iter().map(|(k, v)| (*k, v.as_slice())).collect();
            let mut block = Vec::with_capacity(old.len() + 4096);
            encode(&refs, &mut block);
            table
                .insert(first.as_slice(), block.as_slice())
                .map_err(to_store_error)?;
        }
    }
}
