//! `$filter` parser: OData filter text to the service layer's [`tafel_service::query::Expr`].
