//! An entity row as stored (store format 2): its value, then, when the change
//! feed holds a change whose value is this row's, that change's position (8
//! bytes LE, the row's *link*: docs/design/feed-values.md), then a checksum
//! word. The word's top bit says whether the link is there, so a reader that
//! skips checksums (a store in memory) still knows where the value ends; its
//! other 31 bits are the CRC-32 of the key and all before the word, xored with
//! a constant when linked, so a flipped flag bit fails the check as surely as
//! any other.
//!
//! A row without a link whose CRC has a clear top bit is the same bytes in
//! format 1 (`checksums.rs`): opening a format-1 store reseals only the rows
//! whose CRC has it set ([`reseal_v1`]).

use super::checksums::{checksum, checksum_joined, damaged, SEAL};
use crate::error::StoreError;

/// Bytes of a link.
pub(in crate::embedded) const LINK: usize = 8;
const LINKED: u32 = 1 << 31;
/// Xored into a linked row's CRC: the flag bit's flip changes the expected CRC.
const LINKED_CRC: u32 = 0x5bd1_e995;

/// The checksum word of a row whose key and body have `crc`.
#[inline(always)]
fn word(crc: u32, linked: bool) -> u32 {
    match linked {
        true => ((crc ^ LINKED_CRC) & !LINKED) | LINKED,
        false => crc & !LINKED,
    }
}

/// Whether `w` is the checksum word of a row whose key and body have `crc`.
#[inline(always)]
fn holds(crc: u32, w: u32) -> bool {
    word(crc, w & LINKED != 0) == w
}

/// Appends `link` (if any) and the checksum word to `value`: it is now as stored under `key`.
pub(in crate::embedded) fn seal_in_place(key: &[u8], value: &mut Vec<u8>, link: Option<u64>) {
    if let Some(p) = link {
        value.extend_from_slice(&p.to_le_bytes());
    }
    let w = word(checksum(key, value), link.is_some());
    value.extend_from_slice(&w.to_le_bytes());
}

fn split(stored: &[u8]) -> Option<(&[u8], u32)> {
    let (body, w) = stored.split_at_checked(stored.len().checked_sub(SEAL)?)?;
    Some((body, u32::from_le_bytes(w.try_into().ok()?)))
}

/// The value and link of a row whose checksum was not checked (or already was).
#[inline(always)]
fn parts(body: &[u8], w: u32) -> Option<(&[u8], Option<u64>)> {
    if w & LINKED == 0 {
        return Some((body, None));
    }
    let (value, link) = body.split_at_checked(body.len().checked_sub(LINK)?)?;
    Some((value, Some(u64::from_le_bytes(link.try_into().ok()?))))
}

/// The value and link stored under `key`, if its checksum holds.
pub(in crate::embedded) fn checked<'a>(key: &[u8], stored: &'a [u8]) -> Option<(&'a [u8], Option<u64>)> {
    let (body, w) = split(stored)?;
    holds(checksum(key, body), w).then_some(())?;
    parts(body, w)
}

/// The value stored under `key`, or the error a damaged one is.
pub(in crate::embedded) fn unseal<'a>(key: &[u8], stored: &'a [u8]) -> Result<&'a [u8], StoreError> {
    unseal_linked(key, stored).map(|(v, _)| v)
}

/// The value and link stored under `key`, or the error a damaged one is.
pub(in crate::embedded) fn unseal_linked<'a>(
    key: &[u8],
    stored: &'a [u8],
) -> Result<(&'a [u8], Option<u64>), StoreError> {
    checked(key, stored).ok_or_else(|| damaged(key))
}

/// [`unseal`] of a row whose key (its first `key_len` bytes) and stored value
/// lie together in `row`: the checksum reads both in one pass.
#[inline(always)]
pub(in crate::embedded) fn unseal_joined(row: &[u8], key_len: usize) -> Result<&[u8], StoreError> {
    let checked = || {
        let (key_and_body, w) = split(row)?;
        holds(checksum_joined(key_and_body), w).then_some(())?;
        parts(key_and_body.get(key_len..)?, w).map(|(v, _)| v)
    };
    checked().ok_or_else(|| damaged(row.get(..key_len).unwrap_or(row)))
}

/// The value of a row, its checksum not checked. A row too short to be one
/// gives nothing rather than fail: only a checked read says a row is damaged.
#[inline(always)]
pub(in crate::embedded) fn payload(stored: &[u8]) -> &[u8] {
    split(stored).and_then(|(b, w)| parts(b, w)).map_or(&[][..], |(v, _)| v)
}

/// A format-1 row in format 2: the same bytes unless its CRC's top bit is set.
/// A row that fails its format-1 checksum is left as it is (still damaged).
pub(in crate::embedded) fn reseal_v1(key: &[u8], stored: &[u8]) -> Option<Vec<u8>> {
    let value = super::checksums::checked(key, stored)?;
    let (_, w) = split(stored)?;
    if w & LINKED == 0 {
        return None;
    }
    let mut v = value.to_vec();
    seal_in_place(key, &mut v, None);
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_row_opens_only_under_its_key_unchanged_with_its_link() {
        for link in [None, Some(7u64), Some(u64::MAX)] {
            let mut sealed = b"value".to_vec();
            seal_in_place(b"key", &mut sealed, link);
            assert_eq!(checked(b"key", &sealed), Some((&b"value"[..], link)));
            assert_eq!(payload(&sealed), b"value");
            assert_eq!(checked(b"kez", &sealed), None);
            for bit in 0..sealed.len() * 8 {
                let mut flipped = sealed.clone();
                flipped[bit / 8] ^= 1 << (bit % 8);
                assert_eq!(checked(b"key", &flipped), None, "link {link:?} bit {bit}");
            }
        }
        let mut empty = Vec::new();
        seal_in_place(b"", &mut empty, None);
        assert_eq!(checked(b"", &empty), Some((&b""[..], None)));
        assert_eq!(payload(b"ab"), b"");
    }

    #[test]
    fn a_row_checked_with_its_key_in_one_slice_reads_as_when_apart() {
        for link in [None, Some(7u64)] {
            let mut sealed = b"value".to_vec();
            seal_in_place(b"key", &mut sealed, link);
            let row = [&b"key"[..], &sealed].concat();
            assert_eq!(unseal_joined(&row, 3).ok(), Some(&b"value"[..]));
            for bit in 0..row.len() * 8 {
                let mut flipped = row.clone();
                flipped[bit / 8] ^= 1 << (bit % 8);
                assert!(unseal_joined(&flipped, 3).is_err(), "link {link:?} bit {bit}");
            }
        }
    }

    #[test]
    fn a_format_1_row_reads_alike_or_is_resealed() {
        let (mut kept, mut resealed) = (0, 0);
        for i in 0..64u32 {
            let key = i.to_le_bytes();
            let v1 = super::super::checksums::seal(&key, b"value");
            match reseal_v1(&key, &v1) {
                None => {
                    kept += 1;
                    assert_eq!(checked(&key, &v1), Some((&b"value"[..], None)));
                }
                Some(v2) => {
                    resealed += 1;
                    assert_eq!(checked(&key, &v2), Some((&b"value"[..], None)));
                }
            }
        }
        assert!(kept > 0 && resealed > 0, "{kept} kept, {resealed} resealed");
        let mut damaged_v1 = super::super::checksums::seal(b"k", b"value");
        damaged_v1[0] ^= 1;
        assert_eq!(reseal_v1(b"k", &damaged_v1), None);
    }
}
