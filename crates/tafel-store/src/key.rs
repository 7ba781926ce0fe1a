//! Order-preserving encoding of (PartitionKey, RowKey).
//!
//! Invariant: for keys `a` and `b`, `encode(a) < encode(b)` byte-wise exactly when
//! `a < b` in Azure's order: PartitionKey first, then RowKey, each compared as a
//! sequence of UTF-16 code units.
//!
//! Layout: `pk' 0x00 rk'`, where `s'` is the UTF-8 of `s` with the lead bytes
//! 0xEE/0xEF (code points U+E000..U+FFFF) moved to 0xF5/0xF6. In UTF-16 those code
//! points sort *after* the surrogate pairs of supplementary characters, while in
//! UTF-8 they sort before them; moving their lead bytes above 0xF4 restores UTF-16
//! order, and 0xF5/0xF6 never occur in UTF-8 so the mapping is reversible.
//! Keys never contain U+0000 (the service rejects control characters), so 0x00 is a
//! safe separator that also makes a shorter PartitionKey sort first.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;
use std::ops::Bound;

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntityKey(Vec<u8>);

fn map_byte(b: u8) -> u8 {
    match b {
        0xEE => 0xF5,
        0xEF => 0xF6,
        other => other,
    }
}

/// Appends `s` so that byte order is Azure's string order (the mapping above);
/// secondary index entries use it too.
pub fn push_mapped(out: &mut Vec<u8>, s: &str) {
    out.extend(s.bytes().map(map_byte));
}

/// Compares mapped bytes `enc` with the mapping of `s`, without building it. The
/// mapping is injective per byte, so the first differing position decides.
fn cmp_mapped(enc: &[u8], s: &str) -> Ordering {
    let s = s.as_bytes();
    match enc.iter().zip(s).position(|(&e, &b)| e != map_byte(b)) {
        Some(i) => enc[i].cmp(&map_byte(s[i])),
        None => enc.len().cmp(&s.len()),
    }
}

/// Azure's string order (UTF-16 code units, ordinal) without transcoding: the same
/// lead-byte mapping as the key encoding, applied at the first differing byte.
pub fn azure_str_cmp(a: &str, b: &str) -> Ordering {
    azure_bytes_cmp(a.as_bytes(), b.as_bytes())
}

/// [`azure_str_cmp`] of two strings' UTF-8 bytes.
pub fn azure_bytes_cmp(a: &[u8], b: &[u8]) -> Ordering {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => map_byte(a[i]).cmp(&map_byte(b[i])),
        None => a.len().cmp(&b.len()),
    }
}

fn unmap(bytes: &[u8]) -> String {
    let raw: Vec<u8> = bytes
        .iter()
        .map(|&b| match b {
            0xF5 => 0xEE,
            0xF6 => 0xEF,
            other => other,
        })
        .collect();
    // The bytes came from `push_mapped` of a valid `&str`, so this is lossless.
    String::from_utf8(raw).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

impl EntityKey {
    pub fn new(partition_key: &str, row_key: &str) -> Self {
        let mut v = Vec::with_capacity(partition_key.len() + row_key.len() + 1);
        push_mapped(&mut v, partition_key);
        v.push(0);
        push_mapped(&mut v, row_key);
        EntityKey(v)
    }

    /// Wraps bytes produced by [`EntityKey::as_bytes`] (read back from a backend).
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        EntityKey(bytes)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The key as a borrowed view.
    pub fn view(&self) -> KeyRef<'_> {
        KeyRef(&self.0)
    }

    /// Both keys, decoded.
    pub fn keys(&self) -> (String, String) {
        self.view().keys()
    }
}

/// An encoded key borrowed from a backend's buffer, so scans can test rows
/// without copying each key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KeyRef<'a>(&'a [u8]);

impl<'a> KeyRef<'a> {
    /// Wraps bytes produced by [`EntityKey::as_bytes`].
    pub fn new(bytes: &'a [u8]) -> Self {
        KeyRef(bytes)
    }

    pub fn as_bytes(self) -> &'a [u8] {
        self.0
    }

    pub fn to_owned(self) -> EntityKey {
        EntityKey(self.0.to_vec())
    }

    fn split(self) -> (&'a [u8], &'a [u8]) {
        match memchr0(self.0) {
            Some(i) => (&self.0[..i], &self.0[i + 1..]),
            None => (self.0, &[]),
        }
    }

    /// Both keys, decoded.
    pub fn keys(self) -> (String, String) {
        let (p, r) = self.split();
        (unmap(p), unmap(r))
    }

    /// Both keys, borrowed when they hold no remapped byte (0xF5/0xF6 never occur
    /// in UTF-8, so their absence means the bytes are the keys' own UTF-8).
    pub fn keys_cow(self) -> (Cow<'a, str>, Cow<'a, str>) {
        let (p, r) = self.split();
        (unmap_cow(p), unmap_cow(r))
    }

    /// Compares the PartitionKey with `s` in Azure order, without decoding it.
    pub fn cmp_partition_key(self, s: &str) -> Ordering {
        cmp_mapped(self.split().0, s)
    }

    /// Compares the RowKey with `s` in Azure order, without decoding it.
    pub fn cmp_row_key(self, s: &str) -> Ordering {
        cmp_mapped(self.split().1, s)
    }
}

