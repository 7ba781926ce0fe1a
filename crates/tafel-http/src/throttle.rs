//! Azure's scalability targets for Table storage (`--azure-limits`): a partition
//! answers 503 ServerBusy past its entities per second (2,000 on Azure), an
//! account past its own (20,000), so clients' retry and backoff can be tested.
//! What a request counts is `tafel_protocol::charge`'s (Azure's counting rules).
//!
//! One token bucket per account and per partition (account, table, PartitionKey),
//! holding one second of its rate and refilled continuously: a burst of a second
//! passes, and under any load above the target the admitted rate is the target.
//! A request is admitted when its buckets hold its count (or, for a count larger
//! than a whole bucket, when the bucket is full) and then takes it; a query's
//! entities, known only after it ran, are taken after, so its debt refuses the
//! requests that follow until it is paid. A refused request takes nothing.
//!
//! Memory stays bounded: a full bucket is exactly a bucket never used, so once a
//! second every full (idle) bucket is forgotten.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tafel_protocol::charge::Charge;
use tafel_service::{Error, ErrorCode};

/// Azure's targets: entities per second of one partition, and of an account.
pub const AZURE_PARTITION_LIMIT: u32 = 2_000;
pub const AZURE_ACCOUNT_LIMIT: u32 = 20_000;

/// How often idle buckets are forgotten.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

pub struct Throttle {
    partition_rate: f64,
    account_rate: f64,
    state: Mutex<State>,
}

struct State {
    accounts: HashMap<String, Bucket>,
    /// Keyed `account \0 table (lower case) \0 PartitionKey`.
    partitions: HashMap<String, Bucket>,
    swept: Instant,
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(rate: f64, now: Instant) -> Self {
        Bucket { tokens: rate, at: now }
    }

    /// Adds what the time since it was last seen earned, up to one second's worth.
    fn refill(&mut self, rate: f64, now: Instant) {
        let earned = now.saturating_duration_since(self.at).as_secs_f64() * rate;
        self.tokens = (self.tokens + earned).min(rate);
        self.at = now;
    }

    /// Whether it can take `cost` now: a cost above one second's worth passes
    /// only a full bucket (and leaves it in debt), so it is never refused forever.
    fn holds(&self, cost: f64, rate: f64) -> bool {
        self.tokens >= cost.min(rate)
    }

    fn is_full(&self, rate: f64, now: Instant) -> bool {
        let mut b = *self;
        b.refill(rate, now);
        b.tokens >= rate
    }
}

impl Throttle {
    /// Entities per second of a partition and of an account (each at least 1).
    pub fn new(partition_per_second: u32, account_per_second: u32) -> Self {
        Throttle {
            partition_rate: f64::from(partition_per_second.max(1)),
            account_rate: f64::from(account_per_second.max(1)),
            state: Mutex::new(State {
                accounts: HashMap::new(),
                partitions: HashMap::new(),
                swept: Instant::now(),
            }),
        }
    }

    /// Admits `charge` for `account` and takes its entities, or refuses it with
    /// Azure's ServerBusy (the partition's, else the account's message).
    pub fn admit(&self, account: &str, charge: &Charge) -> Result<(), Error> {
        let now = Instant::now();
        let cost = f64::from(charge.entities.max(1));
        let (partition_rate, account_rate) = (self.partition_rate, self.account_rate);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.sweep(now, partition_rate, account_rate);
        let State {
            accounts, partitions, ..
        } = &mut *state;
        let acct = accounts
            .entry(account.to_owned())
            .or_insert_with(|| Bucket::full(account_rate, now));
        acct.refill(account_rate, now);
        let part = match partition_key(account, charge) {
            Some(key) => {
                let part = partitions
                    .entry(key)
                    .or_insert_with(|| Bucket::full(partition_rate, now));
                part.refill(partition_rate, now);
                if !part.holds(cost, partition_rate) {
                    return Err(Error::new(ErrorCode::ServerBusy));
                }
                Some(part)
            }
            None => None,
        };
        if !acct.holds(cost, account_rate) {
            return Err(Error::new(ErrorCode::AccountOverLimit));
        }
        acct.tokens -= cost;
        if let Some(part) = part {
            part.tokens -= cost;
        }
        Ok(())
    }

