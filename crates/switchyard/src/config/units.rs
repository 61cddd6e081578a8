//! Durations (`250ms`, `30s`, `5m`, `1h`, `1m30s`) and sizes (`20MiB`, `1MB`, `512`).

use std::time::Duration;

const DURATION_UNITS: [(&str, u64); 5] = [
    ("d", 86_400_000_000_000),
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
];

/// Parses a duration: one or more `<number><unit>` parts, largest unit first
/// (`1h30m`, `1m30s`, `1.5s`); units `d`, `h`, `m`, `s`, `ms`. A bare number is an
/// error, because `30` could mean seconds or milliseconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let text = s.trim();
    if text.is_empty() {
        return Err("empty duration; expected e.g. `30s`, `250ms`, `5m`, `1h`".into());
    }
    let bad = |why: &str| {
        Err(format!(
            "invalid duration `{text}`: {why}; expected e.g. `30s`, `250ms`, `5m`, `1m30s`"
        ))
    };
    let mut rest = text;
    let mut nanos: u128 = 0;
    let mut last_rank = None;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return bad("a number must come before each unit");
        }
        let (num, after) = rest.split_at(num_len);
        let unit_len = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        if unit.is_empty() {
            return bad("missing unit (d, h, m, s or ms)");
        }
        let Some(rank) = DURATION_UNITS.iter().position(|(u, _)| *u == unit) else {
            return bad(&format!("unknown unit `{unit}` (use d, h, m, s or ms)"));
        };
        if last_rank.is_some_and(|r| rank <= r) {
            return bad("units must go from largest to smallest, each once");
        }
        last_rank = Some(rank);
        let Ok(n) = num.parse::<f64>() else {
            return bad(&format!("`{num}` is not a number"));
        };
        // Saturating: a 400-digit part is already u128::MAX (`as` saturates),
        // and adding the next part must say "too large", not overflow.
        nanos = nanos.saturating_add((n * DURATION_UNITS[rank].1 as f64).round() as u128);
        rest = after;
    }
    u64::try_from(nanos)
        .map(Duration::from_nanos)
        .or_else(|_| bad("too large"))
}

const SIZE_UNITS: [(&str, u64); 9] = [
    ("b", 1),
    ("kb", 1_000),
    ("mb", 1_000_000),
    ("gb", 1_000_000_000),
    ("tb", 1_000_000_000_000),
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
    ("tib", 1 << 40),
];

/// Parses a size in bytes: `20MiB`, `512KiB`, `1GiB`, `1MB` (decimal), `4096`.
/// Units are case-insensitive; `1.5MiB` is allowed (rounded down to a byte).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let text = s.trim();
    let bad = |why: &str| {
        Err(format!("invalid size `{text}`: {why}; expected e.g. `20MiB`, `512KiB`, `1MB` or a number of bytes"))
    };
    let num_len = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(num_len);
    if num.is_empty() {
        return bad("missing number");
    }
    let unit = unit.trim_start().to_ascii_lowercase();
    let mult = if unit.is_empty() {
        1
    } else {
        match SIZE_UNITS.iter().find(|(u, _)| *u == unit) {
            Some((_, m)) => *m,
            None => {
                return bad(&format!(
                    "unknown unit `{unit}` (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"
                ))
            }
        }
    };
    if let Ok(n) = num.parse::<u64>() {
        return n.checked_mul(mult).ok_or(()).or_else(|_| bad("too large"));
    }
    match num.parse::<f64>() {
        Ok(n) if n * (mult as f64) < u64::MAX as f64 => Ok((n * mult as f64) as u64),
        Ok(_) => bad("too large"),
        Err(_) => bad(&format!("`{num}` is not a number")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two parts past u128 nanoseconds: overflowed (a panic in a debug
    /// build, a wrapped small duration in a release one).
    #[test]
    fn a_duration_past_every_bound_is_too_large() {
        let huge = "9".repeat(400);
        for text in [format!("{huge}d1h"), format!("{huge}m{huge}s")] {
            let e = parse_duration(&text).unwrap_err();
            assert!(e.contains("too large"), "{e}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("90d"), Ok(Duration::from_secs(90 * 86_400)));
        assert_eq!(parse_duration("1d12h"), Ok(Duration::from_secs(36 * 3600)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(
            parse_duration("1h2m3s4ms"),
            Ok(Duration::from_millis(3_723_004))
        );
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration(" 0s "), Ok(Duration::ZERO));
    }

    #[test]
    fn bad_durations() {
        for (s, why) in [
            ("", "empty"),
            ("30", "missing unit"),
            ("5 m", "missing unit"),
            ("5x", "unknown unit `x`"),
            ("5sec", "unknown unit `sec`"),
            ("30s1m", "largest to smallest"),
            ("1s1s", "largest to smallest"),
            ("ms", "a number must come before"),
            ("1..5s", "not a number"),
            ("-1s", "a number must come before"),
            ("99999999999999h", "too large"),
        ] {
            let e = parse_duration(s).unwrap_err();
            assert!(e.contains(why), "{s}: {e}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("20MiB"), Ok(20 << 20));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("1MB"), Ok(1_000_000));
        assert_eq!(parse_size("1mib"), Ok(1 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("10 KiB"), Ok(10 << 10));
        assert_eq!(parse_size("1.5KiB"), Ok(1536));
        assert_eq!(parse_size("0"), Ok(0));
    }

    #[test]
    fn bad_sizes() {
        for (s, why) in [
            ("", "missing number"),
            ("MiB", "missing number"),
            ("20MiBs", "unknown unit `mibs`"),
            ("20 parsecs", "unknown unit"),
            ("-5", "missing number"),
            ("99999999999TiB", "too large"),
            ("1.2.3MB", "not a number"),
        ] {
            let e = parse_size(s).unwrap_err();
            assert!(e.contains(why), "{s}: {e}");
        }
    }
}
