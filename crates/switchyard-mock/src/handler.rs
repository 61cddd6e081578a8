//! Request handling: routing, behavior selection, auth, answers.

use crate::behavior::{Behavior, Fault};
use crate::conv::{self, Conv, Proto};
use crate::faults::{self, full, Body};
use crate::render::{self, Ctx, Rendered, StreamOpts};
use crate::server::{Raw, Shared};
use crate::{
    anthropic, bedrock, embeddings, fixtures, flavors, gemini, openai, responses, sigv4, sts,
    tokens, vertex,
};
use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::Value;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What an API endpoint does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// Generate an answer (chat completions, messages, generateContent, responses).
    Chat,
    /// Embeddings (OpenAI, Gemini `:embedContent`).
    Embed,
    /// Gemini `:batchEmbedContents`.
    EmbedBatch,
    /// Token counting.
    Count,
}

enum Route {
    /// An API endpoint; for Azure and Gemini the model comes from the path.
    Api {
        proto: Proto,
        op: Op,
        model: Option<String>,
        stream: bool,
    },
    /// A model list (`GET`), in the protocol the path names; `/v1/models`
    /// is Anthropic's when the request carries `anthropic-version`.
    Models(Proto),
    /// Vertex's OAuth2 token endpoint (`POST /token`).
    Token,
    /// AWS STS (`POST /`, `Action=AssumeRoleWithWebIdentity`).
    Sts,
    /// `GET /mock/stats`: the mock's counters (for a benchmark running the mock apart).
    Stats,
    NotFound,
}

/// `/model/{modelId}/{operation}` (Bedrock Runtime); the id may be percent-encoded.
fn bedrock_route(path: &str) -> Option<Route> {
    let (id, op) = path.strip_prefix("/model/")?.rsplit_once('/')?;
    if id.is_empty() {
        return None;
    }
    let (proto, op, stream) = match op {
        "converse" => (Proto::Converse, Op::Chat, false),
        "converse-stream" => (Proto::Converse, Op::Chat, true),
        "invoke" => (Proto::BedrockAnthropic, Op::Chat, false),
        "invoke-with-response-stream" => (Proto::BedrockAnthropic, Op::Chat, true),
        "count-tokens" => (Proto::Converse, Op::Count, false),
        _ => return None,
    };
    Some(Route::Api {
        proto,
        op,
        model: Some(vertex::percent_decode(id)),
        stream,
    })
}

/// `/{v1|v1beta1}/projects/{p}/locations/{l}/publishers/{google|anthropic}/models/{m}:{method}`.
fn vertex_route(path: &str) -> Option<Route> {
    let rest = path
        .strip_prefix("/v1/")
        .or_else(|| path.strip_prefix("/v1beta1/"))?;
    let segs: Vec<&str> = rest.splitn(8, '/').collect();
    let ["projects", project, "locations", location, "publishers", publisher, "models", tail] =
        segs[..]
    else {
        return None;
    };
    let (m, method) = tail.rsplit_once(':')?;
    if project.is_empty() || location.is_empty() || m.is_empty() || m.contains('/') {
        return None;
    }
    let model = Some(vertex::percent_decode(m));
    let (proto, op, model, stream) = match (publisher, method) {
        ("google", "generateContent") => (Proto::VertexGemini, Op::Chat, model, false),
        ("google", "streamGenerateContent") => (Proto::VertexGemini, Op::Chat, model, true),
        ("google", "countTokens") => (Proto::VertexGemini, Op::Count, model, false),
        // The model of a count is in the body; the URL says `count-tokens`.
        ("anthropic", "rawPredict") if m == "count-tokens" => {
            (Proto::VertexAnthropic, Op::Count, None, false)
        }
        ("anthropic", "rawPredict") => (Proto::VertexAnthropic, Op::Chat, model, false),
        ("anthropic", "streamRawPredict") => (Proto::VertexAnthropic, Op::Chat, model, true),
        _ => return None,
    };
    Some(Route::Api {
        proto,
        op,
        model,
        stream,
    })
}

