//! Get / Set Table ACL (`/<table>?comp=acl`, operations.md §4–§5): the
//! `SignedIdentifiers` XML document.

use http::StatusCode;
use tafel_service::acl::{AccessPolicy, SignedIdentifier};
use tafel_service::{Error, ErrorCode, Result, Service};

use crate::request::{Context, Request, Response};
use crate::xml::{self, Writer};

fn unexpected(name: &str, parent: &str) -> Error {
    Error::with_message(
        ErrorCode::InvalidXmlDocument,
        format!("The element {name} is not expected inside {parent}."),
    )
}

/// Parses a Set Table ACL body; an empty body or `<SignedIdentifiers/>` clears.
pub(crate) fn parse_acl(body: &[u8]) -> Result<Vec<SignedIdentifier>> {
    let Some(root) = xml::parse(body)? else {
        return Ok(Vec::new());
    };
    if root.name != "SignedIdentifiers" {
        return Err(unexpected(&root.name, "the document"));
    }
    let mut out = Vec::with_capacity(root.children.len());
    for si in &root.children {
        if si.name != "SignedIdentifier" {
            return Err(unexpected(&si.name, "SignedIdentifiers"));
        }
        let id = si.required("Id")?.text.clone();
        let policy = match si.child("AccessPolicy") {
            None => AccessPolicy::default(),
            Some(ap) => AccessPolicy {
                start: ap.child("Start").map(xml::Element::datetime).transpose()?.flatten(),
                expiry: ap.child("Expiry").map(xml::Element::datetime).transpose()?.flatten(),
                permission: ap
                    .child("Permission")
                    .map(|p| p.value().to_owned())
                    .filter(|p| !p.is_empty()),
            },
        };
        out.push(SignedIdentifier { id, policy });
    }
    Ok(out)
}

/// The Get Table ACL document, dates with 7 fractional digits.
pub(crate) fn write_acl(ids: &[SignedIdentifier]) -> String {
    let mut w = Writer::new();
    if ids.is_empty() {
        w.empty("SignedIdentifiers");
        return w.finish();
    }
    w.open("SignedIdentifiers");
    for si in ids {
        w.open("SignedIdentifier").text("Id", &si.id);
        let p = &si.policy;
        // A policy of no fields is no `AccessPolicy` element at all, as Azure
        // answers (the SDKs read it as no policy, `None`).
        if p.start.is_some() || p.expiry.is_some() || p.permission.is_some() {
            w.open("AccessPolicy");
            if let Some(s) = p.start {
                w.text("Start", &s.to_iso());
            }
            if let Some(e) = p.expiry {
                w.text("Expiry", &e.to_iso());
            }
            if let Some(perm) = &p.permission {
                w.text("Permission", perm);
            }
            w.close("AccessPolicy");
        }
        w.close("SignedIdentifier");
    }
    w.close("SignedIdentifiers");
    w.finish()
}

pub async fn get(svc: &Service, cx: &Context, table: &str) -> Result<Response> {
    let ids = svc.get_table_acl(&cx.caller, table).await?;
    Ok(Response::with_body(StatusCode::OK, "application/xml", write_acl(&ids)))
}

pub async fn set(svc: &Service, cx: &Context, req: &Request, table: &str) -> Result<Response> {
    let ids = parse_acl(&req.body)?;
    svc.set_table_acl(&cx.caller, table, ids).await?;
    Ok(Response::new(StatusCode::NO_CONTENT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_the_sdks_send() {
        let body = b"<?xml version='1.0' encoding='utf-8'?>\n<SignedIdentifiers><SignedIdentifier><Id>read</Id><AccessPolicy><Start>2024-06-01T00:00:00Z</Start><Expiry>2024-07-01T00:00:00Z</Expiry><Permission>r</Permission></AccessPolicy></SignedIdentifier><SignedIdentifier><Id>bare</Id></SignedIdentifier></SignedIdentifiers>";
        let ids = parse_acl(body).expect("parses");
        assert_eq!(ids.len(), 2);
        assert_eq!(ids[0].id, "read");
        assert_eq!(ids[0].policy.permission.as_deref(), Some("r"));
        assert_eq!(ids[1].policy, AccessPolicy::default());
        let out = write_acl(&ids);
        assert!(out.contains("<Start>2024-06-01T00:00:00.0000000Z</Start><Expiry>2024-07-01T00:00:00.0000000Z</Expiry><Permission>r</Permission>"), "{out}");
        assert!(out.contains("<Id>bare</Id></SignedIdentifier>"), "{out}");
        // An empty `<AccessPolicy />` sent is no policy too.
        let empty = parse_acl(
            b"<SignedIdentifiers><SignedIdentifier><Id>e</Id><AccessPolicy /></SignedIdentifier></SignedIdentifiers>",
        )
        .expect("parses");
        assert!(write_acl(&empty).contains("<Id>e</Id></SignedIdentifier>"));
        assert_eq!(parse_acl(out.as_bytes()).ok(), Some(ids));
    }

    #[test]
    fn empty_documents_clear() {
        assert_eq!(parse_acl(b"").ok(), Some(vec![]));
        assert_eq!(parse_acl(b"<SignedIdentifiers/>").ok(), Some(vec![]));
        assert_eq!(
            write_acl(&[]),
            "<?xml version=\"1.0\" encoding=\"utf-8\"?><SignedIdentifiers />"
        );
    }

    #[test]
    fn errors() {
        let code = |b: &[u8]| parse_acl(b).err().map(|e| e.code);
        assert_eq!(code(b"<SignedIdentifiers>"), Some(ErrorCode::InvalidXmlDocument));
        assert_eq!(code(b"<Other/>"), Some(ErrorCode::InvalidXmlDocument));
        assert_eq!(
            code(b"<SignedIdentifiers><SignedIdentifier/></SignedIdentifiers>"),
            Some(ErrorCode::InvalidXmlDocument)
        );
        assert_eq!(
            code(b"<SignedIdentifiers><SignedIdentifier><Id>a</Id><AccessPolicy><Start>soon</Start></AccessPolicy></SignedIdentifier></SignedIdentifiers>"),
            Some(ErrorCode::InvalidXmlNodeValue)
        );
    }
}
