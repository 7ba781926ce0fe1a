//! A fault rule's effect on one request (`faults/`): what it does before the
//! request runs (a delay, an error in its place, a shorter page) and what it
//! does to the answer after (a delay, an error or no answer at all).

use std::time::Duration;

use tafel_protocol::operation::{self, Operation};
use tafel_protocol::{Request, Response, Route};
use tafel_service::Error;

use super::{AppState, Meta};
use crate::faults::{Effect, Fault, Injected, RuleSet, Target};

/// What a fired rule left to do once the request has run.
#[derive(Default)]
pub(super) struct Fired {
    /// Entities a query's page is cut to.
    pub page_limit: Option<usize>,
    delay_after: Option<Duration>,
    /// The answer replaced by an error (`Some(Some)`) or withheld (`Some(None)`).
    lost: Option<Option<Injected>>,
}

/// Fires the rules for `request`: waits or fails as the rule says before it runs.
/// Called after authentication: a fault never lets a request through that would
/// have been refused, nor hides its 403.
pub(super) async fn before(
    state: &AppState,
    account: &str,
    route: &Route<'_>,
    request: &Request,
    meta: &mut Meta,
) -> Result<Fired, Error> {
    let mut fired = Fired::default();
    let Some(set) = state.ops.faults.active() else {
        return Ok(fired);
    };
    let Some(f) = fire(&set, account, route, request) else {
        return Ok(fired);
    };
    fired.delay_after = f.delay_after;
    meta.fault = f.effect.kind();
    if let Some(d) = f.delay {
        tokio::time::sleep(d).await;
    }
    match f.effect {
        Effect::Delay => {}
        Effect::Error(e) => {
            meta.fault_status = Some(e.status);
            return Err(e.error());
        }
        Effect::EndPageEarly(n) => fired.page_limit = Some(n),
        Effect::LoseAnswer(e) => fired.lost = Some(e),
    }
    Ok(fired)
}

impl Fired {
    /// The answer the client gets for `answer`, the operation having been applied.
    pub(super) async fn after(self, answer: Result<Response, Error>, meta: &mut Meta) -> Result<Response, Error> {
        if let Some(d) = self.delay_after {
            tokio::time::sleep(d).await;
        }
        match self.lost {
            None => answer,
            Some(Some(e)) => {
                meta.fault_status = Some(e.status);
                Err(e.error())
            }
            Some(None) => {
                meta.lose_answer = true;
                answer
            }
        }
    }
}

/// The fault a rule injects into `request`, if one fires for it.
fn fire(set: &RuleSet, account: &str, route: &Route<'_>, request: &Request) -> Option<Fault> {
    let operation = route.operation();
    let batch;
    let (table, partition) = match operation {
        // A batch's table and partition are in its body.
        Operation::EntityGroupTransaction => {
            batch = route.batch().and_then(|b| operation::batch_target(account, b));
            batch
                .as_ref()
                .map_or((None, None), |(t, p)| (Some(t.as_str()), p.as_deref()))
        }
        _ => {
            let partition = match set.wants_partition() {
                false => None,
                true => route.partition().or_else(|| route.insert_partition()),
            };
            (route.table(), partition)
        }
    };
    set.fire(&Target {
        account,
        table,
        partition,
        operation,
        method: request.method.as_str(),
    })
}
