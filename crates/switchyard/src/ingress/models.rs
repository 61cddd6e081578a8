//! `GET /v1/models` and `GET /v1/models/{id}`: the routes and deployments
//! the caller may use, in OpenAI's shape, or Anthropic's when the request
//! carries `anthropic-version` (what Anthropic SDKs and Claude Code send).
//!
//! A deployment id holds a `/` (`openai/gpt-4o`): `{id}` is the rest of the
//! path, raw `/` or `%2F` alike. Anthropic's list is paged as Anthropic's is
//! (`limit`, default 20, at most 1000; `after_id` / `before_id`; `has_more`,
//! `first_id`, `last_id` of the page); OpenAI's list is not paged.

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use http::HeaderMap;
use serde::{Deserialize, Serialize};

use super::{auth, request_id, respond};
use crate::app::App;
use crate::doors::Door;
use crate::error::{ErrorCode, GatewayError};
use crate::live::{Live, Target};

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

/// Anthropic's list parameters (strings: a bad value is our 400, not axum's).
#[derive(Deserialize, Default)]
pub struct ListQuery {
    limit: Option<String>,
    after_id: Option<String>,
    before_id: Option<String>,
}

const DEFAULT_LIMIT: usize = 20;
const MAX_LIMIT: usize = 1000;

pub async fn list(
    State(app): State<App>,
    query: Result<Query<ListQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Response {
    let live = app.live.load_full();
    let door = door_of(&headers);
    let rid = request_id(&headers);
    let entries = match visible(&live, &headers) {
        Ok(e) => e,
        Err(e) => return respond::error(door, &e, &rid),
    };
    let body = match door {
        Door::AnthropicMessages => {
            let q = match query {
                Ok(Query(q)) => q,
                Err(e) => {
                    let e = GatewayError::invalid(None, format!("bad query string: {e}"));
                    return respond::error(door, &e, &rid);
                }
            };
            let (data, has_more) = match page(&entries, &q) {
                Ok(p) => p,
                Err(e) => return respond::error(door, &e, &rid),
            };
            serde_json::to_vec(&AnthropicList {
                data: data.iter().map(anthropic).collect(),
                has_more,
                first_id: data.first().map(|e| e.id.as_str()),
                last_id: data.last().map(|e| e.id.as_str()),
            })
        }
        Door::OpenAiChat | Door::Responses => serde_json::to_vec(&OpenAiList {
            object: "list",
            data: entries.iter().map(openai).collect(),
        }),
    };
    respond::plain_json(Body::from(body.unwrap_or_default()), &rid)
}

/// The page `q` asks for, and whether there are more entries beyond it in
/// the direction it was read (after `after_id` or none: later ones; before
/// `before_id`: earlier ones).
fn page<'e>(entries: &'e [Entry], q: &ListQuery) -> Result<(&'e [Entry], bool), GatewayError> {
    let limit = match q.limit.as_deref() {
        None | Some("") => DEFAULT_LIMIT,
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| {
                GatewayError::invalid(
                    Some("limit".into()),
                    format!("limit: must be a whole number from 1 to {MAX_LIMIT}"),
                )
            })?,
    };
    let cursor = |param: &str, id: &Option<String>| -> Result<Option<usize>, GatewayError> {
        let Some(id) = id.as_deref().filter(|id| !id.is_empty()) else {
            return Ok(None);
        };
        match entries.iter().position(|e| e.id == id) {
            Some(i) => Ok(Some(i)),
            None => Err(GatewayError::invalid(
                Some(param.into()),
                format!("{param}: no model `{id}` in this list"),
            )),
        }
    };
    let after = cursor("after_id", &q.after_id)?;
    let before = cursor("before_id", &q.before_id)?;
    match (after, before) {
        (Some(_), Some(_)) => Err(GatewayError::invalid(
            Some("before_id".into()),
            "before_id: give `after_id` or `before_id`, not both",
        )),
        (None, Some(b)) => {
            let start = b.saturating_sub(limit);
            Ok((&entries[start..b], start > 0))
        }
        (after, None) => {
            let start = after.map_or(0, |a| a + 1);
            let end = (start + limit).min(entries.len());
            Ok((&entries[start..end], end < entries.len()))
        }
    }
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
