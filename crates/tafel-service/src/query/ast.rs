//! The `$filter` expression tree. Produced by the protocol layer's parser,
//! evaluated and planned here. `and`/`or` are n-ary so that long chains of
//! hundreds of terms stay flat (no deep recursion).

use crate::model::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

impl CompareOp {
    /// Every operator, for code that goes through them all.
    pub const ALL: [CompareOp; 6] = [
        CompareOp::Eq,
        CompareOp::Ne,
        CompareOp::Gt,
        CompareOp::Ge,
        CompareOp::Lt,
        CompareOp::Le,
    ];

    /// The operator with its operands swapped (`'a' lt RowKey` ⇔ `RowKey gt 'a'`).
    pub fn flipped(self) -> CompareOp {
        match self {
            CompareOp::Eq => CompareOp::Eq,
            CompareOp::Ne => CompareOp::Ne,
            CompareOp::Gt => CompareOp::Lt,
            CompareOp::Ge => CompareOp::Le,
            CompareOp::Lt => CompareOp::Gt,
            CompareOp::Le => CompareOp::Ge,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
    /// `property op literal`; a literal on the left is normalised by flipping `op`.
    Compare {
        property: String,
        op: CompareOp,
        value: Value,
    },
    /// A bare property used as a condition: true when it is Boolean `true`.
    Property(String),
    /// A `true`/`false` literal used as a condition.
    Bool(bool),
}
