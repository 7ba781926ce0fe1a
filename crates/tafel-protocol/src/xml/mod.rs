//! The small XML documents of the service and ACL operations (operations.md
//! §4–§7): a tree reader over `quick-xml` events, and a writer. No DTDs and no
//! entities beyond the five predefined ones and character references, so no
//! external resources are ever resolved.

use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::Event;
use quick_xml::Reader;
use tafel_service::model::DateTime;
use tafel_service::{Error, ErrorCode, Result};

/// The deepest element nesting accepted (the documents have four levels).
const MAX_DEPTH: usize = 16;

/// One element: its local name (namespace prefix dropped), its text content and
/// its child elements, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Element {
    pub name: String,
    pub text: String,
    pub children: Vec<Element>,
}

impl Element {
    /// The first child named `name`.
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    /// The first child named `name`, or `InvalidXmlDocument`.
    pub fn required(&self, name: &str) -> Result<&Element> {
        self.child(name).ok_or_else(|| {
            Error::with_message(
                ErrorCode::InvalidXmlDocument,
                format!("The element {} lacks the required element {name}.", self.name),
            )
        })
    }

    /// The text, whitespace-trimmed.
    pub fn value(&self) -> &str {
        self.text.trim()
    }

    /// `true`/`false` (any case), or `InvalidXmlNodeValue`.
    pub fn bool(&self) -> Result<bool> {
        match self.value() {
            v if v.eq_ignore_ascii_case("true") => Ok(true),
            v if v.eq_ignore_ascii_case("false") => Ok(false),
            v => Err(node_value(&self.name, v)),
        }
    }

    /// A non-negative integer, or `InvalidXmlNodeValue`.
    pub fn u64(&self) -> Result<u64> {
        self.value().parse().map_err(|_| node_value(&self.name, self.value()))
    }

    /// An ISO 8601 date-time (or a bare date, meaning midnight UTC); empty is
    /// `None`; anything else is `InvalidXmlNodeValue`.
    pub fn datetime(&self) -> Result<Option<DateTime>> {
        let v = self.value();
        if v.is_empty() {
            return Ok(None);
        }
        parse_datetime(v).map(Some).ok_or_else(|| node_value(&self.name, v))
    }
}

/// ISO 8601 as clients write dates in ACLs and SAS tokens; a bare date is midnight UTC.
pub(crate) fn parse_datetime(s: &str) -> Option<DateTime> {
    if s.len() == 10 {
        return DateTime::parse(&format!("{s}T00:00:00Z"));
    }
    DateTime::parse(s)
}

pub fn node_value(element: &str, value: &str) -> Error {
    Error::with_message(
        ErrorCode::InvalidXmlNodeValue,
        format!("The value '{value}' of the element {element} is not valid."),
    )
}

fn malformed(detail: impl std::fmt::Display) -> Error {
    Error::with_message(
        ErrorCode::InvalidXmlDocument,
        format!("XML specified is not syntactically valid: {detail}"),
    )
}

/// Parses a document into its root element; `None` for an empty (or
/// whitespace-only) body. Malformed XML is `InvalidXmlDocument`.
pub fn parse(body: &[u8]) -> Result<Option<Element>> {
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let text = std::str::from_utf8(body).map_err(|_| malformed("the body is not UTF-8"))?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    let mut reader = Reader::from_str(text);
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    let named = |n: &[u8]| String::from_utf8_lossy(n).into_owned();
    loop {
        let event = reader.read_event().map_err(malformed)?;
        match event {
            Event::Start(_) | Event::Empty(_) if root.is_some() && stack.is_empty() => {
                return Err(malformed("more than one root element"));
            }
            Event::Start(e) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(malformed("elements nest too deeply"));
                }
                stack.push(Element {
                    name: named(e.local_name().as_ref().as_bytes()),
                    ..Element::default()
                });
            }
            Event::Empty(e) => {
                let el = Element {
                    name: named(e.local_name().as_ref().as_bytes()),
                    ..Element::default()
                };
                match stack.last_mut() {
                    Some(parent) => parent.children.push(el),
                    None => root = Some(el),
                }
            }
            Event::End(_) => {
                let el = stack.pop().ok_or_else(|| malformed("unbalanced end tag"))?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(el),
                    None => root = Some(el),
                }
            }
            Event::Text(t) => {
                let content = t.xml10_content();
                match stack.last_mut() {
                    Some(el) => el.text.push_str(&content),
                    None if content.trim().is_empty() => {}
                    None => return Err(malformed("text outside the root element")),
                }
            }
            Event::CData(c) => match stack.last_mut() {
                Some(el) => el.text.push_str(&c.xml10_content()),
                None => return Err(malformed("CDATA outside the root element")),
            },
            Event::GeneralRef(r) => {
                let el = stack
                    .last_mut()
                    .ok_or_else(|| malformed("reference outside the root element"))?;
                match r.resolve_char_ref().map_err(malformed)? {
                    Some(c) => el.text.push(c),
                    None => {
                        let name: &str = &r;
                        let s = resolve_predefined_entity(name)
                            .ok_or_else(|| malformed(format!("unknown entity &{name};")))?;
                        el.text.push_str(s);
                    }
                }
            }
            Event::DocType(_) => return Err(malformed("document type declarations are not accepted")),
            Event::Decl(_) | Event::Comment(_) | Event::PI(_) => {}
            Event::Eof => break,
        }
    }
    if !stack.is_empty() {
        return Err(malformed("the document ends inside an element"));
    }
    Ok(root)
}

