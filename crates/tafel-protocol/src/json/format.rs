//! Choosing the response's metadata level from `$format` / `Accept`.

use tafel_service::{Error, ErrorCode, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataLevel {
    No,
    Minimal,
    Full,
}

/// `application/json;odata=…;streaming=true;charset=utf-8` for `level`.
pub fn content_type(level: MetadataLevel) -> &'static str {
    match level {
        MetadataLevel::No => "application/json;odata=nometadata;streaming=true;charset=utf-8",
        MetadataLevel::Minimal => "application/json;odata=minimalmetadata;streaming=true;charset=utf-8",
        MetadataLevel::Full => "application/json;odata=fullmetadata;streaming=true;charset=utf-8",
    }
}

fn level_of(media: &str) -> Option<Result<MetadataLevel>> {
    let media = media.trim();
    let mut parts = media.split(';').map(str::trim);
    let essence = parts.next().unwrap_or("").to_ascii_lowercase();
    match essence.as_str() {
        "application/json" => {
            let odata = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("odata"))
                .map(|(_, v)| v.trim().to_ascii_lowercase());
            Some(match odata.as_deref() {
                None | Some("minimalmetadata") => Ok(MetadataLevel::Minimal),
                Some("nometadata") => Ok(MetadataLevel::No),
                Some("fullmetadata") => Ok(MetadataLevel::Full),
                Some("verbose") => Err(Error::new(ErrorCode::JsonVerboseFormatNotSupported)),
                Some(_) => Err(Error::new(ErrorCode::MediaTypeNotSupported)),
            })
        }
        "application/atom+xml" | "application/xml" => Some(Err(Error::new(ErrorCode::AtomFormatNotSupported))),
        "*/*" | "application/*" => Some(Ok(MetadataLevel::Minimal)),
        _ => None,
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
