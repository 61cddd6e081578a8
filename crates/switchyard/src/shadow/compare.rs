//! How a shadow answer compares with the primary's, and the running figures
//! per (route, shadow target) that `GET /admin/shadow` shows. Pure: no I/O,
//! no clock.
//!
//! - finish-reason agreement: the two answers ended for the same reason
//!   (`stop`, `length`, `tool_calls`, …), as the IR names them;
//! - tool-call agreement: the same tools called, by name, in the same order
//!   (no call on either side agrees);
//! - schema validity: for requests that asked for JSON with a schema
//!   (`response_format` `json_schema`), the share of shadow answers whose text
//!   satisfies it (`crate::contract::Schemas`);
//! - text similarity: the cosine of the two answers' character-trigram counts
//!   (lowercased, whitespace runs as one space; a tool call is its name and
//!   arguments), 0 to 1: 1 for the same text, two empty answers included;
//! - latency: the shadow call's, beside the primary's for the same requests
//!   (the client's request from arrival to its answer's last byte), p50 and
//!   p95 over the last [`KEEP`] pairs;
//! - cost ratio: the shadow's cost over the primary's, each summed over the
//!   pairs compared.

use std::collections::{HashMap, VecDeque};

use serde::Serialize;
use switchyard_protocol::ir::ChatResponse;

/// Latency pairs kept per (route, target) for the percentiles.
pub const KEEP: usize = 1024;

/// What an answer is compared by.
pub fn compared_text(a: &ChatResponse) -> String {
    let mut s = a.text.clone().unwrap_or_default();
    for c in &a.tool_calls {
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(&c.name);
        s.push(' ');
        s.push_str(&c.arguments);
    }
    s
}

/// The cosine similarity of the character-trigram counts of `a` and `b`
/// (lowercased, whitespace runs as one space). Two empty texts are the
/// same (1); one empty, nothing alike (0). A text shorter than three
/// characters is its own one gram.
pub fn similarity(a: &str, b: &str) -> f64 {
    let (ga, gb) = (trigrams(a), trigrams(b));
    match (ga.is_empty(), gb.is_empty()) {
        (true, true) => return 1.0,
        (true, false) | (false, true) => return 0.0,
        (false, false) => {}
    }
    let norm = |g: &HashMap<String, u32>| g.values().map(|&n| f64::from(n).powi(2)).sum::<f64>();
    let dot: f64 = ga
        .iter()
        .filter_map(|(k, &n)| gb.get(k).map(|&m| f64::from(n) * f64::from(m)))
        .sum();
    (dot / (norm(&ga).sqrt() * norm(&gb).sqrt())).clamp(0.0, 1.0)
}

fn trigrams(s: &str) -> HashMap<String, u32> {
    let lower = s.to_lowercase();
    let chars: Vec<char> = lower
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .collect();
    let mut out = HashMap::new();
    if chars.is_empty() {
        return out;
    }
    if chars.len() < 3 {
        out.insert(chars.iter().collect(), 1);
        return out;
    }
    for w in chars.windows(3) {
        *out.entry(w.iter().collect()).or_insert(0) += 1;
    }
    out
}

/// The same tools called, by name, in order.
pub fn same_tools(a: &ChatResponse, b: &ChatResponse) -> bool {
    a.tool_calls.len() == b.tool_calls.len()
        && a.tool_calls
            .iter()
            .zip(&b.tool_calls)
            .all(|(x, y)| x.name == y.name)
}

/// One compared pair: the primary's answer and figures beside the shadow's.
pub struct Pair<'a> {
    pub primary: &'a ChatResponse,
    pub shadow: &'a ChatResponse,
    pub primary_ms: f64,
    pub shadow_ms: f64,
    pub primary_cost: f64,
    pub shadow_cost: f64,
    /// `Some(valid)` when the request asked for a schema.
    pub schema_valid: Option<bool>,
}

/// The running figures of one (route, shadow target).
#[derive(Debug, Default)]
pub struct Tally {
    /// Shadow calls sent (answered or failed).
    pub requests: u64,
    /// Sent and failed.
    pub errors: u64,
    /// Not sent: the target's circuit or limits, or a request that could
    /// not be copied.
    pub skipped: u64,
    /// Not queued: the shadow queue was full.
    pub dropped: u64,
    /// Answered pairs compared.
    pub compared: u64,
    finish_agree: u64,
    tools_agree: u64,
    similarity_sum: f64,
    schema_checked: u64,
    schema_valid: u64,
    primary_cost: f64,
    shadow_cost: f64,
    primary_ms: VecDeque<f64>,
    shadow_ms: VecDeque<f64>,
}

impl Tally {
    pub fn add(&mut self, p: &Pair<'_>) {
        self.compared += 1;
        self.finish_agree += u64::from(p.primary.finish_reason == p.shadow.finish_reason);
        self.tools_agree += u64::from(same_tools(p.primary, p.shadow));
        self.similarity_sum += similarity(&compared_text(p.primary), &compared_text(p.shadow));
        if let Some(valid) = p.schema_valid {
            self.schema_checked += 1;
            self.schema_valid += u64::from(valid);
        }
        self.primary_cost += p.primary_cost;
        self.shadow_cost += p.shadow_cost;
        for (ring, v) in [
            (&mut self.primary_ms, p.primary_ms),
            (&mut self.shadow_ms, p.shadow_ms),
        ] {
            if ring.len() == KEEP {
                ring.pop_front();
            }
            ring.push_back(v);
        }
    }

