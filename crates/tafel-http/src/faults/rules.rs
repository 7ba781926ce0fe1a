//! A fault rule as users write it (TOML `[[rule]]` tables, or JSON objects with
//! the same kebab-case keys) and its checked, compiled form. A rule set is
//! compiled whole before it replaces the one in force, so a bad rule refuses
//! the set and nothing of it half-applies.

use std::borrow::Cow;
use std::time::Duration;

use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};
use tafel_protocol::operation::{self, Operation};
use tafel_service::{Error, ErrorCode};

/// One rule, as written. Every key is optional; a rule must do something.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct RuleSpec {
    // What it matches (globs for account, table and partition).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    // What it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub lose_answer: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_after_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub end_page_early: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_page_after: Option<usize>,
    // When.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub times: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub for_seconds: Option<f64>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A `--faults` file: `[[rule]]` tables.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    rule: Vec<RuleSpec>,
}

/// The body of `PUT /faults`: `{"rules": [...]}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetBody {
    pub rules: Vec<RuleSpec>,
}

/// The rules of a TOML file's text.
pub fn from_toml(text: &str) -> Result<Vec<RuleSpec>, String> {
    toml::from_str::<File>(text).map(|f| f.rule).map_err(|e| e.to_string())
}

/// The longest delay a rule may ask for: long enough to outlast any client's
/// timeout, short enough that a typo does not hold a connection for hours.
const MAX_DELAY_MS: u64 = 300_000;

/// An Azure error a rule answers with; its status may differ from the code's own.
#[derive(Debug, Clone)]
pub struct Injected {
    pub code: ErrorCode,
    pub status: u16,
    pub message: Cow<'static, str>,
}

impl Injected {
    pub fn error(&self) -> Error {
        Error::with_message(self.code, self.message.clone())
    }
}

/// What a firing rule does after its delay.
#[derive(Debug, Clone)]
pub enum Effect {
    /// Only the delay.
    Delay,
    /// Answer this error without applying the operation.
    Error(Injected),
    /// Apply the operation, then answer this error, or (`None`) close the
    /// connection without an answer.
    LoseAnswer(Option<Injected>),
    /// End a query page after this many entities, with a continuation token.
    EndPageEarly(usize),
}

impl Effect {
    /// The `kind` label of `tafel_faults_injected_total` and the access log's `fault`.
    pub fn kind(&self) -> &'static str {
        match self {
            Effect::Delay => "delay",
            Effect::Error(_) => "error",
            Effect::LoseAnswer(Some(_)) => "lose-answer",
            Effect::LoseAnswer(None) => "lose-answer-close",
            Effect::EndPageEarly(_) => "end-page-early",
        }
    }
}

/// A checked rule: its matchers compiled, its action resolved.
#[derive(Debug)]
pub struct Rule {
    pub spec: RuleSpec,
    pub account: Option<GlobMatcher>,
    pub table: Option<GlobMatcher>,
    pub partition: Option<GlobMatcher>,
    pub operation: Option<Operation>,
    /// Upper case.
    pub method: Option<String>,
    pub delay: Option<Duration>,
    /// After the operation, before its answer (the write is applied; a client
    /// with a shorter timeout never learns it).
    pub delay_after: Option<Duration>,
    pub effect: Effect,
}

const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "MERGE", "DELETE", "OPTIONS"];

fn glob(key: &str, pattern: &Option<String>, case_insensitive: bool) -> Result<Option<GlobMatcher>, String> {
    let Some(p) = pattern else { return Ok(None) };
    GlobBuilder::new(p)
        .case_insensitive(case_insensitive)
        .literal_separator(false)
        .build()
        .map(|g| Some(g.compile_matcher()))
        .map_err(|e| format!("{key}: the glob {p:?} is malformed: {}", e.kind()))
}

fn code(key: &str, name: &str) -> Result<ErrorCode, String> {
    ErrorCode::from_name(name).ok_or_else(|| {
        format!("{key}: {name:?} is not an error code of Azure's Table service (e.g. ServerBusy, OperationTimedOut, InternalError, EntityAlreadyExists, UpdateConditionNotSatisfied)")
    })
}

/// The statuses Azure's Table service answers errors with.
fn azure_statuses() -> Vec<u16> {
    let mut s: Vec<u16> = ErrorCode::ALL.iter().map(|c| c.status()).collect();
    s.sort_unstable();
    s.dedup();
    s
}

/// The error a rule names with `error`, or `status`/`code`/`message`.
fn injected(spec: &RuleSpec) -> Result<Option<Injected>, String> {
    let named = match (&spec.error, &spec.code) {
        (Some(_), Some(_)) => return Err("give either error or code, not both".into()),
        (Some(e), None) => Some(code("error", e)?),
        (None, Some(c)) => Some(code("code", c)?),
        (None, None) => None,
    };
    if let Some(s) = spec.status {
        let statuses = azure_statuses();
        if !statuses.contains(&s) {
            let list: Vec<String> = statuses.iter().map(u16::to_string).collect();
            return Err(format!(
                "status: {s} is not a status Azure's Table service answers an error with (one of {})",
                list.join(", ")
            ));
        }
    }
    let code = match (named, spec.status) {
        (Some(c), _) => c,
        (None, Some(503)) => ErrorCode::ServerBusy,
        (None, Some(500)) => ErrorCode::InternalError,
        (None, Some(s)) => match ErrorCode::ALL.iter().copied().find(|c| c.status() == s) {
            Some(c) => c,
            None => return Err(format!("status: no error code has status {s}")),
        },
        (None, None) if spec.message.is_some() => {
            return Err("message: give error (or status/code) for the message to go with".into())
        }
        (None, None) => return Ok(None),
    };
    Ok(Some(Injected {
        code,
        status: spec.status.unwrap_or(code.status()),
        message: match &spec.message {
            Some(m) => Cow::Owned(m.clone()),
            None => Cow::Borrowed(code.message()),
        },
    }))
}

