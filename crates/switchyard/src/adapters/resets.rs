//! When a provider's daily quota resets: Google's at midnight US Pacific
//! time (PST, UTC−8, or PDT, UTC−7, by the US daylight-saving rule),
//! DashScope's at midnight Beijing time (UTC+8, no daylight saving) unless
//! its answer names the time. Plain calendar arithmetic on Unix seconds:
//! no time-zone database, nothing read from the system.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

const DAY: i64 = 86_400;
const HOUR: i64 = 3_600;
/// Beijing's offset from UTC.
const BEIJING: i64 = 8 * HOUR;

/// How long from `now` until Google's next daily reset.
pub fn until_pacific_midnight(now: SystemTime) -> Duration {
    until(now, next_pacific_midnight(now))
}

/// How long from `now` until the next midnight in Beijing.
pub fn until_beijing_midnight(now: SystemTime) -> Duration {
    until(now, next_beijing_midnight(now))
}

/// The first midnight in US Pacific time after `now`.
pub fn next_pacific_midnight(now: SystemTime) -> SystemTime {
    let t = unix(now);
    let day = (t + pacific_offset(t)).div_euclid(DAY) + 1;
    let midnight = day * DAY;
    // Midnight is hours away from a 2 a.m. change, so the offset in force
    // at it is the one that maps it to itself.
    let utc = [-8 * HOUR, -7 * HOUR]
        .into_iter()
        .map(|off| midnight - off)
        .find(|&u| u + pacific_offset(u) == midnight)
        .unwrap_or(midnight + 8 * HOUR);
    at(utc)
}

/// The first midnight in Beijing after `now`.
pub fn next_beijing_midnight(now: SystemTime) -> SystemTime {
    let t = unix(now);
    let day = (t + BEIJING).div_euclid(DAY) + 1;
    at(day * DAY - BEIJING)
}

/// The first `YYYY-MM-DD HH:MM:SS` (or with `T`) in `text`: a time in
/// Beijing unless a `Z` or a `±HH:MM` offset follows it.
pub fn beijing_time_in(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    (0..b.len()).find_map(|i| stamp_at(b, i))
}

/// `at - now`, or zero when `at` is past.
pub fn until(now: SystemTime, at: SystemTime) -> Duration {
    at.duration_since(now).unwrap_or_default()
}

/// The stamp starting at byte `i`, if there is one.
fn stamp_at(b: &[u8], i: usize) -> Option<SystemTime> {
    let s = b.get(i..i + 19)?;
    let digits = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    let shape = s[4] == b'-' && s[7] == b'-' && matches!(s[10], b' ' | b'T') && s[13] == b':';
    if !shape || s[16] != b':' || (i > 0 && b[i - 1].is_ascii_digit()) {
        return None;
    }
    let (y, mo, d) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (h, mi, sec) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let rest = &b[i + 19..];
    let offset = match rest {
        [b'Z' | b'z', ..] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2, ..]
            if [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()) =>
        {
            let n = |a: &u8, b: &u8| i64::from(a - b'0') * 10 + i64::from(b - b'0');
            let off = n(h1, h2) * HOUR + n(m1, m2) * 60;
            if *sign == b'-' {
                -off
            } else {
                off
            }
        }
        _ => BEIJING,
    };
    let local = days_from_civil(y, mo, d)? * DAY + h * HOUR + mi * 60 + sec;
    Some(at(local - offset))
}

/// The US Pacific offset from UTC in force at Unix second `t`: daylight
/// time from the second Sunday of March, 2 a.m. PST (10:00 UTC), to the
/// first Sunday of November, 2 a.m. PDT (09:00 UTC).
fn pacific_offset(t: i64) -> i64 {
    let (year, _, _) = civil_from_days(t.div_euclid(DAY));
    let starts = nth_sunday(year, 3, 2) * DAY + 10 * HOUR;
    let ends = nth_sunday(year, 11, 1) * DAY + 9 * HOUR;
    if (starts..ends).contains(&t) {
        -7 * HOUR
    } else {
        -8 * HOUR
    }
}

