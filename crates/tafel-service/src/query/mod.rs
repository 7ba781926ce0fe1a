//! Queries: the `$filter` tree, its evaluation against stored entities and table
//! names, and the planner that turns it into key ranges.

pub(crate) mod ast;
pub(crate) mod eval;
pub mod plan;
#[cfg(test)]
mod tests;

pub use ast::{pinned_keys, CompareOp, Expr, Pinned};
pub use eval::{eval_entity, eval_stored, eval_table_name};
pub use plan::{plan_entities, Plan};