fn route(method: &Method, path: &str) -> Route {
    let api = |proto, op, model: Option<&str>, stream| Route::Api {
        proto,
        op,
        model: model.map(str::to_string),
        stream,
    };
    if method == Method::GET {
        return match path {
            "/v1/models" | "/models" => Route::Models(Proto::OpenAi),
            "/v1beta/models" => Route::Models(Proto::Gemini),
            "/openai/models" => Route::Models(Proto::Azure),
            "/mock/stats" => Route::Stats,
            _ => Route::NotFound,
        };
    }
    if method != Method::POST {
        return Route::NotFound;
    }
    match path {
        "/v1/chat/completions" | "/chat/completions" => {
            return api(Proto::OpenAi, Op::Chat, None, false)
        }
        "/v1/embeddings" | "/embeddings" => return api(Proto::OpenAi, Op::Embed, None, false),
        // Azure OpenAI v1 serves the Responses API at /openai/v1/responses.
        "/v1/responses" | "/responses" | "/openai/v1/responses" => {
            return api(Proto::Responses, Op::Chat, None, false)
        }
        "/v1/responses/input_tokens" | "/responses/input_tokens" => {
            return api(Proto::Responses, Op::Count, None, false)
        }
        "/v1/messages" => return api(Proto::Anthropic, Op::Chat, None, false),
        "/v1/messages/count_tokens" => return api(Proto::Anthropic, Op::Count, None, false),
        "/token" => return Route::Token,
        "/" => return Route::Sts,
        _ => {}
    }
    if let Some(r) = bedrock_route(path).or_else(|| vertex_route(path)) {
        return r;
    }
    if let Some(rest) = path.strip_prefix("/openai/deployments/") {
        for (suffix, op) in [("/chat/completions", Op::Chat), ("/embeddings", Op::Embed)] {
            if let Some(dep) = rest.strip_suffix(suffix) {
                if !dep.is_empty() && !dep.contains('/') {
                    return api(Proto::Azure, op, Some(dep), false);
                }
            }
        }
    }
    let gem = path
        .strip_prefix("/v1beta/models/")
        .or_else(|| path.strip_prefix("/v1/models/"));
    if let Some(rest) = gem {
        for (suffix, op, stream) in [
            (":generateContent", Op::Chat, false),
            (":streamGenerateContent", Op::Chat, true),
            (":embedContent", Op::Embed, false),
            (":batchEmbedContents", Op::EmbedBatch, false),
            (":countTokens", Op::Count, false),
        ] {
            if let Some(m) = rest.strip_suffix(suffix) {
                return api(Proto::Gemini, op, Some(m), stream);
            }
        }
    }
    Route::NotFound
}

/// A protocol-shaped error response generated by the mock itself.
fn own_error(proto: Option<Proto>, status: u16, message: &str, seq: u64) -> Response<Body> {
    let (ct, body) = match proto {
        Some(Proto::Converse | Proto::BedrockAnthropic) => {
            let ty = if status == 404 {
                "ResourceNotFoundException"
            } else {
                "ValidationException"
            };
            return bedrock::error_response(status, ty, bedrock::BEDROCK_NS, message, seq, []);
        }
        Some(Proto::Anthropic | Proto::VertexAnthropic) => {
            let ty = if status == 404 {
                "not_found_error"
            } else {
                "invalid_request_error"
            };
            ("application/json", anthropic::error_body(message, ty))
        }
        Some(Proto::Gemini | Proto::VertexGemini) => {
            let st = if status == 404 {
                "NOT_FOUND"
            } else {
                "INVALID_ARGUMENT"
            };
            (
                "application/json; charset=UTF-8",
                gemini::error_body(status, message, st),
            )
        }
        Some(Proto::Responses) => {
            let code = (status == 404).then_some("not_found");
            (
                "application/json",
                responses::error_body(message, "invalid_request_error", code),
            )
        }
        _ => {
            let code = (status == 404).then_some("not_found");
            (
                "application/json",
                openai::error_body(message, "invalid_request_error", code),
            )
        }
    };
    faults::response(status, Some(ct), [], full(body))
}

fn envelope_response(name: &str, b: &Behavior) -> Option<Response<Body>> {
    let env = fixtures::get(name)?;
    let headers = env.headers.iter().cloned().chain(b.headers.clone());
    let body = match &b.error_message {
        Some(m) => crate::json::with_message(&env.body, m),
        None => env.body.clone(),
    };
    Some(faults::response(env.status, None, headers, full(body)))
}