/// The day number (since 1970-01-01) of the `n`-th Sunday of a month.
fn nth_sunday(year: i64, month: i64, n: i64) -> i64 {
    let first = days_from_civil(year, month, 1).unwrap_or(0);
    // 1970-01-01 was a Thursday: (days + 4) mod 7 is 0 on Sundays.
    let to_sunday = (7 - (first + 4).rem_euclid(7)) % 7;
    first + to_sunday + 7 * (n - 1)
}

fn unix(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 2),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX / 2),
    }
}

fn at(secs: i64) -> SystemTime {
    match u64::try_from(secs) {
        Ok(s) => UNIX_EPOCH + Duration::from_secs(s),
        Err(_) => UNIX_EPOCH,
    }
}

/// 1970-01-01 as a Julian day number.
const EPOCH_JULIAN: i64 = 2_440_588;

/// Days since 1970-01-01 of a calendar date (the `time` crate's calendar);
/// `None` for a date that does not exist (February 30th).
fn days_from_civil(y: i64, m: i64, d: i64) -> Option<i64> {
    let month = time::Month::try_from(u8::try_from(m).ok()?).ok()?;
    let date = time::Date::from_calendar_date(i32::try_from(y).ok()?, month, u8::try_from(d).ok()?);
    Some(i64::from(date.ok()?.to_julian_day()) - EPOCH_JULIAN)
}

