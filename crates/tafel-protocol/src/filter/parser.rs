//! Recursive descent over the tokens, following query.md §1:
//! `or` < `and` < `not` / comparison, with parentheses. Recursion is bounded by
//! [`MAX_DEPTH`] so hostile input cannot overflow the stack, and `and`/`or` chains
//! are collected into flat n-ary nodes.

use tafel_service::model::Value;
use tafel_service::query::{CompareOp, Expr};
use tafel_service::{Error, ErrorCode};

use super::error_at;
use super::lexer::{Kind, Token};

/// Maximum nesting of parentheses and `not`s.
pub(crate) const MAX_DEPTH: usize = 100;

pub(super) struct Parser<'a> {
    text: &'a str,
    tokens: Vec<Token<'a>>,
    at: usize,
    depth: usize,
    /// The lexical error that cut the tokens short, reported when parsing gets there.
    lex_error: Option<Error>,
}

/// One side of a comparison.
enum Operand {
    Property(String),
    Literal(Value),
}

fn keyword(word: &str) -> Option<&'static str> {
    const KEYWORDS: [&str; 12] = [
        "and", "or", "not", "eq", "ne", "gt", "ge", "lt", "le", "true", "false", "null",
    ];
    KEYWORDS.into_iter().find(|k| k.eq_ignore_ascii_case(word))
}

/// The comparison operators' keywords.
pub(crate) const OPERATORS: [(&str, CompareOp); 6] = [
    ("eq", CompareOp::Eq),
    ("ne", CompareOp::Ne),
    ("gt", CompareOp::Gt),
    ("ge", CompareOp::Ge),
    ("lt", CompareOp::Lt),
    ("le", CompareOp::Le),
];

fn compare_op(word: &str) -> Option<CompareOp> {
    OPERATORS
        .into_iter()
        .find(|(keyword, _)| keyword.eq_ignore_ascii_case(word))
        .map(|(_, op)| op)
}

fn is_arithmetic(word: &str) -> bool {
    ["add", "sub", "mul", "div", "mod"]
        .iter()
        .any(|k| k.eq_ignore_ascii_case(word))
}

impl<'a> Parser<'a> {
    pub(super) fn new(text: &'a str, tokens: Vec<Token<'a>>, lex_error: Option<Error>) -> Self {
        Parser {
            text,
            tokens,
            at: 0,
            depth: 0,
            lex_error,
        }
    }

    /// The whole filter: one `or` expression and nothing after it.
    pub(super) fn parse(mut self) -> Result<Expr, Error> {
        let expr = self.or()?;
        match self.peek() {
            Kind::End => self.lex_error.map_or(Ok(expr), Err),
            Kind::Close => Err(self.syntax("unmatched ')'")),
            _ => Err(self.syntax("expected 'and', 'or' or the end of the filter")),
        }
    }

