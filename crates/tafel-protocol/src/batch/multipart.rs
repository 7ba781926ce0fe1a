//! Generic `multipart/mixed` framing (RFC 2046 §5.1) as `$batch` bodies use it:
//! media-type parameters, splitting a body at its boundary delimiters, and MIME /
//! HTTP header blocks. Everything here is tolerant of bare-LF line endings and
//! never panics, whatever the input.

use std::borrow::Cow;

use memchr::memmem;
use tafel_service::Error;

/// Upper bound on header lines in one header block (MIME part headers or the
/// headers of one sub-request). Real clients send about ten.
pub(crate) const MAX_HEADERS_PER_BLOCK: usize = 128;

/// Longest boundary string accepted (RFC 2046 says 70; be a little lenient).
const MAX_BOUNDARY_LEN: usize = 256;

/// A parsed `Content-Type`: the lower-cased `type/subtype` and its parameters
/// (names lower-cased, values unquoted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MediaType {
    pub essence: String,
    pub params: Vec<(String, String)>,
}

impl MediaType {
    pub(crate) fn parse(value: &str) -> MediaType {
        let (essence, mut rest) = match value.find(';') {
            Some(i) => (value.get(..i).unwrap_or(value), value.get(i + 1..).unwrap_or("")),
            None => (value, ""),
        };
        let mut params = Vec::new();
        loop {
            rest = rest.trim_start_matches(|c: char| c == ';' || c.is_ascii_whitespace());
            if rest.is_empty() {
                break;
            }
            let name_end = rest.find(['=', ';']).unwrap_or(rest.len());
            let name = rest.get(..name_end).unwrap_or("").trim().to_ascii_lowercase();
            rest = rest.get(name_end..).unwrap_or("");
            let Some(after_eq) = rest.strip_prefix('=') else {
                // A parameter without a value: ignore it.
                continue;
            };
            let after_eq = after_eq.trim_start();
            let (value, remaining) = if let Some(quoted) = after_eq.strip_prefix('"') {
                unquote(quoted)
            } else {
                let end = after_eq.find(';').unwrap_or(after_eq.len());
                (
                    after_eq.get(..end).unwrap_or("").trim().to_string(),
                    after_eq.get(end..).unwrap_or(""),
                )
            };
            rest = remaining;
            if !name.is_empty() {
                params.push((name, value));
            }
        }
        MediaType {
            essence: essence.trim().to_ascii_lowercase(),
            params,
        }
    }

    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads a quoted-string body (after the opening quote) with backslash escapes.
/// Returns the unescaped value and the text after the closing quote (an unclosed
/// string runs to the end).
fn unquote(s: &str) -> (String, &str) {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (out, s.get(i + 1..).unwrap_or("")),
            '\\' => {
                if let Some((_, escaped)) = chars.next() {
                    out.push(escaped);
                }
            }
            _ => out.push(c),
        }
    }
    (out, "")
}

/// The boundary of a `multipart/mixed` content type, validated.
pub(crate) fn multipart_boundary(media: &MediaType, what: &str) -> Result<String, Error> {
    if media.essence != "multipart/mixed" {
        return Err(Error::invalid_input(format!(
            "The {what} content type must be multipart/mixed."
        )));
    }
    let boundary = media.param("boundary").unwrap_or("");
    if boundary.is_empty() {
        return Err(Error::invalid_input(format!(
            "The {what} content type has no boundary parameter."
        )));
    }
    if boundary.len() > MAX_BOUNDARY_LEN || boundary.contains(['\r', '\n']) {
        return Err(Error::invalid_input(format!("The {what} boundary is not valid.")));
    }
    Ok(boundary.to_string())
}

/// How a line that starts with `--boundary` continues.
enum Delimiter {
    /// `--boundary` + padding + line break; the part starts at this offset
    /// (relative to the end of `--boundary`).
    Open(usize),
    /// `--boundary--` + padding + line break or end of input.
    Close,
}

