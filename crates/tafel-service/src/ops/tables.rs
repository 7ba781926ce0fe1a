//! Create, delete and query tables.

use super::{Ctx, Service};
use crate::access::Action;
use crate::error::{Error, ErrorCode, Result};
use crate::query::eval_table_name;
use crate::query::Expr;
use crate::validate;

pub(crate) const MAX_PAGE: usize = 1000;

#[derive(Debug, Clone, Default)]
pub struct TableQuery {
    pub filter: Option<Expr>,
    pub top: Option<usize>,
    /// The `NextTableName` token of the previous page.
    pub next_table: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct TablePage {
    pub names: Vec<String>,
    pub next_table: Option<String>,
}

impl Service {
    /// Creates a table; returns its name as stored.
    pub async fn create_table(&self, ctx: &Ctx, name: &str) -> Result<String> {
        self.create_table_named_by(ctx, name, validate::table_name).await
    }

    /// [`Service::create_table`] with another service's naming rule (Cosmos DB's).
    pub async fn create_table_named_by(&self, ctx: &Ctx, name: &str, rule: fn(&str) -> Result<()>) -> Result<String> {
        ctx.access.check(Action::CreateTable, Some(name), None)?;
        rule(name)?;
        if self.store.create_table(&ctx.account, name).await? {
            Ok(name.to_owned())
        } else {
            Err(Error::new(ErrorCode::TableAlreadyExists))
        }
    }

    /// Creates a table unless one of the name exists, under the Table API's
    /// naming rule: an operator's declaration (the config file's `[[table]]`),
    /// checked by no caller's grants. Whether it was created.
    pub async fn ensure_table(&self, account: &str, name: &str) -> Result<bool> {
        validate::table_name(name)?;
        Ok(self.store.create_table(account, name).await?)
    }

    pub async fn delete_table(&self, ctx: &Ctx, name: &str) -> Result<()> {
        self.delete_table_named_by(ctx, name, |n| {
            validate::table_name(n).map_err(|_| Error::new(ErrorCode::TableNotFound))
        })
        .await
    }

    /// [`Service::delete_table`] with another service's naming rule (Cosmos DB's).
    pub async fn delete_table_named_by(&self, ctx: &Ctx, name: &str, rule: fn(&str) -> Result<()>) -> Result<()> {
        ctx.access.check(Action::DeleteTable, Some(name), None)?;
        rule(name)?;
        let deleted = self.store.delete_table(&ctx.account, name).await;
        // Its policy went with its record; a new table of the name has none.
        self.forget_ttl(&ctx.account, name);
        if deleted? {
            Ok(())
        } else {
            Err(Error::new(ErrorCode::TableNotFound))
        }
    }

    /// `TableNotFound` unless `table` exists, once the caller may do `action` on
    /// it: for a request below a table name (an account URL that ends in one) that
    /// Azure answers with the table's absence before anything else about it.
    pub async fn require_table(&self, ctx: &Ctx, table: &str, action: Action) -> Result<()> {
        ctx.access.check(action, Some(table), None)?;
        match self.store.get_table(&ctx.account, table).await? {
            Some(_) => Ok(()),
            None => Err(Error::new(ErrorCode::TableNotFound)),
        }
    }

    /// Query Tables addressed at one table (`GET /Tables('name')`, the legacy SDKs'
    /// `exists`): its stored name, or `ResourceNotFound` as Azure answers.
    pub async fn get_table(&self, ctx: &Ctx, name: &str) -> Result<String> {
        ctx.access.check(Action::QueryTables, None, None)?;
        match self.store.get_table(&ctx.account, name).await? {
            Some(t) => Ok(t.name),
            None => Err(Error::new(ErrorCode::ResourceNotFound)),
        }
    }

    pub async fn query_tables(&self, ctx: &Ctx, q: &TableQuery) -> Result<TablePage> {
        ctx.access.check(Action::QueryTables, None, None)?;
        let want = q.top.unwrap_or(MAX_PAGE).clamp(1, MAX_PAGE);
        let mut from = q.next_table.clone();
        let mut page = TablePage::default();
        loop {
            // One extra row tells whether another page exists.
            let batch = self
                .store
                .list_tables(&ctx.account, from.as_deref(), MAX_PAGE + 1)
                .await?;
            let exhausted = batch.len() <= MAX_PAGE;
            for (i, t) in batch.iter().enumerate() {
                if i == MAX_PAGE {
                    from = Some(t.name.clone());
                    break;
                }
                if q.filter.as_ref().is_none_or(|f| eval_table_name(f, &t.name)) {
                    if page.names.len() == want {
                        page.next_table = Some(t.name.clone());
                        return Ok(page);
                    }
                    page.names.push(t.name.clone());
                }
            }
            if exhausted {
                return Ok(page);
            }
        }
    }
}
