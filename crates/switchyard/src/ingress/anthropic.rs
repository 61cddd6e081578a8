//! `POST /v1/messages`: the Anthropic-compatible door. Routed exactly like
//! chat completions; errors in the Anthropic envelope.

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use http::HeaderMap;
use switchyard_protocol::{anthropic, passthrough};

use super::{auth, body, pipeline, request_id};
use crate::adapters::{Dialect, Inbound};
use crate::app::App;
use crate::error::GatewayError;

pub async fn messages(State(app): State<App>, headers: HeaderMap, body: Body) -> Response {
    let live = app.live.load_full();
    let rid = request_id(&headers);
    let mut ctx = app.request_ctx(&rid, &headers, &live);
    let result = async {
        let client = auth::authenticate(&live, &headers)?;
        ctx.client = client.map(|c| c.id.clone());
        let bytes = body::read(body, &headers, live.config.server.max_body).await?;
        let text = body::utf8(&bytes)?;
        let ir = anthropic::decode_request(text)
            .map_err(|e| GatewayError::invalid(e.param, e.message))?;
        // Kept raw for the Anthropic→Anthropic passthrough.
        let fields = passthrough::parse_object(text).map_err(|m| GatewayError::invalid(None, m))?;
        if ctx.wants_input_hash() {
            ctx.input_hash = Some(crate::observe::ctx::input_hash(&bytes));
        }
        let inbound = Inbound::Anthropic { fields, ir };
        pipeline::run(&live, &headers, client, &inbound, bytes.clone(), &mut ctx).await
    }
    .await;
    match result {
        Ok(ready) => pipeline::deliver(ready, ctx, &rid),
        Err(e) => pipeline::fail(&live, Dialect::Anthropic, &e, ctx, &rid),
    }
}
