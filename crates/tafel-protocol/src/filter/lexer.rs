//! Tokens of a `$filter`: parentheses, words (property names and keywords, told
//! apart by the parser) and literals, each with its byte offset for error messages.

use tafel_service::model::{DateTime, Guid, Value};
use tafel_service::{Error, ErrorCode};

use super::{error_at, syntax_error};

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Kind<'a> {
    Open,
    Close,
    Word(&'a str),
    Lit(Value),
    End,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Token<'a> {
    pub kind: Kind<'a>,
    /// Byte offset in the filter text.
    pub pos: usize,
}

fn is_word_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Splits `text` into tokens, ending with [`Kind::End`]. A lexical error ends the
/// tokens early (with `End` at its position) and is returned beside them, so that
/// the parser can still report an earlier error first.
pub(super) fn tokenize(text: &str) -> (Vec<Token<'_>>, Option<Error>) {
    let mut lexer = Lexer {
        text,
        b: text.as_bytes(),
        at: 0,
    };
    let mut out = Vec::new();
    loop {
        let start = lexer.at;
        match lexer.next() {
            Ok(token) => {
                let end = token.kind == Kind::End;
                out.push(token);
                if end {
                    return (out, None);
                }
            }
            Err(e) => {
                out.push(Token {
                    kind: Kind::End,
                    pos: start,
                });
                return (out, Some(e));
            }
        }
    }
}

struct Lexer<'a> {
    text: &'a str,
    b: &'a [u8],
    at: usize,
}

impl<'a> Lexer<'a> {
    fn peek(&self, ahead: usize) -> Option<u8> {
        self.b.get(self.at + ahead).copied()
    }