    pub fn view(&self, route: &str, target: &str) -> View {
        let share = |n: u64| (self.compared > 0).then(|| n as f64 / self.compared as f64);
        View {
            route: route.to_owned(),
            target: target.to_owned(),
            requests: self.requests,
            errors: self.errors,
            skipped: self.skipped,
            dropped: self.dropped,
            compared: self.compared,
            primary_p50_ms: percentile(&self.primary_ms, 0.50),
            primary_p95_ms: percentile(&self.primary_ms, 0.95),
            shadow_p50_ms: percentile(&self.shadow_ms, 0.50),
            shadow_p95_ms: percentile(&self.shadow_ms, 0.95),
            primary_cost_usd: self.primary_cost,
            shadow_cost_usd: self.shadow_cost,
            cost_ratio: (self.primary_cost > 0.0).then(|| self.shadow_cost / self.primary_cost),
            finish_reason_agreement: share(self.finish_agree),
            tool_call_agreement: share(self.tools_agree),
            schema_checked: self.schema_checked,
            schema_validity: (self.schema_checked > 0)
                .then(|| self.schema_valid as f64 / self.schema_checked as f64),
            text_similarity: (self.compared > 0)
                .then(|| self.similarity_sum / self.compared as f64),
        }
    }
}

/// The nearest-rank percentile `p` (0..1) of `v`; `None` when empty.
fn percentile(v: &VecDeque<f64>, p: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut sorted: Vec<f64> = v.iter().copied().collect();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// One row of `GET /admin/shadow`. A share is `null` until a pair was
/// compared (schema validity: until a request with a schema was).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct View {
    pub route: String,
    pub target: String,
    pub requests: u64,
    pub errors: u64,
    pub skipped: u64,
    pub dropped: u64,
    pub compared: u64,
    pub primary_p50_ms: Option<f64>,
    pub primary_p95_ms: Option<f64>,
    pub shadow_p50_ms: Option<f64>,
    pub shadow_p95_ms: Option<f64>,
    pub primary_cost_usd: f64,
    pub shadow_cost_usd: f64,
    pub cost_ratio: Option<f64>,
    pub finish_reason_agreement: Option<f64>,
    pub tool_call_agreement: Option<f64>,
    pub schema_checked: u64,
    pub schema_validity: Option<f64>,
    pub text_similarity: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_protocol::ir::{FinishReason, ToolCall};

    fn answer(text: &str, tools: &[&str], finish: FinishReason) -> ChatResponse {
        ChatResponse {
            text: (!text.is_empty()).then(|| text.to_owned()),
            tool_calls: tools
                .iter()
                .map(|n| ToolCall {
                    id: String::new(),
                    name: (*n).to_owned(),
                    arguments: "{}".into(),
                })
                .collect(),
            finish_reason: finish,
            ..ChatResponse::default()
        }
    }

    #[test]
    fn similarity_is_one_for_the_same_text_and_falls_with_difference() {
        assert_eq!(similarity("Hello there", "hello   THERE"), 1.0);
        assert_eq!(similarity("", ""), 1.0);
        assert_eq!(similarity("abc", ""), 0.0);
        assert_eq!(similarity("aaaa", "zzzz"), 0.0);
        let near = similarity("the cat sat on the mat", "the cat sat on a mat");
        let far = similarity("the cat sat on the mat", "quantum chromodynamics");
        assert!(near > 0.7 && near < 1.0, "{near}");
        assert!(far < 0.2, "{far}");
        assert_eq!(similarity("ab", "ab"), 1.0);
    }

    #[test]
    fn a_tally_counts_agreements_and_keeps_the_cost_ratio() {
        let mut t = Tally::default();
        let p = answer("hi", &["lookup"], FinishReason::ToolCalls);
        let same = answer("hi", &["lookup"], FinishReason::ToolCalls);
        let other_tool = answer("hi", &["search"], FinishReason::ToolCalls);
        let text = answer("hello", &[], FinishReason::Stop);
        for (s, valid) in [
            (&same, Some(true)),
            (&other_tool, Some(false)),
            (&text, None),
        ] {
            t.add(&Pair {
                primary: &p,
                shadow: s,
                primary_ms: 10.0,
                shadow_ms: 30.0,
                primary_cost: 1.0,
                shadow_cost: 3.0,
                schema_valid: valid,
            });
        }
        let v = t.view("r", "t");
        assert_eq!(v.compared, 3);
        assert_eq!(v.finish_reason_agreement, Some(2.0 / 3.0));
        assert_eq!(v.tool_call_agreement, Some(1.0 / 3.0));
        assert_eq!(v.schema_checked, 2);
        assert_eq!(v.schema_validity, Some(0.5));
        assert_eq!(v.cost_ratio, Some(3.0));
        assert_eq!(
            (v.primary_p50_ms, v.shadow_p95_ms),
            (Some(10.0), Some(30.0))
        );
    }

    #[test]
    fn percentiles_are_nearest_rank_over_the_last_pairs() {
        let v: VecDeque<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), Some(50.0));
        assert_eq!(percentile(&v, 0.95), Some(95.0));
        assert_eq!(percentile(&VecDeque::new(), 0.5), None);
    }
}
