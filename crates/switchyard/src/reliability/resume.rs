//! Resuming a stream that broke after its first byte (contract §3): the
//! answer is continued on a `prefill`-capable deployment — the same one after
//! a cut or an in-band error, the next candidate after a stall — by sending
//! the original messages plus the text already streamed as a trailing
//! assistant message, and forwarding only the continuation inside the same
//! client stream. Never inside a tool call, never to a deployment without
//! `prefill`. For now only OpenAI-speaking clients are resumed; an Anthropic
//! client's interrupted stream ends with an error event.

use std::sync::Arc;

use bytes::Bytes;
use switchyard_protocol::ir::{ContentPart, Message, Role};
use switchyard_protocol::openai::{parse_request, ChunkEnvelope};

use super::pick_key;
use crate::adapters::stream::Seen;
use crate::adapters::translate::Resumed;
use crate::adapters::{self, Answer, CallInfo, Dialect, Inbound, UpstreamStream};
use crate::config::Capability;
use crate::error::{ErrorCode, GatewayError};
use crate::observe::ctx::{AttemptLog, RequestCtx};
use crate::state::live::DeploymentRt;

/// At most this many continuations per client stream.
pub const MAX_RESUMES: u32 = 2;

pub struct Resume {
    /// The client's request body as it arrived (a refcounted handle, no copy).
    pub body: Bytes,
    pub dialect: Dialect,
    /// The plan's candidates, in order.
    pub candidates: Vec<Arc<DeploymentRt>>,
    pub call: CallInfo,
    pub include_usage: bool,
}

impl Resume {
    /// A continuation stream, opened up to its first event, or `None` when
    /// the stream cannot be resumed.
    pub async fn continue_stream(
        &self,
        e: &GatewayError,
        served: &Arc<DeploymentRt>,
        text: &str,
        seen: &Seen,
        ctx: &mut RequestCtx,
    ) -> Option<(Box<UpstreamStream>, Arc<DeploymentRt>)> {
        if self.dialect != Dialect::OpenAi || seen.in_tool_call || text.trim().is_empty() {
            return None;
        }
        let base = self.request()?;
        // Anthropic rejects a prefill ending in whitespace: trim it, and put
        // it back in front of the continuation.
        let kept = text.trim_end();
        let prefix = text[kept.len()..].to_owned();
        let mut ir = base;
        ir.stream = true;
        ir.messages.push(Message {
            role: Role::Assistant,
            content: vec![ContentPart::Text(kept.to_owned())],
            ..Message::default()
        });
        let envelope = ChunkEnvelope {
            id: seen
                .id
                .clone()
                .unwrap_or_else(|| format!("chatcmpl-{}", ctx.request_id)),
            model: seen
                .model
                .clone()
                .unwrap_or_else(|| served.cfg.model.clone()),
            created: seen.created.unwrap_or_default(),
        };
        for dep in self.order(e, served) {
            let inbound = Inbound::Resume(Box::new(Resumed {
                ir: ir.clone(),
                envelope: envelope.clone(),
                include_usage: self.include_usage,
                prefix: prefix.clone(),
            }));
            let Ok(key) = pick_key(dep) else { continue };
            let started = tokio::time::Instant::now();
            match adapters::chat(dep, key, &inbound, &self.call).await {
                Ok(Answer::Stream(s)) => {
                    let mut log =
                        AttemptLog::ok(&dep.name, &dep.provider.name, started.elapsed(), s.ttfb);
                    log.resumed = true;
                    ctx.attempts.push(log);
                    return Some((s, dep.clone()));
                }
                Ok(Answer::Json(_)) => {}
                Err(err) => {
                    let mut log =
                        AttemptLog::failed(&dep.name, &dep.provider.name, &err, started.elapsed());
                    log.resumed = true;
                    ctx.attempts.push(log);
                }
            }
        }
        None
    }

    /// Same deployment first after a cut or an upstream error; after a stall
    /// (timeout) only the candidates after it. Prefill-capable ones only.
    fn order<'a>(
        &'a self,
        e: &GatewayError,
        served: &'a Arc<DeploymentRt>,
    ) -> Vec<&'a Arc<DeploymentRt>> {
        let pos = self.candidates.iter().position(|d| Arc::ptr_eq(d, served));
        let after = pos.map_or(&self.candidates[..], |p| &self.candidates[p + 1..]);
        let mut order: Vec<&Arc<DeploymentRt>> = Vec::new();
        if e.code != ErrorCode::Timeout {
            order.push(served);
        }
        order.extend(after.iter());
        order.retain(|d| d.cfg.capabilities.contains(Capability::Prefill));
        order
    }

    fn request(&self) -> Option<switchyard_protocol::ir::ChatRequest> {
        let text = std::str::from_utf8(&self.body).ok()?;
        parse_request(text).ok().map(|v| v.to_ir())
    }
}
