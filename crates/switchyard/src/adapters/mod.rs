//! ADAPTERS: the upstream side. Each provider is one module behind one
//! interface (`provider::Provider`: URLs, authentication after the body is
//! built, fixed headers, errors, request encoding, answer and stream
//! decoding with the stream's framing, embeddings, token counting);
//! `provider_for` is where they are registered (`openai` with its Azure
//! flavor, `anthropic`, `gemini`, `bedrock`, `vertex`).
//!
//! An attempt is: build the upstream body for this (client dialect, upstream
//! protocol) pair (`body`), send it (`send`: the provider authorizes the
//! final request), classify a failure with the protocol's own error rules
//! (`*/errors.rs`), and hand back either a whole answer already in the
//! client's dialect (`convert`) or a stream opened up to its first event
//! (`stream`). Same-dialect pairs pass bytes through; other pairs translate
//! through the IR. Before the body is built, image URLs a provider cannot
//! read itself are fetched and inlined (`images`).

pub mod anthropic;
pub mod bedrock;
pub mod body;
pub mod convert;
pub mod count_tokens;
pub mod deployment;
pub mod embeddings;
pub mod endpoint;
pub mod errors;
pub mod gemini;
pub mod images;
pub mod key_check;
pub mod openai;
pub mod provider;
pub mod resets;
pub mod send;
pub mod stream;
pub mod translate;
pub mod vertex;

use std::time::Duration;

use crate::upstream::client::UpstreamBody;
use bytes::Bytes;
use http::HeaderValue;
use http_body_util::BodyExt;
use switchyard_protocol::ir::Usage;
use tokio::time::Instant;

use crate::adapters::deployment::DeploymentRt;
use crate::config::{Protocol, Provider as ProviderCfg, ProviderKey};
use crate::doors::Door;
pub use crate::doors::Inbound;
use crate::error::{ErrorCode, GatewayError};
use std::sync::Arc;
pub use stream::{Step, UpstreamStream};

/// The wire dialect an upstream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    OpenAi,
    Anthropic,
    Gemini,
    /// Bedrock's Converse: no client door speaks it.
    Converse,
}

/// Where providers are registered: the module that speaks a provider
/// block's `protocol`, built once per config load (a module may keep what
/// it needs for the provider's lifetime: credentials, a token source).
pub fn provider_for(cfg: &ProviderCfg) -> Result<Arc<dyn provider::Provider>, String> {
    Ok(match cfg.protocol {
        Protocol::OpenAi | Protocol::Azure => Arc::new(openai::OpenAi::new(cfg)),
        Protocol::Anthropic => Arc::new(anthropic::Anthropic),
        Protocol::Gemini => Arc::new(gemini::Gemini),
        Protocol::Bedrock => Arc::new(bedrock::Bedrock::new(cfg)?),
        Protocol::Vertex => Arc::new(vertex::Vertex::new(cfg)?),
    })
}

/// The upstream speaks the client's own dialect: bytes pass through.
pub fn speaks(api: &dyn provider::Provider, door: Door) -> bool {
    match door {
        Door::OpenAiChat => api.dialect() == Dialect::OpenAi,
        Door::AnthropicMessages => api.dialect() == Dialect::Anthropic,
        // Decided per deployment (`body::responses_pass`): only those
        // with the `responses` capability serve the Responses API.
        Door::Responses => false,
    }
}

/// Per-request facts every adapter needs besides the body.
#[derive(Debug, Clone)]
pub struct CallInfo {
    pub traceparent: Option<HeaderValue>,
    /// The whole-request deadline (route `deadline`), if any.
    pub deadline: Option<Instant>,
    /// An Anthropic client's `anthropic-beta` (all its values, joined), for
    /// Anthropic upstreams.
    pub anthropic_beta: Option<HeaderValue>,
    /// Keep a streamed answer whole as the IR while it goes out (the
    /// response cache stores it when it ends well).
    pub capture: bool,
}

/// A successful non-streamed answer, body already in the client's dialect.
#[derive(Debug)]
pub struct JsonAnswer {
    pub body: Bytes,
    pub usage: Usage,
    pub model: String,
    pub ttfb: Duration,
}

/// What came back from one attempt.
pub enum Answer {
    Json(JsonAnswer),
    Stream(Box<UpstreamStream>),
}

impl Answer {
    pub fn ttfb(&self) -> Duration {
        match self {
            Answer::Json(j) => j.ttfb,
            Answer::Stream(s) => s.ttfb,
        }
    }
}

/// One attempt against one deployment.
pub async fn chat(
    dep: &DeploymentRt,
    key: Option<&ProviderKey>,
    inbound: &Inbound<'_>,
    call: &CallInfo,
) -> Result<Answer, GatewayError> {
    // Image URLs a provider cannot read itself are fetched first, on the
    // request's own time bound, not on the upstream's first-byte budget.
    let inlined = images::inline(dep, inbound, call.deadline).await?;
    let started = Instant::now();
    let t = dep.provider.cfg.timeouts;
    let first_byte_by = earliest(started + t.first_byte, call.deadline);
    let total_by = earliest(started + t.total, call.deadline);
    let mut out = body::build(dep, inbound, inlined.as_ref())?;
    let upstream_body = std::mem::take(&mut out.body);
    let resp = send::send(
        dep,
        key,
        send::Shape {
            stream: inbound.stream(),
            responses_api: out.responses_api,
        },
        upstream_body,
        call,
        first_byte_by,
        total_by,
    )
    .await?;
    if inbound.stream() {
        let mode = translate::Mode::new(inbound, dep, &out);
        let capture = call.capture.then(Box::default);
        let framing = dep.api().stream_framing(&out);
        let stream = UpstreamStream::open(
            resp,
            framing,
            mode,
            inbound.door(),
            capture,
            first_byte_by,
            started,
        )
        .await?;
        if let (true, Inbound::Responses(r)) = (out.responses_api, inbound) {
            // The passthrough's `response.created` named the answer: the
            // client's from now on (its body stays the upstream's).
            if let Some(id) = &stream.seen.at.id {
                r.keep_upstream(id, Bytes::new());
            }
        }
        return Ok(Answer::Stream(Box::new(stream)));
    }
    // `first_byte` runs until the answer's first body byte, not its headers.
    let bytes = read_body(resp.into_body(), send::MAX_ANSWER, first_byte_by, total_by).await?;
    let ttfb = started.elapsed();
    let answer = convert::answer(dep, inbound, &out, bytes)?;
    Ok(Answer::Json(JsonAnswer { ttfb, ..answer }))
}

