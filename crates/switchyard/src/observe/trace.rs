//! What a traced request must know while it runs (contract §6, Traces):
//! its trace id (the caller's `traceparent`'s, else a fresh one), whether it
//! is sampled, its own span id and each attempt's, so that the upstream
//! request's `traceparent` names the attempt span as its parent. The spans
//! themselves are built after the fact from the finished `Record`
//! (`sinks::trace`), so the hot path pays for a few random numbers and one
//! header, not for a tracer.

use http::HeaderValue;

use crate::names;

/// A traced request's trace identity: `Record::trace` when it is sampled
/// in, `Record::tail` while it waits for the tail rule; neither when
/// tracing is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceCtx {
    pub trace_id: u128,
    /// The `switchyard.request` span.
    pub span_id: u64,
    /// The caller's span, when it sent a `traceparent`.
    pub parent: Option<u64>,
}

/// A W3C `traceparent`: `{version}-{trace id}-{parent id}-{flags}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: u128,
    pub span_id: u64,
    pub sampled: bool,
}

impl TraceParent {
    /// `None` for anything the W3C spec says to ignore: wrong lengths,
    /// non-lowercase-hex, version `ff`, all-zero ids, a version-00 header
    /// with trailing data.
    pub fn parse(s: &str) -> Option<TraceParent> {
        let b = s.as_bytes();
        if b.len() < 55 || b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return None;
        }
        let version = hex_u64(&b[0..2])?;
        if version == 0xff || (version == 0 && b.len() != 55) || (b.len() > 55 && b[55] != b'-') {
            return None;
        }
        let trace_id = (u128::from(hex_u64(&b[3..19])?) << 64) | u128::from(hex_u64(&b[19..35])?);
        let span_id = hex_u64(&b[36..52])?;
        let flags = hex_u64(&b[53..55])?;
        (trace_id != 0 && span_id != 0).then_some(TraceParent {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }
}

/// Lowercase hex only (the spec's grammar), at most 16 digits.
fn hex_u64(b: &[u8]) -> Option<u64> {
    b.iter().try_fold(0u64, |n, &c| {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => return None,
        };
        Some(n << 4 | u64::from(d))
    })
}

/// The trace id of a W3C `traceparent` (`00-<trace>-<span>-<flags>`).
pub fn trace_id(headers: &http::HeaderMap) -> Option<String> {
    let tp = headers.get(&names::TRACEPARENT)?.to_str().ok()?;
    let mut parts = tp.split('-');
    let (_version, trace) = (parts.next()?, parts.next()?);
    (trace.len() == 32 && trace.bytes().all(|b| b.is_ascii_hexdigit())).then(|| trace.to_owned())
}

/// The caller's `traceparent`, parsed, if it sent a valid one.
pub fn caller(headers: &http::HeaderMap) -> Option<TraceParent> {
    TraceParent::parse(headers.get(&names::TRACEPARENT)?.to_str().ok()?)
}

/// Head sampling: a caller's decision is followed (sampled in or out);
/// without one, `ratio` of the traces are kept, decided by the trace id so
/// that every hop sampling by ratio agrees. Returns the request's trace
/// either way, and whether it is sampled in now: one that is not is only
/// kept if it ends as the tail rule says (`record::Tail`), so it costs two
/// random numbers here and nothing more until then — no `traceparent`
/// upstream, no attempt span ids, no hex id for the log.
pub fn begin(parent: Option<TraceParent>, ratio: f64) -> (TraceCtx, bool) {
    let trace_id = match parent {
        Some(p) => p.trace_id,
        None => new_trace_id(),
    };
    let sampled = match parent {
        Some(p) => p.sampled,
        None => ratio > 0.0 && keep(trace_id, ratio),
    };
    let t = TraceCtx {
        trace_id,
        span_id: new_span_id(),
        parent: parent.map(|p| p.span_id),
    };
    (t, sampled)
}

/// The trace id's low 63 bits against the ratio (OpenTelemetry's
/// `TraceIdRatioBased` does the same).
fn keep(trace_id: u128, ratio: f64) -> bool {
    if ratio >= 1.0 {
        return true;
    }
    let bound = (ratio * (1u64 << 63) as f64) as u64;
    ((trace_id as u64) >> 1) < bound
}

pub fn new_trace_id() -> u128 {
    loop {
        let id: u128 = rand::random();
        if id != 0 {
            return id;
        }
    }
}

pub fn new_span_id() -> u64 {
    loop {
        let id: u64 = rand::random();
        if id != 0 {
            return id;
        }
    }
}

impl TraceCtx {
    /// The trace id as the decision log shows it (32 hex digits).
    pub fn trace_id_hex(&self) -> String {
        format!("{:032x}", self.trace_id)
    }

    /// The `traceparent` an upstream call made under span `span` carries.
    pub fn traceparent(&self, span: u64) -> HeaderValue {
        let text = format!("00-{:032x}-{span:016x}-01", self.trace_id);
        // Only hex digits and dashes: always a valid header value.
        HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static(""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn parses_a_w3c_traceparent_and_refuses_the_invalid_ones() {
        let p = TraceParent::parse(TP).unwrap();
        assert_eq!(p.trace_id, 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert_eq!(p.span_id, 0x00f067aa0ba902b7);
        assert!(p.sampled);
        assert!(
            !TraceParent::parse(&TP.replace("-01", "-00"))
                .unwrap()
                .sampled
        );
        // A later version may append fields; version 00 may not.
        assert!(TraceParent::parse(&format!("01{}-more", &TP[2..])).is_some());
        let bad: [&str; 8] = [
            "",
            &TP[..54],
            &format!("{TP}-x"),
            &TP.replace("4bf9", "4BF9"),
            &format!("ff{}", &TP[2..]),
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
        ];
        for bad in bad {
            assert_eq!(TraceParent::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_callers_decision_is_followed_whatever_the_ratio() {
        let p = TraceParent::parse(TP).unwrap();
        let (t, sampled) = begin(Some(p), 0.0);
        assert!(sampled);
        assert_eq!((t.trace_id, t.parent), (p.trace_id, Some(p.span_id)));
        assert_ne!(t.span_id, p.span_id);
        let out = TraceParent {
            sampled: false,
            ..p
        };
        // Not sampled in, but the caller's trace should the tail keep it.
        let (t, sampled) = begin(Some(out), 1.0);
        assert!(!sampled);
        assert_eq!((t.trace_id, t.parent), (p.trace_id, Some(p.span_id)));
    }

    #[test]
    fn without_a_caller_the_ratio_decides() {
        let (t, sampled) = begin(None, 1.0);
        assert!(sampled && t.parent.is_none() && t.trace_id != 0);
        let (t, sampled) = begin(None, 0.0);
        assert!(!sampled && t.trace_id != 0 && t.span_id != 0);
        let kept = (0..4000).filter(|_| begin(None, 0.25).1).count();
        assert!((800..1200).contains(&kept), "{kept}");
    }

    #[test]
    fn the_upstream_traceparent_names_the_attempt_span() {
        let t = TraceCtx {
            trace_id: 0x4bf92f3577b34da6a3ce929d0e0e4736,
            span_id: 1,
            parent: None,
        };
        assert_eq!(
            t.traceparent(0xabc),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000abc-01"
        );
        assert_eq!(t.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
    }
}
