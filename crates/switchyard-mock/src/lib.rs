//! Mock upstream LLM providers — OpenAI, Azure OpenAI, Anthropic and Gemini wire formats —
//! with fault injection, for switchyard's tests, demo (`switchyard serve` with no config)
//! and benchmark (`switchyard mock --listen ADDR`).
//!
//! The wire output is built independently of the gateway's own types (plain
//! `serde_json::Value` with preserved key order) and follows the recorded fixtures in
//! `fixtures/providers/`: OpenAI non-stream bodies are 2-space pretty JSON with a trailing
//! newline, streams `data: {compact}\n\n` + `data: [DONE]\n\n`; Anthropic compact JSON and
//! `event: X\ndata: {…}\n\n` streams (message_start, content_block_start, ping,
//! content_block_delta, content_block_stop, message_delta, message_stop); Gemini 2-space
//! pretty bodies and `data: {…}\r\n\r\n` streams with no terminator.
//!
//! # Endpoints
//!
//! | | |
//! |---|---|
//! | `POST /v1/chat/completions`, `POST /chat/completions` | OpenAI (stream with `"stream": true`; `stream_options.include_usage` adds the `choices: []` usage chunk) |
//! | `POST /openai/deployments/{deployment}/chat/completions?api-version=…` | Azure OpenAI: OpenAI format, `model` = deployment |
//! | `POST /v1/messages` | Anthropic (stream with `"stream": true`) |
//! | `POST /v1beta/models/{model}:generateContent` | Gemini (`/v1/models/…` accepted too) |
//! | `POST /v1beta/models/{model}:streamGenerateContent?alt=sse` | Gemini SSE (always SSE, `alt` is not checked) |
//! | `GET /v1/models` | OpenAI model list |
//! | anything else | 404, OpenAI-style JSON error |
//!
//! # Answers
//!
//! * Text: `"Hello from the mock {openai|anthropic|gemini} provider."` (Azure says `openai`),
//!   streamed as word pieces (each word with the whitespace before it).
//! * Usage: prompt tokens = characters (Unicode scalar values) of all system, message and
//!   tool-result text / 4, at least 1; completion tokens = number of pieces (+ reasoning
//!   pieces; a tool call counts its argument fragments of 8 characters).
//! * `model` in the response is the request's (Azure: the deployment; Gemini: `modelVersion`
//!   = the model in the URL).
//! * Tools: when the request has tools, the tool choice is not none, there is no tool result
//!   after the last user text and no prefill, the answer is one call of the named tool (or the
//!   first tool) with arguments synthesized from its schema `properties`: string → `"mock"`
//!   (first `enum` value if there is one), number/integer → 1, boolean → true, else null.
//!   Ids are `call_mock_<seq>` / `toolu_mock_<seq>` (`seq` = request number since start).
//! * Tool results (OpenAI `role: tool`, Anthropic `tool_result`, Gemini `functionResponse`)
//!   after the last user text: `"Tool result received: <content text>"` (several results
//!   joined by `\n`; a Gemini response object is its compact JSON, or the string of a lone
//!   `{"result": "…"}`).
//! * Prefill: when the last message is an assistant (Gemini `model`) text message whose text
//!   is a prefix of the full answer, only the remainder is answered (re-split into word
//!   pieces, no reasoning). A prefill that is not a prefix gets the full answer.
//!
//! # Behavior
//!
//! A [`Behavior`] is chosen per request from, first found wins: (1) the queue set with
//! [`MockServer::script`]; (2) the `x-mock-behavior` request header holding Behavior JSON;
//! (3) a top-level body field `"mock": {…}`; (4) [`MockServer::set_default`]. Invalid
//! Behavior JSON (including unknown fields) gets a 400. Fields (all optional):
//!
//! | field | effect |
//! |---|---|
//! | `text` | answer text (wins over the default and the tool-result text) |
//! | `chunks` | split the answer into exactly N pieces: consecutive words are grouped (the first `words % N` pieces get one extra word); if the text has fewer than N words it becomes `"word1 word2 … wordN"` |
//! | `reasoning` | reasoning before the answer: OpenAI `reasoning_content` (DeepSeek style), Anthropic `thinking` block, Gemini `thought: true` part |
//! | `latency_ms` | delay before the response headers |
//! | `chunk_delay_ms` | delay between stream events |
//! | `status`, `headers`, `body` | respond with this status, headers and body (a JSON string is sent verbatim, other JSON compact); `headers` are also added to normal answers |
//! | `fixture` | serve an error envelope by name, e.g. `"openai/error_429_rate_limit_tokens"`, `"anthropic/error_529_overloaded"`, `"gemini/error_429_resource_exhausted"` (every `error_*.http.json` of openai, anthropic, gemini, azure, deepseek, qwen; see [`fixtures::names`]) |
//! | `fault` | one of the faults below |
//! | `fault_rate` | a number in 0..=1: the failure part of the behavior (`fixture`, `status`, `fault`) applies only to that fraction of requests, drawn at random per request; the others get a normal answer (`latency_ms`, `chunks`, `headers`, … still apply). E.g. `{"fixture": "openai/error_429_rate_limit_tokens", "fault_rate": 0.5}` rate-limits about half the requests. Absent: every request. Outside 0..=1: 400 |
//! | `after_events` | events sent before `cut`, `stall`, `bad_event`, `midstream_error` act (default 0) |
//! | `first_event_delay_ms` | for `first_event_delay` |
//! | `drip_bytes`, `drip_delay_ms` | for `drip` (piece size default 1) |
//!
//! Faults (`"fault": "…"`):
//! * `drop` — the connection is closed without any response.
//! * `hang` — the response headers never come.
//! * `first_event_delay` — 200 + headers at once; the first event (non-stream: the body)
//!   after `first_event_delay_ms`.
//! * `cut` — `after_events` events, then the connection is aborted mid-body (the client sees
//!   an incomplete chunked body). Non-stream: half the body, then abort.
//! * `stall` — `after_events` events, then nothing while the connection stays open.
//!   Non-stream: half the body, then nothing.
//! * `no_finish` — the stream ends cleanly with no finish reason (OpenAI: no finish chunk, no
//!   usage chunk; Anthropic: no `message_delta`; Gemini: no `finishReason`) and no terminator.
//! * `no_terminator` — finish reason sent, no `data: [DONE]` / `message_stop` (Gemini streams
//!   never have one).
//! * `bad_event` — one unparsable event (`data: {not json`) after `after_events` events, then
//!   the stream goes on normally.
//! * `midstream_error` — after `after_events` events, the provider's in-band error (OpenAI
//!   `data: {"error":…}`, Anthropic `event: error` overloaded, Gemini a bare JSON error object,
//!   all verbatim from the fixtures), then the stream ends. No effect on non-stream requests.
//! * `malformed_json` — non-stream: 200 with the first half of the JSON body. Stream: like
//!   `bad_event`.
//! * `drip` — the whole response body written in `drip_bytes`-byte pieces, `drip_delay_ms`
//!   apart.
//!
//! Order of effects: the `fault_rate` roll, `latency_ms`, then `drop`/`hang`, then the route (404), the key check
//! ([`MockServer::set_valid_keys`]), `fixture`, `status`, and finally the answer.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use switchyard_mock::{Behavior, Fault, MockServer};
//! let mock = MockServer::start("127.0.0.1:0").await?;
//! mock.script(vec![
//!     Behavior::fixture("openai/error_429_rate_limit_tokens"),
//!     Behavior::fault(Fault::Cut).after(3),
//! ]);
//! println!("{}", mock.base_url());
//! # Ok(()) }
//! ```

