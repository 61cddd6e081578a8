//! `GET /v1/models` and `GET /v1/models/{id}`: the routes and deployments
//! the caller may use, in OpenAI's shape, or Anthropic's when the request
//! carries `anthropic-version` (what Anthropic SDKs and Claude Code send).

use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::Response;
use http::HeaderMap;
use serde::Serialize;

use super::{auth, request_id, respond};
use crate::app::App;
use crate::doors::Door;
use crate::error::{ErrorCode, GatewayError};
use crate::state::live::{Live, Target};

/// One model the caller may name.
struct Entry {
    id: String,
    owned_by: String,
    context_window: Option<u32>,
    max_output_tokens: Option<u32>,
}

#[derive(Serialize)]
struct OpenAiModel<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    owned_by: &'a str,
}

#[derive(Serialize)]
struct OpenAiList<'a> {
    object: &'static str,
    data: Vec<OpenAiModel<'a>>,
}

#[derive(Serialize)]
struct AnthropicModel<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    display_name: &'a str,
    created_at: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_input_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
}

#[derive(Serialize)]
struct AnthropicList<'a> {
    data: Vec<AnthropicModel<'a>>,
    has_more: bool,
    first_id: Option<&'a str>,
    last_id: Option<&'a str>,
}

/// Routes and deployments carry no creation time of their own.
const CREATED_AT: &str = "1970-01-01T00:00:00Z";

pub async fn list(State(app): State<App>, headers: HeaderMap) -> Response {
    let live = app.live.load_full();
    let door = door_of(&headers);
    let entries = match visible(&live, &headers) {
        Ok(e) => e,
        Err(e) => return respond::error(door, &e, &request_id(&headers)),
    };
    let body = match door {
        Door::AnthropicMessages => serde_json::to_vec(&AnthropicList {
            data: entries.iter().map(anthropic).collect(),
            has_more: false,
            first_id: entries.first().map(|e| e.id.as_str()),
            last_id: entries.last().map(|e| e.id.as_str()),
        }),
        Door::OpenAiChat | Door::Responses => serde_json::to_vec(&OpenAiList {
            object: "list",
            data: entries.iter().map(openai).collect(),
        }),
    };
    respond::plain_json(Body::from(body.unwrap_or_default()), &request_id(&headers))
}

pub async fn retrieve(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let live = app.live.load_full();
    let door = door_of(&headers);
    let rid = request_id(&headers);
    let entries = match visible(&live, &headers) {
        Ok(e) => e,
        Err(e) => return respond::error(door, &e, &rid),
    };
    let Some(entry) = entries.iter().find(|e| e.id == id) else {
        let e = GatewayError::client(
            ErrorCode::ModelNotFound,
            format!(
                "unknown model `{id}`: GET /v1/models lists the routes and deployments you can use"
            ),
        );
        return respond::error(door, &e, &rid);
    };
    let body = match door {
        Door::AnthropicMessages => serde_json::to_vec(&anthropic(entry)),
        Door::OpenAiChat | Door::Responses => serde_json::to_vec(&openai(entry)),
    };
    respond::plain_json(Body::from(body.unwrap_or_default()), &rid)
}

fn door_of(headers: &HeaderMap) -> Door {
    if headers.contains_key(&crate::names::ANTHROPIC_VERSION) {
        Door::AnthropicMessages
    } else {
        Door::OpenAiChat
    }
}

/// Routes first, then deployments in config order, that this caller may use.
fn visible(live: &Live, headers: &HeaderMap) -> Result<Vec<Entry>, GatewayError> {
    let who = auth::authenticate(live, headers)?;
    let mut out = Vec::new();
    for r in live.config.routes.values() {
        if auth::may_use(who.as_ref(), &r.name, &Target::Route(r)) {
            out.push(Entry {
                id: r.name.clone(),
                owned_by: "switchyard".into(),
                context_window: None,
                max_output_tokens: None,
            });
        }
    }
    for id in &live.config.deployment_order {
        if let Some(d) = live.deployments.get(id) {
            if auth::may_use(who.as_ref(), id, &Target::Deployment(d)) {
                out.push(Entry {
                    id: id.clone(),
                    owned_by: d.cfg.provider.clone(),
                    context_window: d.cfg.context_window,
                    max_output_tokens: d.cfg.max_output_tokens,
                });
            }
        }
    }
    Ok(out)
}

fn openai(e: &Entry) -> OpenAiModel<'_> {
    OpenAiModel {
        id: &e.id,
        object: "model",
        created: 0,
        owned_by: &e.owned_by,
    }
}

fn anthropic(e: &Entry) -> AnthropicModel<'_> {
    AnthropicModel {
        kind: "model",
        id: &e.id,
        display_name: &e.id,
        created_at: CREATED_AT,
        max_input_tokens: e.context_window,
        max_tokens: e.max_output_tokens,
    }
}
