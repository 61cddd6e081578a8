//! How long an upstream asked us to wait: `retry-after-ms`, `retry-after`
//! (seconds), and OpenAI's `x-ratelimit-reset-*` Go-style durations.

use std::time::Duration;

use http::HeaderMap;

/// The wait the upstream asked for, if it said.
pub fn from_headers(h: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| h.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return secs(ms / 1000.0);
    }
    if let Some(s) = text("retry-after").and_then(|v| v.parse::<f64>().ok()) {
        return secs(s);
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
    fn go_durations() {
        assert_eq!(go_duration("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(go_duration("20ms"), Some(Duration::from_millis(20)));
        assert_eq!(go_duration("x"), None);
    }
}
