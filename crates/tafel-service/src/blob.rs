//! A tiny length-prefixed encoding for the opaque blobs the service keeps in the
//! store (table ACLs, service properties). Each blob starts with a format byte.

pub(crate) struct Enc(Vec<u8>);

impl Enc {
    pub fn new(format: u8) -> Self {
        Enc(vec![format])
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.0.push(u8::from(v));
        self
    }

    /// 0 = absent, 1 = false, 2 = true.
    pub(crate) fn opt_bool(&mut self, v: Option<bool>) -> &mut Self {
        self.0.push(v.map_or(0, |b| 1 + u8::from(b)));
        self
    }

    pub fn str(&mut self, s: &str) -> &mut Self {
        self.u32(s.len() as u32);
        self.0.extend_from_slice(s.as_bytes());
        self
    }

    pub(crate) fn strs(&mut self, v: &[String]) -> &mut Self {
        self.u32(v.len() as u32);
        for s in v {
            self.str(s);
        }
        self
    }

    pub fn finish(self) -> Vec<u8> {
        self.0
    }
}

/// Reads what [`Enc`] wrote; every getter returns `None` on truncated input.
pub(crate) struct Dec<'a>(&'a [u8]);

impl<'a> Dec<'a> {
    /// Checks the format byte.
    pub fn new(bytes: &'a [u8], format: u8) -> Option<Self> {
        match bytes.split_first() {
            Some((&f, rest)) if f == format => Some(Dec(rest)),
            _ => None,
        }
    }

    /// What is left to read.
    pub(crate) fn rest(&self) -> &'a [u8] {
        self.0
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    pub fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    pub fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    pub fn bool(&mut self) -> Option<bool> {
        Some(self.take(1)?[0] != 0)
    }

    pub(crate) fn opt_bool(&mut self) -> Option<Option<bool>> {
        match self.take(1)?[0] {
            0 => Some(None),
            1 => Some(Some(false)),
            _ => Some(Some(true)),
        }
    }

    pub fn str(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }

    pub(crate) fn strs(&mut self) -> Option<Vec<String>> {
        let n = self.u32()? as usize;
        (0..n.min(self.0.len()))
            .map(|_| self.str())
            .collect::<Option<Vec<_>>>()
            .filter(|v| v.len() == n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut e = Enc::new(7);
        e.u32(3)
            .u64(u64::MAX)
            .i64(-5)
            .bool(true)
            .opt_bool(None)
            .opt_bool(Some(false))
            .str("héllo");
        e.strs(&["a".into(), String::new()]);
        let bytes = e.finish();
        let mut d = Dec::new(&bytes, 7).expect("format");
        assert_eq!(d.u32(), Some(3));
        assert_eq!(d.u64(), Some(u64::MAX));
        assert_eq!(d.i64(), Some(-5));
        assert_eq!(d.bool(), Some(true));
        assert_eq!(d.opt_bool(), Some(None));
        assert_eq!(d.opt_bool(), Some(Some(false)));
        assert_eq!(d.str().as_deref(), Some("héllo"));
        assert_eq!(d.strs(), Some(vec!["a".to_owned(), String::new()]));
        assert_eq!(d.u32(), None);
        assert!(Dec::new(&bytes, 8).is_none());
        assert!(Dec::new(&[], 7).is_none());
    }
}
