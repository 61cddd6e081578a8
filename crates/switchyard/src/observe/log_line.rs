//! The decision-log line, written by hand. serde_json runs every key and
//! every value through its escaper a byte at a time, which made it ~8% of a
//! request's instructions; here keys are literals and a string is copied
//! whole unless it holds a byte JSON must escape. The output is exactly what
//! `serde_json::to_writer` makes of the derived `Serialize` (a test holds the
//! two together), so the derive stays the field list's single source.

use super::record::{AttemptLog, CandidateLog, Record};

impl Record {
    /// Appends this request's decision-log line (no newline).
    pub fn write_line(&self, out: &mut Vec<u8>) {
        let mut w = Line(out);
        w.raw(b"{\"ts\":");
        w.string(&super::record::format_rfc3339(self.ts));
        w.raw(b",\"request_id\":");
        w.string(&self.request_id);
        w.raw(b",\"trace_id\":");
        w.opt_string(self.trace_id.as_deref());
        w.raw(b",\"client\":");
        w.opt_string(self.client.as_deref());
        w.raw(b",\"route\":");
        w.opt_string(self.route.as_deref());
        if let Some(task) = &self.task {
            w.raw(b",\"task\":");
            w.string(task);
        }
        if let Some(source) = self.task_source {
            w.raw(b",\"task_source\":");
            w.string(source);
        }
        w.raw(b",\"model\":");
        w.opt_string(self.model.as_deref());
        w.raw(b",\"config_version\":");
        w.string(&self.config_version);
        w.raw(b",\"input_hash\":");
        w.opt_string(self.input_hash.as_deref());
        w.raw(b",\"candidates\":[");
        for (i, c) in self.candidates.iter().enumerate() {
            w.comma(i);
            w.candidate(c);
        }
        w.raw(b"],\"skipped\":[");
        for (i, (dep, why)) in self.skipped.iter().enumerate() {
            w.comma(i);
            w.raw(b"[");
            w.string(dep);
            w.raw(b",");
            w.string(why);
            w.raw(b"]");
        }
        w.raw(b"],\"selected\":");
        w.opt_string(self.selected.as_deref());
        w.raw(b",\"decision_reason\":");
        w.opt_string(self.decision_reason);
        w.raw(b",\"attempts\":[");
        for (i, a) in self.attempts.iter().enumerate() {
            w.comma(i);
            w.attempt(a);
        }
        w.raw(b"],\"stream\":");
        w.bool(self.stream);
        w.raw(b",\"tokens\":{\"input\":");
        w.int(self.tokens.input);
        w.raw(b",\"output\":");
        w.int(self.tokens.output);
        w.raw(b",\"cached\":");
        w.int(self.tokens.cached);
        w.raw(b"},\"cost_usd\":");
        w.opt_float(self.cost_usd);
        w.raw(b",\"cache\":");
        w.string(self.cache);
        w.raw(b",\"fallback_reason\":");
        w.opt_string(self.fallback_reason);
        if !self.dropped_tools.is_empty() {
            w.raw(b",\"dropped_tools\":[");
            for (i, t) in self.dropped_tools.iter().enumerate() {
                w.comma(i);
                w.string(t);
            }
            w.raw(b"]");
        }
        w.raw(b",\"status\":");
        w.int(u64::from(self.status));
        w.raw(b",\"error\":");
        w.opt_string(self.error);
        w.raw(b",\"outcome\":");
        w.string(self.outcome);
        w.raw(b",\"usage_estimated\":");
        w.bool(self.usage_estimated);
        w.raw(b",\"skipped_events\":");
        w.int(u64::from(self.skipped_events));
        w.raw(b",\"retries\":");
        w.int(u64::from(self.retries));
        if !self.transitions.is_empty() {
            w.raw(b",\"transitions\":[");
            for (i, t) in self.transitions.iter().enumerate() {
                w.comma(i);
                w.string(t);
            }
            w.raw(b"]");
        }
        if let Some(c) = &self.contract {
            // Rare (routes with a contract, structured requests): serde's
            // own writer is fast enough here.
            w.raw(b",\"contract\":");
            let _ = serde_json::to_writer(&mut *w.0, c);
        }
        w.raw(b",\"duration_ms\":");
        w.float(self.duration_ms);
        if let Some(p) = self.probe {
            w.raw(b",\"probe\":{\"kind\":");
            w.string(p.kind);
            w.raw(b",\"reason\":");
            w.string(p.reason);
            w.raw(b",\"result\":");
            w.string(p.result);
            w.raw(b"}");
        }
        if let Some(d) = &self.debug {
            w.raw(b",\"debug\":{\"request\":");
            w.string(&d.request);
            w.raw(b",\"response\":");
            w.string(&d.response);
            w.raw(b",\"truncated\":");
            w.bool(d.truncated);
            w.raw(b"}");
        }
        w.raw(b"}");
    }
}

