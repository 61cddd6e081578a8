//! Per-request behavior: answer shaping, latency and fault injection.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the mock does for one request. Every field is optional (`#[serde(default)]`);
/// unknown fields are rejected so a typo in a test shows up as a 400 instead of being ignored.
///
/// See the crate documentation for the meaning of each field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Behavior {
    /// Answer text (default: `"Hello from the mock {openai|anthropic|gemini} provider."`).
    pub text: Option<String>,
    /// Split the answer into exactly this many pieces (stream events / completion tokens).
    pub chunks: Option<usize>,
    /// Reasoning text emitted before the answer.
    pub reasoning: Option<String>,
    /// Delay before the response headers.
    pub latency_ms: u64,
    /// Delay between stream events.
    pub chunk_delay_ms: u64,
    /// Respond with this status (and `headers`/`body`) instead of an answer.
    pub status: Option<u16>,
    /// Extra response headers (added to answers too when `status` is not set).
    pub headers: BTreeMap<String, String>,
    /// Body for `status`: a JSON string is sent verbatim, any other JSON value compact-serialized.
    pub body: Option<serde_json::Value>,
    /// Serve a fixture error envelope, e.g. `"openai/error_429_rate_limit_tokens"`.
    pub fixture: Option<String>,
    /// Fault to inject.
    pub fault: Option<Fault>,
    /// The `message` of the error a `fixture` or a `midstream_error` serves, instead of the
    /// recorded one (the rest of the bytes as recorded); `{key}` is replaced by the API key
    /// the request carried, as providers echo a bad key back.
    pub error_message: Option<String>,
    /// Fraction (0..=1) of requests the failure part (`fixture`, `status`, `fault`) applies to,
    /// drawn at random per request; the others get a normal answer. `None`: every request.
    pub fault_rate: Option<f64>,
    /// For `cut`, `stall`, `bad_event`, `midstream_error`: number of events sent first.
    pub after_events: usize,
    /// For `first_event_delay`: delay between the headers and the first event.
    pub first_event_delay_ms: u64,
    /// For `drip`: size of each body write (default 1).
    pub drip_bytes: usize,
    /// For `drip`: delay between body writes.
    pub drip_delay_ms: u64,
    /// Scripted tool loop for agent clients: call a tool first, answer `final` once its
    /// result comes back.
    pub tool_loop: Option<ToolLoop>,
    /// Prompt tokens reported as read from the provider's prompt cache (a part of the
    /// prompt; clamped to it).
    pub cached_tokens: u64,
    /// Prompt tokens reported as written to the prompt cache (Anthropic only; clamped to
    /// the prompt left after `cached_tokens`).
    pub cache_write_tokens: u64,
    /// Bedrock streams: the `:exception-type` a `midstream_error` sends (default
    /// `throttlingException`; see [`BEDROCK_STREAM_EXCEPTIONS`]).
    pub bedrock_exception: Option<String>,
}

/// The values `bedrock_exception` takes.
pub const BEDROCK_STREAM_EXCEPTIONS: &[&str] = &[
    "throttlingException",
    "serviceUnavailableException",
    "modelStreamErrorException",
    "validationException",
    "internalServerException",
    "modelTimeoutException",
];

/// A scripted one-step tool loop (`"tool_loop": {"tool": …, "arguments": …, "final": …}`).
///
/// A request with no tool result after its last user turn is answered with one call of
/// `tool` with `arguments`; the request that carries the result is answered with `final`,
/// in which every `{result}` is replaced by the result text (several results joined by
/// `\n`). Agent CLIs (Claude Code's `Bash`, Codex's `shell_command`) are driven this way, so
/// the call is made whatever `tool_choice` says and even when the named tool is not among
/// those offered; a request that offers no tools at all (an agent's side request: title,
/// topic) gets a normal answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolLoop {
    /// Tool to call. Default: the tool rule's choice (the named tool, else the first
    /// function tool offered); with neither, the request gets a normal answer.
    pub tool: Option<String>,
    /// Call arguments (any JSON; for a Responses `custom` tool a string is its `input`,
    /// other JSON its compact text). Default: synthesized from the tool's schema.
    pub arguments: Option<serde_json::Value>,
    /// Answer once the result is in. Default: `text` if set, else
    /// `"Tool result received: {result}"`.
    #[serde(rename = "final")]
    pub final_text: Option<String>,
}

/// Injected faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// Close the connection without any response.
    Drop,
    /// Never send the response headers.
    Hang,
    /// Send 200 + headers at once, the first event (or the body) after `first_event_delay_ms`.
    FirstEventDelay,
    /// Send `after_events` events then abort the connection mid-body.
    Cut,
    /// Send `after_events` events then nothing more, keeping the connection open.
    Stall,
    /// The stream ends cleanly without a finish reason and without a terminator.
    NoFinish,
    /// The finish reason is sent but no terminator (`[DONE]`, `message_stop`).
    NoTerminator,
    /// Inject one unparsable event after `after_events` events, then continue.
    BadEvent,
    /// In-band error event after `after_events` events; the stream then ends.
    MidstreamError,
    /// Non-stream: 200 with a truncated JSON body. Stream: like `bad_event`.
    MalformedJson,
    /// Write the whole body in `drip_bytes`-byte pieces, `drip_delay_ms` apart.
    Drip,
}