/// Escapes text for element content.
pub(crate) fn escape(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains(['<', '>', '&', '"', '\'']) {
        return std::borrow::Cow::Borrowed(s);
    }
    std::borrow::Cow::Owned(crate::error_body::xml_escape(s))
}

/// Builds a document; every method appends.
pub struct Writer(String);

impl Default for Writer {
    fn default() -> Self {
        Writer::new()
    }
}

impl Writer {
    /// Starts with the XML declaration.
    pub fn new() -> Self {
        Writer(String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?>"))
    }

    pub fn open(&mut self, name: &str) -> &mut Self {
        self.0.push('<');
        self.0.push_str(name);
        self.0.push('>');
        self
    }

    pub fn close(&mut self, name: &str) -> &mut Self {
        self.0.push_str("</");
        self.0.push_str(name);
        self.0.push('>');
        self
    }

    /// `<name />`
    pub fn empty(&mut self, name: &str) -> &mut Self {
        self.0.push('<');
        self.0.push_str(name);
        self.0.push_str(" />");
        self
    }

    /// `<name>text</name>`, text escaped.
    pub fn text(&mut self, name: &str, text: &str) -> &mut Self {
        self.open(name);
        self.0.push_str(&escape(text));
        self.close(name)
    }

    pub fn bool(&mut self, name: &str, v: bool) -> &mut Self {
        self.text(name, if v { "true" } else { "false" })
    }

    pub fn finish(self) -> String {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_trees() {
        let doc = "\u{feff}<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<!-- c --><a:Root xmlns:a=\"urn:x\">\n  <Id>x &amp; &#65;&#x42; <![CDATA[<y>]]></Id>\n  <Empty/>\n  <Nested><Leaf> v </Leaf></Nested>\n</a:Root>";
        let root = parse(doc.as_bytes()).expect("parses").expect("has a root");
        assert_eq!(root.name, "Root");
        assert_eq!(root.child("Id").map(|e| e.text.as_str()), Some("x & AB <y>"));
        assert_eq!(root.child("Empty").map(|e| e.children.len()), Some(0));
        assert_eq!(
            root.child("Nested").and_then(|n| n.child("Leaf")).map(Element::value),
            Some("v")
        );
        assert!(root.required("Missing").is_err());
        assert_eq!(parse(b"  \n").ok(), Some(None));
    }

    #[test]
    fn refuses_malformed_documents() {
        for bad in [
            &b"<a><b></a>"[..],
            b"<a>",
            b"<a></a><b/>",
            b"text",
            b"<a>&unknown;</a>",
            b"<!DOCTYPE a [<!ENTITY e SYSTEM \"file:///etc/passwd\">]><a>&e;</a>",
            b"<a>\xff</a>",
        ] {
            let err = parse(bad).map_err(|e| e.code);
            assert_eq!(
                err,
                Err(ErrorCode::InvalidXmlDocument),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let deep = "<a>".repeat(MAX_DEPTH + 1) + &"</a>".repeat(MAX_DEPTH + 1);
        assert!(parse(deep.as_bytes()).is_err());
    }

    #[test]
    fn values() {
        let el = |t: &str| Element {
            name: "X".into(),
            text: t.into(),
            children: vec![],
        };
        assert_eq!(el(" True ").bool().ok(), Some(true));
        assert_eq!(el("no").bool().map_err(|e| e.code), Err(ErrorCode::InvalidXmlNodeValue));
        assert_eq!(el("42").u64().ok(), Some(42));
        assert!(el("-1").u64().is_err());
        assert_eq!(el("").datetime().ok(), Some(None));
        assert_eq!(
            el("2024-06-01").datetime().ok().flatten().map(|d| d.to_iso()),
            Some("2024-06-01T00:00:00.0000000Z".into())
        );
        assert!(el("yesterday").datetime().is_err());
    }

    #[test]
    fn writes() {
        let mut w = Writer::new();
        w.open("A").text("B", "x<&>").bool("C", true).empty("D").close("A");
        assert_eq!(
            w.finish(),
            "<?xml version=\"1.0\" encoding=\"utf-8\"?><A><B>x&lt;&amp;&gt;</B><C>true</C><D /></A>"
        );
    }
}
