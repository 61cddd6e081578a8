//! Civil-time helpers (UTC) for SigV4 dates, JWT times and Vertex `createTime`, without a
//! date crate.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch (negative before it).
pub fn unix_secs(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

/// The time `secs` seconds after the Unix epoch (`None` if out of range).
pub fn from_unix_secs(secs: i64) -> Option<SystemTime> {
    if secs >= 0 {
        UNIX_EPOCH.checked_add(Duration::from_secs(secs.unsigned_abs()))
    } else {
        UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs()))
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// (year, month, day) of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// (year, month, day, hour, minute, second) of Unix seconds.
fn fields(secs: i64) -> (i64, i64, i64, i64, i64, i64) {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    (y, m, d, rem / 3600, rem % 3600 / 60, rem % 60)
}

/// SigV4's ISO 8601 basic format, `20250101T000000Z`.
pub fn amz_date(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = fields(unix_secs(t));
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z")
}

/// Parse `YYYYMMDDTHHMMSSZ` into Unix seconds.
pub fn parse_amz_date(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let (y, mo, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (h, mi, sec) = (num(9..11)?, num(11..13)?, num(13..15)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec)
}

/// RFC 3339 with microseconds, as Vertex writes `createTime`: `2025-06-27T08:48:21.154666Z`.
pub fn rfc3339_micros(t: SystemTime) -> String {
    let micros = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_micros())
        .unwrap_or(0);
    let (y, mo, d, h, mi, s) = fields(unix_secs(t));
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{micros:06}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let t = parse_amz_date("20250101T000000Z").unwrap();
        assert_eq!(t, 1_735_689_600);
        assert_eq!(amz_date(from_unix_secs(t).unwrap()), "20250101T000000Z");
        let leap = parse_amz_date("20240229T235959Z").unwrap();
        assert_eq!(amz_date(from_unix_secs(leap).unwrap()), "20240229T235959Z");
        assert_eq!(amz_date(from_unix_secs(-1).unwrap()), "19691231T235959Z");
        for bad in [
            "",
            "20250101T000000",
            "2025010aT000000Z",
            "20251301T000000Z",
            "２0250101T00000Z",
        ] {
            assert_eq!(parse_amz_date(bad), None, "{bad}");
        }
        let t = UNIX_EPOCH + Duration::from_micros(1_751_014_101_154_666);
        assert_eq!(rfc3339_micros(t), "2025-06-27T08:48:21.154666Z");
    }
}
