//! The canonical model every dialect converts to and from (hub and spoke).
//!
//! It carries the union of what OpenAI Chat Completions, Anthropic Messages and
//! Gemini generateContent can express: text and image parts, tools, tool calls
//! and results, reasoning text (with provider signatures), JSON modes, usage
//! with cached and reasoning tokens, finish reasons and free-form provider
//! options. Field meanings follow `fixtures/providers/MAPPING.md`.

use serde_json::{Map, Value};

/// A chat request, dialect-neutral.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest {
    /// What the client asked for (a route name or a deployment id).
    pub model: String,
    /// System / developer messages stay in place here; adapters whose protocol
    /// hoists them (Anthropic, Gemini) do so on the way out.
    pub messages: Vec<Message>,
    pub tools: Vec<Tool>,
    pub tool_choice: Option<ToolChoice>,
    pub parallel_tool_calls: Option<bool>,
    pub response_format: Option<ResponseFormat>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<u32>,
    pub stop: Vec<String>,
    pub seed: Option<i64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub reasoning: Option<ReasoningConfig>,
    /// End-user id (OpenAI `user`, Anthropic `metadata.user_id`).
    pub user: Option<String>,
    pub stream: bool,
    /// The client asked for usage in the stream (OpenAI `stream_options`).
    pub include_usage: bool,
    /// Non-standard fields merged into the upstream body as they are.
    pub provider_options: Map<String, Value>,
    /// The client asked for the provider's own web search (a Responses
    /// `web_search` tool): Anthropic's server tool, Gemini's Google Search.
    pub web_search: bool,
    /// Choices asked for (OpenAI `n`); `None` or 1 is one.
    pub n: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
// Stored conversations (the usage store) keep messages as JSON.
#[derive(serde::Serialize, serde::Deserialize)]
pub enum Role {
    System,
    #[default]
    User,
    Assistant,
    Tool,
}

#[derive(Debug, Clone, Default, PartialEq)]
// Stored conversations (the usage store) keep messages as JSON.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<ContentPart>,
    /// Assistant turns: the calls it made.
    pub tool_calls: Vec<ToolCall>,
    /// Tool turns: which call this answers.
    pub tool_call_id: Option<String>,
    /// Tool turns: the result is an error (Anthropic `is_error`).
    pub is_error: bool,
    pub name: Option<String>,
}

impl Message {
    /// All text parts joined (reasoning excluded).
    pub fn text(&self) -> String {
        let mut out = String::new();
        for p in &self.content {
            if let ContentPart::Text(t) = p {
                out.push_str(t);
            }
        }
        out
    }
}

#[derive(Debug, Clone, PartialEq)]
// Stored conversations (the usage store) keep messages as JSON.
#[derive(serde::Serialize, serde::Deserialize)]
pub enum ContentPart {
    Text(String),
    Image {
        source: ImageSource,
        /// OpenAI `detail` (auto | low | high); dropped where unsupported.
        detail: Option<String>,
    },
    /// Reasoning shown by the model; `signature` must be echoed back to the
    /// provider that made it (Anthropic thinking, Gemini thoughtSignature).
    Reasoning {
        text: String,
        signature: Option<String>,
    },
    /// Anthropic `redacted_thinking`: opaque, echoed unchanged.
    RedactedReasoning(String),
    /// An OpenAI Responses input item kept as the raw JSON text it arrived
    /// as (a `reasoning` item with `encrypted_content`): only a Responses
    /// upstream can use it, byte for byte; every other encoder drops it.
    /// Its summary text travels separately as `Reasoning` parts.
    ResponsesItem(String),
}

