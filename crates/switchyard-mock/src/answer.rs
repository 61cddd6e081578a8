//! Deciding the answer for a request: text, tool call, tool-result echo, prefill, reasoning,
//! scripted tool loop.

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
        /// Call arguments; for a Responses `custom` tool the `input` string.
        args: Value,
        /// A Responses `custom` (freeform) tool: answered as a `custom_tool_call`.
        custom: bool,
    },
}

/// Answer plus usage numbers.
#[derive(Debug, Clone)]
pub struct Answer {
    pub content: Content,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub reasoning_tokens: u64,
    /// Prompt tokens read from the prompt cache (part of `prompt_tokens`).
    pub cached_tokens: u64,
    /// Prompt tokens written to the prompt cache (part of `prompt_tokens`, besides
    /// `cached_tokens`).
    pub cache_write_tokens: u64,
}

impl Answer {
    /// Prompt tokens neither read from nor written to the cache (Anthropic's `input_tokens`).
    pub fn uncached_prompt_tokens(&self) -> u64 {
        self.prompt_tokens
            .saturating_sub(self.cached_tokens)
            .saturating_sub(self.cache_write_tokens)
    }
}

/// `(cached, cache_write)` clamped so that together they never exceed `prompt`:
/// `cache_write` is reduced first, then `cached`.
pub fn clamp_cache(prompt: u64, cached: u64, cache_write: u64) -> (u64, u64) {
    let cached = cached.min(prompt);
    (cached, cache_write.min(prompt - cached))
}

/// Argument fragment size for streamed tool calls.
pub const ARG_FRAGMENT: usize = 8;

/// The text a tool call streams: compact JSON arguments, or a custom tool's input string.
pub fn call_text(args: &Value, custom: bool) -> String {
    match args {
        Value::String(s) if custom => s.clone(),
        other => other.to_string(),
    }
}

/// The tool the tool rule picks: the named one, else the first function tool (a Responses
/// `custom` tool only when there is nothing else). `None` when no tool is offered.
fn pick_tool(conv: &Conv) -> Option<(String, Value)> {
    match &conv.choice {
        Choice::Named(n) => Some(
            conv.tools
                .iter()
                .find(|(t, _)| t == n)
                .cloned()
                .unwrap_or((n.clone(), Value::Null)),
        ),
        _ => conv
            .tools
            .iter()
            .find(|(t, _)| !conv.custom_tools.contains(t))
            .or(conv.tools.first())
            .cloned(),
    }
}

fn tool_answer(
    proto: Proto,
    conv: &Conv,
    name: String,
    args: Option<Value>,
    schema: &Value,
    seq: u64,
) -> Content {
    let custom = conv.custom_tools.contains(&name);
    let args = match args {
        Some(Value::String(s)) if custom => Value::String(s),
        Some(v) if custom => Value::String(v.to_string()),
        Some(v) => v,
        None if custom => Value::String("mock".into()),
        None => text::synth_args(schema),
    };
    let id = match proto {
        Proto::Anthropic | Proto::BedrockAnthropic | Proto::VertexAnthropic => {
            format!("toolu_mock_{seq}")
        }
        Proto::Converse => format!("tooluse_mock_{seq}"),
        _ => format!("call_mock_{seq}"),
    };
    Content::Tool {
        id,
        name,
        args,
        custom,
    }
}

/// Decide the answer for `conv` under `b`. `seq` numbers tool-call ids.
pub fn decide(proto: Proto, conv: &Conv, b: &Behavior, seq: u64) -> Answer {
    let prompt_tokens = text::prompt_tokens(conv.prompt_chars);
    let (cached_tokens, cache_write_tokens) =
        clamp_cache(prompt_tokens, b.cached_tokens, b.cache_write_tokens);
    let call = if let Some(tl) = &b.tool_loop {
        // Scripted loop: call until a result is in, whatever the tool choice says and
        // whether or not the named tool is among those offered.
        let pick = match &tl.tool {
            Some(n) => Some(
                conv.tools
                    .iter()
                    .find(|(t, _)| t == n)
                    .cloned()
                    .unwrap_or((n.clone(), Value::Null)),
            ),
            None => pick_tool(conv),
        };
        // Side requests without tools (title generation, topic checks) get a normal answer.
        pick.filter(|_| conv.tool_results.is_none() && !conv.tools.is_empty())
            .map(|(name, schema)| (name, tl.arguments.clone(), schema))
    } else {
        let wants_tool = !conv.tools.is_empty()
            && conv.choice != Choice::None
            && conv.tool_results.is_none()
            && conv.prefill.is_none();
        pick_tool(conv)
            .filter(|_| wants_tool)
            .map(|(name, schema)| (name, None, schema))
    };
    if let Some((name, args, schema)) = call {
        let content = tool_answer(proto, conv, name, args, &schema, seq);
        let Content::Tool { args, custom, .. } = &content else {
            unreachable!("tool_answer returns a tool call")
        };
        let frags = text::fragments(&call_text(args, *custom), ARG_FRAGMENT).len() as u64;
        return Answer {
            content,
            prompt_tokens,
            completion_tokens: frags,
            reasoning_tokens: 0,
            cached_tokens,
            cache_write_tokens,
        };
    }
    let loop_final = b.tool_loop.as_ref().and_then(|tl| tl.final_text.as_ref());
    let base = match (loop_final, &b.text, &conv.tool_results) {
        (Some(f), _, Some(results)) => f.replace("{result}", &results.join("\n")),
        (None, Some(t), Some(results)) if b.tool_loop.is_some() => {
            t.replace("{result}", &results.join("\n"))
        }
        (_, Some(t), _) => t.clone(),
        (_, None, Some(results)) => format!("Tool result received: {}", results.join("\n")),
        (_, None, None) => format!("Hello from the mock {} provider.", proto.provider_name()),
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
        cached_tokens,
        cache_write_tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::clamp_cache;

    #[test]
    fn clamp() {
        assert_eq!(clamp_cache(100, 30, 20), (30, 20));
        assert_eq!(clamp_cache(40, 30, 20), (30, 10));
        assert_eq!(clamp_cache(30, 30, 20), (30, 0));
        assert_eq!(clamp_cache(10, 30, 20), (10, 0));
        assert_eq!(clamp_cache(5, 0, 20), (0, 5));
        assert_eq!(clamp_cache(5, 0, 0), (0, 0));
    }
}
