//! Deterministic entities: every property value is a pure function of the entity id and
//! its merge version, so any entity read back can be checked without remembering it.
//!
//! Key layout (fixed-width, so key order = id order):
//! * data set (point read, merge, queries, scan): `PartitionKey = p%07d(id / 1000)`,
//!   `RowKey = %013d(id)`, ids `0..N`, 1000 entities per partition;
//! * insert workload: ids from [`INSERT_BASE`], one partition per worker and 1000 inserts;
//! * batch-insert workload: ids from [`BATCH_BASE`], one partition per 100-entity batch.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{Map, Value};
use std::fmt::Write as _;

pub const PARTITION_SIZE: u64 = 1000;
pub const BATCH_SIZE: u64 = 100;
pub const INSERT_BASE: u64 = 1 << 40;
pub const BATCH_BASE: u64 = 2 << 40;

/// Filter of the partition-query workload (besides the PartitionKey equality).
pub const PARTITION_PREDICATE_MIN: i32 = 500; // Int32Prop gt 500
/// Filter of the full-scan workload on the typed shape: `Int32Prop lt 50` (about 5% match).
pub const SCAN_PREDICATE_MAX: i32 = 50;
/// Categories of the strings shape; its scan filter matches one, so about 1 entity in 100.
const CATEGORIES: u64 = 100;
const SCAN_CATEGORY: u64 = 42;

/// What the entities of a run look like (`--shape`). Both are about 1 KiB and carry
/// `Int32Prop` (the partition query's filter) and five more typed properties.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Shape {
    /// Two strings (24 and 440 characters) and eight typed properties: Int32, Int64,
    /// Double, Boolean, DateTime, Guid, a 96-byte Binary and a version. The scan's
    /// filter is `Int32Prop lt 50` (5% match).
    #[default]
    Typed,
    /// Four strings (a category and 64, 256 and 480 characters) and six typed
    /// properties: Int32, Int64, Double, Boolean, DateTime and a version. The scan's
    /// filter is a string equality on the category (1% match).
    Strings,
}

impl Shape {
    pub fn name(self) -> &'static str {
        match self {
            Shape::Typed => "typed",
            Shape::Strings => "strings",
        }
    }

    /// The scan-filter workload's `$filter`.
    pub fn scan_filter(self) -> String {
        match self {
            Shape::Typed => format!("Int32Prop lt {SCAN_PREDICATE_MAX}"),
            Shape::Strings => format!("Category eq '{}'", category(SCAN_CATEGORY)),
        }
    }

    /// Whether data-set entity `id` matches the scan's filter.
    pub fn scan_matches(self, id: u64) -> bool {
        match self {
            Shape::Typed => int32_of(id) < SCAN_PREDICATE_MAX,
            Shape::Strings => category_of(id) == SCAN_CATEGORY,
        }
    }

    /// Every property an entity of this shape has, besides the keys and Timestamp.
    fn props(self) -> &'static [&'static str] {
        match self {
            Shape::Typed => &[
                "Name",
                "Description",
                "Int32Prop",
                "Int64Prop",
                "DoubleProp",
                "BoolProp",
                "DateProp",
                "GuidProp",
                "BinProp",
                "Version",
            ],
            Shape::Strings => &[
                "Category",
                "Title",
                "Summary",
                "Notes",
                "Int32Prop",
                "Int64Prop",
                "DoubleProp",
                "BoolProp",
                "DateProp",
                "Version",
            ],
        }
    }
}

fn category(n: u64) -> String {
    format!("cat-{n:03}")
}

/// The strings shape's category: fixed for an entity's life, like Int32Prop.
fn category_of(id: u64) -> u64 {
    splitmix(id ^ 0x2222) % CATEGORIES
}

pub fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A small, fast PRNG for key choice.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(splitmix(seed))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        splitmix(self.0)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

pub fn data_pk(id: u64) -> String {
    format!("p{:07}", id / PARTITION_SIZE)
}

pub fn partition_pk(partition: u64) -> String {
    format!("p{partition:07}")
}

pub fn rk(id: u64) -> String {
    format!("{id:013}")
}

pub fn insert_id(worker: u64, seq: u64) -> u64 {
    INSERT_BASE + (worker << 32) + seq
}

pub fn insert_pk(worker: u64, seq: u64) -> String {
    format!("i{worker:04}-{:06}", seq / PARTITION_SIZE)
}

pub fn batch_id(worker: u64, batch: u64, i: u64) -> u64 {
    BATCH_BASE + (worker << 32) + batch * BATCH_SIZE + i
}

