//! What the hot-path input estimate costs a request, beside the estimate it
//! replaced and the tokenizer (issue: "report the estimate's cost per
//! request beside the current one"). Prints one JSON line per request and a
//! summary line.
//!
//! cargo run --release --example estimate_cost -- [ROUNDS]
//!
//! For each recorded agent request (`fixtures/agents`: what Claude Code and
//! Codex really send) the request is decoded once by its door, then timed
//! ROUNDS times each (best of the rounds' means):
//! * `bytes_div_4`: the old estimate, the request's text bytes ÷ 4 (tool
//!   definitions left out) — the figure the gateway decided on before;
//! * `estimate`: `Facts::read`, the estimate the gateway decides on now
//!   (every billed part: system, messages, tools, images; CJK-aware);
//! * `tokenizer`: `tokenize::count_chat` with `o200k_base` (warm vocabulary);
//! * `decode`: the door's own parse of the body, which every request pays
//!   anyway, for scale.

use std::hint::black_box;

#[path = "support/best_of.rs"]
mod best_of;
use best_of::time;

use serde_json::Value;
use switchyard::doors::{Door, Facts};
use switchyard::tokenize;

const REQUESTS: &[(&str, Door)] = &[
    ("claude_code/text_01_messages", Door::AnthropicMessages),
    (
        "claude_code/tool_loop_02_messages_tool_result",
        Door::AnthropicMessages,
    ),
    (
        "claude_code/thinking_02_messages_thinking_replay",
        Door::AnthropicMessages,
    ),
    ("codex/text_01_responses", Door::Responses),
    (
        "codex/tool_loop_02_responses_function_call_output",
        Door::Responses,
    ),
];

/// The request's text as the old estimate read it: every text part of the
/// messages (system ones included, not the tool definitions).
fn text_bytes(ir: &switchyard_protocol::ir::ChatRequest) -> usize {
    use switchyard_protocol::ir::ContentPart;
    ir.messages
        .iter()
        .flat_map(|m| &m.content)
        .map(|p| match p {
            ContentPart::Text(t) => t.len(),
            _ => 0,
        })
        .sum()
}

fn main() -> Result<(), String> {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(Ok(5), |a| a.parse().map_err(|e| format!("ROUNDS: {e}")))?;
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/agents");
    let headers = http::HeaderMap::new();
    let (mut bytes, mut est_ns, mut old_ns, mut tok_ns) = (0usize, 0.0, 0.0, 0.0);
    for (name, door) in REQUESTS {
        let path = format!("{root}/{name}.json");
        let capture: Value = serde_json::from_str(
            &std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?,
        )
        .map_err(|e| format!("{path}: {e}"))?;
        let body = capture["body"].to_string();
        let inbound = door.decode(&body).map_err(|e| format!("{name}: {e:?}"))?;
        let ir = inbound.ir();
        let decode = time(rounds, || {
            black_box(door.decode(black_box(&body)).ok());
        });
        let estimate = time(rounds, || {
            black_box(Facts::read(black_box(&inbound), &headers, &[]));
        });
        let old = time(rounds, || {
            black_box(text_bytes(black_box(ir)) / 4);
        });
        tokenize::count_chat(ir, "gpt-4o"); // loads the vocabulary once
        let tokenizer = time(rounds.min(3), || {
            black_box(tokenize::count_chat(black_box(ir), "gpt-4o"));
        });
        let facts = Facts::read(&inbound, &headers, &[]);
        println!(
            "{{\"request\":\"{name}\",\"bytes\":{},\"estimate_tokens\":{},\"o200k_tokens\":{},\"old_tokens\":{},\"ns\":{{\"bytes_div_4\":{old:.0},\"estimate\":{estimate:.0},\"tokenizer\":{tokenizer:.0},\"decode\":{decode:.0}}}}}",
            body.len(),
            facts.prompt_tokens,
            tokenize::count_chat(ir, "gpt-4o"),
            text_bytes(ir) / 4,
        );
        bytes += body.len();
        est_ns += estimate;
        old_ns += old;
        tok_ns += tokenizer;
    }
    let per_byte = |ns: f64| ns / bytes as f64;
    println!(
        "{{\"summary\":true,\"requests\":{},\"bytes\":{bytes},\"ns_per_byte\":{{\"bytes_div_4\":{:.2},\"estimate\":{:.2},\"tokenizer\":{:.2}}}}}",
        REQUESTS.len(),
        per_byte(old_ns),
        per_byte(est_ns),
        per_byte(tok_ns),
    );
    Ok(())
}
