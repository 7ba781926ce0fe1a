//! Queries: the `$filter` tree, its evaluation against stored entities and table
//! names, and the planner that turns it into key ranges.

pub mod ast;

pub use ast::{CompareOp, Expr};
