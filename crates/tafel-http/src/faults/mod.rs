//! Fault injection: rules that make chosen Table API requests fail, lose their
//! answer, wait, or end a query page early (docs/testing.md). Off by default:
//! with no rule set, a request pays one relaxed atomic load ([`Faults::active`]).
//!
//! The rule set is replaced whole (`--faults FILE`, the admin listener's
//! `PUT /faults`, the explorer's Faults page) and checked whole before it is,
//! so a refused set leaves the one in force untouched.

pub mod rules;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use serde_json::{json, Value};
use tafel_protocol::Operation;

pub use rules::{Effect, Injected, Rule, RuleSpec, SetBody};

/// A rule with what it has seen since its set was installed.
struct Armed {
    rule: Rule,
    matched: AtomicU64,
    fired: AtomicU64,
    /// Seeded when the rule names a seed: the same requests, the same pattern.
    rng: Mutex<fastrand::Rng>,
    /// End of its `for-seconds` window.
    until: Option<Instant>,
}

pub struct RuleSet {
    rules: Vec<Armed>,
    /// Whether a rule matches on the partition (worth finding in the request).
    wants_partition: bool,
}

/// The request a rule is matched against.
pub struct Target<'a> {
    pub account: &'a str,
    pub table: Option<&'a str>,
    pub partition: Option<&'a str>,
    pub operation: Operation,
    pub method: &'a str,
}

/// A rule that fired for a request: what to do with it.
pub struct Fault {
    pub delay: Option<Duration>,
    pub delay_after: Option<Duration>,
    pub effect: Effect,
}

impl RuleSet {
    /// Checks every rule; the first bad one refuses the whole set.
    pub fn compile(specs: Vec<RuleSpec>) -> Result<RuleSet, String> {
        let now = Instant::now();
        let mut rules = Vec::with_capacity(specs.len());
        for (i, spec) in specs.into_iter().enumerate() {
            let rule = Rule::compile(spec).map_err(|e| format!("rule {}: {e}", i + 1))?;
            let rng = match rule.spec.seed {
                Some(seed) => fastrand::Rng::with_seed(seed),
                None => fastrand::Rng::new(),
            };
            let until = rule.spec.for_seconds.map(|s| now + Duration::from_secs_f64(s));
            rules.push(Armed {
                rule,
                matched: AtomicU64::new(0),
                fired: AtomicU64::new(0),
                rng: Mutex::new(rng),
                until,
            });
        }
        let wants_partition = rules.iter().any(|a| a.rule.partition.is_some());
        Ok(RuleSet { rules, wants_partition })
    }

    pub fn wants_partition(&self) -> bool {
        self.wants_partition
    }

    /// The first rule that matches `t` and fires now, counted as fired.
    pub fn fire(&self, t: &Target<'_>) -> Option<Fault> {
        let now = Instant::now();
        self.rules.iter().find_map(|a| {
            if !matches(&a.rule, t) || a.until.is_some_and(|u| now >= u) {
                return None;
            }
            let n = a.matched.fetch_add(1, Ordering::Relaxed) + 1;
            if a.rule.spec.every.is_some_and(|e| n % e != 0) {
                return None;
            }
            if let Some(p) = a.rule.spec.probability {
                let draw = a.rng.lock().unwrap_or_else(|e| e.into_inner()).f64();
                if draw >= p {
                    return None;
                }
            }
            let taken = match a.rule.spec.times {
                Some(times) => a
                    .fired
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |f| (f < times).then_some(f + 1))
                    .is_ok(),
                None => {
                    a.fired.fetch_add(1, Ordering::Relaxed);
                    true
                }
            };
            taken.then(|| Fault {
                delay: a.rule.delay,
                delay_after: a.rule.delay_after,
                effect: a.rule.effect.clone(),
            })
        })
    }

    /// The rules as written, each with how often it matched and fired.
    pub fn describe(&self) -> Vec<Value> {
        self.rules
            .iter()
            .map(|a| {
                let mut v = serde_json::to_value(&a.rule.spec).unwrap_or_else(|_| json!({}));
                if let Some(o) = v.as_object_mut() {
                    o.insert("matched".into(), a.matched.load(Ordering::Relaxed).into());
                    o.insert("fired".into(), a.fired.load(Ordering::Relaxed).into());
                }
                v
            })
            .collect()
    }
}

