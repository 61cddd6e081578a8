//! The OpenAI Responses door (`POST /v1/responses`, what Codex and the
//! OpenAI Agents SDK speak).
//!
//! A request is split once into its raw fields (the same-dialect hop to an
//! `openai`/`azure` deployment with the `responses` capability forwards
//! them as they came) and decoded into the IR plus what only the Responses
//! API has (`ResponsesExtras`: custom and hosted tools, `store`,
//! `previous_response_id`, the parameters an answer echoes). A request the
//! IR cannot express (an `item_reference`, a hosted-tool item) is kept as a
//! decode error: only the passthrough can serve it, every other deployment
//! refuses it with that error.
//!
//! Answers the gateway writes itself get a `resp_…` id it issues; with
//! `store` (the API's default) the conversation is kept in the response
//! store, so `previous_response_id` continues it on any deployment. Every
//! stored answer is its client's (`state::responses::owned_key`): an
//! answer of the passthrough is recorded under the upstream's id too, and
//! a `previous_response_id` the calling client was not given — another
//! client's, an upstream's the gateway never recorded, or none at all — is
//! refused before anything is routed, the same way for all of them.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use switchyard_protocol::ir::{ChatRequest, ChatResponse, Message, Role, StreamEvent};
use switchyard_protocol::responses::{self as rs, RequestPeek, ResponsesExtras, StreamCursor};

use super::facts::{Facts, Raw, Tally};
use super::{Continues, Inbound, StreamPosition};
use crate::config::Capabilities;
use crate::error::{ErrorCode, GatewayError};
use crate::state::responses::{owned_key, ResponseStore, Stored};

/// A Responses request, as the path needs it.
pub struct ResponsesIn<'a> {
    pub peek: RequestPeek<'a>,
    pub decoded: Result<(ChatRequest, Arc<ResponsesExtras>), GatewayError>,
    /// The id of the answer when the gateway writes it (`resp_…`).
    pub id: String,
    /// `previous_response_id` named a conversation of this gateway's store:
    /// its history is in the IR, so only a translation can serve the request.
    pub expanded: bool,
    /// `previous_response_id` named an answer a Responses upstream gave this
    /// client through the passthrough: only that passthrough can continue it.
    pub upstream_previous: bool,
    /// Where to keep the answer (`store: true`), set by [`ResponsesIn::prepare`].
    pub remember: Option<Remember>,
}

/// Keeping an answer: which store, whose, under which id, after which
/// history. (Shared: it rides along in every stream position.)
#[derive(Clone)]
pub struct Remember(Arc<Keep>);

struct Keep {
    store: Arc<dyn ResponseStore>,
    /// The client the answer belongs to (`None`: an open gateway).
    owner: Option<Arc<str>>,
    /// The id of the answer the gateway writes (`resp_…`).
    id: String,
    /// The request's turns (instructions left out: they are not
    /// inherited); `None` when the IR cannot hold the request (only the
    /// passthrough serves it).
    history: Option<Arc<Vec<Message>>>,
}

impl std::fmt::Debug for Remember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remember").field("id", &self.0.id).finish()
    }
}

impl Remember {
    /// Store the answer the client got: `body` is the Response object as
    /// sent, `answer` what it says (its turn joins the history).
    pub fn keep(&self, body: Bytes, answer: &ChatResponse) {
        let k = &self.0;
        let Some(turns) = &k.history else { return };
        let mut history = (**turns).clone();
        history.push(assistant_turn(answer));
        k.store.put(
            owned_key(k.owner.as_deref(), &k.id),
            Stored {
                history: Some(Arc::new(history)),
                body,
            },
        );
    }

    /// A Responses upstream answered through the passthrough: its id (the
    /// upstream's) is this client's from now on. `body` is the answer as
    /// the client got it (empty for a stream: the upstream holds it).
    pub fn keep_upstream(&self, id: &str, body: Bytes) {
        if id.is_empty() {
            return;
        }
        let k = &self.0;
        k.store.put(
            owned_key(k.owner.as_deref(), id),
            Stored {
                history: None,
                body,
            },
        );
    }
}