pub fn batch_pk(worker: u64, batch: u64) -> String {
    format!("b{worker:04}-{batch:07}")
}

/// Int32Prop: fixed for an entity's life (merges never change it), so query and scan
/// results are known in advance.
pub fn int32_of(id: u64) -> i32 {
    (splitmix(id ^ 0x1111) % 1000) as i32
}

/// Number of data-set entities the scan's filter matches.
pub fn scan_expected(shape: Shape, n: u64) -> u64 {
    (0..n).filter(|&id| shape.scan_matches(id)).count() as u64
}

/// Number of entities of a data-set partition with `Int32Prop gt PARTITION_PREDICATE_MIN`.
pub fn partition_expected(partition: u64, n: u64) -> u64 {
    let start = partition * PARTITION_SIZE;
    let end = (start + PARTITION_SIZE).min(n);
    (start..end)
        .filter(|&id| int32_of(id) > PARTITION_PREDICATE_MIN)
        .count() as u64
}

/// All ten properties of an entity: six typed ones both shapes share, and the rest.
pub struct Values {
    pub text: Text,
    pub int32: i32,
    pub int64: i64,
    pub double: f64,
    pub boolean: bool,
    pub date: String,
    pub version: i32,
}

/// The properties that make the shapes differ.
pub enum Text {
    Typed {
        name: String,
        description: String,
        guid: String,
        binary: Vec<u8>,
    },
    Strings {
        category: String,
        title: String,
        summary: String,
        notes: String,
    },
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 .";

fn text(seed: u64, len: usize) -> String {
    let mut r = Rng::new(seed);
    let mut s = String::with_capacity(len);
    while s.len() < len {
        let mut x = r.next_u64();
        for _ in 0..10 {
            if s.len() == len {
                break;
            }
            s.push(ALPHABET[(x & 63) as usize] as char);
            x >>= 6;
        }
    }
    s
}

/// `YYYY-MM-DDTHH:MM:SS.fffffffZ` for seconds since 1970 plus 100-ns ticks.
pub fn format_datetime(secs: i64, ticks: u32) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(secs).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{ticks:07}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

impl Values {
    /// The values of entity `id` of `shape` after `version` merges.
    pub fn new(shape: Shape, id: u64, version: u32) -> Self {
        let fixed = splitmix(id ^ 0xA5A5_0000);
        let var = splitmix(id.wrapping_mul(31) ^ (u64::from(version) << 44) ^ 0x5A5A);
        let text = match shape {
            Shape::Typed => Text::typed(fixed, var),
            Shape::Strings => Text::Strings {
                category: category(category_of(id)),
                title: text(fixed ^ 6, 64),
                summary: text(var ^ 7, 256),
                notes: text(fixed ^ 8, 480),
            },
        };
        let v1 = splitmix(var ^ 1);
        let v2 = splitmix(var ^ 2);
        let v3 = splitmix(var ^ 3);
        // Non-integral by construction (an integer plus an odd multiple of 1/1024, below
        // 2^40, so exact in an f64): no server may print it in a form that reads back as
        // an Int32.
        let double = {
            let x = (v2 % (1u64 << 40)) as f64 + f64::from(1 + 2 * ((v2 >> 48) as u16 % 512)) / 1024.0;
            if v2 >> 63 == 1 {
                -x
            } else {
                x
            }
        };
        // 2000-01-01 .. ~2031, 7 fractional digits, last digit never 0.
        let secs = 946_684_800 + (v3 % 1_000_000_000) as i64;
        let ticks = ((v3 >> 32) % 1_000_000) as u32 * 10 + 1 + (v3 >> 60) as u32 % 9;
        Self {
            text,
            int32: int32_of(id),
            int64: v1 as i64,
            double,
            boolean: fixed & 1 == 1,
            date: format_datetime(secs, ticks),
            version: version as i32,
        }
    }

    /// Full entity JSON (insert body): 10 properties, about 1 KiB.
    pub fn entity_json(&self, pk: &str, rk: &str) -> String {
        let mut s = String::with_capacity(1200);
        let _ = write!(s, "{{\"PartitionKey\":\"{pk}\",\"RowKey\":\"{rk}\",");
        // The typed shape's order is the bench's since its first run: where a
        // filtered property sits in a stored row is part of what a scan costs.
        match &self.text {
            Text::Typed { name, guid, binary, .. } => {
                let _ = write!(
                    s,
                    "\"Name\":\"{name}\",\"Int32Prop\":{},\"BoolProp\":{},\
                     \"GuidProp@odata.type\":\"Edm.Guid\",\"GuidProp\":\"{guid}\",\
                     \"BinProp@odata.type\":\"Edm.Binary\",\"BinProp\":\"{}\",",
                    self.int32,
                    self.boolean,
                    STANDARD.encode(binary)
                );
            }
            Text::Strings {
                category, title, notes, ..
            } => {
                let _ = write!(
                    s,
                    "\"Category\":\"{category}\",\"Title\":\"{title}\",\"Notes\":\"{notes}\",\
                     \"Int32Prop\":{},\"BoolProp\":{},",
                    self.int32, self.boolean
                );
            }
        }
        self.write_mutable(&mut s);
        s.push('}');
        s
    }