fn matches(r: &Rule, t: &Target<'_>) -> bool {
    let glob = |g: &Option<globset::GlobMatcher>, v: Option<&str>| match g {
        None => true,
        Some(g) => v.is_some_and(|v| g.is_match(v)),
    };
    if matches!(r.effect, Effect::EndPageEarly(_)) && t.operation != Operation::QueryEntities {
        return false;
    }
    r.operation.is_none_or(|o| o == t.operation)
        && r.method.as_deref().is_none_or(|m| m == t.method)
        && glob(&r.account, Some(t.account))
        && glob(&r.table, t.table)
        && glob(&r.partition, t.partition)
}

/// The rule set in force, if any.
#[derive(Default)]
pub struct Faults {
    /// Set while a rule set is in force: the one check a request pays when
    /// none is.
    on: AtomicBool,
    set: ArcSwapOption<RuleSet>,
}

impl Faults {
    /// The rule set in force; `None` (one relaxed load) when there is none.
    pub fn active(&self) -> Option<Arc<RuleSet>> {
        if !self.on.load(Ordering::Relaxed) {
            return None;
        }
        self.set.load_full()
    }

    /// Replaces the rule set with `specs` (empty: none), or refuses it whole.
    pub fn replace(&self, specs: Vec<RuleSpec>) -> Result<usize, String> {
        let set = RuleSet::compile(specs)?;
        let n = set.rules.len();
        if n == 0 {
            self.clear();
        } else {
            self.set.store(Some(Arc::new(set)));
            self.on.store(true, Ordering::Relaxed);
        }
        Ok(n)
    }

    pub fn clear(&self) {
        self.on.store(false, Ordering::Relaxed);
        self.set.store(None);
    }

    /// `{"rules": [...]}` with each rule's counts.
    pub fn describe(&self) -> Value {
        let rules = self.set.load_full().map(|s| s.describe()).unwrap_or_default();
        json!({ "rules": rules })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(toml: &str) -> RuleSet {
        RuleSet::compile(rules::from_toml(toml).unwrap()).unwrap()
    }

    fn target(table: &str) -> Target<'_> {
        Target {
            account: "devstoreaccount1",
            table: Some(table),
            partition: None,
            operation: Operation::InsertEntity,
            method: "POST",
        }
    }

    fn pattern(s: &RuleSet, n: usize) -> Vec<bool> {
        (0..n).map(|_| s.fire(&target("t")).is_some()).collect()
    }

    #[test]
    fn times_and_every_count_matches() {
        let s = set("[[rule]]\nerror = \"ServerBusy\"\ntimes = 2");
        assert_eq!(pattern(&s, 4), [true, true, false, false]);
        let s = set("[[rule]]\nerror = \"ServerBusy\"\nevery = 3");
        assert_eq!(pattern(&s, 6), [false, false, true, false, false, true]);
    }

    #[test]
    fn a_seed_repeats_the_pattern() {
        let toml = "[[rule]]\nerror = \"ServerBusy\"\nprobability = 0.5\nseed = 7";
        let a = pattern(&set(toml), 64);
        assert_eq!(a, pattern(&set(toml), 64));
        assert!(a.contains(&true) && a.contains(&false));
    }

    #[test]
    fn a_refused_set_leaves_the_old_one() {
        let f = Faults::default();
        assert!(f.active().is_none());
        f.replace(rules::from_toml("[[rule]]\nerror = \"ServerBusy\"").unwrap())
            .unwrap();
        let bad = rules::from_toml("[[rule]]\ndelay-ms = 1\n[[rule]]\noperation = \"X\"\ndelay-ms = 1").unwrap();
        assert!(f.replace(bad).unwrap_err().starts_with("rule 2: operation:"));
        assert_eq!(f.active().map(|s| s.rules.len()), Some(1));
        f.clear();
        assert!(f.active().is_none());
    }
}
