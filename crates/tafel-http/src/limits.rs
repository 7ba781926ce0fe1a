//! Bounds on what clients can make the server hold: connections, request
//! heads and bodies in memory, and how long a request's head and body may take. Beyond
//! them clients wait (a connection in the listen backlog, a body whose sends
//! stall), or get an answer, never an unbounded share of the machine.
//!
//! Body memory is shared three ways: the whole budget, a share per account and a
//! smaller share per credential within it (the account's key, one SAS, one
//! token). A body takes room in all three, so one tenant, or one leaked SAS,
//! can hold at most its share, never the memory another account's writes need.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::head_budget::HeadBudget;

/// Bytes of body memory one permit of the body budget stands for.
pub(crate) const PERMIT_BYTES: usize = 1024;

/// One account's share of the body budget: a quarter (at least one largest body).
const ACCOUNT_SHARE: usize = 4;
/// One credential's share of the body budget: an eighth (at least one largest body).
const CREDENTIAL_SHARE: usize = 8;
/// Credentials are spread over this many shares, by a hash of who they are: a
/// fixed number, however many SASes or tokens an attacker presents.
const CREDENTIAL_STRIPES: usize = 64;

/// The limits, as configured (`tafel serve --max-connections`, …).
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Bytes of request bodies held in memory at once, over all requests.
    pub body_memory: usize,
    /// Bytes of request heads held in memory at once, over all connections
    /// (`head_budget.rs`).
    pub head_memory: usize,
    /// How long a request's head may take to arrive (and a TLS client's first byte).
    pub header_timeout: Duration,
    /// How long a request's body may take to arrive once its head has.
    pub body_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_connections: 16_384,
            body_memory: 256 << 20,
            head_memory: 64 << 20,
            header_timeout: Duration::from_secs(30),
            // Azure's longest `timeout` for a table operation.
            body_timeout: Duration::from_secs(30),
        }
    }
}

/// The limits in force: the settings, and the body memory left.
pub struct Limits {
    pub settings: Settings,
    body: BodyBudget,
    pub(crate) heads: Arc<HeadBudget>,
}

impl Limits {
    pub fn new(settings: Settings) -> Self {
        Limits {
            body: BodyBudget::new(&settings),
            heads: HeadBudget::new(settings.head_memory),
            settings,
        }
    }

    /// The body memory `credential` of `account` may take from.
    pub(crate) fn body_share(&self, account: &str, credential: &Credential) -> Share {
        self.body.share(account, credential)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::new(Settings::default())
    }
}