/// Read a whole body, at most `limit` bytes: its first byte before
/// `first_by`, all of it before `deadline`.
pub async fn read_body(
    body: UpstreamBody,
    limit: usize,
    first_by: Instant,
    deadline: Instant,
) -> Result<Bytes, GatewayError> {
    match tokio::time::timeout_at(deadline, collect(body, limit, first_by)).await {
        Err(_) => Err(GatewayError::upstream(
            ErrorCode::Timeout,
            "upstream did not finish its answer in time",
        )),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::TimedOut => {
            Err(silent("no answer body before the first-byte timeout"))
        }
        Ok(Err(e)) => Err(GatewayError::upstream(
            ErrorCode::ConnectionError,
            format!("upstream body could not be read: {e}"),
        )),
        Ok(Ok(b)) => Ok(b),
    }
}

/// The body's bytes. A body that comes in one piece (the usual answer,
/// already in the buffer with its head) is that piece, not copied.
/// Nothing before `first_by` is a `TimedOut` error.
async fn collect<B>(mut body: B, limit: usize, first_by: Instant) -> Result<Bytes, std::io::Error>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let too_large = || std::io::Error::other("length limit exceeded");
    let mut first = Bytes::new();
    let mut joined: Option<bytes::BytesMut> = None;
    loop {
        let frame = if first.is_empty() {
            tokio::time::timeout_at(first_by, body.frame())
                .await
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
        } else {
            body.frame().await
        };
        let Some(frame) = frame else { break };
        let frame = frame.map_err(|e| std::io::Error::other(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if data.is_empty() {
            continue;
        }
        let len = joined.as_ref().map_or(first.len(), |j| j.len());
        if len + data.len() > limit {
            return Err(too_large());
        }
        match &mut joined {
            Some(j) => j.extend_from_slice(&data),
            None if first.is_empty() => first = data,
            None => {
                let mut j = bytes::BytesMut::with_capacity(first.len() + data.len());
                j.extend_from_slice(&first);
                j.extend_from_slice(&data);
                joined = Some(j);
            }
        }
    }
    Ok(joined.map_or(first, bytes::BytesMut::freeze))
}

/// The earlier of a phase deadline and the whole-request deadline.
pub fn earliest(phase: Instant, whole: Option<Instant>) -> Instant {
    whole.map_or(phase, |w| w.min(phase))
}

/// A silent upstream: `timeout`, not retried, falls back at once.
pub fn silent(what: &str) -> GatewayError {
    GatewayError::upstream(ErrorCode::Timeout, format!("upstream timed out: {what}"))
}

#[cfg(test)]
mod tests {
    use super::collect;
    use bytes::Bytes;
    use http_body::Frame;
    use http_body_util::StreamBody;

    fn body(
        parts: &[&'static str],
    ) -> StreamBody<impl futures_util::Stream<Item = Result<Frame<Bytes>, String>> + Unpin> {
        let frames: Vec<_> = parts
            .iter()
            .map(|p| Ok(Frame::data(Bytes::from_static(p.as_bytes()))))
            .chain([Ok(Frame::trailers(http::HeaderMap::new()))])
            .collect();
        StreamBody::new(futures_util::stream::iter(frames))
    }

    fn far() -> tokio::time::Instant {
        tokio::time::Instant::now() + std::time::Duration::from_secs(60)
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_before_the_first_byte_deadline_times_out() {
        let rx = futures_util::stream::pending::<Result<Frame<Bytes>, String>>();
        let by = tokio::time::Instant::now() + std::time::Duration::from_millis(300);
        let err = collect(StreamBody::new(rx), 100, by).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(tokio::time::Instant::now(), by);
    }

    #[tokio::test]
    async fn one_piece_is_kept_and_pieces_are_joined_in_order() {
        const ONE: &str = "{\"id\":1}";
        let got = collect(body(&[ONE]), 100, far()).await.unwrap();
        assert_eq!(
            (&got[..], got.as_ptr()),
            (ONE.as_bytes(), ONE.as_ptr()),
            "not copied"
        );
        let got = collect(body(&["ab", "", "cd", "e"]), 100, far())
            .await
            .unwrap();
        assert_eq!(&got[..], b"abcde");
        assert!(collect(body(&[]), 100, far()).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn the_limit_counts_every_piece() {
        assert_eq!(
            &collect(body(&["abc", "de"]), 5, far()).await.unwrap()[..],
            b"abcde"
        );
        let err = collect(body(&["abc", "def"]), 5, far()).await.unwrap_err();
        assert_eq!(err.to_string(), "length limit exceeded");
        let err = collect(body(&["abcdef"]), 5, far()).await.unwrap_err();
        assert_eq!(err.to_string(), "length limit exceeded");
    }
}
