//! Choosing the response's metadata level from `$format` / `Accept`.

use http::HeaderValue;
use tafel_service::{Error, ErrorCode, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataLevel {
    No,
    Minimal,
    Full,
}

const NO: &str = "application/json;odata=nometadata;streaming=true;charset=utf-8";
const MINIMAL: &str = "application/json;odata=minimalmetadata;streaming=true;charset=utf-8";
const FULL: &str = "application/json;odata=fullmetadata;streaming=true;charset=utf-8";

/// `application/json;odata=…;streaming=true;charset=utf-8` for `level`.
pub fn content_type(level: MetadataLevel) -> &'static str {
    match level {
        MetadataLevel::No => NO,
        MetadataLevel::Minimal => MINIMAL,
        MetadataLevel::Full => FULL,
    }
}

/// [`content_type`] as a header value made at compile time: `from_static` at run
/// time checks each of its ~65 bytes per response (benchmark-history §24).
pub fn content_type_value(level: MetadataLevel) -> HeaderValue {
    match level {
        MetadataLevel::No => const { HeaderValue::from_static(NO) },
        MetadataLevel::Minimal => const { HeaderValue::from_static(MINIMAL) },
        MetadataLevel::Full => const { HeaderValue::from_static(FULL) },
    }
}

fn level_of(media: &str) -> Option<Result<MetadataLevel>> {
    // Compared without lowercased copies: this runs on every request.
    let mut parts = media.trim().split(';').map(str::trim);
    let essence = parts.next().unwrap_or("");
    let is = |m: &str| essence.eq_ignore_ascii_case(m);
    if is("application/json") {
        let odata = parts
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("odata"))
            .map(|(_, v)| v.trim());
        let odata_is = |m: &str| odata.is_some_and(|v| v.eq_ignore_ascii_case(m));
        Some(if odata.is_none() || odata_is("minimalmetadata") {
            Ok(MetadataLevel::Minimal)
        } else if odata_is("nometadata") {
            Ok(MetadataLevel::No)
        } else if odata_is("fullmetadata") {
            Ok(MetadataLevel::Full)
        } else if odata_is("verbose") {
            Err(Error::new(ErrorCode::JsonVerboseFormatNotSupported))
        } else {
            Err(Error::new(ErrorCode::MediaTypeNotSupported))
        })
    } else if is("application/atom+xml") || is("application/xml") {
        Some(Err(Error::new(ErrorCode::AtomFormatNotSupported)))
    } else if is("*/*") || is("application/*") {
        Some(Ok(MetadataLevel::Minimal))
    } else {
        None
    }
}

/// The metadata level for a response. `$format` wins over `Accept`; a missing
/// Accept means minimal metadata (JSON-speaking clients that omit it still get
/// JSON); an Accept listing only Atom/XML is refused as Azurite does.
pub(crate) fn negotiate(format_param: Option<&str>, accept: Option<&str>) -> Result<MetadataLevel> {
    if let Some(f) = format_param {
        return level_of(f).unwrap_or_else(|| Err(Error::new(ErrorCode::MediaTypeNotSupported)));
    }
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(MetadataLevel::Minimal);
    };
    // What the SDKs send, recognised whole before the general parse (~1,400
    // instructions, twice per request: benchmark-history §24).
    match accept {
        "application/json;odata=minimalmetadata" => return Ok(MetadataLevel::Minimal),
        "application/json;odata=nometadata" => return Ok(MetadataLevel::No),
        "application/json;odata=fullmetadata" => return Ok(MetadataLevel::Full),
        _ => {}
    }
    let mut first_err = None;
    for media in accept.split(',') {
        match level_of(media) {
            Some(Ok(level)) => return Ok(level),
            Some(Err(e)) => {
                first_err.get_or_insert(e);
            }
            None => {}
        }
    }
    Err(first_err.unwrap_or_else(|| Error::new(ErrorCode::MediaTypeNotSupported)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation() {
        assert_eq!(negotiate(None, None), Ok(MetadataLevel::Minimal));
        assert_eq!(negotiate(None, Some("application/json")), Ok(MetadataLevel::Minimal));
        assert_eq!(
            negotiate(None, Some("application/json;odata=fullmetadata")),
            Ok(MetadataLevel::Full)
        );
        assert_eq!(
            negotiate(Some("application/json;odata=nometadata"), Some("application/json")),
            Ok(MetadataLevel::No)
        );
        for (accept, level) in [
            ("application/json;odata=minimalmetadata", MetadataLevel::Minimal),
            ("application/json;odata=nometadata", MetadataLevel::No),
            ("application/json;odata=fullmetadata", MetadataLevel::Full),
        ] {
            // The whole-string shortcut and the general parse agree.
            assert_eq!(negotiate(None, Some(accept)), Ok(level));
            assert_eq!(negotiate(None, Some(&format!(" {accept} "))), Ok(level));
        }
        assert_eq!(
            negotiate(None, Some("application/atom+xml")).map_err(|e| e.code),
            Err(ErrorCode::AtomFormatNotSupported)
        );
        assert_eq!(
            negotiate(None, Some("application/atom+xml, application/json;odata=nometadata")),
            Ok(MetadataLevel::No)
        );
    }
}
