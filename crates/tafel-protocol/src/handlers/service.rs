//! The service root `/?restype=service&comp=…` (operations.md §6–§7): Get/Set
//! Table Service Properties and Get Table Service Stats, as XML.

use http::StatusCode;
use tafel_service::properties::{
    CorsRule, Logging, Metrics, PropertiesUpdate, RetentionPolicy, ServiceProperties, ServiceStats,
};
use tafel_service::{Error, ErrorCode, Result, Service};

use crate::operation::Operation;
use crate::request::{Context, Request, Response};
use crate::xml::{self, Element, Writer};

fn bad_param(name: &str, value: &str) -> Error {
    Error::with_message(
        ErrorCode::InvalidQueryParameterValue,
        format!("Value for one of the query parameters specified in the request URI is invalid: {name}={value}."),
    )
}

/// Runs `operation` on the service root; `Unknown` is refused for its `comp` or verb.
pub async fn handle(svc: &Service, cx: &Context, req: &Request, operation: Operation) -> Result<Response> {
    let restype = req.param("restype").unwrap_or("");
    if restype != "service" {
        return Err(bad_param("restype", restype));
    }
    match operation {
        Operation::GetTableServiceProperties => {
            let p = svc.get_service_properties(&cx.caller).await?;
            Ok(Response::with_body(
                StatusCode::OK,
                "application/xml",
                write_properties(&p),
            ))
        }
        Operation::SetTableServiceProperties => {
            svc.set_service_properties(&cx.caller, parse_properties(&req.body)?)
                .await?;
            Ok(Response::new(StatusCode::ACCEPTED))
        }
        Operation::GetTableServiceStats => {
            // Replication status is served by the secondary endpoint only, as in Azure.
            if !cx.secondary {
                return Err(Error::with_message(
                    ErrorCode::InvalidQueryParameterValue,
                    "Get Table Service Stats is only available on the secondary endpoint (<account>-secondary).",
                ));
            }
            let s = svc.get_service_stats(&cx.caller).await?;
            Ok(Response::with_body(StatusCode::OK, "application/xml", write_stats(&s)))
        }
        _ => match req.param("comp").unwrap_or("") {
            "properties" | "stats" => Err(Error::new(ErrorCode::MethodNotAllowed)),
            comp => Err(bad_param("comp", comp)),
        },
    }
}

fn retention(el: &Element) -> Result<RetentionPolicy> {
    let r = el.required("RetentionPolicy")?;
    let enabled = r.required("Enabled")?.bool()?;
    let days = match r.child("Days") {
        Some(d) if !d.value().is_empty() => {
            let n = d.u64()?;
            Some(u32::try_from(n).map_err(|_| xml::node_value("Days", d.value()))?)
        }
        _ => None,
    };
    Ok(RetentionPolicy { enabled, days })
}

fn logging(el: &Element) -> Result<Logging> {
    Ok(Logging {
        version: el.required("Version")?.value().to_owned(),
        delete: el.required("Delete")?.bool()?,
        read: el.required("Read")?.bool()?,
        write: el.required("Write")?.bool()?,
        retention: retention(el)?,
    })
}

fn metrics(el: &Element) -> Result<Metrics> {
    Ok(Metrics {
        version: el.required("Version")?.value().to_owned(),
        enabled: el.required("Enabled")?.bool()?,
        include_apis: match el.child("IncludeAPIs") {
            Some(i) if !i.value().is_empty() => Some(i.bool()?),
            _ => None,
        },
        retention: retention(el)?,
    })
}

fn list(el: Option<&Element>) -> Vec<String> {
    el.map(|e| {
        e.value()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    })
    .unwrap_or_default()
}