    /// Merge body: keys plus the five properties a merge changes.
    pub fn merge_json(&self, pk: &str, rk: &str) -> String {
        let mut s = String::with_capacity(700);
        let _ = write!(s, "{{\"PartitionKey\":\"{pk}\",\"RowKey\":\"{rk}\",");
        self.write_mutable(&mut s);
        s.push('}');
        s
    }

    fn write_mutable(&self, s: &mut String) {
        let (prop, value) = self.text.mutable();
        let _ = write!(
            s,
            "\"{prop}\":\"{value}\",\"Int64Prop@odata.type\":\"Edm.Int64\",\"Int64Prop\":\"{}\",\
             \"DoubleProp\":{:?},\"DateProp@odata.type\":\"Edm.DateTime\",\"DateProp\":\"{}\",\"Version\":{}",
            self.int64, self.double, self.date, self.version
        );
    }
}

impl Text {
    fn typed(fixed: u64, var: u64) -> Self {
        let g1 = splitmix(fixed ^ 1);
        let g2 = splitmix(fixed ^ 2);
        let mut binary = Vec::with_capacity(96);
        let mut r = Rng::new(fixed ^ 3);
        while binary.len() < 96 {
            binary.extend_from_slice(&r.next_u64().to_le_bytes());
        }
        Text::Typed {
            name: text(fixed ^ 4, 24),
            description: text(var ^ 5, 440),
            guid: format!(
                "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                g1 >> 32,
                (g1 >> 16) & 0xFFFF,
                g1 & 0xFFFF,
                g2 >> 48,
                g2 & 0xFFFF_FFFF_FFFF
            ),
            binary,
        }
    }

    fn shape(&self) -> Shape {
        match self {
            Text::Typed { .. } => Shape::Typed,
            Text::Strings { .. } => Shape::Strings,
        }
    }

    /// The string property a merge changes, and its value.
    fn mutable(&self) -> (&'static str, &str) {
        match self {
            Text::Typed { description, .. } => ("Description", description),
            Text::Strings { summary, .. } => ("Summary", summary),
        }
    }

    /// Every `Edm.String` property, with its value.
    fn strings(&self) -> Vec<(&'static str, &str)> {
        match self {
            Text::Typed { name, description, .. } => vec![("Name", name), ("Description", description)],
            Text::Strings {
                category,
                title,
                summary,
                notes,
            } => vec![
                ("Category", category),
                ("Title", title),
                ("Summary", summary),
                ("Notes", notes),
            ],
        }
    }
}

/// Normalises a DateTime string for comparison: trailing zeros of the fraction dropped.
fn norm_datetime(s: &str) -> String {
    let s = s.trim_end_matches('Z');
    match s.split_once('.') {
        Some((whole, frac)) => {
            let frac = frac.trim_end_matches('0');
            if frac.is_empty() {
                whole.to_string()
            } else {
                format!("{whole}.{frac}")
            }
        }
        None => s.to_string(),
    }
}

fn annotation<'a>(obj: &'a Map<String, Value>, prop: &str) -> Option<&'a str> {
    obj.get(&format!("{prop}@odata.type")).and_then(Value::as_str)
}

/// Checks the annotation of a property against the allowed types (`None` = may be absent).
fn check_type(obj: &Map<String, Value>, prop: &str, required: &str, optional: bool) -> Result<(), String> {
    match annotation(obj, prop) {
        Some(t) if t == required => Ok(()),
        None if optional => Ok(()),
        other => Err(format!("{prop}: type annotation {other:?}, expected {required}")),
    }
}