#[derive(Debug, Clone, PartialEq)]
// Stored conversations (the usage store) keep messages as JSON.
#[derive(serde::Serialize, serde::Deserialize)]
pub enum ImageSource {
    Url(String),
    Base64 { media_type: String, data: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    pub parameters: Value,
    pub strict: Option<bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ToolChoice {
    Auto,
    None,
    Required,
    Named(String),
    /// Restrict to a subset; `required` = must call one of them.
    Allowed {
        names: Vec<String>,
        required: bool,
    },
}

#[derive(Debug, Clone, PartialEq)]
// Stored conversations (the usage store) keep messages as JSON.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as JSON text (OpenAI's representation; may be invalid
    /// JSON when the model produced it so).
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ResponseFormat {
    Text,
    JsonObject,
    JsonSchema {
        name: String,
        schema: Value,
        strict: Option<bool>,
        description: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReasoningConfig {
    /// OpenAI `reasoning_effort` (minimal | low | medium | high | none).
    pub effort: Option<String>,
    /// Anthropic `thinking.budget_tokens`, Gemini `thinkingBudget`.
    pub budget_tokens: Option<u32>,
}

/// A whole (non-streamed) answer.
#[derive(Debug, Clone, Default, PartialEq)]
// A shared response cache keeps answers as JSON.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct ChatResponse {
    pub id: String,
    /// The upstream model that served (never the route alias).
    pub model: String,
    pub created: u64,
    pub text: Option<String>,
    pub reasoning: Option<String>,
    pub reasoning_signature: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub refusal: Option<String>,
    pub finish_reason: FinishReason,
    /// The provider's own value, kept for logs (`end_turn`, `SAFETY`…).
    pub raw_finish_reason: Option<String>,
    pub usage: Usage,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum FinishReason {
    #[default]
    Stop,
    Length,
    ToolCalls,
    ContentFilter,
    /// Tool misuse reported by the provider (Gemini MALFORMED_FUNCTION_CALL…).
    Error,
}

impl FinishReason {
    pub fn openai(self) -> &'static str {
        match self {
            FinishReason::Stop | FinishReason::Error => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
        }
    }

    pub fn from_openai(s: &str) -> FinishReason {
        match s {
            "length" => FinishReason::Length,
            "tool_calls" | "function_call" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            _ => FinishReason::Stop,
        }
    }
}

/// Token accounting in the unified sense of MAPPING.md §10.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// All prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// All output tokens, reasoning included.
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache (subset of input).
    pub cached_input_tokens: u64,
    /// Prompt tokens written to the provider's cache (Anthropic).
    pub cache_write_tokens: u64,
    /// Output tokens spent on reasoning (subset of output).
    pub reasoning_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// One step of a streamed answer, in the order a client must see them.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// Stream opened: ids for the client's envelope.
    Start {
        id: String,
        model: String,
        created: u64,
    },
    TextDelta(String),
    ReasoningDelta {
        text: String,
        signature: Option<String>,
    },
    /// `index` counts tool calls (0, 1, …), not content blocks.
    ToolCallStart {
        index: u32,
        id: String,
        name: String,
    },
    ToolCallDelta {
        index: u32,
        arguments: String,
    },
    /// Replaces any earlier usage (providers report cumulative totals).
    Usage(Usage),
    Finish {
        reason: FinishReason,
        raw: Option<String>,
    },
}

/// A whole answer put together from its stream events (what a cache keeps of
/// a streamed answer). Text and reasoning append; a tool call's arguments
/// append to the call its `index` names.
#[derive(Debug, Default)]
pub struct AnswerBuilder {
    answer: ChatResponse,
    /// Tool-call `index` → position in `answer.tool_calls`.
    calls: Vec<(u32, usize)>,
    finished: bool,
}

impl AnswerBuilder {
    pub fn push(&mut self, ev: &StreamEvent) {
        let a = &mut self.answer;
        match ev {
            StreamEvent::Start { id, model, created } => {
                a.id.clone_from(id);
                a.model.clone_from(model);
                a.created = *created;
            }
            StreamEvent::TextDelta(t) => a.text.get_or_insert_with(String::new).push_str(t),
            StreamEvent::ReasoningDelta { text, signature } => {
                a.reasoning.get_or_insert_with(String::new).push_str(text);
                if signature.is_some() {
                    a.reasoning_signature.clone_from(signature);
                }
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                self.calls.push((*index, a.tool_calls.len()));
                a.tool_calls.push(ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: String::new(),
                });
            }
            StreamEvent::ToolCallDelta { index, arguments } => {
                let at = self.calls.iter().rev().find(|(i, _)| i == index);
                if let Some(call) = at.and_then(|(_, p)| a.tool_calls.get_mut(*p)) {
                    call.arguments.push_str(arguments);
                }
            }
            StreamEvent::Usage(u) => a.usage = *u,
            StreamEvent::Finish { reason, raw } => {
                a.finish_reason = *reason;
                a.raw_finish_reason.clone_from(raw);
                self.finished = true;
            }
        }
    }

    /// The answer, once its finish reason came.
    pub fn finish(self) -> Option<ChatResponse> {
        self.finished.then_some(self.answer)
    }
}

impl ChatResponse {
    /// The answer as the events of a stream that would have carried it, in
    /// the order every encoder takes them (usage after the finish reason).
    /// The input usage also comes right after `Start`, as a live Anthropic
    /// stream reports it, so an Anthropic client's `message_start` carries
    /// it; the full usage at the end replaces it.
    pub fn stream_events(&self) -> Vec<StreamEvent> {
        let mut ev = vec![
            StreamEvent::Start {
                id: self.id.clone(),
                model: self.model.clone(),
                created: self.created,
            },
            StreamEvent::Usage(Usage {
                output_tokens: 0,
                reasoning_tokens: 0,
                ..self.usage
            }),
        ];
        if self.reasoning.is_some() || self.reasoning_signature.is_some() {
            ev.push(StreamEvent::ReasoningDelta {
                text: self.reasoning.clone().unwrap_or_default(),
                signature: self.reasoning_signature.clone(),
            });
        }
        if let Some(t) = &self.text {
            ev.push(StreamEvent::TextDelta(t.clone()));
        }
        for (i, c) in self.tool_calls.iter().enumerate() {
            let index = i as u32;
            ev.push(StreamEvent::ToolCallStart {
                index,
                id: c.id.clone(),
                name: c.name.clone(),
            });
            ev.push(StreamEvent::ToolCallDelta {
                index,
                arguments: c.arguments.clone(),
            });
        }
        ev.push(StreamEvent::Finish {
            reason: self.finish_reason,
            raw: self.raw_finish_reason.clone(),
        });
        ev.push(StreamEvent::Usage(self.usage));
        ev
    }
}

#[cfg(test)]
mod answer_tests {
    use super::*;

