//! `Edm.DateTime`: UTC instants in 100-ns ticks since 0001-01-01T00:00:00Z, the
//! resolution Azure keeps (7 fractional digits). Hand-written because it sits on
//! the hot path (every Timestamp of every response) and its range and formats are
//! Azure's, not ISO's in general.
//!
//! Azure writes an entity's DateTimes — property values, Timestamp and the ETag made
//! from it — as .NET's `yyyy-MM-ddTHH:mm:ss.FFFFFFFZ`: up to seven fractional digits
//! with trailing zeros dropped, and no fraction at all when it is zero
//! (`2020-09-17T00:00:00.99999Z`, `1970-10-04T00:00:00Z`, a Timestamp and its ETag
//! `2022-02-01T20:52:36.569405Z`: Azure's answers in azure-sdk-for-js's recordings,
//! `sdk/tables/data-tables/recordings/node/`, and azure-sdk-for-python's perf tests).
//! That is [`DateTime::iso`]. The access-policy documents and the `Time:` of error
//! messages keep all seven (`2021-06-08T02:05:09.0000000Z`, `…22.8065600Z`):
//! [`DateTime::iso_bytes`].

use std::fmt;

/// Ticks (100 ns) since 0001-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DateTime(pub i64);

const TICKS_PER_SECOND: i64 = 10_000_000;
const TICKS_PER_DAY: i64 = 86_400 * TICKS_PER_SECOND;
/// Days from 0001-01-01 to 1970-01-01.
const UNIX_EPOCH_DAYS: i64 = 719_162;

impl DateTime {
    /// 1601-01-01T00:00:00Z, the earliest value Azure stores.
    pub const MIN: DateTime = DateTime(504_911_232_000_000_000);
    /// 9999-12-31T23:59:59.9999999Z.
    pub const MAX: DateTime = DateTime(3_155_378_975_999_999_999);

    pub fn now() -> DateTime {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        DateTime(UNIX_EPOCH_DAYS * TICKS_PER_DAY + (d.as_nanos() / 100) as i64)
    }

    pub fn ticks(self) -> i64 {
        self.0
    }

    /// `d` later (saturating: a far future stays the farthest).
    pub fn after(self, d: std::time::Duration) -> DateTime {
        let ticks = i64::try_from(d.as_nanos() / 100).unwrap_or(i64::MAX);
        DateTime(self.0.saturating_add(ticks))
    }

    /// Seconds since the Unix epoch (may be negative).
    pub fn unix_seconds(self) -> i64 {
        (self.0 - UNIX_EPOCH_DAYS * TICKS_PER_DAY).div_euclid(TICKS_PER_SECOND)
    }

    pub fn from_unix_seconds(s: i64) -> DateTime {
        DateTime(UNIX_EPOCH_DAYS * TICKS_PER_DAY + s * TICKS_PER_SECOND)
    }

    pub fn in_azure_range(self) -> bool {
        self >= DateTime::MIN && self <= DateTime::MAX
    }

