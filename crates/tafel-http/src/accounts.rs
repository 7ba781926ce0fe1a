//! Storage accounts and their keys.

use std::collections::HashMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, KeyInit};
use sha2::Sha256;

/// The well-known emulator account and key (spec/auth.md §1).
pub(crate) const DEV_ACCOUNT: &str = "devstoreaccount1";
pub const DEV_KEY: &str = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

#[derive(Debug, Clone, Default)]
pub struct Accounts {
    keys: HashMap<String, Vec<AccountKey>>,
}

/// An account key, with its HMAC-SHA256 keyed once: a signature check clones
/// this state instead of hashing the key's inner and outer pads again, two of
/// the ~5 SHA-256 blocks each Shared Key request costs (benchmark-history §23).
#[derive(Clone)]
pub struct AccountKey {
    bytes: Vec<u8>,
    mac: Hmac<Sha256>,
}

impl AccountKey {
    pub fn new(bytes: Vec<u8>) -> Self {
        // HMAC takes a key of any length: `new_from_slice` only fails for fixed-size MACs.
        let mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&bytes)
            .unwrap_or_else(|_| <Hmac<Sha256> as KeyInit>::new(&Default::default()));
        AccountKey { bytes, mac }
    }

    /// A fresh HMAC under this key, ready for the string to sign.
    pub(crate) fn mac(&self) -> Hmac<Sha256> {
        self.mac.clone()
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl std::fmt::Debug for AccountKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccountKey(..)")
    }
}

impl Accounts {
    /// Parses `NAME:BASE64KEY[:BASE64KEY2]` specs; the first key is the primary.
    pub fn from_specs<S: AsRef<str>>(specs: &[S]) -> Result<Self, String> {
        let mut a = Accounts::default();
        for spec in specs {
            let spec = spec.as_ref();
            let mut parts = spec.split(':');
            let name = parts
                .next()
                .filter(|n| !n.is_empty())
                .ok_or_else(|| format!("bad account spec '{spec}'"))?;
            if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) {
                return Err(format!("account name '{name}' must be lowercase letters and digits"));
            }
            let keys = parts
                .map(|k| {
                    STANDARD
                        .decode(k.trim())
                        .map_err(|_| format!("account '{name}': key is not base64"))
                })
                .map(|k| k.map(AccountKey::new))
                .collect::<Result<Vec<_>, _>>()?;
            if keys.is_empty() {
                return Err(format!("account '{name}' has no key"));
            }
            a.keys.insert(name.to_owned(), keys);
        }
        Ok(a)
    }

    /// Reads account specs from a file: one `NAME:KEY1[:KEY2]` per line; blank
    /// lines and lines starting with `#` are skipped.
    pub fn specs_from_file(path: &std::path::Path) -> Result<Vec<String>, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        Ok(text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_owned)
            .collect())
    }

    pub fn dev() -> Self {
        Accounts::from_specs(&[format!("{DEV_ACCOUNT}:{DEV_KEY}")]).unwrap_or_default()
    }

    /// Adds `other`'s accounts (an account in both keeps `other`'s keys).
    pub fn merge(&mut self, other: Accounts) {
        self.keys.extend(other.keys);
    }

    pub fn keys(&self, account: &str) -> Option<&[AccountKey]> {
        self.keys.get(account).map(Vec::as_slice)
    }

    pub fn contains(&self, account: &str) -> bool {
        self.keys.contains_key(account)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_file_and_two_keys() {
        let path = std::env::temp_dir().join(format!("tafel-accounts-{}.txt", std::process::id()));
        let text = format!("# accounts\n\n{DEV_ACCOUNT}:{DEV_KEY}:a2V5Mg==\n  other:b3RoZXI=  \n");
        std::fs::write(&path, text).expect("write temp file");
        let specs = Accounts::specs_from_file(&path).expect("reads");
        let _ = std::fs::remove_file(&path);
        assert_eq!(specs.len(), 2);
        let a = Accounts::from_specs(&specs).expect("parses");
        assert_eq!(a.keys(DEV_ACCOUNT).map(<[_]>::len), Some(2));
        let other = a
            .keys("other")
            .map(|k| k.iter().map(AccountKey::bytes).collect::<Vec<_>>());
        assert_eq!(other, Some(vec![&b"other"[..]]));
        assert!(Accounts::specs_from_file(std::path::Path::new("/nonexistent/tafel")).is_err());
    }
}
