//! switchyard-protocol: the wire formats the gateway speaks and the internal
//! model (IR) every dialect converts to and from. No I/O, no async runtime:
//! everything here is a pure function over bytes and values, tested against
//! `fixtures/providers/`.
//!
//! - [`sse`]: incremental Server-Sent-Events decoder (any byte split) and encoder.
//! - [`ir`]: the canonical request / response / stream-event model.
//! - [`openai`]: OpenAI Chat Completions wire types, the passthrough view of a
//!   request body, and conversions to and from the IR.
//! - [`anthropic`]: Anthropic Messages wire types and conversions to and from
//!   the IR, both as upstream provider and as client-facing dialect.
//! - [`gemini`]: Gemini generateContent request encoding, response / stream
//!   decoding and error bodies (upstream), plus response / stream encoding.
//! - [`ids`]: ids made up for answers and tool calls an upstream sent none for.
//! - [`responses`]: the OpenAI Responses API (`/v1/responses`): item-based
//!   requests grouped into IR turns, answers and SSE events in both
//!   directions, and the passthrough view for Responses upstreams.
//! - [`bedrock`]: Amazon Bedrock: the AWS event-stream framing, Converse /
//!   ConverseStream to and from the IR, InvokeModel with an Anthropic body,
//!   and CountTokens bodies.

pub mod anthropic;
pub mod bedrock;
pub mod gemini;
pub mod ids;
pub mod ir;
pub mod json;
pub mod openai;
pub mod passthrough;
pub mod responses;
pub mod sse;