    fn peek(&self) -> &Kind<'a> {
        self.tokens.get(self.at).map_or(&Kind::End, |t| &t.kind)
    }

    fn pos(&self) -> usize {
        self.tokens.get(self.at).or(self.tokens.last()).map_or(0, |t| t.pos)
    }

    fn bump(&mut self) {
        if self.at < self.tokens.len() {
            self.at += 1;
        }
    }

    /// An error at the current token, unless that is where the text stopped making
    /// tokens: then the lexical error is the first thing wrong.
    fn error(&self, code: ErrorCode, detail: &str) -> Error {
        match (&self.lex_error, self.peek()) {
            (Some(e), Kind::End) => e.clone(),
            _ => error_at(code, self.text, self.pos(), detail),
        }
    }

    fn syntax(&self, detail: &str) -> Error {
        self.error(ErrorCode::InvalidInput, detail)
    }

    fn unsupported(&self, detail: &str) -> Error {
        self.error(ErrorCode::NotImplemented, detail)
    }

    /// True (and consumes it) when the next token is the keyword `kw`.
    fn eat_keyword(&mut self, kw: &str) -> bool {
        if matches!(self.peek(), Kind::Word(w) if keyword(w) == Some(kw)) {
            self.bump();
            return true;
        }
        false
    }

    fn enter(&mut self) -> Result<(), Error> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(error_at(
                ErrorCode::InvalidInput,
                self.text,
                self.pos(),
                &format!("filter nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, Error> {
        let mut items = vec![self.and()?];
        while self.eat_keyword("or") {
            items.push(self.and()?);
        }
        Ok(flatten(items, true))
    }

    fn and(&mut self) -> Result<Expr, Error> {
        let mut items = vec![self.unary()?];
        while self.eat_keyword("and") {
            items.push(self.unary()?);
        }
        Ok(flatten(items, false))
    }

    fn unary(&mut self) -> Result<Expr, Error> {
        if self.eat_keyword("not") {
            self.enter()?;
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, Error> {
        if *self.peek() == Kind::Open {
            self.enter()?;
            self.bump();
            let inner = self.or()?;
            if *self.peek() != Kind::Close {
                return Err(self.syntax("expected ')'"));
            }
            self.bump();
            self.depth -= 1;
            return Ok(inner);
        }
        let left = self.operand()?;
        if let Kind::Word(w) = self.peek() {
            if let Some(op) = compare_op(w) {
                self.bump();
                let right_pos = self.pos();
                let right = self.operand()?;
                return self.comparison(left, op, right, right_pos);
            }
            if is_arithmetic(w) {
                return Err(self.unsupported("arithmetic operators are not supported"));
            }
        }
        match left {
            Operand::Property(name) => Ok(Expr::Property(name)),
            Operand::Literal(Value::Boolean(b)) => Ok(Expr::Bool(b)),
            Operand::Literal(_) => Err(self.syntax("expected a comparison operator")),
        }
    }

    fn comparison(&self, left: Operand, op: CompareOp, right: Operand, right_pos: usize) -> Result<Expr, Error> {
        match (left, right) {
            (Operand::Property(property), Operand::Literal(value)) => Ok(Expr::Compare { property, op, value }),
            (Operand::Literal(value), Operand::Property(property)) => Ok(Expr::Compare {
                property,
                op: op.flipped(),
                value,
            }),
            (Operand::Property(_), Operand::Property(_)) => Err(error_at(
                ErrorCode::InvalidInput,
                self.text,
                right_pos,
                "comparing two properties is not supported",
            )),
            (Operand::Literal(_), Operand::Literal(_)) => Err(error_at(
                ErrorCode::InvalidInput,
                self.text,
                right_pos,
                "comparing two literals is not supported",
            )),
        }
    }

    fn operand(&mut self) -> Result<Operand, Error> {
        let operand = match self.peek() {
            Kind::Lit(v) => Operand::Literal(v.clone()),
            Kind::Word(w) => {
                let w = *w;
                match keyword(w) {
                    Some("true") => Operand::Literal(Value::Boolean(true)),
                    Some("false") => Operand::Literal(Value::Boolean(false)),
                    Some("null") => return Err(self.unsupported("null is not supported")),
                    Some(_) => return Err(self.syntax("expected a property name or literal")),
                    None => {
                        if self.tokens.get(self.at + 1).map(|t| &t.kind) == Some(&Kind::Open) {
                            return Err(self.unsupported("functions are not supported"));
                        }
                        Operand::Property(w.to_owned())
                    }
                }
            }
            Kind::End => return Err(self.syntax("unexpected end of filter")),
            Kind::Open | Kind::Close => return Err(self.syntax("expected a property name or literal")),
        };
        self.bump();
        Ok(operand)
    }
}

/// One item stays itself; several become an n-ary node, absorbing nested nodes of
/// the same kind (`(a or b) or c` is `or(a, b, c)`).
fn flatten(mut items: Vec<Expr>, or: bool) -> Expr {
    if items.len() == 1 {
        if let Some(only) = items.pop() {
            return only;
        }
    }
    let mut flat = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Expr::Or(children) if or => flat.extend(children),
            Expr::And(children) if !or => flat.extend(children),
            other => flat.push(other),
        }
    }
    if or {
        Expr::Or(flat)
    } else {
        Expr::And(flat)
    }
}
