//! What a request counts against Azure's scalability targets (`--azure-limits`),
//! known before it runs: its table, its partition when it names one, and its
//! entities. Azure's performance checklist for Table storage: "each entity that
//! is inserted, updated, deleted, or scanned counts toward this target. So a
//! batch insert that contains 100 entities would count as 100 entities"; a
//! partition's target uses "the same counting". A query's entities are known only
//! once it has run ([`Response::entities`](crate::Response)), so the caller
//! charges them after the fact (to the account, and to the partition when its
//! filter pins one) and the *next* requests are refused.
//!
//! Only called while the limits are on; it may parse an insert's or a batch's
//! body a second time (the handler parses it again), which costs nothing when off.

use tafel_service::query::pinned_keys;

use crate::batch::BatchKind;
use crate::operation::{self, Operation};
use crate::route::Route;

/// A request's count toward the targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    /// The table, as addressed (the caller folds its case: table names are
    /// case-insensitive), or `None` for an operation on no table.
    pub table: Option<String>,
    /// The PartitionKey, when the request addresses one partition.
    pub partition: Option<String>,
    /// Entities known before it runs; a query's are added after it ran.
    pub entities: u32,
    /// Whether it is a query, whose returned entities are charged after it ran.
    pub query: bool,
}

impl Charge {
    fn one(table: Option<String>, partition: Option<String>) -> Self {
        Charge {
            table,
            partition,
            entities: 1,
            query: false,
        }
    }
}

/// What a request of `account`, classified as `route` (its body read), counts, by the route's
/// operation. A request the handler will refuse as malformed still counts as one
/// transaction on the account: Azure counts every request against the account's rate.
pub fn of(account: &str, route: &Route<'_>) -> Charge {
    let table = || route.table().map(str::to_owned);
    match route.operation() {
        Operation::QueryEntities => Charge {
            table: table(),
            partition: route.filter().and_then(|f| pinned_keys(f).partition.map(str::to_owned)),
            entities: 0,
            query: true,
        },
        Operation::InsertEntity => Charge::one(table(), route.insert_partition().map(str::to_owned)),
        Operation::EntityGroupTransaction => batch(account, route),
        // An entity's operations, and what else names one (refused by its handler).
        _ => match route.partition() {
            Some(partition) => Charge::one(table(), Some(partition.to_owned())),
            None => Charge::one(None, None),
        },
    }
}

/// A batch counts each of its operations, all in one partition (Azure's rule
/// for entity group transactions; the handler refuses a batch that breaks it).
fn batch(account: &str, route: &Route<'_>) -> Charge {
    let Some(parsed) = route.batch() else {
        return Charge::one(None, None);
    };
    let mut charge = Charge {
        table: None,
        partition: None,
        entities: u32::try_from(parsed.operations.len()).unwrap_or(u32::MAX).max(1),
        query: false,
    };
    for sub in &parsed.operations {
        // A query batch's table-wide reads name no partition to charge.
        let Some((table, partition)) = operation::sub_request_target(account, sub) else {
            continue;
        };
        if partition.is_none() && parsed.kind != BatchKind::Changeset {
            continue;
        }
        charge.table = Some(table);
        charge.partition = partition;
        if charge.partition.is_some() {
            break;
        }
    }
    charge
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Request;
    use bytes::Bytes;
    use http::{HeaderMap, Method};

    fn request(method: Method, path: &str, body: &str) -> Request {
        Request {
            method,
            path: path.to_owned(),
            query: Vec::new(),
            headers: HeaderMap::new(),
            body: Bytes::from(body.to_owned()),
        }
    }

    /// What `req` counts, classified as the pipeline classifies it.
    fn charge(req: &Request) -> Charge {
        let mut route = Route::of(&req.method, &req.path, &req.query, &req.headers);
        route.read_body(req, true);
        of("acct", &route)
    }

    #[test]
    fn a_point_operation_counts_one_entity_of_its_partition() {
        let c = charge(&request(Method::DELETE, "/t(PartitionKey='p',RowKey='r')", ""));
        assert_eq!(c, Charge::one(Some("t".into()), Some("p".into())));
    }

    #[test]
    fn an_insert_counts_one_entity_of_the_partition_in_its_body() {
        let c = charge(&request(
            Method::POST,
            "/t",
            r#"{"RowKey":"r","PartitionKey":"p","n":1}"#,
        ));
        assert_eq!(c, Charge::one(Some("t".into()), Some("p".into())));
        let c = charge(&request(Method::POST, "/t", "not json"));
        assert_eq!(c, Charge::one(Some("t".into()), None));
    }

    /// `POST /t/Tables` was routed Unknown while its handler inserted into `t`
    /// and this charged an insert: metrics and fault rules mis-named a real insert.
    #[test]
    fn post_to_t_tables_is_routed_and_charged_as_an_insert_into_t() {
        let req = request(Method::POST, "/t/Tables", r#"{"PartitionKey":"p","RowKey":"r"}"#);
        let route = Route::of(&req.method, &req.path, &req.query, &req.headers);
        assert_eq!(route.operation(), Operation::InsertEntity);
        assert_eq!(route.table(), Some("t"));
        assert_eq!(charge(&req), Charge::one(Some("t".into()), Some("p".into())));
    }

    #[test]
    fn a_query_is_charged_after_it_ran() {
        let c = charge(&request(Method::GET, "/t()", ""));
        assert!(c.query);
        assert_eq!(c.entities, 0);
    }

    #[test]
    fn a_query_of_one_partition_counts_against_it() {
        let mut req = request(Method::GET, "/t()", "");
        req.query = vec![("$filter".into(), "RowKey gt '1' and PartitionKey eq 'p'".into())];
        assert_eq!(charge(&req).partition.as_deref(), Some("p"));
        req.query = vec![("$filter".into(), "PartitionKey eq 'p' or PartitionKey eq 'q'".into())];
        assert_eq!(charge(&req).partition, None);
    }

    #[test]
    fn a_batch_counts_each_operation_in_its_partition() {
        let mut body = String::from("--b\r\nContent-Type: multipart/mixed; boundary=c\r\n\r\n");
        for i in 0..3 {
            body.push_str(&format!(
                "--c\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n\
                 POST http://h/acct/t HTTP/1.1\r\nContent-Type: application/json\r\n\r\n\
                 {{\"PartitionKey\":\"p\",\"RowKey\":\"{i}\"}}\r\n"
            ));
        }
        body.push_str("--c--\r\n--b--\r\n");
        let mut req = request(Method::POST, "/$batch", &body);
        req.headers
            .insert("content-type", "multipart/mixed; boundary=b".parse().unwrap());
        let c = charge(&req);
        assert_eq!(c.entities, 3);
        assert_eq!(c.partition.as_deref(), Some("p"));
        assert_eq!(c.table.as_deref(), Some("t"));
    }
}
