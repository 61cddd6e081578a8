//! `/admin/usage` and `switchyard usage`: totals per group over a time
//! range. Whole UTC days come from the daily rollups, the ragged ends from
//! the request rows, so an answer over months reads a few rows a day
//! whatever the traffic was, and stays right after `retention` deleted the
//! request rows (the rollups are kept).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::record::{Totals, DAY_MS};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    Client,
    Model,
    Route,
    Deployment,
}

impl GroupBy {
    pub fn parse(s: &str) -> Option<GroupBy> {
        Some(match s {
            "client" => GroupBy::Client,
            "model" => GroupBy::Model,
            "route" => GroupBy::Route,
            "deployment" => GroupBy::Deployment,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GroupBy::Client => "client",
            GroupBy::Model => "model",
            GroupBy::Route => "route",
            GroupBy::Deployment => "deployment",
        }
    }

    /// The column, from a fixed list (never from user text).
    pub fn column(self) -> &'static str {
        self.as_str()
    }
}

/// A half-open range `[since, until)` in Unix milliseconds, optionally for
/// one client.
#[derive(Debug, Clone, PartialEq)]
pub struct Range {
    pub since_ms: i64,
    pub until_ms: i64,
    pub client: Option<String>,
}

/// Where each part of a range is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Request rows, `[from, to)` in milliseconds.
    Rows(i64, i64),
    /// Daily rollups, days `[from, to)` (days since the Unix epoch).
    Days(i64, i64),
}

/// Whole days from the rollups, the rest from the rows.
pub fn split(since_ms: i64, until_ms: i64) -> Vec<Part> {
    if until_ms <= since_ms {
        return Vec::new();
    }
    let first_day = since_ms.div_euclid(DAY_MS) + i64::from(since_ms.rem_euclid(DAY_MS) != 0);
    let end_day = until_ms.div_euclid(DAY_MS);
    if first_day >= end_day {
        return vec![Part::Rows(since_ms, until_ms)];
    }
    let mut parts = Vec::with_capacity(3);
    if since_ms < first_day * DAY_MS {
        parts.push(Part::Rows(since_ms, first_day * DAY_MS));
    }
    parts.push(Part::Days(first_day, end_day));
    if end_day * DAY_MS < until_ms {
        parts.push(Part::Rows(end_day * DAY_MS, until_ms));
    }
    parts
}

/// Group totals from several parts, added up; ordered by cost, highest first.
pub fn merge(parts: Vec<Vec<(String, Totals)>>) -> Vec<(String, Totals)> {
    let mut by: BTreeMap<String, Totals> = BTreeMap::new();
    for (k, t) in parts.into_iter().flatten() {
        by.entry(k).or_default().add(&t);
    }
    let mut rows: Vec<(String, Totals)> = by.into_iter().collect();
    rows.sort_by(|a, b| {
        b.1.cost_usd
            .total_cmp(&a.1.cost_usd)
            .then(b.1.requests.cmp(&a.1.requests))
            .then(a.0.cmp(&b.0))
    });
    rows
}

pub fn now_ms() -> i64 {
    to_ms(SystemTime::now())
}

pub fn to_ms(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `since`/`until` as the admin API and the command take them: RFC 3339
/// (`2026-12-01T00:00:00Z`), a date (`2026-12-01`, midnight UTC), or a
/// duration back from `now` (`24h`, `7d`, `90m`).
pub fn parse_time(s: &str, now_ms: i64) -> Result<i64, String> {
    let s = s.trim();
    if let Ok(t) = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339) {
        return Ok((t.unix_timestamp_nanos() / 1_000_000) as i64);
    }
    let date = time::macros::format_description!("[year]-[month]-[day]");
    if let Ok(d) = time::Date::parse(s, &date) {
        return Ok(d.midnight().assume_utc().unix_timestamp() * 1000);
    }
    match crate::config::units::parse_duration(s) {
        Ok(d) => Ok(now_ms - i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        Err(_) => Err(format!(
            "`{s}` is neither an RFC 3339 time (2026-12-01T00:00:00Z), a date (2026-12-01) nor a duration back from now (24h, 7d)"
        )),
    }
}

/// RFC 3339 in UTC, seconds precision (what answers say).
pub fn format_time(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// The default range: the last 24 hours.
pub const DEFAULT_SPAN: Duration = Duration::from_secs(86_400);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_days_come_from_rollups() {
        let h = 3_600_000;
        // Inside one day: rows only.
        assert_eq!(split(h, 5 * h), vec![Part::Rows(h, 5 * h)]);
        // 1h on day 0 to 5h on day 3: rows, days 1..3, rows.
        assert_eq!(
            split(h, 3 * DAY_MS + 5 * h),
            vec![
                Part::Rows(h, DAY_MS),
                Part::Days(1, 3),
                Part::Rows(3 * DAY_MS, 3 * DAY_MS + 5 * h)
            ]
        );
        // Exactly on midnights: days only.
        assert_eq!(split(DAY_MS, 3 * DAY_MS), vec![Part::Days(1, 3)]);
        assert!(split(5, 5).is_empty());
    }

    #[test]
    fn merge_adds_up_and_orders_by_cost() {
        let t = |requests, cost_usd| Totals {
            requests,
            cost_usd,
            ..Totals::default()
        };
        let rows = merge(vec![
            vec![("a".into(), t(1, 1.0)), ("b".into(), t(2, 0.5))],
            vec![("b".into(), t(3, 1.0))],
        ]);
        assert_eq!(rows[0].0, "b");
        assert_eq!(rows[0].1.requests, 5);
        assert_eq!(rows[1].0, "a");
    }

    #[test]
    fn times() {
        let now = 10 * DAY_MS;
        assert_eq!(parse_time("24h", now), Ok(9 * DAY_MS));
        assert_eq!(parse_time("2d", now), Ok(8 * DAY_MS));
        assert_eq!(parse_time("1970-01-02", now), Ok(DAY_MS));
        assert_eq!(
            parse_time("1970-01-02T01:00:00Z", now),
            Ok(DAY_MS + 3_600_000)
        );
        assert_eq!(
            parse_time("1970-01-02T02:00:00+01:00", now),
            Ok(DAY_MS + 3_600_000)
        );
        assert!(parse_time("yesterday", now).is_err());
        assert_eq!(format_time(DAY_MS), "1970-01-02T00:00:00Z");
    }
}