/// Who is spending body memory, within an account: the share it draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Credential<'a> {
    /// The account's key (every Shared Key request of the account), or no credential.
    Key,
    /// A shared access signature, by its `sig`.
    Sas(&'a str),
    /// A bearer token, by its text.
    Token(&'a [u8]),
}

impl<'a> Credential<'a> {
    /// The credential a request presents: its SAS, its bearer token, or the key.
    pub(crate) fn of(headers: &'a http::HeaderMap, query: &'a [(String, String)]) -> Self {
        if let Some((_, sig)) = query.iter().find(|(k, _)| k == "sig") {
            return Credential::Sas(sig);
        }
        match headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        {
            Some(token) => Credential::Token(token),
            None => Credential::Key,
        }
    }
}

struct BodyBudget {
    total: Arc<Semaphore>,
    /// Permits of the whole budget, of one account's share, of one credential's.
    total_permits: usize,
    account_permits: usize,
    credential_permits: usize,
    /// Made on an account's first body; only authenticated accounts get here,
    /// so the map is as small as the configured accounts.
    accounts: Mutex<HashMap<String, Arc<Semaphore>>>,
    stripes: Vec<Arc<Semaphore>>,
}

impl BodyBudget {
    fn new(settings: &Settings) -> Self {
        let total_permits = (settings.body_memory / PERMIT_BYTES).clamp(1, Semaphore::MAX_PERMITS);
        let largest = crate::body::MAX_BODY / PERMIT_BYTES;
        let share = |parts: usize| (total_permits / parts).max(largest).min(total_permits);
        let credential_permits = share(CREDENTIAL_SHARE);
        BodyBudget {
            total: Arc::new(Semaphore::new(total_permits)),
            total_permits,
            account_permits: share(ACCOUNT_SHARE),
            credential_permits,
            accounts: Mutex::new(HashMap::new()),
            stripes: (0..CREDENTIAL_STRIPES)
                .map(|_| Arc::new(Semaphore::new(credential_permits)))
                .collect(),
        }
    }

    fn share(&self, account: &str, credential: &Credential) -> Share {
        let account_sem = {
            let mut accounts = self.accounts.lock().unwrap_or_else(PoisonError::into_inner);
            match accounts.get(account) {
                Some(s) => s.clone(),
                None => {
                    let s = Arc::new(Semaphore::new(self.account_permits));
                    accounts.insert(account.to_owned(), s.clone());
                    s
                }
            }
        };
        let mut h = std::hash::DefaultHasher::new();
        (account, credential).hash(&mut h);
        let stripe = (h.finish() % self.stripes.len() as u64) as usize;
        Share {
            sems: [self.stripes[stripe].clone(), account_sem, self.total.clone()],
            caps: [self.credential_permits, self.account_permits, self.total_permits],
        }
    }
}

/// The body memory one request may draw from: its credential's share, its
/// account's and the whole budget, taken in that order.
pub(crate) struct Share {
    sems: [Arc<Semaphore>; 3],
    caps: [usize; 3],
}

impl Share {
    /// Room for `bytes` more of request body, waiting for it if need be; held
    /// until the [`Room`] is dropped. More than a share waits for all of it.
    pub(crate) async fn room(&self, bytes: usize, into: &mut Room) {
        let wanted = bytes.div_ceil(PERMIT_BYTES).max(1);
        for (i, sem) in self.sems.iter().enumerate() {
            let n = u32::try_from(wanted.min(self.caps[i])).unwrap_or(u32::MAX);
            let permit = match sem.clone().acquire_many_owned(n).await {
                Ok(p) => p,
                // Never closed; should one be, waiting is pointless.
                Err(_) => std::future::pending().await,
            };
            match &mut into.held[i] {
                Some(held) => held.merge(permit),
                slot @ None => *slot = Some(permit),
            }
        }
        into.bytes += wanted * PERMIT_BYTES;
    }
}

/// Body memory held: given back when dropped.
#[derive(Default)]
pub(crate) struct Room {
    held: [Option<OwnedSemaphorePermit>; 3],
    bytes: usize,
}

impl Room {
    /// Bytes of body this room has been taken for.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime")
    }

    fn limits(body_memory: usize) -> Limits {
        Limits::new(Settings {
            body_memory,
            ..Default::default()
        })
    }

    async fn take(share: &Share, bytes: usize, within: Duration) -> Option<Room> {
        let mut room = Room::default();
        tokio::time::timeout(within, share.room(bytes, &mut room)).await.ok()?;
        Some(room)
    }

    #[test]
    fn one_account_cannot_take_another_accounts_room() {
        let limits = limits(64 * MIB);
        let wait = Duration::from_millis(50);
        rt().block_on(async {
            let mut held = Vec::new();
            // Many credentials of one account: the account's quarter, then nothing.
            for i in 0..64 {
                let sig = format!("sig{i}");
                let share = limits.body_share("attacker", &Credential::Sas(&sig));
                match take(&share, 4 * MIB, wait).await {
                    Some(r) => held.push(r),
                    None => break,
                }
            }
            let taken: usize = held.iter().map(Room::bytes).sum();
            assert_eq!(taken, 16 * MIB, "an account holds a quarter of the budget");
            let other = limits.body_share("victim", &Credential::Key);
            assert!(
                take(&other, 4 * MIB, wait).await.is_some(),
                "another account still has room"
            );
        });
    }

    #[test]
    fn one_credential_cannot_take_its_accounts_whole_share() {
        let limits = limits(256 * MIB);
        let wait = Duration::from_millis(50);
        rt().block_on(async {
            let sas = limits.body_share("acct", &Credential::Sas("leaked"));
            let mut held = Vec::new();
            while let Some(r) = take(&sas, 4 * MIB, wait).await {
                held.push(r);
            }
            assert_eq!(held.len(), 8, "a credential holds an eighth of the budget");
            let key = limits.body_share("acct", &Credential::Key);
            assert!(
                take(&key, 4 * MIB, wait).await.is_some(),
                "the account's key still has room"
            );
            drop(held);
            assert!(take(&sas, 4 * MIB, wait).await.is_some(), "room comes back when let go");
        });
    }

    #[test]
    fn a_small_budget_still_admits_one_largest_body() {
        let limits = limits(4 * MIB);
        rt().block_on(async {
            let share = limits.body_share("a", &Credential::Key);
            let room = take(&share, 4 * MIB, Duration::from_millis(50)).await;
            assert!(room.is_some());
        });
    }
}
