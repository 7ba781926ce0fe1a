//! Results: the per-workload table, JSON output, and the side-by-side comparison.

use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// A latency histogram in microseconds (1 µs .. 10 min, 3 significant digits).
pub fn new_hist() -> Histogram<u64> {
    // Constant, valid bounds: this cannot fail.
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

/// The outcome of one workload.
#[derive(Default)]
pub struct Row {
    pub workload: String,
    /// Unit of [`Row::rate`]: "ops/s", "queries/s" or "entities/s".
    pub unit: &'static str,
    pub rate: f64,
    pub ops: u64,
    pub entities: u64,
    pub matched: u64,
    pub elapsed_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub errors: u64,
    pub verified: u64,
    pub mismatches: u64,
    pub note: String,
}

impl Row {
    pub fn set_latency(&mut self, h: &Histogram<u64>) {
        if h.is_empty() {
            return;
        }
        let ms = |us: u64| us as f64 / 1000.0;
        self.p50_ms = ms(h.value_at_quantile(0.50));
        self.p99_ms = ms(h.value_at_quantile(0.99));
        self.p999_ms = ms(h.value_at_quantile(0.999));
        self.max_ms = ms(h.max());
    }

    pub fn to_json(&self) -> Value {
        json!({
            "workload": self.workload,
            "unit": self.unit,
            "rate": round(self.rate),
            "ops": self.ops,
            "ops_per_s": round(per_s(self.ops, self.elapsed_s)),
            "entities": self.entities,
            "entities_per_s": round(per_s(self.entities, self.elapsed_s)),
            "matched": self.matched,
            "elapsed_s": round(self.elapsed_s),
            "p50_ms": round(self.p50_ms),
            "p99_ms": round(self.p99_ms),
            "p999_ms": round(self.p999_ms),
            "max_ms": round(self.max_ms),
            "errors": self.errors,
            "verified": self.verified,
            "mismatches": self.mismatches,
            "note": self.note,
        })
    }
}

pub fn per_s(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn fmt_rate(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn fmt_ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// Prints a Markdown table (readable as plain text too).
pub fn print_table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; cols];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for (ri, r) in rows.iter().enumerate() {
        out.push('|');
        for (i, w) in widths.iter().enumerate() {
            let c = r.get(i).map(String::as_str).unwrap_or("");
            let pad = w - c.chars().count();
            if i == 0 || ri == 0 {
                out.push_str(&format!(" {c}{} |", " ".repeat(pad)));
            } else {
                out.push_str(&format!(" {}{c} |", " ".repeat(pad)));
            }
        }
        out.push('\n');
        if ri == 0 {
            out.push('|');
            for (i, w) in widths.iter().enumerate() {
                let dashes = "-".repeat(*w);
                if i == 0 {
                    out.push_str(&format!(" {dashes} |"));
                } else {
                    out.push_str(&format!(" {}: |", &dashes[..dashes.len().saturating_sub(1)]));
                }
            }
            out.push('\n');
        }
    }
    out
}

pub fn results_table(rows: &[Row]) -> String {
    let mut t = vec![[
        "workload", "rate", "unit", "ops", "p50 ms", "p99 ms", "p99.9 ms", "errors", "verified", "notes",
    ]
    .map(String::from)
    .to_vec()];
    for r in rows {
        t.push(vec![
            r.workload.clone(),
            fmt_rate(r.rate),
            r.unit.to_string(),
            r.ops.to_string(),
            fmt_ms(r.p50_ms),
            fmt_ms(r.p99_ms),
            fmt_ms(r.p999_ms),
            r.errors.to_string(),
            if r.verified > 0 {
                format!("{}/{}", r.verified - r.mismatches.min(r.verified), r.verified)
            } else {
                "-".into()
            },
            r.note.clone(),
        ]);
    }
    print_table(&t)
}

/// `tafel-bench compare A.json B.json`: the side-by-side table (A is the subject, B the
/// baseline; ratio = A/B of the primary rate).
pub fn compare(a: &Value, b: &Value) -> Result<String, String> {
    let name = |v: &Value| v["target"].as_str().unwrap_or("?").to_string();
    let (na, nb) = (name(a), name(b));
    let rows_of = |v: &Value| -> Result<Vec<Value>, String> {
        v["results"]
            .as_array()
            .cloned()
            .ok_or_else(|| "no \"results\" array".to_string())
    };
    let (ra, rb) = (rows_of(a)?, rows_of(b)?);
    let mut t = vec![vec![
        "workload".to_string(),
        "unit".to_string(),
        format!("{na} rate"),
        format!("{nb} rate"),
        "ratio".to_string(),
        format!("{na} p99 ms"),
        format!("{nb} p99 ms"),
        format!("{na} errors"),
        format!("{nb} errors"),
    ]];
    for x in &ra {
        let w = x["workload"].as_str().unwrap_or("?");
        let Some(y) = rb.iter().find(|y| y["workload"].as_str() == Some(w)) else {
            continue;
        };
        let (xa, yb) = (x["rate"].as_f64().unwrap_or(0.0), y["rate"].as_f64().unwrap_or(0.0));
        let ratio = if yb > 0.0 {
            format!("{:.1}×", xa / yb)
        } else {
            "n/a".into()
        };
        let errs = |v: &Value| v["errors"].as_u64().unwrap_or(0) + v["mismatches"].as_u64().unwrap_or(0);
        t.push(vec![
            w.to_string(),
            x["unit"].as_str().unwrap_or("").to_string(),
            fmt_rate(xa),
            fmt_rate(yb),
            ratio,
            fmt_ms(x["p99_ms"].as_f64().unwrap_or(0.0)),
            fmt_ms(y["p99_ms"].as_f64().unwrap_or(0.0)),
            errs(x).to_string(),
            errs(y).to_string(),
        ]);
    }
    Ok(print_table(&t))
}
