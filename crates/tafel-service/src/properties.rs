//! Table service properties per account (operations.md §6–§7): analytics
//! logging, hour and minute metrics (stored and echoed; Tafel records no
//! analytics) and the CORS rules the HTTP layer answers preflights from.

use crate::access::Action;
use crate::blob::{Dec, Enc};
use crate::error::{Error, ErrorCode, Result};
use crate::model::DateTime;
use crate::ops::{Ctx, Service};

pub(crate) const MAX_CORS_RULES: usize = 5;
pub(crate) const MAX_ORIGINS: usize = 64;
pub(crate) const MAX_LITERAL_HEADERS: usize = 64;
pub(crate) const MAX_PREFIXED_HEADERS: usize = 2;
pub(crate) const MAX_CORS_VALUE_CHARS: usize = 256;
pub(crate) const CORS_METHODS: [&str; 8] = ["DELETE", "GET", "HEAD", "MERGE", "POST", "OPTIONS", "PUT", "PATCH"];
pub(crate) const ANALYTICS_VERSION: &str = "1.0";

const FORMAT: u8 = 1;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionPolicy {
    pub enabled: bool,
    /// 1–365 when enabled; dropped when disabled.
    pub days: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logging {
    pub version: String,
    pub delete: bool,
    pub read: bool,
    pub write: bool,
    pub retention: RetentionPolicy,
}

impl Default for Logging {
    fn default() -> Self {
        Logging {
            version: ANALYTICS_VERSION.into(),
            delete: false,
            read: false,
            write: false,
            retention: RetentionPolicy::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metrics {
    pub version: String,
    pub enabled: bool,
    /// Only meaningful (and only kept) when enabled.
    pub include_apis: Option<bool>,
    pub retention: RetentionPolicy,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            version: ANALYTICS_VERSION.into(),
            enabled: false,
            include_apis: None,
            retention: RetentionPolicy::default(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CorsRule {
    /// Origins, or the single entry `*`.
    pub allowed_origins: Vec<String>,
    /// Upper-case verbs from [`CORS_METHODS`].
    pub allowed_methods: Vec<String>,
    pub max_age_seconds: u64,
    pub exposed_headers: Vec<String>,
    pub allowed_headers: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceProperties {
    pub logging: Logging,
    pub hour_metrics: Metrics,
    pub minute_metrics: Metrics,
    pub cors: Vec<CorsRule>,
}

/// A Set Service Properties request: `None` keeps the stored value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PropertiesUpdate {
    pub logging: Option<Logging>,
    pub hour_metrics: Option<Metrics>,
    pub minute_metrics: Option<Metrics>,
    pub cors: Option<Vec<CorsRule>>,
}

/// Get Table Service Stats: replication is always live, synced now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceStats {
    pub last_sync_time: DateTime,
}

fn bad(message: impl Into<String>) -> Error {
    Error::with_message(ErrorCode::InvalidXmlNodeValue, message.into())
}

fn check_version(v: &str) -> Result<()> {
    if v != ANALYTICS_VERSION {
        return Err(bad(format!(
            "The analytics version '{v}' is not supported; use {ANALYTICS_VERSION}."
        )));
    }
    Ok(())
}

fn normalise_retention(r: &mut RetentionPolicy) -> Result<()> {
    if r.enabled {
        match r.days {
            Some(d) if (1..=365).contains(&d) => {}
            _ => {
                return Err(bad(
                    "Retention days must be between 1 and 365 when the retention policy is enabled.",
                ))
            }
        }
    } else {
        r.days = None;
    }
    Ok(())
}

fn normalise_metrics(m: &mut Metrics) -> Result<()> {
    check_version(&m.version)?;
    if m.enabled {
        m.include_apis.get_or_insert(false);
    } else {
        m.include_apis = None;
    }
    normalise_retention(&mut m.retention)
}

fn check_headers(list: &[String], what: &str) -> Result<()> {
    let prefixed = list.iter().filter(|h| h.ends_with('*')).count();
    if prefixed > MAX_PREFIXED_HEADERS || list.len() - prefixed > MAX_LITERAL_HEADERS {
        return Err(bad(format!(
            "{what} allows at most {MAX_LITERAL_HEADERS} literal and {MAX_PREFIXED_HEADERS} prefixed headers."
        )));
    }
    if list.iter().any(|h| h.chars().count() > MAX_CORS_VALUE_CHARS) {
        return Err(bad(format!(
            "A header in {what} is longer than {MAX_CORS_VALUE_CHARS} characters."
        )));
    }
    Ok(())
}

fn normalise_cors(rules: &mut [CorsRule]) -> Result<()> {
    if rules.len() > MAX_CORS_RULES {
        return Err(bad(format!("At most {MAX_CORS_RULES} CORS rules are allowed.")));
    }
    for rule in rules {
        let origins = &rule.allowed_origins;
        if origins.is_empty() || origins.len() > MAX_ORIGINS {
            return Err(bad(format!(
                "AllowedOrigins must list 1 to {MAX_ORIGINS} origins, or *."
            )));
        }
        if origins.len() > 1 && origins.iter().any(|o| o == "*") {
            return Err(bad("AllowedOrigins is either * or a list of origins."));
        }
        if origins.iter().any(|o| o.chars().count() > MAX_CORS_VALUE_CHARS) {
            return Err(bad(format!(
                "An origin is longer than {MAX_CORS_VALUE_CHARS} characters."
            )));
        }
        if rule.allowed_methods.is_empty() {
            return Err(bad("AllowedMethods must list at least one method."));
        }
        for m in &mut rule.allowed_methods {
            let upper = m.to_ascii_uppercase();
            if !CORS_METHODS.contains(&upper.as_str()) {
                return Err(bad(format!("'{m}' is not a method CORS rules can allow.")));
            }
            *m = upper;
        }
        check_headers(&rule.allowed_headers, "AllowedHeaders")?;
        check_headers(&rule.exposed_headers, "ExposedHeaders")?;
    }
    Ok(())
}

/// Validates an update's values and normalises them as Azure echoes them.
pub fn validate(mut u: PropertiesUpdate) -> Result<PropertiesUpdate> {
    if let Some(l) = &mut u.logging {
        check_version(&l.version)?;
        normalise_retention(&mut l.retention)?;
    }
    for m in [&mut u.hour_metrics, &mut u.minute_metrics].into_iter().flatten() {
        normalise_metrics(m)?;
    }
    if let Some(rules) = &mut u.cors {
        normalise_cors(rules)?;
    }
    Ok(u)
}

fn put_retention(e: &mut Enc, r: &RetentionPolicy) {
    e.bool(r.enabled).u32(r.days.unwrap_or(0));
}

fn put_metrics(e: &mut Enc, m: &Metrics) {
    e.str(&m.version).bool(m.enabled).opt_bool(m.include_apis);
    put_retention(e, &m.retention);
}

pub fn encode(p: &ServiceProperties) -> Vec<u8> {
    let mut e = Enc::new(FORMAT);
    let l = &p.logging;
    e.str(&l.version).bool(l.delete).bool(l.read).bool(l.write);
    put_retention(&mut e, &l.retention);
    put_metrics(&mut e, &p.hour_metrics);
    put_metrics(&mut e, &p.minute_metrics);
    e.u32(p.cors.len() as u32);
    for r in &p.cors {
        e.strs(&r.allowed_origins)
            .strs(&r.allowed_methods)
            .u64(r.max_age_seconds);
        e.strs(&r.exposed_headers).strs(&r.allowed_headers);
    }
    e.finish()
}

fn get_retention(d: &mut Dec<'_>) -> Option<RetentionPolicy> {
    let enabled = d.bool()?;
    let days = d.u32()?;
    Some(RetentionPolicy {
        enabled,
        days: enabled.then_some(days),
    })
}

fn get_metrics(d: &mut Dec<'_>) -> Option<Metrics> {
    Some(Metrics {
        version: d.str()?,
        enabled: d.bool()?,
        include_apis: d.opt_bool()?,
        retention: get_retention(d)?,
    })
}

fn decode_inner(bytes: &[u8]) -> Option<ServiceProperties> {
    let mut d = Dec::new(bytes, FORMAT)?;
    let logging = Logging {
        version: d.str()?,
        delete: d.bool()?,
        read: d.bool()?,
        write: d.bool()?,
        retention: get_retention(&mut d)?,
    };
    let hour_metrics = get_metrics(&mut d)?;
    let minute_metrics = get_metrics(&mut d)?;
    let n = d.u32()? as usize;
    let mut cors = Vec::with_capacity(n.min(MAX_CORS_RULES));
    for _ in 0..n {
        cors.push(CorsRule {
            allowed_origins: d.strs()?,
            allowed_methods: d.strs()?,
            max_age_seconds: d.u64()?,
            exposed_headers: d.strs()?,
            allowed_headers: d.strs()?,
        });
    }
    Some(ServiceProperties {
        logging,
        hour_metrics,
        minute_metrics,
        cors,
    })
}

pub fn decode(bytes: &[u8]) -> Result<ServiceProperties> {
    decode_inner(bytes).ok_or_else(|| Error::internal("corrupt stored service properties"))
}

impl Service {
    async fn load_properties(&self, account: &str) -> Result<ServiceProperties> {
        match self.store().get_service_properties(account).await? {
            Some(bytes) => decode(&bytes),
            None => Ok(ServiceProperties::default()),
        }
    }

    pub async fn get_service_properties(&self, ctx: &Ctx) -> Result<ServiceProperties> {
        ctx.access.check(Action::GetServiceProperties, None, None)?;
        self.load_properties(&ctx.account).await
    }

    /// Set Table Service Properties: the elements given replace the stored ones.
    pub async fn set_service_properties(&self, ctx: &Ctx, update: PropertiesUpdate) -> Result<()> {
        ctx.access.check(Action::SetServiceProperties, None, None)?;
        let u = validate(update)?;
        // Read-modify-write: concurrent setters of different elements may race;
        // Azure gives no stronger guarantee either.
        let mut p = self.load_properties(&ctx.account).await?;
        if let Some(l) = u.logging {
            p.logging = l;
        }
        if let Some(m) = u.hour_metrics {
            p.hour_metrics = m;
        }
        if let Some(m) = u.minute_metrics {
            p.minute_metrics = m;
        }
        if let Some(c) = u.cors {
            p.cors = c;
        }
        self.store().set_service_properties(&ctx.account, encode(&p)).await?;
        Ok(())
    }

    pub async fn get_service_stats(&self, ctx: &Ctx) -> Result<ServiceStats> {
        ctx.access.check(Action::GetServiceStats, None, None)?;
        Ok(ServiceStats {
            last_sync_time: DateTime::now(),
        })
    }

    /// The account's CORS rules, for preflight and actual-request CORS headers
    /// (no access check: CORS is evaluated before and apart from authentication).
    pub async fn cors_rules(&self, account: &str) -> Result<Vec<CorsRule>> {
        Ok(self.load_properties(account).await?.cors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> CorsRule {
        CorsRule {
            allowed_origins: vec!["https://a.example".into()],
            allowed_methods: vec!["get".into(), "PUT".into()],
            max_age_seconds: 60,
            exposed_headers: vec!["x-ms-*".into()],
            allowed_headers: vec!["x-ms-meta-*".into(), "content-type".into()],
        }
    }

    #[test]
    fn validation_normalises() {
        let u = PropertiesUpdate {
            logging: Some(Logging {
                retention: RetentionPolicy {
                    enabled: false,
                    days: Some(9),
                },
                ..Logging::default()
            }),
            hour_metrics: Some(Metrics {
                enabled: true,
                ..Metrics::default()
            }),
            minute_metrics: Some(Metrics {
                include_apis: Some(true),
                ..Metrics::default()
            }),
            cors: Some(vec![rule()]),
        };
        let v = validate(u).expect("valid");
        assert_eq!(v.logging.map(|l| l.retention.days), Some(None));
        assert_eq!(v.hour_metrics.and_then(|m| m.include_apis), Some(false));
        assert_eq!(v.minute_metrics.map(|m| m.include_apis), Some(None));
        assert_eq!(
            v.cors.map(|c| c[0].allowed_methods.clone()),
            Some(vec!["GET".to_owned(), "PUT".to_owned()])
        );
    }

    #[test]
    fn validation_refuses() {
        let code = |u| validate(u).err().map(|e| e.code);
        let bad_days = RetentionPolicy {
            enabled: true,
            days: Some(366),
        };
        let cases = [
            PropertiesUpdate {
                logging: Some(Logging {
                    retention: bad_days.clone(),
                    ..Logging::default()
                }),
                ..Default::default()
            },
            PropertiesUpdate {
                hour_metrics: Some(Metrics {
                    retention: RetentionPolicy {
                        enabled: true,
                        days: None,
                    },
                    ..Metrics::default()
                }),
                ..Default::default()
            },
            PropertiesUpdate {
                logging: Some(Logging {
                    version: "2.0".into(),
                    ..Logging::default()
                }),
                ..Default::default()
            },
            PropertiesUpdate {
                cors: Some(vec![rule(); 6]),
                ..Default::default()
            },
            PropertiesUpdate {
                cors: Some(vec![CorsRule {
                    allowed_methods: vec!["TRACE".into()],
                    ..rule()
                }]),
                ..Default::default()
            },
            PropertiesUpdate {
                cors: Some(vec![CorsRule {
                    allowed_origins: vec![],
                    ..rule()
                }]),
                ..Default::default()
            },
            PropertiesUpdate {
                cors: Some(vec![CorsRule {
                    allowed_origins: vec!["*".into(), "https://b".into()],
                    ..rule()
                }]),
                ..Default::default()
            },
            PropertiesUpdate {
                cors: Some(vec![CorsRule {
                    allowed_headers: vec!["a*".into(), "b*".into(), "c*".into()],
                    ..rule()
                }]),
                ..Default::default()
            },
            PropertiesUpdate {
                cors: Some(vec![CorsRule {
                    exposed_headers: vec!["h".repeat(257)],
                    ..rule()
                }]),
                ..Default::default()
            },
        ];
        for u in cases {
            assert_eq!(code(u.clone()), Some(ErrorCode::InvalidXmlNodeValue), "{u:?}");
        }
    }

    #[test]
    fn blob_round_trip() {
        let p = ServiceProperties {
            logging: Logging {
                read: true,
                retention: RetentionPolicy {
                    enabled: true,
                    days: Some(7),
                },
                ..Logging::default()
            },
            hour_metrics: Metrics {
                enabled: true,
                include_apis: Some(true),
                ..Metrics::default()
            },
            minute_metrics: Metrics::default(),
            cors: vec![
                rule(),
                CorsRule {
                    allowed_origins: vec!["*".into()],
                    ..CorsRule::default()
                },
            ],
        };
        assert_eq!(decode(&encode(&p)).ok(), Some(p));
        assert_eq!(
            decode(&encode(&ServiceProperties::default())).ok(),
            Some(ServiceProperties::default())
        );
        assert!(decode(&[1, 2]).is_err());
    }
}