/// The auth error of a protocol checked with [`MockServer::set_valid_keys`] (Bedrock and
/// Vertex have their own checks).
///
/// [`MockServer::set_valid_keys`]: crate::MockServer::set_valid_keys
fn auth_fixture(proto: Proto) -> &'static str {
    match proto {
        Proto::OpenAi | Proto::Responses => "openai/error_401_invalid_api_key",
        Proto::Azure => "azure/error_401_access_denied",
        Proto::Anthropic | Proto::BedrockAnthropic | Proto::VertexAnthropic => {
            "anthropic/error_401_authentication"
        }
        Proto::Gemini | Proto::VertexGemini | Proto::Converse => "gemini/error_400_api_key_invalid",
    }
}

/// The 403 of a refused SigV4 signature.
fn sigv4_error(r: sigv4::Rejection, seq: u64) -> Response<Body> {
    let (ty, message) = match r {
        sigv4::Rejection::InvalidSignature(m) => ("InvalidSignatureException", m),
        sigv4::Rejection::UnrecognizedClient(m) => ("UnrecognizedClientException", m),
        sigv4::Rejection::ExpiredToken(m) => ("ExpiredTokenException", m),
    };
    bedrock::error_response(403, ty, bedrock::CORAL_NS, &message, seq, [])
}

/// A bare `status` (no `body`) on a Bedrock or Vertex route: the platform's recorded
/// envelope for that status, else one built the same way.
fn platform_status(proto: Proto, status: u16, b: &Behavior, seq: u64) -> Response<Body> {
    let name = if proto.is_bedrock() {
        bedrock::status_fixture(status)
    } else {
        vertex::status_fixture(status, proto == Proto::VertexAnthropic)
    };
    if let Some(r) = name.and_then(|n| envelope_response(n, b)) {
        return r;
    }
    if proto.is_bedrock() {
        let (ty, message) = bedrock::status_exception(status);
        let message = b.error_message.as_deref().unwrap_or(message);
        return bedrock::error_response(
            status,
            ty,
            bedrock::BEDROCK_NS,
            message,
            seq,
            b.headers.clone(),
        );
    }
    let body = vertex::status_body(status);
    let body = match &b.error_message {
        Some(m) => crate::json::with_message(&body, m),
        None => body,
    };
    faults::response(
        status,
        Some("application/json; charset=UTF-8"),
        b.headers.clone(),
        full(body),
    )
}

