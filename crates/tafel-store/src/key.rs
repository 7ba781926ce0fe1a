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

use std::fmt;

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntityKey(Vec<u8>);

fn push_mapped(out: &mut Vec<u8>, s: &str) {
    out.extend(s.bytes().map(|b| match b {
        0xEE => 0xF5,
        0xEF => 0xF6,
        other => other,
    }));
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

    fn split(&self) -> (&[u8], &[u8]) {
        match memchr0(&self.0) {
            Some(i) => (&self.0[..i], &self.0[i + 1..]),
            None => (&self.0[..], &[]),
        }
    }

    pub fn partition_key(&self) -> String {
        unmap(self.split().0)
    }

    pub fn row_key(&self) -> String {
        unmap(self.split().1)
    }

    /// Both keys, decoded.
    pub fn keys(&self) -> (String, String) {
        let (p, r) = self.split();
        (unmap(p), unmap(r))
    }
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
        KeyRange {
            start,
            end: Some(end),
        }
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

    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && self.end.as_deref().is_none_or(|e| key < e)
    }

    pub fn is_empty(&self) -> bool {
        self.end
            .as_deref()
            .is_some_and(|e| e <= self.start.as_slice())
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
        let samples = [
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
        for a in samples {
            for b in samples {
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
        assert_eq!(
            k.keys(),
            ("p\u{E123}x\u{1F600}".to_string(), "r'ow".to_string())
        );
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
