//! Expiry (TTL) policies of tables (docs/lifecycle.md, "Expiry (TTL)"): what a
//! policy is, where it is kept, and the one decision every read and write asks,
//! [`Expiry::expired`].
//!
//! A policy lives in the table's record, after its ACL in the blob the service
//! keeps there (`TableRecord::acl`), so both backends persist it, a backup and a
//! snapshot carry it, and deleting the table drops it. Requests read it through
//! [`Policies`], a cache refreshed after [`FRESH`]: a change made on this node
//! holds at once, one made on another node over the same PostgreSQL database
//! within that bound.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crate::blob::{Dec, Enc};
use crate::error::{Error, ErrorCode, Result};
use crate::model::codec::{self, ValueRef};
use crate::model::DateTime;

/// How long a cached policy is trusted before the table's record is read again.
pub const FRESH: Duration = Duration::from_secs(1);
/// The longest `seconds` a policy takes: 100 years.
pub const MAX_SECONDS: u64 = 100 * 366 * 86_400;
/// The format byte of the policy's part of the blob.
const FORMAT: u8 = b'T';

/// A table's expiry policy: an entity expires `seconds` after its last write
/// (its Timestamp), or at the Edm.DateTime value of `property`, whichever is
/// first. An entity without `property`, or with it of another type, expires
/// by `seconds` alone (never, without `seconds`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TtlPolicy {
    pub seconds: Option<u64>,
    pub property: Option<String>,
}

impl TtlPolicy {
    /// Checks a policy a caller asks for; the error names what is wrong.
    pub fn validate(self) -> Result<TtlPolicy> {
        if self.seconds.is_none() && self.property.is_none() {
            return Err(Error::invalid_input(
                "A TTL policy needs \"seconds\" (a number of seconds after each entity's last write) \
                 or \"property\" (the name of an Edm.DateTime property holding the expiry), or both.",
            ));
        }
        if let Some(s) = self.seconds {
            if s == 0 || s > MAX_SECONDS {
                return Err(Error::with_message(
                    ErrorCode::OutOfRangeInput,
                    format!("\"seconds\" must be from 1 to {MAX_SECONDS} (100 years); it is {s}."),
                ));
            }
        }
        if let Some(p) = &self.property {
            if matches!(p.as_str(), "PartitionKey" | "RowKey" | "Timestamp" | "ETag") {
                return Err(Error::with_message(
                    ErrorCode::PropertyNameInvalid,
                    format!(
                        "\"property\" names a system property ({p}); name a property of type Edm.DateTime, \
                         or use \"seconds\" for an expiry after the last write."
                    ),
                ));
            }
            crate::validate::property_name(p).map_err(|_| {
                Error::with_message(
                    ErrorCode::PropertyNameInvalid,
                    format!("\"property\" is not a valid property name: {p:?}."),
                )
            })?;
        }
        Ok(self)
    }
}

/// A policy as of one instant: what a request or a sweep decides with.
#[derive(Clone)]
pub(crate) struct Expiry {
    pub policy: Arc<TtlPolicy>,
    pub now: DateTime,
}

impl Expiry {
    /// Whether the stored entity `bytes` has expired. Corrupt bytes have not
    /// (their read fails on its own).
    pub fn expired(&self, bytes: &[u8]) -> bool {
        self.expires_at(bytes).is_some_and(|at| at <= self.now)
    }

    /// When the stored entity `bytes` expires under the policy: the earlier of
    /// its last write plus `seconds` and its expiry property (an Edm.DateTime;
    /// any other type sets none); `None` if neither applies.
    pub fn expires_at(&self, bytes: &[u8]) -> Option<DateTime> {
        let by_age = self.policy.seconds.and_then(|s| {
            let ts = codec::timestamp(bytes)?;
            Some(ts.after(Duration::from_secs(s)))
        });
        let by_property = match &self.policy.property {
            Some(p) => match codec::lookup(bytes, p) {
                Some(ValueRef::DateTime(at)) => Some(at),
                _ => None,
            },
            None => None,
        };
        by_age.into_iter().chain(by_property).min()
    }
}

/// The policy's part of a table's blob, appended after the ACL's.
pub(crate) fn encode(policy: &TtlPolicy) -> Vec<u8> {
    let mut e = Enc::new(FORMAT);
    e.u64(policy.seconds.unwrap_or(0))
        .opt_bool(policy.property.as_ref().map(|_| true))
        .str(policy.property.as_deref().unwrap_or(""));
    e.finish()
}

/// The policy in what follows a table's ACL in its blob; none when nothing does.
pub(crate) fn decode(tail: &[u8]) -> Result<Option<TtlPolicy>> {
    if tail.is_empty() {
        return Ok(None);
    }
    let corrupt = || Error::internal("corrupt stored TTL policy");
    let mut d = Dec::new(tail, FORMAT).ok_or_else(corrupt)?;
    let seconds = d.u64().ok_or_else(corrupt)?;
    let has_property = d.opt_bool().ok_or_else(corrupt)?.is_some();
    let property = d.str().ok_or_else(corrupt)?;
    Ok(Some(TtlPolicy {
        seconds: (seconds != 0).then_some(seconds),
        property: has_property.then_some(property),
    }))
}

struct Cached {
    policy: Option<Arc<TtlPolicy>>,
    read: Instant,
}

/// Each table's policy as last read, by account and by table name as requests
/// spell it (a lookup on every request allocates nothing); changes reach every
/// spelling of the name, as Azure's names are case-insensitive.
/// When a table is next due for a sweep, and under which policy.
type Due = (DateTime, Arc<TtlPolicy>);