fn unmap_cow(bytes: &[u8]) -> Cow<'_, str> {
    if !bytes.iter().any(|&b| b == 0xF5 || b == 0xF6) {
        if let Ok(s) = std::str::from_utf8(bytes) {
            return Cow::Borrowed(s);
        }
    }
    Cow::Owned(unmap(bytes))
}

fn memchr0(b: &[u8]) -> Option<usize> {
    b.iter().position(|&x| x == 0)
}

impl fmt::Debug for EntityKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (p, r) = self.keys();
        write!(f, "({p:?}, {r:?})")
    }
}

/// A half-open range of encoded keys: `start <= key < end` (`end: None` = unbounded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRange {
    pub start: Vec<u8>,
    pub end: Option<Vec<u8>>,
}

impl KeyRange {
    /// The part of `ranges` at or after `from` (where a scan resumes); ranges
    /// left empty are dropped.
    pub fn resume(ranges: Vec<KeyRange>, from: &[u8]) -> Vec<KeyRange> {
        ranges
            .into_iter()
            .filter_map(|mut r| {
                if r.start.as_slice() < from {
                    r.start = from.to_vec();
                }
                (!r.is_empty()).then_some(r)
            })
            .collect()
    }

    /// Every key.
    pub fn all() -> Self {
        KeyRange {
            start: Vec::new(),
            end: None,
        }
    }

    /// Exactly one entity.
    pub fn point(partition_key: &str, row_key: &str) -> Self {
        let k = EntityKey::new(partition_key, row_key);
        let mut end = k.0.clone();
        end.push(0);
        KeyRange {
            start: k.0,
            end: Some(end),
        }
    }

    /// All entities of one partition.
    pub fn partition(partition_key: &str) -> Self {
        let mut start = Vec::with_capacity(partition_key.len() + 1);
        push_mapped(&mut start, partition_key);
        let mut end = start.clone();
        start.push(0);
        end.push(1);
        KeyRange { start, end: Some(end) }
    }

    /// Encoded prefix of a PartitionKey bound: keys whose PartitionKey is >= `pk`
    /// start at `pk_lower(pk)`, keys with PartitionKey > `pk` start at `pk_after(pk)`.
    pub fn pk_lower(pk: &str) -> Vec<u8> {
        let mut v = Vec::with_capacity(pk.len() + 1);
        push_mapped(&mut v, pk);
        v.push(0);
        v
    }

    pub fn pk_after(pk: &str) -> Vec<u8> {
        let mut v = Vec::with_capacity(pk.len() + 1);
        push_mapped(&mut v, pk);
        v.push(1);
        v
    }

    /// Smallest encoded key strictly greater than `k` and every key it prefixes... of
    /// the same entity: `k` followed by 0x00 (entity keys never end in 0x00 twice).
    pub fn key_after(k: &EntityKey) -> Vec<u8> {
        let mut v = k.0.clone();
        v.push(0);
        v
    }

    /// Keys of partition `pk` whose RowKey lies within `lower`..`upper`.
    pub fn rows(pk: &str, lower: Bound<&str>, upper: Bound<&str>) -> Self {
        let prefix = Self::pk_lower(pk);
        let with = |rk: &str, tail: Option<u8>| {
            let mut v = Vec::with_capacity(prefix.len() + rk.len() + 1);
            v.extend_from_slice(&prefix);
            push_mapped(&mut v, rk);
            v.extend(tail);
            v
        };
        // A RowKey never contains U+0000, so `rk 0x00` is the first key after `rk`
        // and every longer RowKey starting with `rk`.
        let start = match lower {
            Bound::Unbounded => prefix.clone(),
            Bound::Included(rk) => with(rk, None),
            Bound::Excluded(rk) => with(rk, Some(0)),
        };
        let end = match upper {
            Bound::Unbounded => Self::pk_after(pk),
            Bound::Included(rk) => with(rk, Some(0)),
            Bound::Excluded(rk) => with(rk, None),
        };
        KeyRange { start, end: Some(end) }
    }

