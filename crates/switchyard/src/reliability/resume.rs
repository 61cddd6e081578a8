//! Resuming a stream that broke after its first byte (contract §3): the
//! answer is continued on a `prefill`-capable deployment — the same one after
//! a cut or an in-band error, the next candidate after a stall — by sending
//! the original messages plus the text already streamed as a trailing
//! assistant message, and forwarding only the continuation inside the same
//! client stream, for either door: an OpenAI client keeps its envelope and
//! role chunk; an Anthropic client gets no second `message_start`, the text
//! goes on in the block left open. Never inside a tool call, never to a
//! deployment without `prefill`. A continuation is an attempt like any
//! other: admitted by the circuit and the limits (a busy deployment is
//! passed over), holding its slot until the stream ends.

use std::sync::Arc;

use bytes::Bytes;
use switchyard_protocol::ir::{ChatRequest, ContentPart, Message, Role};

use super::{admit_attempt, admit_circuit, attempt, pick_key};
use crate::adapters::deployment::DeploymentRt;
use crate::adapters::{Answer, CallInfo, UpstreamStream};
use crate::config::Capability;
use crate::doors::{Door, Inbound, Resumed, StreamPosition};
use crate::error::{ErrorCode, GatewayError};
use crate::reliability::ctx::RequestCtx;

/// At most this many continuations per client stream.
pub const MAX_RESUMES: u32 = 2;

pub struct Resume {
    /// The client's request body as it arrived (a refcounted handle, no copy).
    pub body: Bytes,
    pub door: Door,
    /// The request's IR when its body alone does not give it back (a
    /// Responses request that continued a stored conversation).
    pub ir: Option<Arc<ChatRequest>>,
    /// The plan's candidates, in order.
    pub candidates: Vec<Arc<DeploymentRt>>,
    pub call: CallInfo,
    pub include_usage: bool,
    /// The request's estimated tokens, for the deployments' tpm.
    pub estimate: u64,
}

impl Resume {
    /// A continuation stream, opened up to its first event and holding its
    /// deployment's slot, or `None` when the stream cannot be resumed.
    pub async fn continue_stream(
        &self,
        e: &GatewayError,
        served: &Arc<DeploymentRt>,
        text: &str,
        mut at: StreamPosition,
        in_tool_call: bool,
        ctx: &mut RequestCtx,
    ) -> Option<(Box<UpstreamStream>, Arc<DeploymentRt>)> {
        if in_tool_call || text.trim().is_empty() {
            return None;
        }
        at.id
            .get_or_insert_with(|| format!("chatcmpl-{}", ctx.request_id));
        at.model.get_or_insert_with(|| served.cfg.model.clone());
        let continues = self.door.continues(&at, self.include_usage)?;
        let mut ir = self.request()?;
        // Anthropic rejects a prefill ending in whitespace: trim it, and put
        // it back in front of the continuation.
        let kept = text.trim_end();
        let prefix = &text[kept.len()..];
        ir.stream = true;
        ir.messages.push(Message {
            role: Role::Assistant,
            content: vec![ContentPart::Text(kept.to_owned())],
            ..Message::default()
        });
        let inbound = Inbound::Resume(Box::new(Resumed {
            ir,
            continues,
            prefix: prefix.to_owned(),
        }));
        for dep in self.order(e, served) {
            let before = ctx.attempts.len();
            let opened = self.attempt_on(dep, &inbound, ctx).await;
            for log in &mut ctx.attempts[before..] {
                log.resumed = true;
            }
            if let Some(s) = opened {
                return Some((s, dep.clone()));
            }
        }
        None
    }

    /// One continuation attempt, admitted like any other (circuit, then
    /// limits); a refusal or a failure moves on to the next deployment.
    async fn attempt_on(
        &self,
        dep: &DeploymentRt,
        inbound: &Inbound<'_>,
        ctx: &mut RequestCtx,
    ) -> Option<Box<UpstreamStream>> {
        let probe = admit_circuit(dep, ctx).ok()?;
        let slot = admit_attempt(dep, self.estimate, ctx).await.ok()?;
        let Ok(key) = pick_key(dep) else {
            slot.cancel();
            return None;
        };
        match attempt(dep, key, super::Op::Chat(inbound), &self.call, probe, ctx).await {
            Ok(answer) => match slot.serve(answer) {
                Answer::Stream(s) => Some(s),
                Answer::Json(_) => None,
            },
            Err(_) => {
                slot.cancel();
                None
            }
        }
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

    /// The client's request, as the IR: the one the first attempt had, or
    /// read again from its body.
    fn request(&self) -> Option<ChatRequest> {
        if let Some(ir) = &self.ir {
            return Some((**ir).clone());
        }
        self.door.reparse(std::str::from_utf8(&self.body).ok()?)
    }
}