struct Line<'a>(&'a mut Vec<u8>);

impl Line<'_> {
    fn raw(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }

    fn comma(&mut self, i: usize) {
        if i > 0 {
            self.0.push(b',');
        }
    }

    fn string(&mut self, s: &str) {
        // A fold, not `all`: no early exit, so it compiles to a vector loop.
        let escape = s
            .bytes()
            .fold(false, |e, b| e | (b < 0x20) | (b == b'"') | (b == b'\\'));
        let plain = !escape;
        if plain {
            self.0.push(b'"');
            self.0.extend_from_slice(s.as_bytes());
            self.0.push(b'"');
        } else {
            // Rare (a client's model name or request id with odd bytes).
            let _ = serde_json::to_writer(&mut *self.0, s);
        }
    }

    fn opt_string(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.string(s),
            None => self.raw(b"null"),
        }
    }

    fn bool(&mut self, b: bool) {
        self.raw(if b { b"true" } else { b"false" });
    }

    fn int(&mut self, n: u64) {
        self.raw(itoa::Buffer::new().format(n).as_bytes());
    }

    /// serde_json's own float text (shortest round-trip; non-finite → null).
    fn float(&mut self, v: f64) {
        let _ = serde_json::to_writer(&mut *self.0, &v);
    }

    fn opt_float(&mut self, v: Option<f64>) {
        match v {
            Some(v) => self.float(v),
            None => self.raw(b"null"),
        }
    }

    fn candidate(&mut self, c: &CandidateLog) {
        self.raw(b"{\"deployment\":");
        self.string(&c.deployment);
        self.raw(b",\"role\":");
        self.string(c.role);
        self.raw(b",\"score\":");
        self.float(c.score);
        self.raw(b",\"parts\":{");
        for (i, (k, v)) in c.parts.iter().enumerate() {
            self.comma(i);
            self.string(k);
            self.raw(b":");
            self.float(*v);
        }
        self.raw(b"}}");
    }

    fn attempt(&mut self, a: &AttemptLog) {
        self.raw(b"{\"deployment\":");
        self.string(&a.deployment);
        self.raw(b",\"outcome\":");
        self.string(a.outcome);
        self.raw(b",\"status\":");
        match a.status {
            Some(s) => self.int(u64::from(s)),
            None => self.raw(b"null"),
        }
        self.raw(b",\"latency_ms\":");
        self.float(a.latency_ms);
        self.raw(b",\"ttfb_ms\":");
        self.opt_float(a.ttfb_ms);
        self.raw(b",\"resumed\":");
        self.bool(a.resumed);
        // What this call used, when it reported (or was billed) usage.
        if let Some(u) = &a.usage {
            self.raw(b",\"tokens\":{\"input\":");
            self.int(u.input_tokens);
            self.raw(b",\"output\":");
            self.int(u.output_tokens);
            self.raw(b"}");
        }
        self.raw(b"}");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::error::{ErrorCode, GatewayError};

    fn serde_line(ctx: &Record) -> String {
        serde_json::to_string(ctx).unwrap()
    }

    fn hand_line(ctx: &Record) -> String {
        let mut out = Vec::new();
        ctx.write_line(&mut out);
        String::from_utf8(out).unwrap()
    }

    fn ctx() -> Record {
        Record::new("req_\"odd\\id\u{1}".into(), None, Arc::from("v1"))
    }

    #[test]
    fn a_bare_request_matches_serde() {
        let c = ctx();
        assert_eq!(hand_line(&c), serde_line(&c));
        assert!(serde_json::from_str::<serde_json::Value>(&hand_line(&c)).is_ok());
    }

    #[test]
    fn a_full_request_matches_serde() {
        let mut c = ctx();
        let dep: Arc<str> = Arc::from("openai/gpt-4o");
        let prov: Arc<str> = Arc::from("openai");
        c.trace_id = Some("4bf92f3577b34da6a3ce929d0e0e4736".into());
        c.client = Some("team-a".into());
        c.route = Some(Arc::from("chat"));
        c.task = Some("code".into());
        c.task_source = Some("classifier");
        c.model = Some("chat ünïcode \t tab".into());
        c.input_hash = Some("ab".repeat(32));
        c.candidates = vec![
            CandidateLog {
                deployment: dep.clone(),
                role: "target",
                score: 0.973_456_1,
                parts: vec![("base", 1.0), ("health", 0.5), ("est_cost_usd", 1.2e-7)],
            },
            CandidateLog {
                deployment: Arc::from("b"),
                role: "fallback",
                score: f64::NAN,
                parts: vec![],
            },
        ];
        c.skipped = vec![
            (Arc::from("c"), "circuit_open"),
            (Arc::from("d"), "no_tools"),
        ];
        c.selected = Some(dep.clone());
        c.decision_reason = Some("priority: targets in config order");
        let e = GatewayError::upstream(ErrorCode::RateLimited, "slow down");
        c.attempts = vec![
            AttemptLog::failed(&dep, &prov, &e, std::time::Duration::from_micros(1234)),
            AttemptLog::ok(
                &dep,
                &prov,
                std::time::Duration::from_millis(20),
                std::time::Duration::from_micros(5),
            ),
        ];
        c.attempts[1].resumed = true;
        c.stream = true;
        c.tokens.input = 12;
        c.tokens.output = u64::MAX;
        c.cost_usd = Some(0.000_123);
        c.fallback_reason = Some("rate_limited");
        c.status = 200;
        c.error = Some("timeout");
        c.skipped_events = 2;
        c.retries = 1;
        c.transitions = vec!["closed->open (failure_rate)".into()];
        c.duration_ms = 20.5;
        assert_eq!(hand_line(&c), serde_line(&c));
        c.contract = Some(Box::new(crate::observe::record::ContractLog {
            mode: "held",
            checks: vec![
                crate::observe::record::ContractCheck {
                    deployment: dep.clone(),
                    valid: false,
                    then: Some("repair"),
                    error: Some("at /total: \"x\" is not of type \"number\"".into()),
                },
                crate::observe::record::ContractCheck {
                    deployment: dep.clone(),
                    valid: true,
                    then: None,
                    error: None,
                },
            ],
        }));
        assert_eq!(hand_line(&c), serde_line(&c));
        c.probe = Some(crate::observe::record::ProbeTag {
            kind: "auth",
            reason: "idle",
            result: "failed",
        });
        assert_eq!(hand_line(&c), serde_line(&c));
        c.debug = Some(Box::new(crate::observe::debug_bodies::DebugBodies {
            request: "{\"q\":\"\u{1}é\"}".into(),
            response: "data: {}\n\n".into(),
            truncated: true,
        }));
        assert_eq!(hand_line(&c), serde_line(&c));
    }
}
