//! Query Tables (all, or one by name), Create Table, Delete Table.

use crate::cosmos::{self, Dialect};
use http::StatusCode;
use tafel_service::{Result, Service, TableQuery};

use super::{apply_prefer, open_query_body, prefer, require_json_body, top};
use crate::filter::parse_filter;
use crate::json::{content_type, decode_table_name, write_json_str, MetadataLevel};
use crate::request::{Context, Request, Response};

fn write_table(out: &mut Vec<u8>, cx: &Context, level: MetadataLevel, name: &str, single: bool) {
    out.push(b'{');
    if level != MetadataLevel::No && single {
        out.extend_from_slice(b"\"odata.metadata\":");
        write_json_str(out, &format!("{}/$metadata#Tables/@Element", cx.base_url));
        out.push(b',');
    }
    if level == MetadataLevel::Full {
        out.extend_from_slice(b"\"odata.type\":");
        write_json_str(out, &format!("{}.Tables", cx.caller.account));
        out.extend_from_slice(b",\"odata.id\":");
        write_json_str(out, &format!("{}/Tables('{name}')", cx.base_url));
        out.extend_from_slice(b",\"odata.editLink\":");
        write_json_str(out, &format!("Tables('{name}')"));
        out.push(b',');
    }
    out.extend_from_slice(b"\"TableName\":");
    write_json_str(out, name);
    out.push(b'}');
}

pub async fn query(svc: &Service, cx: &Context, req: &Request, level: MetadataLevel) -> Result<Response> {
    let filter = match req.param("$filter").filter(|f| !f.trim().is_empty()) {
        Some(f) => Some(parse_filter(f)?),
        None => None,
    };
    let q = TableQuery {
        filter,
        top: top(req)?,
        next_table: req.param("NextTableName").map(str::to_owned),
    };
    let page = svc.query_tables(&cx.caller, &q).await?;
    let mut out = Vec::with_capacity(64 + page.names.len() * 48);
    open_query_body(&mut out, level, &cx.base_url, "Tables");
    for (i, name) in page.names.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_table(&mut out, cx, level, name, false);
    }
    out.extend_from_slice(b"]}");
    let mut resp = Response::with_body(StatusCode::OK, content_type(level), out);
    if let Some(next) = &page.next_table {
        resp.set(crate::names::X_MS_CONTINUATION_NEXTTABLENAME, next)?;
    }
    Ok(resp)
}

/// `GET /Tables('name')`: that one table as a single `@Element`, not a `value` array.
pub async fn get(svc: &Service, cx: &Context, name: &str, level: MetadataLevel) -> Result<Response> {
    let name = svc.get_table(&cx.caller, name).await?;
    let mut out = Vec::with_capacity(128);
    write_table(&mut out, cx, level, &name, true);
    Ok(Response::with_body(StatusCode::OK, content_type(level), out))
}

pub async fn create(svc: &Service, cx: &Context, req: &Request, level: MetadataLevel) -> Result<Response> {
    require_json_body(req)?;
    let name = decode_table_name(&req.body)?;
    let name = match cx.dialect {
        Dialect::Storage => svc.create_table(&cx.caller, &name).await?,
        Dialect::Cosmos => svc.create_table_named_by(&cx.caller, &name, cosmos::table_name).await?,
    };
    let mut out = Vec::with_capacity(128);
    write_table(&mut out, cx, level, &name, true);
    let mut resp = Response::with_body(StatusCode::CREATED, content_type(level), out);
    // Escaped: a Cosmos table's name may be any Unicode, which a header cannot hold.
    let location = format!("{}/Tables('{}')", cx.base_url, cosmos::escape_name(&name));
    resp.set(crate::names::LOCATION, &location)?;
    resp.set(crate::names::DATASERVICEID, &location)?;
    apply_prefer(&mut resp, prefer(req));
    Ok(resp)
}

pub async fn delete(svc: &Service, cx: &Context, name: &str) -> Result<Response> {
    match cx.dialect {
        Dialect::Storage => svc.delete_table(&cx.caller, name).await?,
        Dialect::Cosmos => {
            svc.delete_table_named_by(&cx.caller, name, cosmos::table_name_in_path)
                .await?
        }
    }
    Ok(Response::new(StatusCode::NO_CONTENT))
}