impl Rule {
    /// Checks and compiles `spec`; the error names the key that is wrong.
    pub fn compile(spec: RuleSpec) -> Result<Rule, String> {
        let operation = match &spec.operation {
            None => None,
            Some(name) => Some(operation::from_name(name).ok_or_else(|| {
                let names: Vec<&str> = Operation::ALL
                    .iter()
                    .filter(|o| !matches!(o, Operation::Unknown))
                    .map(|o| o.as_str())
                    .collect();
                format!("operation: unknown operation {name:?} (one of {})", names.join(", "))
            })?),
        };
        let method = match &spec.method {
            None => None,
            Some(m) => {
                let up = m.to_ascii_uppercase();
                if !METHODS.contains(&up.as_str()) {
                    return Err(format!("method: {m:?} is not one of {}", METHODS.join(", ")));
                }
                Some(up)
            }
        };
        let error = injected(&spec)?;
        for (key, d) in [("delay-ms", spec.delay_ms), ("delay-after-ms", spec.delay_after_ms)] {
            if d.is_some_and(|d| d > MAX_DELAY_MS) {
                return Err(format!("{key}: more than {MAX_DELAY_MS}"));
            }
        }
        if spec.end_page_after.is_some() && !spec.end_page_early {
            return Err("end-page-after: only with end-page-early = true".into());
        }
        let effect = match (spec.lose_answer, spec.end_page_early, error) {
            (true, true, _) => return Err("lose-answer and end-page-early cannot be combined".into()),
            (false, true, Some(_)) => return Err("end-page-early cannot be combined with an error".into()),
            (true, false, e) => Effect::LoseAnswer(e),
            (false, true, None) => match spec.end_page_after.unwrap_or(1) {
                n @ 1..=999 => Effect::EndPageEarly(n),
                n => return Err(format!("end-page-after: {n} is not in 1 to 999")),
            },
            (false, false, Some(e)) => Effect::Error(e),
            (false, false, None) if spec.delay_ms.is_some() || spec.delay_after_ms.is_some() => Effect::Delay,
            (false, false, None) => {
                return Err(
                    "the rule does nothing: give error (or status/code), lose-answer, delay-ms, delay-after-ms or end-page-early"
                        .into(),
                )
            }
        };
        if matches!(effect, Effect::EndPageEarly(_)) && spec.operation.as_deref().is_some_and(|o| o != "QueryEntities")
        {
            return Err("end-page-early: only a QueryEntities request has pages to end".into());
        }
        if let Some(p) = spec.probability {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("probability: {p} is not between 0 and 1"));
            }
        }
        if spec.every == Some(0) {
            return Err("every: must be at least 1".into());
        }
        if spec.times == Some(0) {
            return Err("times: must be at least 1".into());
        }
        if let Some(s) = spec.for_seconds {
            if !(s.is_finite() && s > 0.0 && s < 1e9) {
                return Err(format!("for-seconds: {s} is not a positive number of seconds"));
            }
        }
        Ok(Rule {
            account: glob("account", &spec.account, false)?,
            table: glob("table", &spec.table, true)?,
            partition: glob("partition", &spec.partition, false)?,
            operation,
            method,
            delay: spec.delay_ms.map(Duration::from_millis),
            delay_after: spec.delay_after_ms.map(Duration::from_millis),
            effect,
            spec,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(toml: &str) -> Result<Rule, String> {
        let mut rules = from_toml(toml)?;
        Rule::compile(rules.remove(0))
    }

    #[test]
    fn an_error_takes_its_status_from_azures_table() {
        let r = compile("[[rule]]\nerror = \"ServerBusy\"\ntable = \"ord*\"").unwrap();
        let Effect::Error(e) = r.effect else {
            panic!("{:?}", r.effect)
        };
        assert_eq!((e.code, e.status), (ErrorCode::ServerBusy, 503));
        assert!(r.table.unwrap().is_match("ORDERS"));
    }

    #[test]
    fn bad_rules_are_refused_naming_the_key() {
        for (rule, key) in [
            ("operation = \"Nope\"\nerror = \"ServerBusy\"", "operation:"),
            ("table = \"a[\"\nerror = \"ServerBusy\"", "table:"),
            ("status = 418", "status:"),
            ("error = \"Teapot\"", "error:"),
            ("method = \"FETCH\"\ndelay-ms = 1", "method:"),
            ("probability = 2.0\nerror = \"ServerBusy\"", "probability:"),
            ("table = \"t\"", "does nothing"),
        ] {
            let e = compile(&format!("[[rule]]\n{rule}")).unwrap_err();
            assert!(e.contains(key), "{rule}: {e}");
        }
        assert!(from_toml("[[rule]]\nbogus = 1").unwrap_err().contains("bogus"));
    }

    #[test]
    fn a_lost_answer_closes_unless_an_error_is_named() {
        let r = compile("[[rule]]\nlose-answer = true").unwrap();
        assert!(matches!(r.effect, Effect::LoseAnswer(None)));
        let r = compile("[[rule]]\nlose-answer = true\nerror = \"OperationTimedOut\"").unwrap();
        assert!(matches!(
            r.effect,
            Effect::LoseAnswer(Some(Injected { status: 500, .. }))
        ));
    }
}
