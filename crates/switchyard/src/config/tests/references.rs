//! Cross-references and ranges: the diagnostic's exact line, column, path and message.

use super::{errs, one};

/// A provider `p` and a deployment `p/a` (lines 1–4).
const PRE: &str = "providers:\n  p: { protocol: openai }\nmodels:\n  - { provider: p, model: a }\n";

fn pre(rest: &str) -> String {
    format!("{PRE}{rest}")
}

#[test]
fn model_references_and_ids() {
    one(
        "models:\n  - { provider: nope, model: m }\n",
        2,
        17,
        "models[0].provider",
        "unknown provider `nope`; defined providers: (none)",
    );
    one(
        &pre("  - { provider: p, model: a }\n"),
        5,
        5,
        "models[1]",
        "duplicate deployment id `p/a` (from provider/model",
    );
    one(
        &pre("  - { id: p/a, provider: p, model: b }\n"),
        5,
        11,
        "models[1].id",
        "duplicate deployment id `p/a`",
    );
    one(
        &pre("  - { provider: p }\n"),
        5,
        5,
        "models[1].model",
        "missing `model`",
    );
    one(
        &pre("  - { provider: p, model: b, context_window: 0 }\n"),
        5,
        46,
        "models[1].context_window",
        "greater than zero",
    );
    one(
        &pre("  - { provider: p, model: b, context_window: 100, max_output_tokens: 200 }\n"),
        5,
        70,
        "models[1].max_output_tokens",
        "exceeds context_window (100)",
    );
    one(
        &pre("  - { provider: p, model: b, pricing: { input: -1, output: 2 } }\n"),
        5,
        48,
        "models[1].pricing.input",
        "must not be negative",
    );
    one(
        &pre("  - { provider: p, model: b, pricing: { input: .inf, output: 2 } }\n"),
        5,
        48,
        "models[1].pricing.input",
        "finite",
    );
    one(
        &pre("  - { provider: p, model: b, pricing: { input: 1 } }\n"),
        5,
        39,
        "models[1].pricing.output",
        "missing `output`",
    );
}

#[test]
fn route_references() {
    let src = pre("routes:\n  chat:\n    targets: [p/a, p/b]\n    fallbacks: [p/c]\n    tasks: { code: [p/d] }\n");
    let all = errs(&src);
    let got: Vec<_> = all
        .iter()
        .map(|(l, c, p, m)| (*l, *c, p.as_str(), m.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                7,
                20,
                "routes.chat.targets[1]",
                "unknown deployment `p/b`; defined deployments: p/a"
            ),
            (
                8,
                17,
                "routes.chat.fallbacks[0]",
                "unknown deployment `p/c`; defined deployments: p/a"
            ),
            (
                9,
                21,
                "routes.chat.tasks.code[0]",
                "unknown deployment `p/d`; defined deployments: p/a"
            ),
        ]
    );
    one(
        &pre("routes:\n  a/b: { targets: [p/a] }\n"),
        6,
        3,
        "routes.a/b",
        "must not contain `/`",
    );
    one(
        &pre("routes:\n  r: { strategy: cost }\n"),
        6,
        6,
        "routes.r.targets",
        "at least one target",
    );
    one(
        &pre("routes:\n  r: { targets: [] }\n"),
        6,
        17,
        "routes.r.targets",
        "at least one target",
    );
    one(
        &pre("routes:\n  r: { targets: [p/a, p/a] }\n"),
        6,
        23,
        "routes.r.targets[1]",
        "listed twice",
    );
    one(
        &pre("routes:\n  r: { targets: [{ deployment: p/a, weight: 2 }] }\n"),
        6,
        45,
        "routes.r.targets[0].weight",
        "only applies to `strategy: weighted`",
    );
    one(
        &pre("routes:\n  r: { strategy: weighted, targets: [{ deployment: p/a, weight: 0 }] }\n"),
        6,
        52,
        "routes.r.targets[0]",
        "at least one must be > 0",
    );
    one(&pre("routes:\n  r: { strategy: balanced, targets: [p/a], weights: { health: 0, latency: 0, cost: 0 } }\n"), 6, 53, "routes.r.weights", "all zero");
    one(&pre("routes:\n  r: { strategy: balanced, targets: [p/a], weights: { health: -1, cost: 1 } }\n"), 6, 63, "routes.r.weights.health", "must not be negative");
    one(
        &pre("routes:\n  r: { targets: [p/a], weights: { health: 1 } }\n"),
        6,
        33,
        "routes.r.weights",
        "only applies to `strategy: balanced`",
    );
    one(
        &pre("routes:\n  r: { targets: [p/a], max_cost_per_mtok: -2 }\n"),
        6,
        43,
        "routes.r.max_cost_per_mtok",
        "must not be negative",
    );
    one(
        &pre("routes:\n  p/a: { targets: [p/a] }\n"),
        6,
        3,
        "routes.p/a",
        "must not contain",
    );
    one("providers:\n  p: { protocol: openai }\nmodels:\n  - { id: fast, provider: p, model: a }\nroutes:\n  fast: { targets: [fast] }\n", 6, 3, "routes.fast", "same name as a deployment");
}

