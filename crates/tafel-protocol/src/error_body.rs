//! Error bodies (errors.md §1): OData JSON for JSON requests, XML otherwise.

use tafel_service::model::DateTime;
use tafel_service::Error;

use crate::json::{content_type, write_json_str, MetadataLevel};

fn message(err: &Error, request_id: &str, index: Option<usize>) -> String {
    let prefix = index.map(|i| format!("{i}:")).unwrap_or_default();
    format!(
        "{prefix}{}\nRequestId:{request_id}\nTime:{}",
        err.message,
        DateTime::now()
    )
}

/// `{"odata.error":{"code":…,"message":{"lang":"en-US","value":…}}}`; `index`
/// prefixes the message as batch responses do (`"2:…"`). Only these two members, as
/// Azure sends: azure-data-tables 12.0 fails to decode an error with any other (an
/// authentication failure's detail is in the XML form and the server log only).
pub fn json(err: &Error, level: MetadataLevel, request_id: &str, index: Option<usize>) -> (&'static str, Vec<u8>) {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"odata.error\":{\"code\":");
    write_json_str(&mut out, err.code.as_str());
    out.extend_from_slice(b",\"message\":{\"lang\":\"en-US\",\"value\":");
    write_json_str(&mut out, &message(err, request_id, index));
    out.extend_from_slice(b"}}}");
    (content_type(level), out)
}

/// Cosmos DB for Table's error body: OData JSON whatever the request asked for
/// (Azure's recorded Cosmos answers carry `application/json; odata=fullmetadata`,
/// to XML requests too), `lang` `en-us`, and the message followed by the activity
/// and request ids as Cosmos appends them (its own build string there is Tafel's).
pub fn cosmos_json(err: &Error, request_id: &str) -> (&'static str, Vec<u8>) {
    let value = format!(
        "{}\r\nActivityId: {request_id}, tafel/{}\nRequestID:{request_id}\n",
        err.message,
        env!("CARGO_PKG_VERSION")
    );
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"odata.error\":{\"code\":");
    write_json_str(&mut out, err.code.as_str());
    out.extend_from_slice(b",\"message\":{\"lang\":\"en-us\",\"value\":");
    write_json_str(&mut out, &value);
    out.extend_from_slice(b"}}}");
    ("application/json; odata=fullmetadata", out)
}

pub(crate) fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

pub fn xml(err: &Error, request_id: &str) -> (&'static str, Vec<u8>) {
    let mut s = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>{}</Code><Message>{}</Message>",
        err.code.as_str(),
        xml_escape(&message(err, request_id, None))
    );
    if let Some(d) = &err.detail {
        s.push_str(&format!(
            "<AuthenticationErrorDetail>{}</AuthenticationErrorDetail>",
            xml_escape(d)
        ));
    }
    s.push_str("</Error>");
    ("application/xml", s.into_bytes())
}