fn cors(el: &Element) -> Result<Vec<CorsRule>> {
    let mut rules = Vec::new();
    for rule in &el.children {
        if rule.name != "CorsRule" {
            return Err(Error::with_message(
                ErrorCode::InvalidXmlDocument,
                format!("The element {} is not expected inside Cors.", rule.name),
            ));
        }
        rules.push(CorsRule {
            allowed_origins: list(Some(rule.required("AllowedOrigins")?)),
            allowed_methods: list(Some(rule.required("AllowedMethods")?)),
            max_age_seconds: rule.required("MaxAgeInSeconds")?.u64()?,
            exposed_headers: list(rule.child("ExposedHeaders")),
            allowed_headers: list(rule.child("AllowedHeaders")),
        });
    }
    Ok(rules)
}

/// Parses a Set Table Service Properties body; absent top-level elements stay
/// `None` (keep the stored value).
pub(crate) fn parse_properties(body: &[u8]) -> Result<PropertiesUpdate> {
    let root = xml::parse(body)?.ok_or_else(|| {
        Error::with_message(
            ErrorCode::InvalidXmlDocument,
            "The request body must be a StorageServiceProperties document.",
        )
    })?;
    if root.name != "StorageServiceProperties" {
        return Err(Error::with_message(
            ErrorCode::InvalidXmlDocument,
            format!("The root element must be StorageServiceProperties, not {}.", root.name),
        ));
    }
    Ok(PropertiesUpdate {
        logging: root.child("Logging").map(logging).transpose()?,
        hour_metrics: root.child("HourMetrics").map(metrics).transpose()?,
        minute_metrics: root.child("MinuteMetrics").map(metrics).transpose()?,
        cors: root.child("Cors").map(cors).transpose()?,
    })
}

fn write_retention(w: &mut Writer, r: &RetentionPolicy) {
    w.open("RetentionPolicy").bool("Enabled", r.enabled);
    if let (true, Some(d)) = (r.enabled, r.days) {
        w.text("Days", &d.to_string());
    }
    w.close("RetentionPolicy");
}

fn write_metrics(w: &mut Writer, name: &str, m: &Metrics) {
    w.open(name).text("Version", &m.version).bool("Enabled", m.enabled);
    if let (true, Some(i)) = (m.enabled, m.include_apis) {
        w.bool("IncludeAPIs", i);
    }
    write_retention(w, &m.retention);
    w.close(name);
}

pub(crate) fn write_properties(p: &ServiceProperties) -> String {
    let mut w = Writer::new();
    w.open("StorageServiceProperties");
    let l = &p.logging;
    w.open("Logging")
        .text("Version", &l.version)
        .bool("Delete", l.delete)
        .bool("Read", l.read)
        .bool("Write", l.write);
    write_retention(&mut w, &l.retention);
    w.close("Logging");
    write_metrics(&mut w, "HourMetrics", &p.hour_metrics);
    write_metrics(&mut w, "MinuteMetrics", &p.minute_metrics);
    if p.cors.is_empty() {
        w.empty("Cors");
    } else {
        w.open("Cors");
        for r in &p.cors {
            w.open("CorsRule")
                .text("AllowedOrigins", &r.allowed_origins.join(","))
                .text("AllowedMethods", &r.allowed_methods.join(","))
                .text("MaxAgeInSeconds", &r.max_age_seconds.to_string())
                .text("ExposedHeaders", &r.exposed_headers.join(","))
                .text("AllowedHeaders", &r.allowed_headers.join(","))
                .close("CorsRule");
        }
        w.close("Cors");
    }
    w.close("StorageServiceProperties");
    w.finish()
}