/// The answer as the assistant turn a continuation replays.
fn assistant_turn(r: &ChatResponse) -> Message {
    let mut content = Vec::new();
    if let Some(t) = r.text.as_deref().filter(|t| !t.is_empty()) {
        content.push(switchyard_protocol::ir::ContentPart::Text(t.to_owned()));
    }
    Message {
        role: Role::Assistant,
        content,
        tool_calls: r.tool_calls.clone(),
        ..Message::default()
    }
}

pub fn decode(text: &str) -> Result<Inbound<'_>, GatewayError> {
    let peek = rs::peek_request(text).map_err(|e| GatewayError::invalid(e.param, e.message))?;
    // Whose conversation is continued is the gateway's to check: never
    // slipped past it to the upstream.
    if peek
        .provider_options
        .as_ref()
        .is_some_and(|o| o.contains_key("previous_response_id"))
    {
        return Err(GatewayError::invalid(
            Some("provider_options.previous_response_id".into()),
            "`previous_response_id` is a request field, not a provider option",
        ));
    }
    let decoded = rs::decode_fields(&peek.fields)
        .map(|(mut ir, x)| {
            ir.web_search = x.web_search.is_some();
            // Non-standard fields for the upstream, as on the other doors.
            ir.provider_options = peek.provider_options.clone().unwrap_or_default();
            (ir, Arc::new(x))
        })
        .map_err(|e| GatewayError::invalid(e.param, e.message));
    Ok(Inbound::Responses(Box::new(ResponsesIn {
        peek,
        decoded,
        id: format!("resp_{:032x}", rand::random::<u128>()),
        expanded: false,
        upstream_previous: false,
        remember: None,
    })))
}

impl ResponsesIn<'_> {
    /// Routing facts. A request the IR cannot express is estimated from
    /// its fields as they came (only the passthrough serves it).
    pub fn facts(&self) -> Facts {
        let raw = Raw::of(&self.peek.fields);
        if let Ok((ir, _)) = &self.decoded {
            return Facts::from_ir(ir, raw);
        }
        let mut t = Tally::default();
        for (k, v) in &self.peek.fields {
            if matches!(k.as_ref(), "input" | "instructions" | "tools" | "text") {
                t.json(v.get());
            }
        }
        t.finish(Capabilities::default(), self.peek.max_output_tokens, 1)
    }

    /// The store key of the conversation this request continues, if any
    /// (read from the body as it came, whether the IR can hold it or not).
    pub fn previous_key(&self, client: Option<&str>) -> Option<String> {
        let prev = self.peek.previous_response_id.as_deref()?;
        Some(owned_key(client, prev))
    }

    /// Before routing (and before the response cache): continue the
    /// client's own stored conversation, and note where the answer is to be
    /// kept. A `previous_response_id` that is not the client's is refused
    /// here, whatever deployment would have served it.
    pub fn prepare(
        &mut self,
        store: &Arc<dyn ResponseStore>,
        client: Option<&str>,
    ) -> Result<(), GatewayError> {
        let lead = match &self.decoded {
            Ok((_, extras)) => usize::from(
                extras
                    .echo
                    .instructions
                    .as_ref()
                    .is_some_and(|i| !i.is_empty()),
            ),
            Err(_) => 0,
        };
        if let Some(prev) = self.peek.previous_response_id.as_deref() {
            match store.get(&owned_key(client, prev)).map(|s| s.history) {
                None => return Err(unknown_previous(prev)),
                Some(None) => self.upstream_previous = true,
                Some(Some(history)) => {
                    // Held here: never forwarded to an upstream, which
                    // does not know the id (a request the IR cannot hold
                    // is refused with its decode error).
                    self.expanded = true;
                    if let Ok((ir, _)) = &mut self.decoded {
                        ir.messages.splice(lead..lead, history.iter().cloned());
                    }
                }
            }
        }
        if self.peek.store {
            self.remember = Some(Remember(Arc::new(Keep {
                store: store.clone(),
                owner: client.map(Arc::from),
                id: self.id.clone(),
                history: self
                    .decoded
                    .as_ref()
                    .ok()
                    .map(|(ir, _)| Arc::new(ir.messages[lead..].to_vec())),
            })));
        }
        Ok(())
    }

    /// An answer of the passthrough (the upstream's id and, for a whole
    /// answer, its body), kept as the client's when the request asked.
    pub fn keep_upstream(&self, id: &str, body: Bytes) {
        if let Some(m) = &self.remember {
            m.keep_upstream(id, body);
        }
    }

    /// Why a deployment that does not speak the Responses API cannot serve
    /// this request, if it cannot.
    pub fn refusal(&self) -> Option<GatewayError> {
        let (_, extras) = match &self.decoded {
            Err(e) => return Some(e.clone()),
            Ok(d) => d,
        };
        if self.upstream_previous {
            let prev = extras.previous_response_id.as_deref().unwrap_or_default();
            return Some(GatewayError::invalid(
                Some("previous_response_id".into()),
                format!("Previous response with id '{prev}' is held by the Responses API deployment that answered it: only a request to it can continue it."),
            ));
        }
        extras.forced_hosted.as_ref().map(|t| {
            GatewayError::invalid(
                Some("tool_choice".into()),
                format!(
                    "tool_choice forces the hosted tool `{t}`, which this deployment cannot run"
                ),
            )
        })
    }

    /// Tools a translation leaves out (named in `x-switchyard-dropped-tools`);
    /// `own_search`: the deployment runs the web search itself.
    pub fn dropped_tools(&self, own_search: bool) -> Vec<String> {
        let Ok((_, x)) = &self.decoded else {
            return Vec::new();
        };
        let search = x
            .web_search
            .as_ref()
            .filter(|_| !own_search)
            .map(|_| "web_search".to_owned());
        search
            .into_iter()
            .chain(x.dropped_tools.iter().cloned())
            .collect()
    }

    fn extras(&self) -> Arc<ResponsesExtras> {
        match &self.decoded {
            Ok((_, x)) => x.clone(),
            Err(_) => Arc::default(),
        }
    }

    /// The Response body for an answer the gateway translated (kept in the
    /// store when asked). A foreign reasoning signature is never handed out
    /// as `encrypted_content`: an OpenAI upstream would refuse it later.
    pub fn answer(&self, r: &ChatResponse) -> Bytes {
        let unsigned;
        let r = match r.reasoning_signature {
            Some(_) => {
                unsigned = ChatResponse {
                    reasoning_signature: None,
                    ..r.clone()
                };
                &unsigned
            }
            None => r,
        };
        let body = Bytes::from(rs::encode_response(r, &self.id, &self.extras()));
        if let Some(m) = &self.remember {
            m.keep(body.clone(), r);
        }
        body
    }

    pub fn encoder(&self) -> StreamEncoder {
        StreamEncoder {
            enc: rs::StreamEncoder::new(&self.id, crate::doors::unix_now(), &self.extras()),
            extras: self.extras(),
            remember: self.remember.clone(),
            prefix: String::new(),
        }
    }
}