/// Compares an entity object (minimal metadata JSON) with the expected keys and values.
/// Every property must be present with the exact value and type; no unknown property may
/// appear.
pub fn verify_entity(obj: &Map<String, Value>, pk: &str, rk: &str, v: &Values) -> Result<(), String> {
    let str_of = |p: &str| -> Result<&str, String> {
        obj.get(p)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{p}: missing or not a string: {:?}", obj.get(p)))
    };
    if str_of("PartitionKey")? != pk || str_of("RowKey")? != rk {
        return Err(format!(
            "keys: got ({:?},{:?}), expected ({pk},{rk})",
            obj.get("PartitionKey"),
            obj.get("RowKey")
        ));
    }
    for (prop, want) in v.text.strings() {
        check_type(obj, prop, "Edm.String", true)?;
        if str_of(prop)? != want {
            return Err(format!("{prop}: got {:?}, expected {want:?}", obj.get(prop)));
        }
    }
    for (prop, want) in [("Int32Prop", v.int32), ("Version", v.version)] {
        check_type(obj, prop, "Edm.Int32", true)?;
        if obj.get(prop).and_then(Value::as_i64) != Some(i64::from(want)) {
            return Err(format!("{prop}: got {:?}, expected {want}", obj.get(prop)));
        }
    }
    check_type(obj, "Int64Prop", "Edm.Int64", false)?;
    let i64_ok = match obj.get("Int64Prop") {
        Some(Value::String(s)) => s.parse::<i64>() == Ok(v.int64),
        _ => false,
    };
    if !i64_ok {
        return Err(format!(
            "Int64Prop: got {:?}, expected \"{}\"",
            obj.get("Int64Prop"),
            v.int64
        ));
    }
    check_type(obj, "DoubleProp", "Edm.Double", true)?;
    let dbl_ok = match obj.get("DoubleProp") {
        Some(Value::Number(n)) => n.is_f64() && n.as_f64() == Some(v.double),
        _ => false,
    };
    if !dbl_ok {
        return Err(format!(
            "DoubleProp: got {:?}, expected {:?}",
            obj.get("DoubleProp"),
            v.double
        ));
    }
    check_type(obj, "BoolProp", "Edm.Boolean", true)?;
    if obj.get("BoolProp").and_then(Value::as_bool) != Some(v.boolean) {
        return Err(format!(
            "BoolProp: got {:?}, expected {}",
            obj.get("BoolProp"),
            v.boolean
        ));
    }
    check_type(obj, "DateProp", "Edm.DateTime", false)?;
    if norm_datetime(str_of("DateProp")?) != norm_datetime(&v.date) {
        return Err(format!(
            "DateProp: got {:?}, expected {:?}",
            obj.get("DateProp"),
            v.date
        ));
    }
    if let Text::Typed { guid, binary, .. } = &v.text {
        check_type(obj, "GuidProp", "Edm.Guid", false)?;
        if !str_of("GuidProp")?.eq_ignore_ascii_case(guid) {
            return Err(format!("GuidProp: got {:?}, expected {guid:?}", obj.get("GuidProp")));
        }
        check_type(obj, "BinProp", "Edm.Binary", false)?;
        if STANDARD.decode(str_of("BinProp")?).ok().as_deref() != Some(binary.as_slice()) {
            return Err(format!("BinProp: got {:?}, expected other bytes", obj.get("BinProp")));
        }
    }
    for key in obj.keys() {
        let base = key.strip_suffix("@odata.type").unwrap_or(key);
        let known = key.starts_with("odata.")
            || matches!(base, "PartitionKey" | "RowKey" | "Timestamp")
            || v.text.shape().props().contains(&base);
        if !known {
            return Err(format!("unexpected property {key}"));
        }
    }
    Ok(())
}

/// Parses a single-entity body and verifies it.
pub fn verify_body(body: &[u8], pk: &str, rk: &str, v: &Values) -> Result<(), String> {
    let value: Value = serde_json::from_slice(body).map_err(|e| format!("invalid JSON: {e}"))?;
    let obj = value.as_object().ok_or("body is not a JSON object")?;
    verify_entity(obj, pk, rk, v)
}

/// Counts the entities of a query page without parsing it (one `"PartitionKey":` each).
pub fn count_entities(body: &[u8]) -> u64 {
    // memmem, not a naive window scan: the client shares the machine with the
    // server, and query pages are up to a megabyte each.
    memchr::memmem::find_iter(body, b"\"PartitionKey\":").count() as u64
}

/// The RowKey of the last entity of a query page (our RowKeys are numeric ids).
pub fn last_row_id(body: &[u8]) -> Option<u64> {
    const NEEDLE: &[u8] = b"\"RowKey\":\"";
    let pos = memchr::memmem::rfind(body, NEEDLE)? + NEEDLE.len();
    let end = body[pos..].iter().position(|&b| b == b'"')? + pos;
    std::str::from_utf8(&body[pos..end]).ok()?.parse().ok()
}

#[cfg(test)]
#[path = "data_tests.rs"]
mod tests;