impl Behavior {
    /// Parse a behavior from JSON text.
    pub fn from_json(s: &str) -> Result<Behavior, serde_json::Error> {
        serde_json::from_str(s)
    }

    /// Behavior answering with `text`.
    pub fn text(text: impl Into<String>) -> Behavior {
        Behavior {
            text: Some(text.into()),
            ..Behavior::default()
        }
    }

    /// Behavior injecting `fault`.
    pub fn fault(fault: Fault) -> Behavior {
        Behavior {
            fault: Some(fault),
            ..Behavior::default()
        }
    }

    /// Behavior serving the named fixture error envelope.
    pub fn fixture(name: impl Into<String>) -> Behavior {
        Behavior {
            fixture: Some(name.into()),
            ..Behavior::default()
        }
    }

    /// Behavior answering with `status` and `body`.
    pub fn status(status: u16, body: impl Into<String>) -> Behavior {
        Behavior {
            status: Some(status),
            body: Some(serde_json::Value::String(body.into())),
            ..Behavior::default()
        }
    }

    /// Behavior running a scripted tool loop: call `tool` with `arguments`, then answer
    /// `final_text` (`{result}` = the tool's result) once the result comes back.
    pub fn tool_loop(
        tool: impl Into<String>,
        arguments: serde_json::Value,
        final_text: impl Into<String>,
    ) -> Behavior {
        Behavior {
            tool_loop: Some(ToolLoop {
                tool: Some(tool.into()),
                arguments: Some(arguments),
                final_text: Some(final_text.into()),
            }),
            ..Behavior::default()
        }
    }

    /// Builder: set `fault_rate`.
    pub fn rate(mut self, rate: f64) -> Behavior {
        self.fault_rate = Some(rate);
        self
    }

    /// Check the values serde cannot: `fault_rate` must be within 0..=1, `bedrock_exception`
    /// one of [`BEDROCK_STREAM_EXCEPTIONS`].
    pub(crate) fn validate(&self) -> Result<(), String> {
        if let Some(e) = self
            .bedrock_exception
            .as_deref()
            .filter(|e| !BEDROCK_STREAM_EXCEPTIONS.contains(e))
        {
            return Err(format!(
                "bedrock_exception must be one of {}, got {e}",
                BEDROCK_STREAM_EXCEPTIONS.join(", ")
            ));
        }
        match self.fault_rate {
            Some(r) if !(0.0..=1.0).contains(&r) => {
                Err(format!("fault_rate must be within 0..=1, got {r}"))
            }
            _ => Ok(()),
        }
    }

    /// This request's behavior once `fault_rate` is rolled: unchanged when the failure part
    /// applies, else without `fixture`, `status` and `fault`.
    pub(crate) fn roll(self: std::sync::Arc<Self>) -> std::sync::Arc<Self> {
        let Some(rate) = self.fault_rate else {
            return self;
        };
        if rand::random::<f64>() < rate {
            return self;
        }
        let mut b = (*self).clone();
        b.fixture = None;
        b.status = None;
        b.fault = None;
        std::sync::Arc::new(b)
    }

    /// Builder: set `error_message`.
    pub fn error_message(mut self, m: impl Into<String>) -> Behavior {
        self.error_message = Some(m.into());
        self
    }

    /// Builder: set `after_events`.
    pub fn after(mut self, n: usize) -> Behavior {
        self.after_events = n;
        self
    }

    /// Builder: set `latency_ms`.
    pub fn latency(mut self, ms: u64) -> Behavior {
        self.latency_ms = ms;
        self
    }

    /// Builder: set `chunk_delay_ms`.
    pub fn chunk_delay(mut self, ms: u64) -> Behavior {
        self.chunk_delay_ms = ms;
        self
    }

    /// Builder: set `chunks`.
    pub fn chunks(mut self, n: usize) -> Behavior {
        self.chunks = Some(n);
        self
    }

    /// Builder: set `text`.
    pub fn with_text(mut self, text: impl Into<String>) -> Behavior {
        self.text = Some(text.into());
        self
    }

    /// Builder: set `cached_tokens`.
    pub fn cached(mut self, n: u64) -> Behavior {
        self.cached_tokens = n;
        self
    }

    /// Builder: set `cache_write_tokens`.
    pub fn cache_write(mut self, n: u64) -> Behavior {
        self.cache_write_tokens = n;
        self
    }
}