/// The API keys a request carries, wherever a provider takes them.
fn sent_keys<'a>(headers: &'a HeaderMap, query: Option<&'a str>) -> Vec<&'a str> {
    let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    let bearer = h("authorization").and_then(|a| a.strip_prefix("Bearer "));
    let from_query = query.and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("key=")));
    [
        bearer,
        h("x-api-key"),
        h("x-goog-api-key"),
        h("api-key"),
        from_query,
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn key_ok(keys: &[String], headers: &HeaderMap, query: Option<&str>) -> bool {
    sent_keys(headers, query)
        .into_iter()
        .any(|k| keys.iter().any(|valid| valid == k))
}

/// `error_message` with `{key}` replaced by the key the request carried.
fn echo_key(b: Arc<Behavior>, headers: &HeaderMap, query: Option<&str>) -> Arc<Behavior> {
    let Some(m) = b.error_message.as_deref().filter(|m| m.contains("{key}")) else {
        return b;
    };
    let key = sent_keys(headers, query)
        .first()
        .copied()
        .unwrap_or_default();
    let mut echoed = (*b).clone();
    echoed.error_message = Some(m.replace("{key}", key));
    Arc::new(echoed)
}

/// Pick the behavior: script (when `scripted`), then `x-mock-behavior` header, then body
/// `mock`, then default.
fn select_behavior(
    shared: &Shared,
    headers: &HeaderMap,
    json: Option<&Value>,
    scripted: bool,
) -> Result<Arc<Behavior>, String> {
    if let Some(b) = scripted.then(|| shared.next_scripted()).flatten() {
        return Ok(Arc::new(b));
    }
    if let Some(h) = headers.get("x-mock-behavior") {
        let s = h.to_str().map_err(|e| format!("x-mock-behavior: {e}"))?;
        return Behavior::from_json(s)
            .map(Arc::new)
            .map_err(|e| format!("invalid x-mock-behavior: {e}"));
    }
    if let Some(m) = json.and_then(|j| j.get("mock")) {
        return serde_json::from_value::<Behavior>(m.clone())
            .map(Arc::new)
            .map_err(|e| format!("invalid mock behavior in body: {e}"));
    }
    Ok(shared.default_behavior().unwrap_or_default())
}

/// The hyper service. Returning `Err` makes hyper close the connection with no response.
pub(crate) async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Body>, io::Error> {
    let seq = shared
        .seq
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        + 1;
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let body: Bytes = body.collect().await.map_err(io::Error::other)?.to_bytes();
    // `/{flavor}/…`: an OpenAI-compatible provider's quirks on the OpenAI routes.
    let (flavor, path) = flavors::split_path(parts.uri.path());
    let route = route(&parts.method, path);
    if let Route::Stats = route {
        // Not recorded, no behavior: reading the counters changes none of them.
        return Ok(faults::response(
            200,
            Some("application/json"),
            [],
            full(shared.stats().to_string()),
        ));
    }
    let json: Option<Value> = match route {
        Route::Api { .. } if !body.is_empty() => serde_json::from_slice(&body).ok(),
        _ => None,
    };
    shared.record(Raw {
        method: parts.method.clone(),
        uri: parts.uri.clone(),
        headers: parts.headers.clone(),
        body: body.clone(),
    });
    let proto = match &route {
        Route::Api { proto, .. } => Some(*proto),
        Route::Models(Proto::OpenAi) if parts.headers.contains_key("anthropic-version") => {
            Some(Proto::Anthropic)
        }
        Route::Models(proto) => Some(*proto),
        Route::Token | Route::Sts | Route::Stats | Route::NotFound => None,
    };
    // A model list (a gateway's key check) does not take the next scripted
    // behavior: the script is for the API calls a test makes.
    let scripted = matches!(route, Route::Api { .. });
    let b = match select_behavior(&shared, &parts.headers, json.as_ref(), scripted)
        .and_then(|b| b.validate().map(|()| b))
    {
        Ok(b) => echo_key(b.roll(), &parts.headers, parts.uri.query()),
        Err(msg) => return Ok(own_error(proto, 400, &msg, seq)),
    };
    if b.latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(b.latency_ms)).await;
    }
    match b.fault {
        Some(Fault::Drop) => {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "mock fault: drop",
            ))
        }
        Some(Fault::Hang) => std::future::pending::<()>().await,
        _ => {}
    }
    let (proto, op, model, stream) = match route {
        Route::NotFound | Route::Stats => {
            let msg = format!("Unknown path: {} {}", parts.method, parts.uri.path());
            return Ok(own_error(None, 404, &msg, seq));
        }
        Route::Token => {
            shared
                .token_requests
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let now = crate::time::unix_secs(shared.now());
            return Ok(vertex::token(&shared.vertex, &parts.headers, &body, now));
        }
        Route::Sts => return Ok(sts::answer(&shared, &body)),
        Route::Models(_) => {
            let proto = proto.unwrap_or(Proto::OpenAi);
            let keys = shared.valid_keys();
            if !keys.is_empty() && !key_ok(&keys, &parts.headers, parts.uri.query()) {
                let name = auth_fixture(proto);
                return Ok(envelope_response(name, &b).expect("auth fixture exists"));
            }
            let (ct, body) = match proto {
                Proto::Anthropic => ("application/json", anthropic::models()),
                Proto::Gemini => ("application/json; charset=UTF-8", gemini::models()),
                Proto::Azure => ("application/json", openai::azure_models(created(&shared))),
                _ => ("application/json", openai::models(created(&shared))),
            };
            return Ok(faults::response(
                200,
                Some(ct),
                b.headers.clone(),
                full(body),
            ));
        }
        Route::Api {
            proto,
            op,
            model,
            stream,
        } => (proto, op, model, stream),
    };
    if proto.is_bedrock() {
        let path_and_query = parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path(), |p| p.as_str());
        let checked = sts::signing_credentials(&shared, &parts.headers).and_then(|creds| {
            sigv4::verify(
                &creds,
                parts.method.as_str(),
                path_and_query,
                &parts.headers,
                &body,
                shared.now(),
            )
        });
        let counter = match checked {
            Ok(()) => &shared.sigv4_verified,
            Err(_) => &shared.sigv4_rejected,
        };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Err(r) = checked {
            return Ok(sigv4_error(r, seq));
        }
    } else if proto.is_vertex() {
        let now = crate::time::unix_secs(shared.now());
        let st = shared.vertex.lock().expect("vertex lock");
        if let Err(why) = vertex::check_bearer(&st, &parts.headers, now) {
            return Ok(vertex::unauthenticated(why));
        }
    } else {
        let keys = shared.valid_keys();
        if !keys.is_empty() && !key_ok(&keys, &parts.headers, parts.uri.query()) {
            let name = auth_fixture(proto);
            return Ok(envelope_response(name, &b).expect("auth fixture exists"));
        }
    }
    if let Some(name) = &b.fixture {
        return Ok(envelope_response(name, &b).unwrap_or_else(|| {
            own_error(
                Some(proto),
                400,
                &format!("unknown mock fixture: {name}"),
                seq,
            )
        }));
    }
    if let Some(status) = b.status.filter(|_| b.body.is_none()) {
        if proto.is_bedrock() || proto.is_vertex() {
            return Ok(platform_status(proto, status, &b, seq));
        }
    }
    if let Some(status) = b.status {
        let body = match &b.body {
            Some(Value::String(s)) => Bytes::from(s.clone()),
            Some(v) => Bytes::from(v.to_string()),
            None => Bytes::new(),
        };
        let ct = (!b
            .headers
            .keys()
            .any(|k| k.eq_ignore_ascii_case("content-type")))
        .then_some("application/json");
        return Ok(faults::response(status, ct, b.headers.clone(), full(body)));
    }
    let Some(json) = json else {
        let msg = if proto.is_bedrock() {
            "Malformed input request, please reformat your input and try again."
        } else {
            "We could not parse the JSON body of your request."
        };
        return Ok(own_error(Some(proto), 400, msg, seq));
    };
    if op != Op::Chat {
        return Ok(match other_op(proto, op, model.as_deref(), &json, seq) {
            Ok(rendered) => faults::answer(rendered, &b),
            Err(msg) => own_error(Some(proto), 400, &msg, seq),
        });
    }
    let url_model = model.as_deref().unwrap_or_default();
    let conv = match proto {
        Proto::OpenAi | Proto::Azure => Ok(conv::openai(&json, model.as_deref())),
        Proto::Anthropic => Ok(conv::anthropic(&json)),
        Proto::Gemini | Proto::VertexGemini => Ok(conv::gemini(&json, url_model, stream)),
        Proto::Responses => Ok(conv::responses(&json)),
        Proto::Converse => bedrock::converse(&json, url_model, stream),
        Proto::BedrockAnthropic => bedrock::invoke(&json, url_model, stream),
        Proto::VertexAnthropic => vertex::anthropic_conv(&json, url_model, stream),
    };
    let conv = match conv {
        Ok(c) => c,
        Err(msg) => return Ok(own_error(Some(proto), 400, &msg, seq)),
    };
    if conv.model.is_empty() {
        return Ok(own_error(
            Some(proto),
            400,
            "you must provide a model parameter",
            seq,
        ));
    }
    if let Some(refused) = flavor.and_then(|f| flavors::refusal(f, &json, conv.stream)) {
        return Ok(match refused {
            flavors::Refusal::Fixture(name) => {
                envelope_response(name, &b).expect("flavor fixtures are embedded")
            }
            flavors::Refusal::Message(m) => own_error(Some(proto), 400, &m, seq),
        });
    }
    let b = converse_cache(&shared, proto, &conv, b);
    let ans = crate::answer::decide(proto, &conv, &b, seq);
    let opts = StreamOpts {
        finish: b.fault != Some(Fault::NoFinish),
        terminator: !matches!(b.fault, Some(Fault::NoFinish | Fault::NoTerminator)),
    };
    let now = shared.now();
    let ctx = Ctx {
        seq,
        created: u64::try_from(crate::time::unix_secs(now)).unwrap_or(0),
        now,
        latency_ms: u64::try_from(started.elapsed().as_millis())
            .unwrap_or(u64::MAX)
            .max(1),
    };
    let mut rendered = render::render(proto, &conv, &ans, ctx, opts);
    if let Some(f) = flavor {
        flavors::reshape(f, &mut rendered, &json, b.reasoning.as_deref());
    }
    if proto.is_bedrock() {
        // Built with the message in the payload: the frame's length and CRCs cover it.
        rendered.midstream_error = render::fixed(bedrock::stream_exception(
            b.bedrock_exception.as_deref(),
            b.error_message.as_deref(),
        ));
    }
    Ok(faults::answer(rendered, &b))
}