    /// Takes the entities a query returned, after it ran (its one transaction
    /// was taken when it was admitted).
    pub fn settle(&self, account: &str, charge: &Charge, returned: u32) {
        let extra = f64::from(returned.saturating_sub(1));
        if extra == 0.0 {
            return;
        }
        let key = partition_key(account, charge);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = state.accounts.get_mut(account) {
            b.tokens -= extra;
        }
        if let Some(b) = key.and_then(|k| state.partitions.get_mut(&k)) {
            b.tokens -= extra;
        }
    }

    /// Buckets held now (accounts, partitions): what the sweep bounds.
    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (state.accounts.len(), state.partitions.len())
    }
}

impl State {
    fn sweep(&mut self, now: Instant, partition_rate: f64, account_rate: f64) {
        if now.saturating_duration_since(self.swept) < SWEEP_EVERY {
            return;
        }
        self.swept = now;
        self.partitions.retain(|_, b| !b.is_full(partition_rate, now));
        self.accounts.retain(|_, b| !b.is_full(account_rate, now));
    }
}

fn partition_key(account: &str, charge: &Charge) -> Option<String> {
    let (table, pk) = (charge.table.as_deref()?, charge.partition.as_deref()?);
    Some(format!("{account}\0{}\0{pk}", table.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn charge(pk: &str, entities: u32) -> Charge {
        Charge {
            table: Some("T".into()),
            partition: Some(pk.into()),
            entities,
            query: false,
        }
    }

    #[test]
    fn a_partition_past_its_second_is_busy_while_another_is_served() {
        let t = Throttle::new(10, 1_000);
        for _ in 0..10 {
            t.admit("a", &charge("p", 1)).unwrap();
        }
        let e = t.admit("a", &charge("p", 1)).unwrap_err();
        assert_eq!(e.code, ErrorCode::ServerBusy);
        t.admit("a", &charge("q", 1)).unwrap();
    }

    #[test]
    fn an_account_past_its_second_is_busy_with_azures_account_message() {
        let t = Throttle::new(1_000, 5);
        for i in 0..5 {
            t.admit("a", &charge(&i.to_string(), 1)).unwrap();
        }
        let e = t.admit("a", &charge("x", 1)).unwrap_err();
        assert_eq!(e.code.as_str(), "ServerBusy");
        assert_eq!(e.message, "Operations per second is over the account limit.");
        t.admit("b", &charge("x", 1)).unwrap();
    }

    #[test]
    fn a_batch_larger_than_a_second_passes_a_full_bucket_and_leaves_debt() {
        let t = Throttle::new(20, 1_000);
        t.admit("a", &charge("p", 100)).unwrap();
        assert!(t.admit("a", &charge("p", 1)).is_err());
    }

    #[test]
    fn a_query_pays_after_it_ran() {
        let t = Throttle::new(10, 1_000);
        let q = charge("p", 0);
        t.admit("a", &q).unwrap();
        t.settle("a", &q, 50);
        assert!(t.admit("a", &charge("p", 1)).is_err());
    }

    #[test]
    fn idle_buckets_are_forgotten() {
        let t = Throttle::new(1_000_000, 1_000_000);
        for i in 0..100 {
            t.admit("a", &charge(&i.to_string(), 1)).unwrap();
        }
        assert_eq!(t.held(), (1, 100));
        // A millionth of a second refills each; the sweep runs once a second.
        t.state.lock().unwrap().swept -= SWEEP_EVERY;
        std::thread::sleep(Duration::from_millis(2));
        t.admit("b", &charge("z", 1)).unwrap();
        assert_eq!(t.held(), (1, 1));
    }
}