/// Classifies the bytes that follow `--boundary` on a line. `None` means the line
/// is not a delimiter (e.g. `--boundaryX`, where the boundary is only a prefix).
fn classify(rest: &[u8]) -> Option<Delimiter> {
    let (is_close, from) = match rest.strip_prefix(b"--") {
        Some(_) => (true, 2),
        None => (false, 0),
    };
    let tail = rest.get(from..)?;
    let pad = tail.iter().take_while(|b| **b == b' ' || **b == b'\t').count();
    let after_pad = tail.get(pad..)?;
    let line_break = if after_pad.is_empty() {
        0
    } else if after_pad.starts_with(b"\r\n") {
        2
    } else if after_pad.starts_with(b"\n") || after_pad == b"\r" {
        1
    } else {
        return None;
    };
    if is_close {
        Some(Delimiter::Close)
    } else {
        Some(Delimiter::Open(from + pad + line_break))
    }
}

/// Splits a multipart body into the contents of its body parts (headers and
/// content of each part, without the delimiters). The preamble and epilogue are
/// ignored. The line break that precedes each delimiter belongs to the
/// delimiter and is not part of the content.
///
/// `budget` is the number of parts the caller still allows; every part found
/// consumes one and running out is an error.
///
/// Tolerances: CRLF or bare LF; transport padding (spaces/tabs) after a
/// delimiter; a final *open* delimiter followed by nothing but whitespace is
/// taken as the closing one (early `@azure/data-tables` builds ended the batch
/// that way and Azure accepted it).
pub(crate) fn split_parts<'a>(body: &'a [u8], boundary: &str, budget: &mut usize) -> Result<Vec<&'a [u8]>, Error> {
    let mut dash_boundary = Vec::with_capacity(boundary.len() + 2);
    dash_boundary.extend_from_slice(b"--");
    dash_boundary.extend_from_slice(boundary.as_bytes());
    let finder = memmem::Finder::new(&dash_boundary);

    let mut parts = Vec::new();
    let mut current: Option<usize> = None;
    let mut search_from = 0usize;
    loop {
        let haystack = body.get(search_from..).unwrap_or_default();
        let Some(found) = finder.find(haystack) else {
            return Err(Error::invalid_input(if current.is_none() {
                format!("The multipart body contains no '--{boundary}' delimiter.")
            } else {
                format!("The multipart body has no closing '--{boundary}--' delimiter.")
            }));
        };
        let pos = search_from + found;
        search_from = pos + 1;
        let at_line_start = pos == 0 || body.get(pos - 1) == Some(&b'\n');
        if !at_line_start {
            continue;
        }
        let after = pos + dash_boundary.len();
        let Some(kind) = classify(body.get(after..).unwrap_or_default()) else {
            continue;
        };
        if let Some(start) = current {
            if *budget == 0 {
                return Err(Error::invalid_input("The batch request contains too many parts."));
            }
            *budget -= 1;
            parts.push(content_before(body, start, pos));
        }
        match kind {
            Delimiter::Close => return Ok(parts),
            Delimiter::Open(len) => {
                let next = after + len;
                let remaining = body.get(next..).unwrap_or_default();
                if current.is_some() && remaining.iter().all(u8::is_ascii_whitespace) {
                    return Ok(parts);
                }
                current = Some(next);
                search_from = next;
            }
        }
    }
}

/// The content between `start` and the delimiter at `delimiter`, without the
/// line break that precedes the delimiter.
fn content_before(body: &[u8], start: usize, delimiter: usize) -> &[u8] {
    let mut end = delimiter;
    if end > start && body.get(end - 1) == Some(&b'\n') {
        end -= 1;
        if end > start && body.get(end - 1) == Some(&b'\r') {
            end -= 1;
        }
    }
    body.get(start..end).unwrap_or_default()
}

/// Splits `data` at its first line break: the line (without `\r\n` / `\n`) and
/// the rest. Without a line break the whole input is the line.
pub(crate) fn split_line(data: &[u8]) -> (&[u8], &[u8]) {
    match memchr::memchr(b'\n', data) {
        Some(nl) => {
            let line = data.get(..nl).unwrap_or_default();
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            (line, data.get(nl + 1..).unwrap_or_default())
        }
        None => (data.strip_suffix(b"\r").unwrap_or(data), &[]),
    }
}

/// Headers in the order sent: (name as sent, trimmed value), borrowed from the
/// body unless a value was folded or not UTF-8 (two allocations a header saved,
/// about ten a batch operation: benchmark-history §24).
pub(crate) type Headers<'a> = Vec<(Cow<'a, str>, Cow<'a, str>)>;

