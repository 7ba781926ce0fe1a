//! What a snapshot restore does to the change feed: positions are never given
//! out twice. The restore brings back the snapshot's META, each account's feed
//! head with it; each head is then carried forward to where it was before the
//! restore, and the range the restore undid (restored head, head before] is
//! remembered under `feedgap/<account>`, so that a reader who read into it is
//! told (`ChangesRead::Undone`) rather than handed later changes as if they
//! followed what it read. Written by the restore's own durable commit, so it
//! holds after a restart or a crash exactly when the restore does.

use std::collections::BTreeMap;

use super::checksums::{seal, unseal};
use super::engine::group::Trees;
use super::engine::tree::{ReadTrees, Tree};
use crate::error::{FailureKind, StoreError};
use crate::feed::{decode_head, encode_head};

const HEADS: (&str, &str) = ("feed/", "feed0");
const GAP: &str = "feedgap/";

/// The ranges `(lo, hi]` of an account's positions a restore undid, in order,
/// none touching another.
pub(super) type Gaps = Vec<(u64, u64)>;

fn gap_key(account: &str) -> String {
    format!("{GAP}{account}")
}

fn corrupt() -> StoreError {
    StoreError::failure(FailureKind::Corrupt, "corrupt change feed record")
}

/// Every account's feed head (last position, bytes kept) in `trees`.
pub(super) fn heads(trees: &impl ReadTrees) -> Result<BTreeMap<String, (u64, u64)>, StoreError> {
    let mut out = BTreeMap::new();
    for item in trees.range_of(Tree::Meta, HEADS.0.as_bytes(), HEADS.1.as_bytes())? {
        let (k, v) = item?;
        let head = decode_head(unseal(k.bytes(), v.bytes())?).ok_or_else(corrupt)?;
        let account = k.bytes().get(HEADS.0.len()..).unwrap_or_default();
        out.insert(String::from_utf8(account.to_vec()).map_err(|_| corrupt())?, head);
    }
    Ok(out)
}

/// The ranges of `account`'s positions that restores undid.
pub(super) fn gaps(trees: &impl ReadTrees, account: &str) -> Result<Gaps, StoreError> {
    let key = gap_key(account);
    let Some(v) = trees.get(Tree::Meta, key.as_bytes())? else {
        return Ok(Vec::new());
    };
    let v = unseal(key.as_bytes(), v.bytes())?;
    if v.len() % 16 != 0 {
        return Err(corrupt());
    }
    let u = |b: &[u8]| b.try_into().map(u64::from_le_bytes).map_err(|_| corrupt());
    v.chunks_exact(16).map(|c| Ok((u(&c[..8])?, u(&c[8..])?))).collect()
}

/// After the savepoint job's transaction (`trees`) restored a savepoint: carries each account's head forward to
/// `before` (the heads before the restore) and adds what the restore undid to
/// the snapshot's own gaps (those recorded after it was saved lie above its
/// heads, inside the new range, or below them in a history it does not hold).
pub(super) fn carry_across_restore(
    trees: &mut Trees<'_>,
    before: &BTreeMap<String, (u64, u64)>,
) -> Result<(), StoreError> {
    let restored = heads(trees)?;
    for (account, &(was, _)) in before {
        let (head, bytes) = restored.get(account).copied().unwrap_or((0, 0));
        if was <= head {
            continue;
        }
        let mut gaps = gaps(trees, account)?;
        match gaps.last_mut() {
            Some(last) if last.1 == head => last.1 = was,
            _ => gaps.push((head, was)),
        }
        let key = format!("{}{account}", HEADS.0);
        trees.insert_unlogged(
            Tree::Meta,
            key.as_bytes(),
            &seal(key.as_bytes(), &encode_head(was, bytes)),
        )?;
        let key = gap_key(account);
        let value: Vec<u8> = gaps
            .iter()
            .flat_map(|&(lo, hi)| lo.to_le_bytes().into_iter().chain(hi.to_le_bytes()))
            .collect();
        trees.insert_unlogged(Tree::Meta, key.as_bytes(), &seal(key.as_bytes(), &value))?;
    }
    Ok(())
}

/// The restored head a reader at `after` went past, if a restore undid it.
pub(super) fn undone(gaps: &Gaps, after: u64) -> Option<u64> {
    gaps.iter()
        .find(|&&(lo, hi)| lo < after && after <= hi)
        .map(|&(lo, _)| lo)
}

/// Position `p` as a reader is handed it: right after a restore the head ends
/// the range it undid, and a reader handed that (as the head, or as where an
/// empty page ends) would be told at its next read that it had read undone
/// changes. It is handed the restored head, the same place (no change lies between).
pub(super) fn shown(gaps: &Gaps, p: u64) -> u64 {
    undone(gaps, p).unwrap_or(p)
}

/// Where a reader at `after` (not inside a gap) really is: the positions of a
/// gap starting there were never changes it could miss.
pub(super) fn past_gaps(gaps: &Gaps, after: u64) -> u64 {
    gaps.iter().fold(after, |at, &(lo, hi)| if lo == at { hi } else { at })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_inside_an_undone_range_is_told_and_one_at_its_start_skips_it() {
        let gaps = vec![(3, 6), (9, 12)];
        assert_eq!(undone(&gaps, 3), None);
        assert_eq!(undone(&gaps, 4), Some(3));
        assert_eq!(undone(&gaps, 6), Some(3));
        assert_eq!(undone(&gaps, 7), None);
        assert_eq!(undone(&gaps, 12), Some(9));
        // At 3 the next change it can have missed is past 6: retention that
        // dropped everything up to 7 dropped nothing it had not read.
        assert_eq!(past_gaps(&gaps, 3), 6);
        assert_eq!(past_gaps(&gaps, 2), 2);
        assert_eq!(past_gaps(&vec![(3, 6), (6, 8)], 3), 8);
    }
}
