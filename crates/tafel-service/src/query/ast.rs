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

/// The keys a filter pins by `eq` to a string in a conjunction, whatever else it
/// asks: a request's route tells a point query from a scan by it, and
/// `--azure-limits` charges a query to the partition it names.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pinned<'e> {
    pub partition: Option<&'e str>,
    pub row: Option<&'e str>,
}

/// What [`Pinned`] `filter` pins, in one walk (the first `eq` of each key wins).
pub fn pinned_keys(filter: &Expr) -> Pinned<'_> {
    fn walk<'e>(e: &'e Expr, pinned: &mut Pinned<'e>) {
        match e {
            Expr::Compare {
                property,
                op: CompareOp::Eq,
                value: Value::String(v),
            } => {
                let slot = match property.as_str() {
                    "PartitionKey" => &mut pinned.partition,
                    "RowKey" => &mut pinned.row,
                    _ => return,
                };
                slot.get_or_insert(v.as_str());
            }
            Expr::And(all) => all.iter().for_each(|t| walk(t, pinned)),
            _ => {}
        }
    }
    let mut pinned = Pinned::default();
    walk(filter, &mut pinned);
    pinned
}