/// What a `previous_response_id` that is not the caller's gets: the
/// upstream API's own answer to an unknown id, whoever's it is (no hint
/// that another client has it).
fn unknown_previous(prev: &str) -> GatewayError {
    GatewayError::invalid(
        Some("previous_response_id".into()),
        format!("Previous response with id '{prev}' not found."),
    )
}

/// The Responses error envelope is OpenAI's (`{"error":{message,type,code,param}}`).
pub fn error_body(e: &GatewayError) -> Vec<u8> {
    super::openai_chat::error_body(e)
}

/// A Responses error code for a failure reported inside a stream.
fn stream_code(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::RateLimited | ErrorCode::GatewayRateLimited => "rate_limit_exceeded",
        ErrorCode::ContextTooLong => "context_length_exceeded",
        ErrorCode::ContentFiltered => "invalid_prompt",
        ErrorCode::BudgetExceeded => "insufficient_quota",
        _ => "server_error",
    }
}

/// What a Responses client reads in a stream's error: the delay a 429 asks
/// for as "Please try again in Ns." (Codex parses it).
fn stream_message(e: &GatewayError) -> String {
    match e.retry_after {
        Some(d) => format!("{} Please try again in {}s.", e.message, d.as_secs().max(1)),
        None => e.message.clone(),
    }
}

/// The answer the gateway writes with nothing to echo (degraded answers).
pub fn answer(r: &ChatResponse) -> Bytes {
    let id = format!("resp_{:032x}", rand::random::<u128>());
    Bytes::from(rs::encode_response(r, &id, &ResponsesExtras::default()))
}