    fn next(&mut self) -> Result<Token<'a>, Error> {
        while self.peek(0).is_some_and(|c| c.is_ascii_whitespace()) {
            self.at += 1;
        }
        let pos = self.at;
        let kind = match self.peek(0) {
            None => Kind::End,
            Some(b'(') => {
                self.at += 1;
                Kind::Open
            }
            Some(b')') => {
                self.at += 1;
                Kind::Close
            }
            Some(q @ (b'\'' | b'"')) => Kind::Lit(Value::String(self.string(q)?)),
            Some(c) if c.is_ascii_digit() => self.number()?,
            Some(b'-') if self.peek(1).is_some_and(|c| c.is_ascii_digit()) => self.number()?,
            Some(b'/') => {
                return Err(error_at(
                    ErrorCode::NotImplemented,
                    self.text,
                    pos,
                    "property paths are not supported",
                ))
            }
            Some(_) => {
                let c = self.text[pos..].chars().next().unwrap_or_default();
                if !is_word_start(c) {
                    return Err(syntax_error(self.text, pos, &format!("unexpected character '{c}'")));
                }
                self.word()?
            }
        };
        Ok(Token { kind, pos })
    }

    /// A quoted string; the quote character doubled stands for itself.
    fn string(&mut self, quote: u8) -> Result<String, Error> {
        let open = self.at;
        self.at += 1;
        let mut out = String::new();
        loop {
            let rest = &self.b[self.at..];
            let Some(i) = rest.iter().position(|&c| c == quote) else {
                return Err(syntax_error(self.text, open, "unterminated string literal"));
            };
            out.push_str(&self.text[self.at..self.at + i]);
            self.at += i + 1;
            if self.peek(0) == Some(quote) {
                out.push(quote as char);
                self.at += 1;
            } else {
                return Ok(out);
            }
        }
    }

    fn word(&mut self) -> Result<Kind<'a>, Error> {
        let start = self.at;
        let len = self.text[start..]
            .char_indices()
            .find(|&(_, c)| !is_word_char(c))
            .map_or(self.text.len() - start, |(i, _)| i);
        self.at += len;
        let word = &self.text[start..self.at];
        if self.peek(0) != Some(b'\'') {
            return Ok(Kind::Word(word));
        }
        // A known type prefix glued to a quote is a typed literal; any other word
        // is left alone so that `eq'a'` still reads as `eq 'a'`.
        let prefix = word.to_ascii_lowercase();
        if !matches!(prefix.as_str(), "datetime" | "guid" | "x" | "binary") {
            return Ok(Kind::Word(word));
        }
        let open = self.at;
        self.at += 1;
        let Some(len) = self.b[self.at..].iter().position(|&c| c == b'\'') else {
            return Err(syntax_error(self.text, open, "unterminated literal"));
        };
        let body = &self.text[self.at..self.at + len];
        self.at += len + 1;
        let value = match prefix.as_str() {
            "datetime" => Value::DateTime(self.datetime(body, start)?),
            "guid" => Value::Guid(
                Guid::parse(body)
                    .filter(|_| body.len() == 36)
                    .ok_or_else(|| syntax_error(self.text, start, "invalid guid literal"))?,
            ),
            _ => Value::Binary(hex(body).ok_or_else(|| syntax_error(self.text, start, "invalid binary literal"))?),
        };
        self.end_of_literal()?;
        Ok(Kind::Lit(value))
    }

    fn datetime(&self, body: &str, pos: usize) -> Result<DateTime, Error> {
        let dt = DateTime::parse(body).ok_or_else(|| syntax_error(self.text, pos, "invalid datetime literal"))?;
        if !dt.in_azure_range() {
            return Err(error_at(
                ErrorCode::OutOfRangeInput,
                self.text,
                pos,
                "datetime literal outside 1601-01-01..9999-12-31",
            ));
        }
        Ok(dt)
    }

    /// `-?digits(.digits)?([eE][+-]?digits)?` with an optional `L` (Int64) or `D`
    /// (Double) suffix. Plain integers are Int32 and must fit.
    fn number(&mut self) -> Result<Kind<'a>, Error> {
        let start = self.at;
        if self.peek(0) == Some(b'-') {
            self.at += 1;
        }
        self.digits();
        let mut is_double = false;
        if self.peek(0) == Some(b'.') && self.peek(1).is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
            self.digits();
            is_double = true;
        }
        if matches!(self.peek(0), Some(b'e' | b'E')) {
            let sign = usize::from(matches!(self.peek(1), Some(b'+' | b'-')));
            if self.peek(1 + sign).is_some_and(|c| c.is_ascii_digit()) {
                self.at += 1 + sign;
                self.digits();
                is_double = true;
            }
        }
        let digits = &self.text[start..self.at];
        let value = match self.peek(0) {
            Some(b'L' | b'l') if !is_double => {
                self.at += 1;
                Value::Int64(digits.parse().map_err(|_| {
                    error_at(
                        ErrorCode::InvalidInput,
                        self.text,
                        start,
                        "Edm.Int64 literal out of range",
                    )
                })?)
            }
            Some(b'D' | b'd') => {
                self.at += 1;
                self.double(digits, start)?
            }
            _ if is_double => self.double(digits, start)?,
            _ => Value::Int32(digits.parse().map_err(|_| {
                error_at(
                    ErrorCode::InvalidInput,
                    self.text,
                    start,
                    "integer literal out of range for Edm.Int32 (use the L suffix for Edm.Int64)",
                )
            })?),
        };
        self.end_of_literal()?;
        Ok(Kind::Lit(value))
    }

    fn digits(&mut self) {
        while self.peek(0).is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
    }

    fn double(&self, digits: &str, start: usize) -> Result<Value, Error> {
        match digits.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(Value::Double(v)),
            _ => Err(error_at(
                ErrorCode::InvalidInput,
                self.text,
                start,
                "Edm.Double literal out of range",
            )),
        }
    }

    /// A number or typed literal must not run into the next word (`5and`, `1.5M`).
    fn end_of_literal(&self) -> Result<(), Error> {
        match self.text[self.at..].chars().next() {
            Some(c) if is_word_char(c) || c == '.' || c == '\'' => Err(syntax_error(
                self.text,
                self.at,
                "literal must be followed by whitespace or a parenthesis",
            )),
            _ => Ok(()),
        }
    }
}

fn hex(s: &str) -> Option<Vec<u8>> {
    let pairs = s.as_bytes().chunks_exact(2);
    if !pairs.remainder().is_empty() {
        return None;
    }
    pairs
        .map(|pair| {
            let hi = (pair[0] as char).to_digit(16)?;
            let lo = (pair[1] as char).to_digit(16)?;
            Some((hi * 16 + lo) as u8)
        })
        .collect()
}