/// `bytes` as text (invalid UTF-8 replaced) without leading and trailing
/// whitespace, borrowed when it is valid.
fn trimmed(bytes: &[u8]) -> Cow<'_, str> {
    // `from_utf8` checks valid text several times faster than `from_utf8_lossy`.
    let text = match std::str::from_utf8(bytes) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    };
    match text {
        Cow::Borrowed(s) => Cow::Borrowed(s.trim()),
        Cow::Owned(s) if s.trim().len() == s.len() => Cow::Owned(s),
        Cow::Owned(s) => Cow::Owned(s.trim().to_owned()),
    }
}

/// Parses a header block up to (and consuming) the blank line that ends it.
/// Returns the headers in order (names as sent, values trimmed, folded
/// continuation lines joined with a space) and the bytes after the blank line.
/// A block that runs to the end of the input has an empty rest.
pub(crate) fn parse_header_block(mut data: &[u8]) -> Result<(Headers<'_>, &[u8]), Error> {
    let mut headers: Headers<'_> = Vec::new();
    while !data.is_empty() {
        let (line, rest) = split_line(data);
        data = rest;
        if line.is_empty() {
            return Ok((headers, data));
        }
        if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
            let Some((_, value)) = headers.last_mut() else {
                return Err(Error::invalid_input("A header block starts with a continuation line."));
            };
            let more = String::from_utf8_lossy(line);
            let more = more.trim();
            if !more.is_empty() {
                let value = value.to_mut();
                if !value.is_empty() {
                    value.push(' ');
                }
                value.push_str(more);
            }
            continue;
        }
        let Some(colon) = memchr::memchr(b':', line) else {
            return Err(Error::invalid_input(format!(
                "Malformed header line '{}'.",
                truncate_for_message(line)
            )));
        };
        let name = trimmed(line.get(..colon).unwrap_or_default());
        if name.is_empty() {
            return Err(Error::invalid_input("A header line has an empty name."));
        }
        let value = trimmed(line.get(colon + 1..).unwrap_or_default());
        if headers.len() >= MAX_HEADERS_PER_BLOCK {
            return Err(Error::invalid_input("Too many headers in a batch part."));
        }
        headers.push((name, value));
    }
    Ok((headers, data))
}

/// First value of a header (case-insensitive name).
pub(crate) fn header<'h>(headers: &'h [(Cow<'_, str>, Cow<'_, str>)], name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_ref())
}

/// Whether a `Content-Type` value's `type/subtype` is `essence` (lower case):
/// what `MediaType::parse(value).essence == essence` says, without its allocations.
pub(crate) fn essence_is(value: &str, essence: &str) -> bool {
    let end = value.find(';').unwrap_or(value.len());
    value.get(..end).unwrap_or(value).trim().eq_ignore_ascii_case(essence)
}

