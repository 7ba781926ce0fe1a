//! `Edm.Guid`, kept as its 16 bytes in textual order so that byte order equals the
//! order of the lowercase canonical string.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Guid(pub [u8; 16]);

impl Guid {
    /// Parses `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (any case, optionally in braces).
    pub fn parse(s: &str) -> Option<Guid> {
        let s = s.strip_prefix('{').and_then(|r| r.strip_suffix('}')).unwrap_or(s);
        let b = s.as_bytes();
        if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
            return None;
        }
        let mut out = [0u8; 16];
        let mut n = 0;
        let mut i = 0;
        while i < 36 {
            if b[i] == b'-' {
                i += 1;
                continue;
            }
            let hi = (b[i] as char).to_digit(16)?;
            let lo = (*b.get(i + 1)? as char).to_digit(16)?;
            out[n] = (hi * 16 + lo) as u8;
            n += 1;
            i += 2;
        }
        (n == 16).then_some(Guid(out))
    }
}

impl Guid {
    /// The canonical lowercase form, 36 ASCII bytes, written without `core::fmt`
    /// (this runs for every Guid of every response).
    pub fn write_canonical(&self, out: &mut Vec<u8>) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for (i, byte) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                out.push(b'-');
            }
            out.push(HEX[usize::from(byte >> 4)]);
            out.push(HEX[usize::from(byte & 0x0f)]);
        }
    }
}

impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = Vec::with_capacity(36);
        self.write_canonical(&mut buf);
        f.write_str(std::str::from_utf8(&buf).map_err(|_| fmt::Error)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_canonical_lowercase() {
        let g = Guid::parse("3F2504E0-4F89-11D3-9A0C-0305E82C3301").map(|g| g.to_string());
        assert_eq!(g.as_deref(), Some("3f2504e0-4f89-11d3-9a0c-0305e82c3301"));
        assert!(Guid::parse("3f2504e04f8911d39a0c0305e82c3301").is_none());
        assert!(Guid::parse("3f2504e0-4f89-11d3-9a0c-0305e82c330g").is_none());
    }
}