#[test]
fn retry_deadline_and_timeouts() {
    one(
        &pre("routes:\n  r: { targets: [p/a], retry: { attempts: 7 } }\n"),
        6,
        43,
        "routes.r.retry.attempts",
        "between 1 and 6",
    );
    one(
        &pre("routes:\n  r: { targets: [p/a], retry: { attempts: 0 } }\n"),
        6,
        43,
        "routes.r.retry.attempts",
        "between 1 and 6",
    );
    one(
        &pre("routes:\n  r: { targets: [p/a], retry: { base: 2s, max: 1s } }\n"),
        6,
        39,
        "routes.r.retry.base",
        "base (2s) must not exceed max (1s)",
    );
    one(
        &pre("routes:\n  r: { targets: [p/a], deadline: 0s }\n"),
        6,
        34,
        "routes.r.deadline",
        "greater than zero",
    );
    let p = "providers:\n  p:\n    protocol: openai\n";
    one(
        &format!("{p}    timeouts: {{ first_byte: 60s, total: 30s }}\n"),
        4,
        29,
        "providers.p.timeouts.first_byte",
        "must not exceed total",
    );
    one(
        &format!("{p}    timeouts: {{ stream_idle: 0ms }}\n"),
        4,
        30,
        "providers.p.timeouts.stream_idle",
        "greater than zero",
    );
    one(
        &format!("{p}    timeouts: {{ total: 10s }}\n"),
        4,
        24,
        "providers.p.timeouts.total",
        "first_byte (30s) must not exceed total (10s)",
    );
}

#[test]
fn limits_and_circuit() {
    let p = "providers:\n  p:\n    protocol: openai\n";
    let all = errs(&format!(
        "{p}    limits: {{ rpm: 0, tpm: 0, concurrency: 0, queue: 5, queue_timeout: 0s }}\n"
    ));
    let got: Vec<_> = all
        .iter()
        .map(|(l, c, p, m)| (*l, *c, p.as_str(), m.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (4, 20, "providers.p.limits.rpm", "must be at least 1"),
            (4, 28, "providers.p.limits.tpm", "must be at least 1"),
            (
                4,
                44,
                "providers.p.limits.concurrency",
                "must be at least 1"
            ),
            (
                4,
                72,
                "providers.p.limits.queue_timeout",
                "must be greater than zero when `queue` > 0"
            ),
        ]
    );
    let all = errs(&format!(
        "{p}    circuit: {{ failure_rate: 0, min_requests: 0, window: 0s }}\n"
    ));
    let got: Vec<_> = all
        .iter()
        .map(|(l, c, p, m)| (*l, *c, p.as_str(), m.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                4,
                30,
                "providers.p.circuit.failure_rate",
                "must be in (0, 1], found 0"
            ),
            (
                4,
                47,
                "providers.p.circuit.min_requests",
                "must be at least 1"
            ),
            (
                4,
                58,
                "providers.p.circuit.window",
                "must be greater than zero"
            ),
        ]
    );
    one(
        &format!("{p}    circuit: {{ failure_rate: 1.5 }}\n"),
        4,
        30,
        "providers.p.circuit.failure_rate",
        "(0, 1]",
    );
}