    /// Parses ISO 8601 as clients send it: `YYYY-MM-DDTHH:MM[:SS[.f…]][Z|±HH:MM]`.
    /// No offset means UTC. Fractions beyond 7 digits are truncated. Returns `None`
    /// for anything malformed, including out-of-range fields; the caller decides
    /// whether a valid but out-of-Azure-range instant is an error.
    pub fn parse(s: &str) -> Option<DateTime> {
        let b = s.as_bytes();
        let num = |r: std::ops::Range<usize>| -> Option<i64> {
            let part = b.get(r)?;
            if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
                return None;
            }
            Some(part.iter().fold(0i64, |a, d| a * 10 + i64::from(d - b'0')))
        };
        if b.len() < 16
            || b[4] != b'-'
            || b[7] != b'-'
            || !(b[10] == b'T' || b[10] == b't' || b[10] == b' ')
            || b[13] != b':'
        {
            return None;
        }
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (hour, minute) = (num(11..13)?, num(14..16)?);
        let mut i = 16;
        let mut second = 0;
        let mut frac = 0i64;
        if b.get(i) == Some(&b':') {
            second = num(i + 1..i + 3)?;
            i += 3;
            if b.get(i) == Some(&b'.') {
                i += 1;
                let start = i;
                let mut digits = 0;
                while let Some(d) = b.get(i).filter(|d| d.is_ascii_digit()) {
                    if digits < 7 {
                        frac = frac * 10 + i64::from(d - b'0');
                        digits += 1;
                    }
                    i += 1;
                }
                if i == start {
                    return None;
                }
                for _ in digits..7 {
                    frac *= 10;
                }
            }
        }
        let offset_minutes = match b.get(i) {
            None => 0,
            Some(b'Z') | Some(b'z') if i + 1 == b.len() => 0,
            Some(&sign @ (b'+' | b'-')) if b.len() == i + 6 && b[i + 3] == b':' => {
                let m = num(i + 1..i + 3)? * 60 + num(i + 4..i + 6)?;
                if sign == b'+' {
                    m
                } else {
                    -m
                }
            }
            _ => return None,
        };
        if !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 59
            || year < 1
        {
            return None;
        }
        let days = days_from_civil(year, month, day);
        let ticks =
            days * TICKS_PER_DAY + ((hour * 60 + minute - offset_minutes) * 60 + second) * TICKS_PER_SECOND + frac;
        Some(DateTime(ticks))
    }

    /// `YYYY-MM-DDTHH:MM:SS[.FFFFFFF]Z`, the form Azure gives an entity's DateTimes:
    /// trailing zeros of the fraction dropped, and the whole fraction, '.' and all,
    /// when it is zero. On the stack, so encoders copy it without an intermediate String.
    pub fn iso(self) -> Iso {
        let mut buf = self.iso_bytes();
        // The fraction is bytes 20..27; keep up to its last non-zero digit.
        let digits = buf[20..27].iter().rposition(|&d| d != b'0').map_or(0, |i| i + 1);
        let len = if digits == 0 { 19 } else { 20 + digits };
        buf[len] = b'Z';
        Iso { buf, len: len + 1 }
    }

    /// `YYYY-MM-DDTHH:MM:SS.fffffffZ` as 28 ASCII bytes, all seven fractional digits
    /// kept: the form of access policies and error messages ([`DateTime::iso`] is
    /// entities').
    pub fn iso_bytes(self) -> [u8; 28] {
        let days = self.0.div_euclid(TICKS_PER_DAY);
        let rem = self.0.rem_euclid(TICKS_PER_DAY);
        let (y, m, d) = civil_from_days(days);
        let secs = rem / TICKS_PER_SECOND;
        let frac = rem % TICKS_PER_SECOND;
        let mut buf = [0u8; 28];
        // rem_euclid keeps every byte an ASCII digit even for years outside 0..=9999.
        let put = |buf: &mut [u8], at: usize, width: usize, mut v: i64| {
            for k in (0..width).rev() {
                buf[at + k] = b'0' + v.rem_euclid(10) as u8;
                v /= 10;
            }
        };
        put(&mut buf, 0, 4, y);
        buf[4] = b'-';
        put(&mut buf, 5, 2, m);
        buf[7] = b'-';
        put(&mut buf, 8, 2, d);
        buf[10] = b'T';
        put(&mut buf, 11, 2, secs / 3600);
        buf[13] = b':';
        put(&mut buf, 14, 2, secs / 60 % 60);
        buf[16] = b':';
        put(&mut buf, 17, 2, secs % 60);
        buf[19] = b'.';
        put(&mut buf, 20, 7, frac);
        buf[27] = b'Z';
        buf
    }

    /// `YYYY-MM-DDTHH:MM:SS.fffffffZ` ([`DateTime::iso_bytes`]) as a String.
    pub fn to_iso(self) -> String {
        self.to_string()
    }
}

/// Writes all seven fractional digits ([`DateTime::iso_bytes`]), as Azure's error
/// messages give their `Time:`; an entity's DateTimes are [`DateTime::iso`].
impl fmt::Display for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(std::str::from_utf8(&self.iso_bytes()).unwrap_or_default())
    }
}

/// [`DateTime::iso`]'s text: 20 to 28 ASCII bytes on the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Iso {
    buf: [u8; 28],
    len: usize,
}

