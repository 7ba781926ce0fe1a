//! `$filter` parser: OData filter text to the service layer's [`tafel_service::query::Expr`].
//!
//! The grammar and literal forms are those of spec/query.md §1–§3. Syntax errors
//! are 400 `InvalidInput` naming the character position; features Azure does not
//! implement (functions, arithmetic, `null`, property paths) are 501
//! `NotImplemented`, as Azure answers them.

mod lexer;
mod parser;
#[cfg(test)]
mod tests;

use tafel_service::query::Expr;
use tafel_service::{Error, ErrorCode};

/// Parses percent-decoded `$filter` text. Keywords and type prefixes are
/// case-insensitive; whitespace between tokens is free. An empty filter is an
/// error: callers treat an absent or blank `$filter` as "no filter" themselves.
///
/// A filter of boolean literals alone (`false`, `not true`) is accepted: Azure
/// answers it, and health checks send `$filter=false` to probe a table or the
/// table list without reading any row.
pub fn parse_filter(text: &str) -> Result<Expr, Error> {
    let (tokens, lex_error) = lexer::tokenize(text);
    parser::Parser::new(text, tokens, lex_error).parse()
}

/// The filter as quoted in messages, cut short so errors stay small.
fn shown(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// Character (not byte) position of byte offset `pos`.
fn char_pos(text: &str, pos: usize) -> usize {
    text.get(..pos).map_or(pos, |s| s.chars().count())
}

fn syntax_error(text: &str, pos: usize, detail: &str) -> Error {
    error_at(ErrorCode::InvalidInput, text, pos, detail)
}

/// `<kind> at position <n> in '<filter>': <detail>.`
fn error_at(code: ErrorCode, text: &str, pos: usize, detail: &str) -> Error {
    let kind = match code {
        ErrorCode::NotImplemented => "Unsupported filter feature",
        ErrorCode::OutOfRangeInput => "Value out of range",
        _ => "Syntax error",
    };
    Error::with_message(
        code,
        format!(
            "{kind} at position {} in '{}': {detail}.",
            char_pos(text, pos),
            shown(text)
        ),
    )
}
