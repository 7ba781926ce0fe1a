//! Reading an account's change feed (`$changes`, docs/change-feed.md): the same
//! access check a query of the table makes, a SAS's key range applied to the
//! changes, the store's refusals as Azure-style errors, and the long poll.

use std::time::{Duration, Instant};

use tafel_store::feed::{ChangesFrom, ChangesPage, ChangesRead, ChangesRequest};

use super::{Ctx, Service};
use crate::access::Action;
use crate::error::{Error, ErrorCode, Result};

/// The most changes one page holds.
pub const MAX_CHANGES: usize = 1000;
/// The longest a long poll waits.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// One read of the feed, as asked.
#[derive(Debug, Clone)]
pub struct ChangesQuery {
    /// Only this table's changes; `None`: every table (account-wide rights).
    pub table: Option<String>,
    pub from: ChangesFrom,
    pub limit: usize,
    /// Hold the request this long while there is nothing to return.
    pub wait: Duration,
}

impl Service {
    /// One page of the account's changes, in commit order.
    pub async fn read_changes(&self, ctx: &Ctx, query: ChangesQuery) -> Result<ChangesPage> {
        ctx.access.check(Action::ReadEntity, query.table.as_deref(), None)?;
        let deadline = Instant::now() + query.wait.min(MAX_WAIT);
        let mut request = ChangesRequest {
            from: query.from,
            limit: query.limit.clamp(1, MAX_CHANGES),
            table: query.table,
        };
        let mut waited = false;
        loop {
            let mut page = match self.store.read_changes(&ctx.account, &request).await? {
                ChangesRead::Page(page) => page,
                ChangesRead::NotEnabled => return Err(Error::new(ErrorCode::ChangeFeedNotEnabled)),
                ChangesRead::Expired { oldest } => {
                    return Err(Error::with_message(
                        ErrorCode::ChangePositionExpired,
                        format!(
                            "The change feed no longer holds the changes after this position: \
                             retention dropped them, and the oldest change kept is at position \
                             {oldest}. Copy the table(s) again, then read the feed from after=latest."
                        ),
                    ))
                }
                ChangesRead::Undone { restored } => {
                    return Err(Error::with_message(
                        ErrorCode::ChangePositionExpired,
                        format!(
                            "The store was restored to a snapshot whose change feed ends at position \
                             {restored}: the changes read after that position were undone (their \
                             positions are never given out again). Copy the table(s) again, then \
                             read the feed from after=latest."
                        ),
                    ))
                }
                ChangesRead::Rewound { head } => {
                    return Err(Error::with_message(
                        ErrorCode::ChangePositionExpired,
                        format!(
                            "The position is past the change feed's newest ({head}): this store does \
                             not hold the feed it came from (a backup restored with tafel restore \
                             starts an empty feed). Copy the table(s) again, then read the feed \
                             from after=latest."
                        ),
                    ))
                }
            };
            // A service SAS with a key range reads only the changes inside it.
            if let Some(range) = ctx.access.key_range() {
                page.changes
                    .retain(|c| c.key.as_ref().is_none_or(|k| range.contains(k.as_bytes())));
            }
            if !page.changes.is_empty() || Instant::now() >= deadline {
                if waited {
                    // What the credential allowed when the poll began may have been
                    // revoked while it waited: no change goes out unless it still holds.
                    ctx.still_authorized().await?;
                }
                return Ok(page);
            }
            waited = true;
            // Nothing yet: go on from what this read passed, once more is committed.
            request.from = ChangesFrom::After(page.next_after);
            self.store.wait_for_changes(&ctx.account, page.head, deadline).await;
        }
    }
}