/// A short, printable excerpt of client bytes for an error message.
pub(crate) fn truncate_for_message(bytes: &[u8]) -> String {
    const MAX: usize = 80;
    let text = String::from_utf8_lossy(bytes.get(..MAX.min(bytes.len())).unwrap_or_default());
    let mut out: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if bytes.len() > MAX {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(body: &str, boundary: &str) -> Result<Vec<String>, Error> {
        let mut budget = 1000;
        split_parts(body.as_bytes(), boundary, &mut budget).map(|parts| {
            parts
                .into_iter()
                .map(|p| String::from_utf8(p.to_vec()).unwrap())
                .collect()
        })
    }

    #[test]
    fn media_type_params() {
        let m = MediaType::parse("Multipart/Mixed; boundary=batch_1 ; charset=utf-8");
        assert_eq!(m.essence, "multipart/mixed");
        assert_eq!(m.param("BOUNDARY"), Some("batch_1"));
        assert_eq!(m.param("charset"), Some("utf-8"));

        let m = MediaType::parse("multipart/mixed;boundary=\"a \\\"b\\\"; c\";x=y");
        assert_eq!(m.param("boundary"), Some("a \"b\"; c"));
        assert_eq!(m.param("x"), Some("y"));

        let m = MediaType::parse("application/http");
        assert_eq!(m.essence, "application/http");
        assert!(m.params.is_empty());

        let m = MediaType::parse("multipart/mixed; flag; boundary=\"unclosed");
        assert_eq!(m.param("boundary"), Some("unclosed"));
    }

    #[test]
    fn boundary_validation() {
        let ok = MediaType::parse("multipart/mixed; boundary=\"q\"");
        assert_eq!(multipart_boundary(&ok, "batch").unwrap(), "q");
        for bad in [
            "application/json",
            "multipart/mixed",
            "multipart/mixed; boundary=",
            "multipart/mixed; boundary=\"\"",
            "multipart/related; boundary=x",
        ] {
            assert!(multipart_boundary(&MediaType::parse(bad), "batch").is_err(), "{bad}");
        }
        let long = format!("multipart/mixed; boundary={}", "x".repeat(300));
        assert!(multipart_boundary(&MediaType::parse(&long), "batch").is_err());
    }

    #[test]
    fn split_crlf_lf_preamble_epilogue_padding() {
        let body = "preamble\r\n--b\r\nA\r\n--b \t\r\nB\nline2\n--b--  \r\nepilogue";
        assert_eq!(split(body, "b").unwrap(), ["A", "B\nline2"]);
        let body = "--b\n\n--b\n--b--";
        assert_eq!(split(body, "b").unwrap(), ["", ""]);
    }

    #[test]
    fn split_ignores_non_delimiters() {
        // Boundary as a prefix of a longer token, or not at line start.
        let body = "--b\r\nx --b y\r\n--bb\r\n--b-x\r\n--b--";
        assert_eq!(split(body, "b").unwrap(), ["x --b y\r\n--bb\r\n--b-x"]);
        // "--b--" followed by text on the same line is not a close delimiter.
        let body = "--b\r\n--b--x\r\n--b--\r\n";
        assert_eq!(split(body, "b").unwrap(), ["--b--x"]);
    }

    #[test]
    fn split_errors() {
        assert!(split("no delimiter here", "b").is_err());
        assert!(split("--b\r\nunterminated", "b").is_err());
        assert!(split("--b\r\nA\r\n--bX", "b").is_err());
    }

    #[test]
    fn split_tolerates_final_open_delimiter() {
        assert_eq!(split("--b\r\nA\r\n--b\r\n", "b").unwrap(), ["A"]);
        assert_eq!(split("--b\r\nA\r\n--b", "b").unwrap(), ["A"]);
        // But a lone open delimiter with nothing at all is not a body.
        assert!(split("--b\r\n", "b").is_err());
    }

    #[test]
    fn split_budget() {
        let body = "--b\r\n1\r\n--b\r\n2\r\n--b\r\n3\r\n--b--";
        let mut budget = 2;
        assert!(split_parts(body.as_bytes(), "b", &mut budget).is_err());
        let mut budget = 3;
        assert_eq!(split_parts(body.as_bytes(), "b", &mut budget).unwrap().len(), 3);
        assert_eq!(budget, 0);
    }

    #[test]
    fn header_blocks() {
        let (h, rest) = parse_header_block(b"A: 1\r\nb:two  \r\n  folded\r\nC:\r\n\r\nbody\r\n").unwrap();
        assert_eq!(header(&h, "B"), Some("two folded"));
        let h: Vec<(String, String)> = h.into_iter().map(|(n, v)| (n.into_owned(), v.into_owned())).collect();
        assert_eq!(
            h,
            [
                ("A".to_string(), "1".to_string()),
                ("b".to_string(), "two folded".to_string()),
                ("C".to_string(), String::new()),
            ]
        );
        assert_eq!(rest, b"body\r\n");

        let (h, rest) = parse_header_block(b"A: 1").unwrap();
        assert_eq!(h.len(), 1);
        assert!(rest.is_empty());

        let (h, rest) = parse_header_block(b"\nbody").unwrap();
        assert!(h.is_empty());
        assert_eq!(rest, b"body");

        assert!(parse_header_block(b"no colon\r\n\r\n").is_err());
        assert!(parse_header_block(b" folded first\r\n\r\n").is_err());
        assert!(parse_header_block(b": empty name\r\n\r\n").is_err());
        let many = "X: 1\r\n".repeat(MAX_HEADERS_PER_BLOCK + 1);
        assert!(parse_header_block(many.as_bytes()).is_err());
    }
}