/// Unix seconds on the mock's clock (`created` fields).
fn created(shared: &Shared) -> u64 {
    u64::try_from(crate::time::unix_secs(shared.now())).unwrap_or(0)
}

/// The Converse cache rule: with `cachePoint` blocks and no cache tokens set by the
/// behavior, the prompt before the last cache point (`chars / 4` tokens) is written to the
/// cache the first time the mock sees that prefix (same model, same text) and read from it
/// afterwards.
fn converse_cache(shared: &Shared, proto: Proto, conv: &Conv, b: Arc<Behavior>) -> Arc<Behavior> {
    if proto != Proto::Converse || b.cached_tokens > 0 || b.cache_write_tokens > 0 {
        return b;
    }
    let Some((chars, hash)) = conv.cache_prefix else {
        return b;
    };
    let tokens = (chars / 4) as u64;
    if tokens == 0 {
        return b;
    }
    let fresh = shared.cache_seen.lock().expect("cache lock").insert(hash);
    let mut with = (*b).clone();
    if fresh {
        with.cache_write_tokens = tokens;
    } else {
        with.cached_tokens = tokens;
    }
    Arc::new(with)
}

/// Embeddings and token counts: a complete JSON body, or the message of a 400.
fn other_op(
    proto: Proto,
    op: Op,
    model: Option<&str>,
    json: &Value,
    seq: u64,
) -> Result<Rendered, String> {
    let openai_headers = |model: Option<&str>| {
        let mut h = vec![
            ("x-request-id", format!("req_mock_{seq}")),
            ("openai-processing-ms", "1".to_string()),
            ("openai-version", "2020-10-01".to_string()),
        ];
        if let Some(m) = model {
            h.insert(0, ("openai-model", m.to_string()));
        }
        h
    };
    const GEMINI_CT: &str = "application/json; charset=UTF-8";
    let request_model = || {
        model
            .map(str::to_string)
            .or_else(|| {
                json.get("model")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .filter(|m| !m.is_empty())
            .ok_or_else(|| "you must provide a model parameter".to_string())
    };
    Ok(match (proto, op) {
        (Proto::Gemini, Op::Embed) => {
            Rendered::full(GEMINI_CT, Vec::new(), embeddings::gemini_single(json)?)
        }
        (Proto::Gemini, Op::EmbedBatch) => Rendered::full(
            GEMINI_CT,
            Vec::new(),
            embeddings::gemini_batch(json, model.unwrap_or_default())?,
        ),
        (Proto::Gemini, _) => Rendered::full(
            GEMINI_CT,
            Vec::new(),
            tokens::gemini(json, model.unwrap_or_default()),
        ),
        (Proto::Anthropic, _) => {
            request_model()?;
            Rendered::full(
                "application/json",
                vec![("request-id", format!("req_mock_{seq}"))],
                tokens::anthropic(json),
            )
        }
        (Proto::Responses, _) => Rendered::full(
            "application/json",
            openai_headers(None),
            tokens::responses(json),
        ),
        (Proto::OpenAi | Proto::Azure, _) => {
            let m = request_model()?;
            let body = embeddings::openai(json, &m)?;
            Rendered::full("application/json", openai_headers(Some(&m)), body)
        }
        (Proto::Converse | Proto::BedrockAnthropic, _) => Rendered::full(
            "application/json",
            vec![("x-amzn-requestid", bedrock::request_id(seq))],
            bedrock::count_tokens(json, model.unwrap_or_default())?,
        ),
        (Proto::VertexGemini, _) => Rendered::full(
            GEMINI_CT,
            Vec::new(),
            vertex::gemini_count(json, model.unwrap_or_default()),
        ),
        (Proto::VertexAnthropic, _) => {
            request_model()?;
            Rendered::full(
                "application/json",
                vec![("request-id", format!("req_vrtx_mock_{seq}"))],
                tokens::anthropic(json),
            )
        }
    })
}