#[derive(Default)]
pub(crate) struct Policies {
    map: RwLock<HashMap<String, HashMap<String, Cached>>>,
    /// Entities the sweep removed (`tafel_expired_entities_total`).
    pub expired: AtomicU64,
    /// When each table swept last is next due for a sweep, and under which
    /// policy that was worked out (`ops/expiry.rs`).
    dues: std::sync::Mutex<HashMap<(String, String), Due>>,
}

impl Policies {
    /// The cached policy, when read less than [`FRESH`] ago.
    pub fn fresh(&self, account: &str, table: &str) -> Option<Option<Arc<TtlPolicy>>> {
        let map = self.map.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let c = map.get(account)?.get(table)?;
        (c.read.elapsed() < FRESH).then(|| c.policy.clone())
    }

    /// Caches `policy` as read for the table spelt `table`.
    pub fn put(&self, account: &str, table: &str, policy: Option<Arc<TtlPolicy>>) {
        let mut map = self.map.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.entry(account.to_owned()).or_default().insert(
            table.to_owned(),
            Cached {
                policy,
                read: Instant::now(),
            },
        );
    }

    /// Forgets the table spelt `table` (it was not found).
    pub fn forget_spelling(&self, account: &str, table: &str) {
        let mut map = self.map.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(tables) = map.get_mut(account) {
            tables.remove(table);
        }
    }

    /// Forgets the table under every spelling of its name (its policy changed,
    /// or it was deleted): an operator's act, rare enough to walk the account.
    pub fn forget(&self, account: &str, table: &str) {
        let mut map = self.map.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(tables) = map.get_mut(account) {
            tables.retain(|name, _| !name.eq_ignore_ascii_case(table));
        }
        drop(map);
        let mut dues = self.dues.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        dues.retain(|(a, t), _| !(a == account && t.eq_ignore_ascii_case(table)));
    }

    /// The tables last seen with a policy: the sweep's work.
    pub fn with_policy(&self) -> Vec<(String, String, Arc<TtlPolicy>)> {
        let map = self.map.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.iter()
            .flat_map(|(account, tables)| {
                tables.iter().filter_map(move |(table, c)| {
                    let policy = c.policy.clone()?;
                    Some((account.clone(), table.clone(), policy))
                })
            })
            .collect()
    }

    /// Whether a sweep of the table under `policy` is not yet due at `now`.
    pub fn not_due(&self, account: &str, table: &str, policy: &TtlPolicy, now: DateTime) -> bool {
        let dues = self.dues.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // A policy changed since (on another node too) voids the due time.
        matches!(dues.get(&(account.to_owned(), table.to_owned())), Some((at, p)) if now < *at && **p == *policy)
    }

    pub fn set_due(&self, account: String, table: String, policy: Arc<TtlPolicy>, at: DateTime) {
        let mut dues = self.dues.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        dues.insert((account, table), (at, policy));
    }

    /// Every table is due at once (the test clock moved).
    pub fn all_due(&self) {
        self.dues
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Property, Value};

    fn policy(seconds: Option<u64>, property: Option<&str>) -> TtlPolicy {
        TtlPolicy {
            seconds,
            property: property.map(str::to_owned),
        }
    }

    #[test]
    fn bad_policies_are_refused_naming_the_field() {
        for (p, says) in [
            (policy(None, None), "seconds"),
            (policy(Some(0), None), "seconds"),
            (policy(Some(MAX_SECONDS + 1), None), "seconds"),
            (policy(None, Some("Timestamp")), "system property"),
            (policy(None, Some("RowKey")), "system property"),
            (policy(None, Some("1abc")), "valid property name"),
            (policy(None, Some("")), "valid property name"),
        ] {
            let e = p
                .clone()
                .validate()
                .err()
                .map(|e| e.message.into_owned())
                .unwrap_or_default();
            assert!(e.contains(says), "{p:?}: {e}");
        }
        assert!(policy(Some(60), Some("ExpiresAt")).validate().is_ok());
    }

    #[test]
    fn expiry_by_age_and_by_property() {
        let at = |s: i64| DateTime::from_unix_seconds(1_700_000_000 + s);
        let entity = |ts, props: Vec<Property>| codec::encode(ts, &props);
        let prop = |name: &str, value| Property {
            name: name.into(),
            value,
        };
        let by_age = Expiry {
            policy: Arc::new(policy(Some(60), None)),
            now: at(100),
        };
        assert!(by_age.expired(&entity(at(40), vec![])));
        assert!(!by_age.expired(&entity(at(41), vec![])));
        let by_property = Expiry {
            policy: Arc::new(policy(None, Some("ExpiresAt"))),
            now: at(100),
        };
        assert!(by_property.expired(&entity(at(99), vec![prop("ExpiresAt", Value::DateTime(at(100)))])));
        assert!(!by_property.expired(&entity(at(99), vec![prop("ExpiresAt", Value::DateTime(at(101)))])));
        assert!(!by_property.expired(&entity(at(0), vec![])));
        let text = prop("ExpiresAt", Value::String("2000-01-01T00:00:00Z".into()));
        assert!(!by_property.expired(&entity(at(0), vec![text])));
        assert!(!by_property.expired(b"not an entity"));
    }

    #[test]
    fn the_policy_round_trips_after_an_acl() {
        let p = policy(Some(3600), Some("ExpiresAt"));
        let mut blob = crate::acl::encode(&[]);
        blob.extend_from_slice(&encode(&p));
        let tail = crate::acl::decode_parts(&blob)
            .map(|(_, t)| t.to_vec())
            .unwrap_or_default();
        assert_eq!(decode(&tail).ok().flatten(), Some(p));
        assert_eq!(decode(&[]).ok().flatten(), None);
        assert!(crate::acl::decode(&blob).is_ok_and(|ids| ids.is_empty()));
    }
}