    /// The PartitionKey shared by every key in this range, when the range lies
    /// within a single partition.
    pub fn single_partition(&self) -> Option<String> {
        let pk = &self.start[..memchr0(&self.start)?];
        let mut partition_end = Vec::with_capacity(pk.len() + 1);
        partition_end.extend_from_slice(pk);
        partition_end.push(1);
        let end = self.end.as_deref()?;
        (end <= partition_end.as_slice()).then(|| unmap(pk))
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && self.end.as_deref().is_none_or(|e| key < e)
    }

    pub fn is_empty(&self) -> bool {
        self.end.as_deref().is_some_and(|e| e <= self.start.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16_cmp(a: &str, b: &str) -> std::cmp::Ordering {
        a.encode_utf16().cmp(b.encode_utf16())
    }

    #[test]
    fn encoding_orders_like_utf16_code_units() {
        for a in SAMPLES {
            for b in SAMPLES {
                let ka = EntityKey::new(a, "");
                let kb = EntityKey::new(b, "");
                assert_eq!(ka.cmp(&kb), utf16_cmp(a, b), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn partition_key_sorts_before_row_key() {
        assert!(EntityKey::new("a", "zzz") < EntityKey::new("ab", ""));
        assert!(EntityKey::new("a", "") < EntityKey::new("a", "0"));
    }

    #[test]
    fn keys_round_trip() {
        let k = EntityKey::new("p\u{E123}x\u{1F600}", "r'ow");
        assert_eq!(k.keys(), ("p\u{E123}x\u{1F600}".to_string(), "r'ow".to_string()));
    }

    const SAMPLES: [&str; 14] = [
        "",
        "a",
        "ab",
        "b",
        "\u{7f}",
        "é",
        "\u{D7FF}",
        "\u{E000}",
        "\u{FFFD}",
        "\u{10000}",
        "\u{1F600}",
        "a\u{1F600}",
        "a\u{FFFF}",
        "z",
    ];

    #[test]
    fn string_and_key_comparisons_follow_utf16() {
        for a in SAMPLES {
            for b in SAMPLES {
                assert_eq!(azure_str_cmp(a, b), utf16_cmp(a, b), "{a:?} vs {b:?}");
                let k = EntityKey::new(a, b);
                assert_eq!(k.view().cmp_partition_key(b), utf16_cmp(a, b), "{a:?} vs {b:?}");
                assert_eq!(k.view().cmp_row_key(a), utf16_cmp(b, a), "{b:?} vs {a:?}");
            }
        }
    }

    #[test]
    fn row_ranges_hold_exactly_their_rows() {
        use Bound::{Excluded, Included, Unbounded};
        let bounds = |s| [Unbounded, Included(s), Excluded(s)];
        for lo in SAMPLES {
            for hi in SAMPLES {
                for lower in bounds(lo) {
                    for upper in bounds(hi) {
                        let r = KeyRange::rows("p", lower, upper);
                        assert_eq!(r.single_partition().as_deref(), Some("p"));
                        for pk in ["", "p", "p\u{1F600}", "pa", "o", "q"] {
                            for rk in SAMPLES {
                                let inside = pk == "p"
                                    && match lower {
                                        Unbounded => true,
                                        Included(l) => utf16_cmp(rk, l).is_ge(),
                                        Excluded(l) => utf16_cmp(rk, l).is_gt(),
                                    }
                                    && match upper {
                                        Unbounded => true,
                                        Included(h) => utf16_cmp(rk, h).is_le(),
                                        Excluded(h) => utf16_cmp(rk, h).is_lt(),
                                    };
                                let k = EntityKey::new(pk, rk);
                                assert_eq!(r.contains(k.as_bytes()), inside, "{r:?} {k:?}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn single_partition_is_detected() {
        assert_eq!(
            KeyRange::partition("a\u{E000}").single_partition().as_deref(),
            Some("a\u{E000}")
        );
        assert_eq!(KeyRange::point("a", "b").single_partition().as_deref(), Some("a"));
        assert_eq!(KeyRange::all().single_partition(), None);
        let two = KeyRange {
            start: KeyRange::pk_lower("a"),
            end: Some(KeyRange::pk_lower("b")),
        };
        assert_eq!(two.single_partition(), None);
        let open = KeyRange {
            start: KeyRange::pk_lower("a"),
            end: None,
        };
        assert_eq!(open.single_partition(), None);
    }

    #[test]
    fn partition_range_holds_exactly_its_partition() {
        let r = KeyRange::partition("a");
        assert!(r.contains(EntityKey::new("a", "").as_bytes()));
        assert!(r.contains(EntityKey::new("a", "\u{FFFF}").as_bytes()));
        assert!(!r.contains(EntityKey::new("ab", "").as_bytes()));
        assert!(!r.contains(EntityKey::new("", "a").as_bytes()));
    }
}