pub fn fresh_encoder() -> StreamEncoder {
    let extras = Arc::new(ResponsesExtras::default());
    let id = format!("resp_{:032x}", rand::random::<u128>());
    StreamEncoder {
        enc: rs::StreamEncoder::new(&id, crate::doors::unix_now(), &extras),
        extras,
        remember: None,
        prefix: String::new(),
    }
}

/// A stream that broke without an encoder of ours (a passthrough): `error`
/// and `response.failed` numbered after the last event it forwarded.
pub fn stream_error_after(id: &str, next_sequence: u64, e: &GatewayError) -> Bytes {
    let at = StreamCursor {
        id: id.to_owned(),
        started: true,
        sequence_number: next_sequence,
        ..StreamCursor::default()
    };
    let mut enc = rs::StreamEncoder::continuing(at, &ResponsesExtras::default());
    join(enc.error(stream_code(e.code), &stream_message(e)))
}

pub fn continues(at: &StreamPosition) -> Option<Continues> {
    let (cursor, extras, remember) = at.responses.clone()?;
    Some(Continues::Responses {
        cursor,
        extras,
        remember,
    })
}

/// IR events → Responses events; the terminal event's Response is kept in
/// the store when the request asked for it.
pub struct StreamEncoder {
    enc: rs::StreamEncoder,
    extras: Arc<ResponsesExtras>,
    remember: Option<Remember>,
    /// Continuing another stream: whitespace trimmed off the prefill, put
    /// back in front of the continuation's first text.
    prefix: String,
}

impl StreamEncoder {
    pub fn continuing(
        cursor: StreamCursor,
        extras: Arc<ResponsesExtras>,
        remember: Option<Remember>,
        prefix: String,
    ) -> Self {
        StreamEncoder {
            enc: rs::StreamEncoder::continuing(cursor, &extras),
            extras,
            remember,
            prefix,
        }
    }

    pub fn encode(&mut self, ev: &StreamEvent, out: &mut BytesMut) {
        // Never a foreign signature as encrypted_content (see `answer`).
        let stripped;
        let ev = match ev {
            StreamEvent::ReasoningDelta {
                text,
                signature: Some(_),
            } => {
                stripped = StreamEvent::ReasoningDelta {
                    text: text.clone(),
                    signature: None,
                };
                &stripped
            }
            StreamEvent::TextDelta(t) if !self.prefix.is_empty() => {
                stripped = StreamEvent::TextDelta(std::mem::take(&mut self.prefix) + t);
                &stripped
            }
            StreamEvent::Finish { .. } if !self.prefix.is_empty() => {
                let text = StreamEvent::TextDelta(std::mem::take(&mut self.prefix));
                self.enc
                    .push(&text)
                    .iter()
                    .for_each(|f| out.extend_from_slice(f));
                ev
            }
            ev => ev,
        };
        self.enc
            .push(ev)
            .iter()
            .for_each(|f| out.extend_from_slice(f));
    }

    pub fn end(&mut self) -> Bytes {
        let frames = self.enc.end();
        if let (Some(m), Some(last)) = (&self.remember, frames.last()) {
            if let Some(body) = response_of(last) {
                if let Ok(answer) = rs::decode_response(body.as_bytes()) {
                    m.keep(Bytes::copy_from_slice(body.as_bytes()), &answer);
                }
            }
        }
        join(frames)
    }

    pub fn error(&mut self, e: &GatewayError) -> Bytes {
        join(self.enc.error(stream_code(e.code), &stream_message(e)))
    }

    pub fn position(&self, at: &mut StreamPosition) {
        at.responses = Some((
            self.enc.cursor(),
            self.extras.clone(),
            self.remember.clone(),
        ));
    }
}

/// The Response object inside a terminal event's frame, as its text (not
/// parsed into a value and written again).
fn response_of(frame: &[u8]) -> Option<&str> {
    #[derive(serde::Deserialize)]
    struct Terminal<'a> {
        #[serde(borrow)]
        response: &'a serde_json::value::RawValue,
    }
    let text = std::str::from_utf8(frame).ok()?;
    let data = text.lines().find_map(|l| l.strip_prefix("data: "))?;
    let t: Terminal = serde_json::from_str(data).ok()?;
    Some(t.response.get())
}

fn join(frames: Vec<Bytes>) -> Bytes {
    let mut out = BytesMut::new();
    frames.iter().for_each(|f| out.extend_from_slice(f));
    out.freeze()
}
