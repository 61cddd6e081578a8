//! How long an upstream asked us to wait: `retry-after-ms`, `retry-after`
//! (seconds or an HTTP date), and OpenAI's `x-ratelimit-reset-*` Go-style
//! durations; and the jitter every such wait gets on top (contract §10).

use std::time::{Duration, SystemTime};

use rand::Rng;

use http::HeaderMap;

/// The wait the upstream asked for, if it said.
pub fn from_headers(h: &HeaderMap) -> Option<Duration> {
    from_headers_at(h, SystemTime::now())
}

/// [`from_headers`] with the clock an HTTP-date Retry-After is read against.
pub fn from_headers_at(h: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| h.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return secs(ms / 1000.0);
    }
    if let Some(v) = text("retry-after") {
        if let Ok(s) = v.parse::<f64>() {
            return secs(s);
        }
        // `Retry-After: Wed, 21 Oct 2026 07:28:00 GMT` (RFC 9110 §10.2.3).
        if let Ok(at) = httpdate::parse_http_date(v) {
            let wait = at.duration_since(now).unwrap_or(Duration::ZERO);
            return secs(wait.as_secs_f64());
        }
    }
    // OpenAI: reset of whichever budget is exhausted (both when unsure).
    let mut wait: Option<Duration> = None;
    for kind in ["requests", "tokens"] {
        let exhausted = text(&format!("x-ratelimit-remaining-{kind}")).is_none_or(|v| v == "0");
        if let (true, Some(d)) = (
            exhausted,
            text(&format!("x-ratelimit-reset-{kind}")).and_then(go_duration),
        ) {
            wait = Some(wait.map_or(d, |w| w.max(d)));
        }
    }
    wait
}

/// `wait` with a little jitter on top, never less: requests told the same
/// wait do not all come back in the same instant. Up to a tenth of the
/// wait, at most a second.
pub fn jittered(wait: Duration) -> Duration {
    let spread = (wait / 10).min(Duration::from_secs(1));
    let ms = spread.as_millis() as u64;
    if ms == 0 {
        return wait;
    }
    wait + Duration::from_millis(rand::rng().random_range(0..=ms))
}

fn secs(s: f64) -> Option<Duration> {
    (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s.min(3600.0)))
}

/// `6m0s`, `1.5s`, `174ms`, `20us`: Go's `time.Duration` text.
pub fn go_duration(s: &str) -> Option<Duration> {
    let mut total = 0f64;
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" | "" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[unit_end..];
    }
    secs(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn precedence_and_formats() {
        assert_eq!(
            from_headers(&headers(&[("retry-after-ms", "250"), ("retry-after", "9")])),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            from_headers(&headers(&[("retry-after", "2")])),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            from_headers(&headers(&[
                ("x-ratelimit-remaining-requests", "4999"),
                ("x-ratelimit-reset-requests", "12ms"),
                ("x-ratelimit-remaining-tokens", "0"),
                ("x-ratelimit-reset-tokens", "174ms"),
            ])),
            Some(Duration::from_millis(174))
        );
        assert_eq!(from_headers(&HeaderMap::new()), None);
    }

    #[test]
    fn an_http_date_is_the_wait_until_it() {
        let now = httpdate::parse_http_date("Wed, 02 Dec 2026 17:00:00 GMT").unwrap();
        let h = headers(&[("retry-after", "Wed, 02 Dec 2026 17:00:30 GMT")]);
        assert_eq!(from_headers_at(&h, now), Some(Duration::from_secs(30)));
        // A date already past: retry now; a date a year away: an hour.
        let h = headers(&[("retry-after", "Wed, 02 Dec 2026 16:00:00 GMT")]);
        assert_eq!(from_headers_at(&h, now), Some(Duration::ZERO));
        let h = headers(&[("retry-after", "Thu, 02 Dec 2027 17:00:00 GMT")]);
        assert_eq!(from_headers_at(&h, now), Some(Duration::from_secs(3600)));
        let h = headers(&[("retry-after", "soon")]);
        assert_eq!(from_headers_at(&h, now), None);
    }

    #[test]
    fn jitter_is_on_top_and_small() {
        for wait in [
            Duration::ZERO,
            Duration::from_millis(5),
            Duration::from_secs(2),
            Duration::from_secs(60),
        ] {
            let seen: Vec<Duration> = (0..300).map(|_| jittered(wait)).collect();
            let spread = (wait / 10).min(Duration::from_secs(1));
            assert!(
                seen.iter().all(|d| *d >= wait && *d <= wait + spread),
                "{wait:?}"
            );
            if spread >= Duration::from_millis(10) {
                // Spread out, not one instant.
                let distinct: std::collections::BTreeSet<_> = seen.iter().collect();
                assert!(distinct.len() > 10, "{wait:?}");
            }
        }
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(go_duration("20ms"), Some(Duration::from_millis(20)));
        assert_eq!(go_duration("x"), None);
    }
}