/// `include_str!` of a file under `fixtures/providers/`.
macro_rules! fixture {
    ($path:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/providers/",
            $path
        ))
    };
}

mod answer;
mod anthropic;
mod behavior;
mod conv;
mod embeddings;
mod faults;
pub mod fixtures;
mod gemini;
mod handler;
mod json;
mod openai;
mod render;
mod responses;
mod server;
mod text;
mod tokens;

pub use behavior::{Behavior, Fault, ToolLoop};
pub use server::{MockServer, RecordedRequest, MAX_RECORDED};

/// Run the mock providers on `addr` until ctrl-c (`switchyard mock --listen ADDR`).
pub async fn run(addr: &str) -> std::io::Result<()> {
    let server = MockServer::start(addr).await?;
    let base = server.base_url();
    println!("switchyard mock providers listening on {base}");
    println!("  OpenAI:    POST {base}/v1/chat/completions");
    println!("  Azure:     POST {base}/openai/deployments/{{deployment}}/chat/completions");
    println!("  Anthropic: POST {base}/v1/messages");
    println!("  Gemini:    POST {base}/v1beta/models/{{model}}:generateContent");
    println!("             POST {base}/v1beta/models/{{model}}:streamGenerateContent?alt=sse");
    tokio::signal::ctrl_c().await?;
    server.shutdown();
    Ok(())
}