pub(crate) fn write_stats(s: &ServiceStats) -> String {
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(s.last_sync_time.unix_seconds().max(0) as u64);
    let mut w = Writer::new();
    w.open("StorageServiceStats")
        .open("GeoReplication")
        .text("Status", "live")
        .text("LastSyncTime", &httpdate::fmt_http_date(when))
        .close("GeoReplication")
        .close("StorageServiceStats");
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<StorageServiceProperties>
  <Logging><Version>1.0</Version><Delete>false</Delete><Read>false</Read><Write>true</Write>
    <RetentionPolicy><Enabled>true</Enabled><Days>7</Days></RetentionPolicy></Logging>
  <HourMetrics><Version>1.0</Version><Enabled>true</Enabled><IncludeAPIs>false</IncludeAPIs>
    <RetentionPolicy><Enabled>true</Enabled><Days>7</Days></RetentionPolicy></HourMetrics>
  <MinuteMetrics><Version>1.0</Version><Enabled>false</Enabled>
    <RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></MinuteMetrics>
  <Cors>
    <CorsRule>
      <AllowedOrigins>https://app.example.com, https://b.example</AllowedOrigins>
      <AllowedMethods>GET,PUT,POST,MERGE,DELETE</AllowedMethods>
      <MaxAgeInSeconds>600</MaxAgeInSeconds>
      <ExposedHeaders>x-ms-*</ExposedHeaders>
      <AllowedHeaders>x-ms-*,content-type</AllowedHeaders>
    </CorsRule>
  </Cors>
</StorageServiceProperties>"#;

    #[test]
    fn round_trips_the_documented_sample() {
        let u = parse_properties(SAMPLE.as_bytes()).expect("parses");
        let p = ServiceProperties {
            logging: u.logging.clone().expect("logging"),
            hour_metrics: u.hour_metrics.clone().expect("hour"),
            minute_metrics: u.minute_metrics.clone().expect("minute"),
            cors: u.cors.clone().expect("cors"),
        };
        assert!(p.logging.write && p.logging.retention.days == Some(7));
        assert_eq!(p.hour_metrics.include_apis, Some(false));
        assert_eq!(
            p.cors[0].allowed_origins,
            vec!["https://app.example.com", "https://b.example"]
        );
        let out = write_properties(&p);
        let again = parse_properties(out.as_bytes()).expect("parses its own output");
        assert_eq!(again, u);
    }

    #[test]
    fn omitted_elements_are_none_and_defaults_serialise() {
        let u = parse_properties(b"<StorageServiceProperties><Cors/></StorageServiceProperties>").expect("parses");
        assert_eq!(
            u,
            PropertiesUpdate {
                cors: Some(vec![]),
                ..Default::default()
            }
        );
        let out = write_properties(&ServiceProperties::default());
        assert!(out.contains("<MinuteMetrics><Version>1.0</Version><Enabled>false</Enabled><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></MinuteMetrics><Cors /></StorageServiceProperties>"), "{out}");
    }

    #[test]
    fn errors() {
        let code = |b: &str| parse_properties(b.as_bytes()).err().map(|e| e.code);
        assert_eq!(code(""), Some(ErrorCode::InvalidXmlDocument));
        assert_eq!(code("<StorageServiceProperties>"), Some(ErrorCode::InvalidXmlDocument));
        assert_eq!(code("<Other/>"), Some(ErrorCode::InvalidXmlDocument));
        assert_eq!(
            code("<StorageServiceProperties><Logging><Version>1.0</Version></Logging></StorageServiceProperties>"),
            Some(ErrorCode::InvalidXmlDocument)
        );
        assert_eq!(
            code("<StorageServiceProperties><HourMetrics><Version>1.0</Version><Enabled>maybe</Enabled><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></HourMetrics></StorageServiceProperties>"),
            Some(ErrorCode::InvalidXmlNodeValue)
        );
        assert_eq!(
            code("<StorageServiceProperties><Cors><CorsRule><AllowedOrigins>*</AllowedOrigins><AllowedMethods>GET</AllowedMethods><MaxAgeInSeconds>-5</MaxAgeInSeconds></CorsRule></Cors></StorageServiceProperties>"),
            Some(ErrorCode::InvalidXmlNodeValue)
        );
    }

    #[test]
    fn stats_document() {
        let s = write_stats(&ServiceStats {
            last_sync_time: tafel_service::model::DateTime::from_unix_seconds(1_717_488_600),
        });
        assert!(
            s.contains("<Status>live</Status><LastSyncTime>Tue, 04 Jun 2024 08:10:00 GMT</LastSyncTime>"),
            "{s}"
        );
    }
}
