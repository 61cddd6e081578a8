//! The upstream's quota headers on an answer: OpenAI's
//! `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` (Go-duration
//! resets) and Anthropic's `anthropic-ratelimit-{requests,tokens}-*`
//! (RFC 3339 resets), read once per answer into what is left of each
//! budget: the block when one is at 0 (`DeploymentLimits::observe_headers`)
//! and the share used (`registry::quota`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderName};

use crate::upstream::retry_after::go_duration;

/// One dimension's quota headers (`limit`, `remaining`, `reset`) as one
/// upstream names them. Static names: this runs on every answer, so no
/// name is formatted or parsed per call.
struct QuotaNames {
    limit: HeaderName,
    remaining: HeaderName,
    reset: HeaderName,
    /// OpenAI resets are Go durations (`6m0s`), Anthropic's RFC 3339 times.
    rfc3339: bool,
}

/// Per dimension (requests, then tokens): OpenAI's names, then Anthropic's.
static QUOTA_NAMES: [[QuotaNames; 2]; 2] = [
    [
        QuotaNames {
            limit: HeaderName::from_static("x-ratelimit-limit-requests"),
            remaining: HeaderName::from_static("x-ratelimit-remaining-requests"),
            reset: HeaderName::from_static("x-ratelimit-reset-requests"),
            rfc3339: false,
        },
        QuotaNames {
            limit: HeaderName::from_static("anthropic-ratelimit-requests-limit"),
            remaining: HeaderName::from_static("anthropic-ratelimit-requests-remaining"),
            reset: HeaderName::from_static("anthropic-ratelimit-requests-reset"),
            rfc3339: true,
        },
    ],
    [
        QuotaNames {
            limit: HeaderName::from_static("x-ratelimit-limit-tokens"),
            remaining: HeaderName::from_static("x-ratelimit-remaining-tokens"),
            reset: HeaderName::from_static("x-ratelimit-reset-tokens"),
            rfc3339: false,
        },
        QuotaNames {
            limit: HeaderName::from_static("anthropic-ratelimit-tokens-limit"),
            remaining: HeaderName::from_static("anthropic-ratelimit-tokens-remaining"),
            reset: HeaderName::from_static("anthropic-ratelimit-tokens-reset"),
            rfc3339: true,
        },
    ],
];

/// What one dimension's quota headers said.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuotaReading {
    /// `None` when the upstream sent only what is left.
    pub limit: Option<u64>,
    pub remaining: u64,
    /// Until the budget is whole again; `None` when not said (or not
    /// understood).
    pub reset: Option<Duration>,
}

impl QuotaReading {
    /// The share of the budget used (in [0, 1]), when the limit is known.
    pub fn used_share(&self) -> Option<f64> {
        let limit = self.limit.filter(|l| *l > 0)?;
        Some((1.0 - self.remaining as f64 / limit as f64).clamp(0.0, 1.0))
    }
}

/// An answer's quota headers (OpenAI `x-ratelimit-*`, Anthropic
/// `anthropic-ratelimit-*`): requests, then tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QuotaHeaders(pub [Option<QuotaReading>; 2]);

impl QuotaHeaders {
    /// Read `h`. `wall_now` is only called when an RFC 3339 reset needs it.
    pub fn read(h: &HeaderMap, wall_now: impl Fn() -> SystemTime) -> QuotaHeaders {
        let text = |name: &HeaderName| h.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
        let mut out = QuotaHeaders::default();
        for (slot, names) in out.0.iter_mut().zip(&QUOTA_NAMES) {
            *slot = names.iter().find_map(|n| {
                let remaining = text(&n.remaining)?.parse().ok()?;
                let reset = text(&n.reset).and_then(|r| {
                    if n.rfc3339 {
                        parse_rfc3339(r).map(|at| at.duration_since(wall_now()).unwrap_or_default())
                    } else {
                        go_duration(r)
                    }
                });
                Some(QuotaReading {
                    limit: text(&n.limit).and_then(|l| l.parse().ok()),
                    remaining,
                    reset,
                })
            });
        }
        out
    }

    /// How long until the exhausted upstream budget resets, if one is
    /// exhausted (remaining exactly 0, with a reset ahead).
    pub fn exhausted_for(&self) -> Option<Duration> {
        self.0
            .iter()
            .flatten()
            .filter(|r| r.remaining == 0)
            .filter_map(|r| r.reset)
            .max()
            .filter(|d| !d.is_zero())
    }
}

/// How long until the exhausted upstream budget resets, if one is exhausted.
/// `wall_now` is only read when an RFC 3339 reset needs it.
pub fn exhausted_for(h: &HeaderMap, wall_now: impl Fn() -> SystemTime) -> Option<Duration> {
    QuotaHeaders::read(h, wall_now).exhausted_for()
}