/// (year, month, day) of a day number (1970-01-01 for one out of the
/// calendar's range).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let date = i32::try_from(z + EPOCH_JULIAN)
        .ok()
        .and_then(|j| time::Date::from_julian_day(j).ok())
        .unwrap_or(time::macros::date!(1970 - 01 - 01));
    (
        i64::from(date.year()),
        i64::from(u8::from(date.month())),
        i64::from(date.day()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A UTC time written out, as a `SystemTime`.
    fn utc(y: i64, mo: i64, d: i64, h: i64, mi: i64) -> SystemTime {
        at(days_from_civil(y, mo, d).unwrap() * DAY + h * HOUR + mi * 60)
    }

    fn hours(d: Duration) -> f64 {
        d.as_secs_f64() / 3600.0
    }

    #[test]
    fn pacific_midnight_in_winter_and_summer() {
        // 2026-01-15 20:00 UTC is 12:00 PST: midnight is 08:00 UTC.
        let now = utc(2026, 1, 15, 20, 0);
        assert_eq!(next_pacific_midnight(now), utc(2026, 1, 16, 8, 0));
        assert_eq!(hours(until_pacific_midnight(now)), 12.0);
        // 2026-07-15 20:00 UTC is 13:00 PDT: midnight is 07:00 UTC.
        let now = utc(2026, 7, 15, 20, 0);
        assert_eq!(next_pacific_midnight(now), utc(2026, 7, 16, 7, 0));
        assert_eq!(hours(until_pacific_midnight(now)), 11.0);
        // Just past midnight PDT: a whole day to the next one.
        let now = utc(2026, 7, 16, 7, 1);
        assert_eq!(next_pacific_midnight(now), utc(2026, 7, 17, 7, 0));
        // Across a new year (PST on both sides).
        let now = utc(2027, 1, 1, 7, 30); // 23:30 PST on Dec 31
        assert_eq!(next_pacific_midnight(now), utc(2027, 1, 1, 8, 0));
    }

    /// Daylight saving begins on 2026-03-08 (the second Sunday of March):
    /// that day has 23 hours in Pacific time.
    #[test]
    fn pacific_midnight_when_clocks_go_forward() {
        assert_eq!(nth_sunday(2026, 3, 2), days_from_civil(2026, 3, 8).unwrap());
        // 01:00 PST on the 8th (09:00 UTC): the next midnight is PDT.
        let now = utc(2026, 3, 8, 9, 0);
        assert_eq!(next_pacific_midnight(now), utc(2026, 3, 9, 7, 0));
        assert_eq!(hours(until_pacific_midnight(now)), 22.0);
        // The midnight opening that day is still PST.
        let now = utc(2026, 3, 7, 12, 0);
        assert_eq!(next_pacific_midnight(now), utc(2026, 3, 8, 8, 0));
        // The change itself: 01:59 PST, then 03:00 PDT.
        assert_eq!(pacific_offset(unix(utc(2026, 3, 8, 9, 59))), -8 * HOUR);
        assert_eq!(pacific_offset(unix(utc(2026, 3, 8, 10, 0))), -7 * HOUR);
    }

    /// Daylight saving ends on 2026-11-01 (the first Sunday of November):
    /// that day has 25 hours in Pacific time.
    #[test]
    fn pacific_midnight_when_clocks_go_back() {
        assert_eq!(
            nth_sunday(2026, 11, 1),
            days_from_civil(2026, 11, 1).unwrap()
        );
        // 01:30 PDT on the 1st (08:30 UTC): the next midnight is PST.
        let now = utc(2026, 11, 1, 8, 30);
        assert_eq!(next_pacific_midnight(now), utc(2026, 11, 2, 8, 0));
        assert_eq!(hours(until_pacific_midnight(now)), 23.5);
        // The midnight opening that day is still PDT: 07:00 UTC.
        let now = utc(2026, 10, 31, 20, 0);
        assert_eq!(next_pacific_midnight(now), utc(2026, 11, 1, 7, 0));
        // The whole day, midnight to midnight, is 25 hours.
        let from = next_pacific_midnight(now);
        assert_eq!(hours(until_pacific_midnight(from)), 25.0);
        assert_eq!(pacific_offset(unix(utc(2026, 11, 1, 8, 59))), -7 * HOUR);
        assert_eq!(pacific_offset(unix(utc(2026, 11, 1, 9, 0))), -8 * HOUR);
        // Another year's rule lands on its own Sundays (2025: 2 Nov, 9 Mar).
        assert_eq!(
            nth_sunday(2025, 11, 1),
            days_from_civil(2025, 11, 2).unwrap()
        );
        assert_eq!(nth_sunday(2025, 3, 2), days_from_civil(2025, 3, 9).unwrap());
    }

    #[test]
    fn beijing_midnight_and_stated_times() {
        // 2026-05-01 15:59 UTC is 23:59 in Beijing: a minute to go.
        let now = utc(2026, 5, 1, 15, 59);
        assert_eq!(next_beijing_midnight(now), utc(2026, 5, 1, 16, 0));
        assert_eq!(until_beijing_midnight(now), Duration::from_secs(60));
        let now = utc(2026, 5, 1, 16, 0);
        assert_eq!(next_beijing_midnight(now), utc(2026, 5, 2, 16, 0));
        let msg = "已达到 5 小时的使用上限。您的限额将在 2026-08-25 07:41:44 重置。";
        let t = beijing_time_in(msg).unwrap();
        assert_eq!(t, utc(2026, 8, 24, 23, 41) + Duration::from_secs(44));
        assert_eq!(
            beijing_time_in("resets at 2026-08-25T07:41:44Z."),
            Some(utc(2026, 8, 25, 7, 41) + Duration::from_secs(44))
        );
        assert_eq!(
            beijing_time_in("at 2026-08-25 07:41:44+02:00"),
            Some(utc(2026, 8, 25, 5, 41) + Duration::from_secs(44))
        );
        for none in [
            "no time here",
            "2026-13-01 00:00:00",
            "2026-02-30 00:00:00",
            "12026-08-25 07:41:44x",
            "2026-08-25 7:41:44",
            "",
            "2026-08-25 07:41",
        ] {
            assert_eq!(beijing_time_in(none), None, "{none}");
        }
    }

    #[test]
    fn the_calendar_round_trips() {
        for days in [-1, 0, 59, 365, 11_016, 20_454, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), Some(days), "{y}-{m}-{d}");
        }
        // Before 1970 a time is the epoch (never a panic).
        assert_eq!(at(-5), UNIX_EPOCH);
        assert!(next_pacific_midnight(UNIX_EPOCH) > UNIX_EPOCH);
    }
}
