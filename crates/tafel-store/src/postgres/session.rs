//! What every new connection to the database is set up with, before its first
//! request: time limits, and the statements requests run, prepared in one round
//! trip so that no request pays a round trip to prepare one.

use std::time::Duration;

use deadpool_postgres::{ClientWrapper, Hook, HookError};
use futures_util::future::{try_join, try_join_all};

use super::schema;

/// The database ends a transaction left idle this long (a node cut off mid-write).
const IDLE_IN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);

const HOT: &[&str] = &[
    schema::GET_ENTITY,
    schema::GET_TABLE,
    schema::LOCK_TABLE,
    schema::READ_FOR_WRITE,
    schema::INSERT_ENTITIES,
    schema::INSERT_NEW_ENTITIES,
    schema::PUT_ENTITIES,
    schema::DELETE_ENTITIES,
    schema::SCAN_FROM,
    schema::SCAN_BETWEEN,
    schema::LIST_TABLES,
    schema::CREATE_TABLE,
    schema::MARK_DELETING,
    schema::DELETE_CHUNK_NAMED,
    schema::DROP_EMPTY_NAMED,
];

/// The pool's post-create hook. `statement_timeout`: the database ends a
/// statement that runs longer, so no request holds a transaction open past it
/// (scans read in bounded chunks well within it).
pub(super) fn hook(statement_timeout: Duration) -> Hook {
    let limits = format!(
        "SET statement_timeout = {}; SET idle_in_transaction_session_timeout = {}",
        statement_timeout.as_millis(),
        IDLE_IN_TRANSACTION_TIMEOUT.max(statement_timeout).as_millis()
    );
    Hook::async_fn(move |client: &mut ClientWrapper, _| {
        let limits = limits.clone();
        Box::pin(async move {
            let client: &ClientWrapper = client;
            try_join(
                client.batch_execute(&limits),
                try_join_all(HOT.iter().map(|sql| client.prepare_cached(sql))),
            )
            .await
            .map_err(HookError::Backend)?;
            Ok(())
        })
    })
}