/// `2024-05-01T12:30:05Z`, `…05.123Z`, `…05+02:00`.
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut frac = 0.0;
    if let Some(r) = rest.strip_prefix('.') {
        let n = r.bytes().take_while(u8::is_ascii_digit).count();
        frac = format!("0.{}", &r[..n]).parse().ok()?;
        rest = &r[n..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        o if o.len() == 6 && matches!(&o[..1], "+" | "-") && &o[3..4] == ":" => {
            let hours: i64 = o[1..3].parse().ok()?;
            let mins: i64 = o[4..6].parse().ok()?;
            let sign = if &o[..1] == "-" { -1 } else { 1 };
            sign * (hours * 3600 + mins * 60)
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + hh * 3600 + mm * 60 + ss - offset;
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_secs_f64(frac))
}

/// Days since 1970-01-01 (Howard Hinnant's civil-from-days inverse).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn anthropic_reset_timestamps() {
        let at = |s| parse_rfc3339(s).unwrap();
        let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
        assert_eq!(secs(at("1970-01-02T00:00:00Z")), 86_400.0);
        assert_eq!(secs(at("2024-02-29T12:00:00Z")), 1_709_208_000.0);
        assert_eq!(secs(at("2024-02-29T14:00:00+02:00")), 1_709_208_000.0);
        assert_eq!(secs(at("2024-02-29T12:00:00.5Z")), 1_709_208_000.5);
        for bad in [
            "2024-02-29",
            "2024-13-01T00:00:00Z",
            "2024-02-29T12:00:00",
            "x",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
        let mut h = HeaderMap::new();
        h.insert("anthropic-ratelimit-tokens-remaining", "0".parse().unwrap());
        h.insert(
            "anthropic-ratelimit-tokens-reset",
            "2024-02-29T12:00:30Z".parse().unwrap(),
        );
        h.insert(
            "anthropic-ratelimit-requests-remaining",
            "3".parse().unwrap(),
        );
        h.insert(
            "anthropic-ratelimit-requests-reset",
            "2024-02-29T12:05:00Z".parse().unwrap(),
        );
        assert_eq!(
            exhausted_for(&h, || at("2024-02-29T12:00:00Z")),
            Some(30 * S)
        );
        assert_eq!(
            exhausted_for(&h, || at("2024-02-29T12:01:00Z")),
            None,
            "reset passed"
        );
    }

    /// The quota headers are read into a share used per dimension: OpenAI's
    /// `x-ratelimit-limit-*`/`-remaining-*` with a Go-duration reset,
    /// Anthropic's `anthropic-ratelimit-*` with an RFC 3339 one.
    #[test]
    fn quota_headers_read_into_shares() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("x-ratelimit-limit-requests", "500"),
            ("x-ratelimit-remaining-requests", "50"),
            ("x-ratelimit-reset-requests", "6m0s"),
            ("x-ratelimit-remaining-tokens", "1000"),
        ] {
            h.insert(k, v.parse().unwrap());
        }
        let q = QuotaHeaders::read(&h, SystemTime::now);
        let r = q.0[0].unwrap();
        assert_eq!(
            (r.limit, r.remaining, r.reset),
            (Some(500), 50, Some(360 * S))
        );
        assert!((r.used_share().unwrap() - 0.9).abs() < 1e-9);
        let t = q.0[1].unwrap();
        assert_eq!(
            (t.used_share(), t.reset),
            (None, None),
            "no limit: no share"
        );
        assert_eq!(q.exhausted_for(), None);
        let mut a = HeaderMap::new();
        for (k, v) in [
            ("anthropic-ratelimit-tokens-limit", "80000"),
            ("anthropic-ratelimit-tokens-remaining", "8000"),
            ("anthropic-ratelimit-tokens-reset", "2024-02-29T12:00:30Z"),
        ] {
            a.insert(k, v.parse().unwrap());
        }
        let q = QuotaHeaders::read(&a, || parse_rfc3339("2024-02-29T12:00:00Z").unwrap());
        assert_eq!(q.0[0], None);
        let t = q.0[1].unwrap();
        assert_eq!(t.reset, Some(30 * S));
        assert!((t.used_share().unwrap() - 0.9).abs() < 1e-9);
        // Nonsense is no reading; more left than the limit is 0 used.
        let mut bad = HeaderMap::new();
        bad.insert("x-ratelimit-remaining-requests", "lots".parse().unwrap());
        bad.insert("x-ratelimit-limit-tokens", "10".parse().unwrap());
        bad.insert("x-ratelimit-remaining-tokens", "20".parse().unwrap());
        let q = QuotaHeaders::read(&bad, SystemTime::now);
        assert_eq!(q.0[0], None);
        assert_eq!(q.0[1].unwrap().used_share(), Some(0.0));
        assert_eq!(
            QuotaHeaders::read(&HeaderMap::new(), SystemTime::now),
            QuotaHeaders::default()
        );
    }
}
