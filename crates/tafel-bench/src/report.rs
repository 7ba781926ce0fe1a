//! Results: the per-workload table, JSON output, and the side-by-side comparison.

use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// A latency histogram in microseconds (1 µs .. 10 min, 3 significant digits).
pub fn new_hist() -> Histogram<u64> {
    #[allow(clippy::expect_used, reason = "constant, valid bounds: this cannot fail")]
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

/// The outcome of one workload.
#[derive(Default)]
pub struct Row {
    pub workload: String,
    /// Unit of [`Row::rate`]: "ops/s", "reads/s", "queries/s" or "entities/s".
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
    /// The rate of the same workload against the do-nothing reference server, same run.
    pub ceiling: Option<f64>,
}

impl Row {
    /// The rate as a fraction of the ceiling's.
    pub fn of_ceiling(&self) -> Option<f64> {
        self.ceiling.filter(|&c| c > 0.0).map(|c| self.rate / c)
    }

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
            "ceiling_rate": self.ceiling.map(round),
            "of_ceiling": self.of_ceiling().map(round),
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

fn fmt_fraction(f: Option<f64>) -> String {
    f.map_or("-".into(), |f| format!("{:.0}%", f * 100.0))
}

pub fn results_table(rows: &[Row]) -> String {
    let ceiling = rows.iter().any(|r| r.ceiling.is_some());
    let mut head = vec!["workload", "rate", "unit"];
    if ceiling {
        head.extend(["ceiling", "of ceiling"]);
    }
    head.extend(["ops", "p50 ms", "p99 ms", "p99.9 ms", "errors", "verified", "notes"]);
    let mut t = vec![head.into_iter().map(String::from).collect::<Vec<_>>()];
    for r in rows {
        let mut cells = vec![r.workload.clone(), fmt_rate(r.rate), r.unit.to_string()];
        if ceiling {
            cells.push(r.ceiling.map_or("-".into(), fmt_rate));
            cells.push(fmt_fraction(r.of_ceiling()));
        }
        cells.extend([
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
        t.push(cells);
    }
    print_table(&t)
}

/// `tafel-bench compare A.json B.json [C.json …]`: A (the subject) side by side with each
/// baseline; ratio = A / baseline of the primary rate, and A's fraction of its ceiling
/// when A was run with `--ceiling`.
pub fn compare(a: &Value, others: &[Value]) -> Result<String, String> {
    let name = |v: &Value| v["target"].as_str().unwrap_or("?").to_string();
    let rows_of = |v: &Value| -> Result<Vec<Value>, String> {
        v["results"]
            .as_array()
            .cloned()
            .ok_or_else(|| "no \"results\" array".to_string())
    };
    let ra = rows_of(a)?;
    let rbs = others.iter().map(rows_of).collect::<Result<Vec<_>, _>>()?;
    let na = name(a);
    let ceiling = ra.iter().any(|x| x["of_ceiling"].is_number());
    let mut head = vec!["workload".to_string(), "unit".to_string(), format!("{na} rate")];
    if ceiling {
        head.push(format!("{na} of ceiling"));
    }
    head.push(format!("{na} p99 ms"));
    for b in others {
        let nb = name(b);
        head.extend([format!("{nb} rate"), format!("{na} / {nb}"), format!("{nb} p99 ms")]);
    }
    head.push("errors".to_string());
    let mut t = vec![head];
    let errs = |v: &Value| v["errors"].as_u64().unwrap_or(0) + v["mismatches"].as_u64().unwrap_or(0);
    for x in &ra {
        let w = x["workload"].as_str().unwrap_or("?");
        let matches: Vec<Option<&Value>> = rbs
            .iter()
            .map(|rb| rb.iter().find(|y| y["workload"].as_str() == Some(w)))
            .collect();
        if matches.iter().all(Option::is_none) {
            continue;
        }
        let xa = x["rate"].as_f64().unwrap_or(0.0);
        let mut row = vec![
            w.to_string(),
            x["unit"].as_str().unwrap_or("").to_string(),
            fmt_rate(xa),
        ];
        if ceiling {
            row.push(fmt_fraction(x["of_ceiling"].as_f64()));
        }
        row.push(fmt_ms(x["p99_ms"].as_f64().unwrap_or(0.0)));
        let mut errors = errs(x).to_string();
        for y in matches {
            let Some(y) = y else {
                row.extend(["-".to_string(), "-".to_string(), "-".to_string()]);
                errors.push_str(" / -");
                continue;
            };
            let yb = y["rate"].as_f64().unwrap_or(0.0);
            row.push(fmt_rate(yb));
            row.push(if yb > 0.0 {
                format!("{:.1}×", xa / yb)
            } else {
                "n/a".into()
            });
            row.push(fmt_ms(y["p99_ms"].as_f64().unwrap_or(0.0)));
            errors.push_str(&format!(" / {}", errs(y)));
        }
        row.push(errors);
        t.push(row);
    }
    Ok(print_table(&t))
}
