//! Continuation tokens: opaque to clients, base64url (no padding) of the key so
//! that any key survives a header and a query string.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use tafel_service::{Error, Result};

pub fn encode(key: &str) -> String {
    URL_SAFE_NO_PAD.encode(key.as_bytes())
}

pub fn decode(token: &str) -> Result<String> {
    URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('=').as_bytes())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| Error::invalid_input("The continuation token is not valid."))
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trip() {
        for k in ["", "a", "ü/\\#?'", "\u{1F600}"] {
            assert_eq!(super::decode(&super::encode(k)).ok().as_deref(), Some(k));
        }
        assert!(super::decode("!!").is_err());
    }
}