    /// Upstream counts near `u64::MAX` add up saturating (a debug build
    /// panicked; a wrapped total would bill a huge answer as a tiny one).
    #[test]
    fn a_total_at_the_top_of_u64_saturates() {
        let u = Usage {
            input_tokens: u64::MAX,
            output_tokens: 1,
            ..Usage::default()
        };
        assert_eq!(u.total(), u64::MAX);
    }

    #[test]
    fn an_answer_survives_its_own_stream() {
        let answer = ChatResponse {
            id: "a1".into(),
            model: "m".into(),
            created: 7,
            text: Some("hello".into()),
            reasoning: Some("think".into()),
            reasoning_signature: Some("sig".into()),
            tool_calls: vec![
                ToolCall {
                    id: "c1".into(),
                    name: "f".into(),
                    arguments: "{\"a\":1}".into(),
                },
                ToolCall {
                    id: "c2".into(),
                    name: "g".into(),
                    arguments: "{}".into(),
                },
            ],
            finish_reason: FinishReason::ToolCalls,
            raw_finish_reason: Some("tool_use".into()),
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                ..Usage::default()
            },
            ..ChatResponse::default()
        };
        let mut b = AnswerBuilder::default();
        answer.stream_events().iter().for_each(|e| b.push(e));
        assert_eq!(b.finish(), Some(answer));
    }

    #[test]
    fn fragments_append_and_an_unfinished_stream_is_no_answer() {
        let events = [
            StreamEvent::TextDelta("he".into()),
            StreamEvent::ToolCallStart {
                index: 0,
                id: "c".into(),
                name: "f".into(),
            },
            StreamEvent::ToolCallDelta {
                index: 0,
                arguments: "{\"x\":".into(),
            },
            StreamEvent::TextDelta("llo".into()),
            StreamEvent::ToolCallDelta {
                index: 0,
                arguments: "2}".into(),
            },
        ];
        let built = |finish: bool| {
            let mut b = AnswerBuilder::default();
            events.iter().for_each(|e| b.push(e));
            if finish {
                b.push(&StreamEvent::Finish {
                    reason: FinishReason::Stop,
                    raw: None,
                });
            }
            b.finish()
        };
        assert_eq!(built(false), None);
        let a = built(true).expect("finished");
        assert_eq!(a.text.as_deref(), Some("hello"));
        assert_eq!(a.tool_calls[0].arguments, "{\"x\":2}");
    }
}
