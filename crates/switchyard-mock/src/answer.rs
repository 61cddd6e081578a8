//! Deciding the answer for a request: text, tool call, tool-result echo, prefill, reasoning.

use crate::behavior::Behavior;
use crate::conv::{Choice, Conv, Proto};
use crate::text;
use serde_json::Value;

/// The decided answer.
#[derive(Debug, Clone)]
pub enum Content {
    Text {
        reasoning: Vec<String>,
        pieces: Vec<String>,
    },
    Tool {
        id: String,
        name: String,
        args: Value,
    },
}

/// Answer plus usage numbers.
#[derive(Debug, Clone)]
pub struct Answer {
    pub content: Content,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub reasoning_tokens: u64,
}

/// Argument fragment size for streamed tool calls.
pub const ARG_FRAGMENT: usize = 8;

/// Decide the answer for `conv` under `b`. `seq` numbers tool-call ids.
pub fn decide(proto: Proto, conv: &Conv, b: &Behavior, seq: u64) -> Answer {
    let prompt_tokens = text::prompt_tokens(conv.prompt_chars);
    let wants_tool = !conv.tools.is_empty()
        && conv.choice != Choice::None
        && conv.tool_results.is_none()
        && conv.prefill.is_none();
    if wants_tool {
        let (name, schema) = match &conv.choice {
            Choice::Named(n) => conv
                .tools
                .iter()
                .find(|(t, _)| t == n)
                .cloned()
                .unwrap_or((n.clone(), Value::Null)),
            _ => conv.tools[0].clone(),
        };
        let args = text::synth_args(&schema);
        let frags = text::fragments(&args.to_string(), ARG_FRAGMENT).len() as u64;
        let id = match proto {
            Proto::Anthropic => format!("toolu_mock_{seq}"),
            _ => format!("call_mock_{seq}"),
        };
        return Answer {
            content: Content::Tool { id, name, args },
            prompt_tokens,
            completion_tokens: frags,
            reasoning_tokens: 0,
        };
    }
    let base = match (&b.text, &conv.tool_results) {
        (Some(t), _) => t.clone(),
        (None, Some(results)) => format!("Tool result received: {}", results.join("\n")),
        (None, None) => format!("Hello from the mock {} provider.", proto.provider_name()),
    };
    let (full, mut pieces) = text::shape_answer(&base, b.chunks);
    let mut reasoning = b
        .reasoning
        .as_deref()
        .map(text::word_pieces)
        .unwrap_or_default();
    if let Some(prefill) = conv.prefill.as_deref().filter(|p| !p.is_empty()) {
        if let Some(rest) = full.strip_prefix(prefill) {
            pieces = text::word_pieces(rest);
            reasoning.clear();
        }
    }
    let reasoning_tokens = reasoning.len() as u64;
    Answer {
        completion_tokens: pieces.len() as u64 + reasoning_tokens,
        content: Content::Text { reasoning, pieces },
        prompt_tokens,
        reasoning_tokens,
    }
}