impl Iso {
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    pub fn as_str(&self) -> &str {
        // All bytes of iso_bytes are ASCII.
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 0001-01-01 (proleptic Gregorian), after H. Hinnant's algorithm.
/// Written here rather than taken from the `time` crate (which the access log
/// and the bench use): this runs for every Timestamp encoded, and must map every
/// i64 of ticks, where `time`'s dates stop at year 9999.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    // 719468 shifts the algorithm's 0000-03-01 epoch to 1970; then to 0001-01-01.
    era * 146_097 + doe - 719_468 + UNIX_EPOCH_DAYS
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days - UNIX_EPOCH_DAYS + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_seven_digits() {
        for s in [
            "2024-06-04T08:15:30.1234567Z",
            "1601-01-01T00:00:00.0000000Z",
            "9999-12-31T23:59:59.9999999Z",
            "2000-02-29T00:00:00.0000001Z",
        ] {
            assert_eq!(DateTime::parse(s).map(DateTime::to_iso).as_deref(), Some(s));
        }
    }

    #[test]
    fn entity_form_drops_trailing_zeros_of_the_fraction_as_azure_does() {
        for (sent, want) in [
            ("2020-09-17T00:00:00.99999Z", "2020-09-17T00:00:00.99999Z"),
            ("2020-09-17T00:00:00.9999900Z", "2020-09-17T00:00:00.99999Z"),
            ("2020-09-17T00:00:00Z", "2020-09-17T00:00:00Z"),
            ("2020-09-17T00:00:00.0000000Z", "2020-09-17T00:00:00Z"),
            ("2019-07-10T18:59:59.999Z", "2019-07-10T18:59:59.999Z"),
            ("2022-02-01T20:52:36.5694050Z", "2022-02-01T20:52:36.569405Z"),
            ("2024-06-04T08:15:30.1234567Z", "2024-06-04T08:15:30.1234567Z"),
            ("2000-02-29T00:00:00.0000001Z", "2000-02-29T00:00:00.0000001Z"),
            ("9999-12-31T23:59:59.9999999Z", "9999-12-31T23:59:59.9999999Z"),
            ("1601-01-01T00:00:00Z", "1601-01-01T00:00:00Z"),
        ] {
            let d = DateTime::parse(sent);
            assert_eq!(d.map(|d| d.iso().as_str().to_owned()).as_deref(), Some(want), "{sent}");
            assert_eq!(DateTime::parse(want), d, "{want} reads back as the same instant");
        }
    }

    #[test]
    fn range_constants_are_the_documented_instants() {
        assert_eq!(DateTime::MIN.to_iso(), "1601-01-01T00:00:00.0000000Z");
        assert_eq!(DateTime::MAX.to_iso(), "9999-12-31T23:59:59.9999999Z");
        assert_eq!(DateTime::from_unix_seconds(0).to_iso(), "1970-01-01T00:00:00.0000000Z");
    }

    #[test]
    fn any_ticks_format_as_ascii_without_panicking() {
        for t in [i64::MIN, -1, 0, i64::MAX] {
            assert!(DateTime(t).iso_bytes().is_ascii());
            assert_eq!(DateTime(t).to_iso().len(), 28);
            assert!(DateTime(t).iso().as_bytes().is_ascii());
            assert!((20..=28).contains(&DateTime(t).iso().as_str().len()));
        }
    }

    #[test]
    fn accepts_client_variants() {
        let want = DateTime::parse("2024-06-04T08:15:30.0000000Z");
        assert_eq!(DateTime::parse("2024-06-04T08:15:30Z"), want);
        assert_eq!(DateTime::parse("2024-06-04T08:15:30"), want);
        assert_eq!(DateTime::parse("2024-06-04T10:15:30+02:00"), want);
        assert_eq!(DateTime::parse("2024-06-04T08:15:30.000000000Z"), want);
        assert_eq!(
            DateTime::parse("2024-06-04T08:15Z").map(|d| d.to_iso()).as_deref(),
            Some("2024-06-04T08:15:00.0000000Z")
        );
    }

    #[test]
    fn rejects_malformed() {
        for s in [
            "",
            "2024-13-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-06-04",
            "2024-06-04T08:15:30.Z",
            "2024-06-04T08:15:30Zjunk",
            "abcd-06-04T08:15:30Z",
        ] {
            assert_eq!(DateTime::parse(s), None, "{s}");
        }
    }
}
