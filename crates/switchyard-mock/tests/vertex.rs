//! Google Vertex AI over real HTTP: the OAuth2 token endpoint (JWT bearer), the bearer check,
//! Gemini and Claude publishers, token counting, errors and faults, compared with
//! `fixtures/providers/vertex/`.

mod common;

use common::*;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use switchyard_mock::{Behavior, Fault, MockServer};

const BASE: &str = "/v1/projects/test-project/locations/us-central1/publishers";

fn gem(method: &str) -> String {
    format!("{BASE}/google/models/gemini-2.0-flash:{method}")
}

fn claude(method: &str) -> String {
    format!("{BASE}/anthropic/models/claude-sonnet-4-5@20250929:{method}")
}

fn count_claude() -> String {
    format!("{BASE}/anthropic/models/count-tokens:rawPredict")
}

fn account() -> Value {
    fixture_json("vertex/oauth/service_account.test.json")
}

fn unix(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// An RS256 assertion with `claims`, signed with the test service account's key.
fn assertion(claims: &Value) -> String {
    let key =
        EncodingKey::from_rsa_pem(account()["private_key"].as_str().unwrap().as_bytes()).unwrap();
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("1".into());
    jsonwebtoken::encode(&header, claims, &key).unwrap()
}

fn claims(iat: i64) -> Value {
    json!({"iat": iat, "exp": iat + 3600, "iss": "service-account@example.com",
        "aud": "https://oauth2.googleapis.com/token",
        "scope": "https://www.googleapis.com/auth/cloud-platform"})
}

fn form(assertion: &str) -> String {
    format!(
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={assertion}"
    )
}

async fn post_form(m: &MockServer, body: &str) -> Resp {
    let c = Conn::send(m.addr(), "POST", "/token", &[], body)
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), c.read_all())
        .await
        .unwrap()
        .unwrap()
}

/// A fresh access token from the mock's token endpoint.
async fn mint(m: &MockServer) -> String {
    let r = post_form(m, &form(&assertion(&claims(unix(SystemTime::now()))))).await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["access_token"].as_str().unwrap().to_string()
}

async fn call_with(
    m: &MockServer,
    token: &str,
    path: &str,
    body: &Value,
    extra: &[(&str, &str)],
) -> Resp {
    let auth = format!("Bearer {token}");
    let mut headers = vec![("authorization", auth.as_str())];
    headers.extend_from_slice(extra);
    call(m.addr(), path, &headers, body).await
}

/// An assertion the token endpoint refuses: `(error, error_description)`.
async fn refused(m: &MockServer, c: Value) -> (String, String) {
    let r = post_form(m, &form(&assertion(&c))).await;
    assert_eq!(r.status, 400, "{c}");
    let v = r.json();
    (
        v["error"].as_str().unwrap().to_string(),
        v["error_description"].as_str().unwrap().to_string(),
    )
}

fn raw_req() -> Value {
    fixture_json("vertex/anthropic_rawpredict.request.json")
}

fn stream_raw_req() -> Value {
    json!({"anthropic_version": "vertex-2023-10-16", "max_tokens": 1024, "stream": true,
        "messages": [{"role": "user", "content": "ping"}]})
}

#[tokio::test]
async fn token_vector_and_refusals() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let v = fixture_json("vertex/oauth/jwt_bearer_vector.json");
    // the vector's frozen iat, a minute on
    m.set_clock(Some(UNIX_EPOCH + Duration::from_secs(1_735_689_600 + 60)));
    let body = v["token_request"]["body"].as_str().unwrap();
    let r = post_form(&m, body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("content-type"),
        Some("application/json; charset=utf-8")
    );
    assert_eq!(
        r.text(),
        r#"{"access_token":"ya29.mock-1","expires_in":3599,"token_type":"Bearer"}"#
    );
    let token_shape = fixture_json("vertex/oauth/token_response.json");
    assert_eq!(key_paths(&r.json()), key_paths(&token_shape));
    assert_eq!((m.token_requests(), m.tokens_issued()), (1, 1));
    // the token opens the Vertex routes
    let r = call_with(
        &m,
        "ya29.mock-1",
        &gem("generateContent"),
        &gemini_req(),
        &[],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());

    // a flipped signature character: the recorded error, byte for byte
    let mut bad = body.to_string();
    let last = bad.pop().unwrap();
    bad.push(if last == 'Q' { 'R' } else { 'Q' });
    let r = post_form(&m, &bad).await;
    assert_eq!(r.status, 400);
    let env = fixture_json("vertex/oauth/error_400_invalid_grant.http.json");
    assert_eq!(r.text(), env["body_raw"].as_str().unwrap());
    assert_eq!(
        r.header("content-type"),
        Some("application/json; charset=utf-8")
    );

    let now = 1_735_689_600 + 60;
    let mut c = claims(now);
    c["iss"] = json!("someone@example.com");
    assert_eq!(refused(&m, c).await.0, "invalid_grant");
    let mut c = claims(now);
    c["aud"] = json!("https://example.com/token");
    assert!(refused(&m, c).await.1.contains("audience"));
    let mut c = claims(now);
    c["scope"] = json!("https://www.googleapis.com/auth/devstorage.read_only");
    assert_eq!(refused(&m, c).await.0, "invalid_scope");
    let mut c = claims(now);
    c["exp"] = json!(now + 3601);
    assert!(refused(&m, c)
        .await
        .1
        .starts_with("Invalid JWT: Token must be a short-lived token"));
    // already expired on the mock's clock
    assert!(refused(&m, claims(now - 4000))
        .await
        .1
        .starts_with("Invalid JWT: Token must be"));
    // several scopes, one of them cloud-platform; aud = the mock's own token URL
    let mut c = claims(now);
    c["scope"] = json!("openid https://www.googleapis.com/auth/cloud-platform");
    c["aud"] = json!(format!("http://{}/token", m.addr()));
    assert_eq!(post_form(&m, &form(&assertion(&c))).await.status, 200);
    // HS256 with any secret is not the account's signature
    let hs = jsonwebtoken::encode(
        &Header::default(),
        &claims(now),
        &EncodingKey::from_secret(b"x").unwrap(),
    )
    .unwrap();
    assert_eq!(post_form(&m, &form(&hs)).await.status, 400);
    let r = post_form(&m, "grant_type=client_credentials").await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (400, Some("unsupported_grant_type"))
    );
    let r = post_form(
        &m,
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=a.b",
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(m.token_requests(), 11);
    assert_eq!(m.tokens_issued(), 2);
}

#[tokio::test]
async fn bearer_check_and_lifetime() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let unauth = |r: &Resp, reason: &str| {
        assert_eq!(r.status, 401);
        let v = r.json();
        assert_eq!(v["error"]["status"], "UNAUTHENTICATED");
        assert_eq!(v["error"]["code"], 401);
        assert_eq!(v["error"]["details"][0]["reason"], reason);
        assert!(r.text().starts_with("{\n  \"error\": {"), "pretty");
    };
    for path in [gem("generateContent"), claude("rawPredict"), count_claude()] {
        let r = call(m.addr(), &path, &[], &gemini_req()).await;
        unauth(&r, "CREDENTIALS_MISSING");
        let r = call_with(&m, "ya29.forged", &path, &gemini_req(), &[]).await;
        unauth(&r, "ACCESS_TOKEN_TYPE_UNSUPPORTED");
    }
    // an API key is no Vertex credential
    let r = call(
        m.addr(),
        &gem("generateContent"),
        &[("x-goog-api-key", "k")],
        &gemini_req(),
    )
    .await;
    assert_eq!(r.status, 401);

    m.set_token_lifetime(100);
    let t0 = SystemTime::now();
    m.set_clock(Some(t0));
    let r = post_form(&m, &form(&assertion(&claims(unix(t0))))).await;
    assert_eq!(r.json()["expires_in"], 100);
    let token = r.json()["access_token"].as_str().unwrap().to_string();
    assert_eq!(
        call_with(&m, &token, &gem("generateContent"), &gemini_req(), &[])
            .await
            .status,
        200
    );
    m.set_clock(Some(t0 + Duration::from_secs(101)));
    let r = call_with(&m, &token, &gem("generateContent"), &gemini_req(), &[]).await;
    unauth(&r, "ACCESS_TOKEN_EXPIRED");
    // a new token, then revoked
    let token = mint(&m).await;
    assert_eq!(
        call_with(&m, &token, &claude("rawPredict"), &raw_req(), &[])
            .await
            .status,
        200
    );
    m.revoke_tokens();
    assert_eq!(
        call_with(&m, &token, &claude("rawPredict"), &raw_req(), &[])
            .await
            .status,
        401
    );
    assert_eq!(m.tokens_issued(), 2);
    assert_eq!(m.token_requests(), 2);
    // the same counters over HTTP, for a mock in another process
    let before = m.request_count();
    let c = Conn::send(m.addr(), "GET", "/mock/stats", &[], "")
        .await
        .unwrap();
    let v = c.read_all().await.unwrap().json();
    assert_eq!(v["token_requests"], 2);
    assert_eq!(v["tokens_issued"], 2);
    assert_eq!(v["sigv4_verified"], 0);
    assert_eq!(v["requests"], before);
    assert_eq!(m.request_count(), before, "not recorded");
}

#[tokio::test]
async fn gemini_on_vertex() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let token = mint(&m).await;
    for path in [
        gem("generateContent"),
        gem("generateContent").replacen("/v1/", "/v1beta1/", 1),
    ] {
        let r = call_with(&m, &token, &path, &gemini_req(), &[]).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(
            r.header("content-type"),
            Some("application/json; charset=UTF-8")
        );
        let v = r.json();
        assert_eq!(
            r.text(),
            format!("{}\n", serde_json::to_string_pretty(&v).unwrap())
        );
        assert_eq!(
            sorted_paths(&v),
            sorted_paths(&fixture_json("vertex/gemini_generate_text.response.json"))
        );
        assert_eq!(
            v["candidates"][0]["content"]["parts"][0]["text"],
            "Hello from the mock gemini provider."
        );
        assert_eq!(v["usageMetadata"]["trafficType"], "ON_DEMAND");
        // (28 + 5) / 4 = 8 prompt tokens, 6 pieces
        assert_eq!(v["usageMetadata"]["promptTokenCount"], 8);
        assert_eq!(v["usageMetadata"]["totalTokenCount"], 14);
        assert_eq!(v["modelVersion"], "gemini-2.0-flash");
        let ct = v["createTime"].as_str().unwrap();
        assert_eq!(ct.len(), "2025-06-27T08:48:21.154666Z".len(), "{ct}");
        assert!(ct.ends_with('Z') && ct.as_bytes()[10] == b'T');
    }

    // stream: intermediate frames carry only the traffic type, the last the counts
    let r = call_with(
        &m,
        &token,
        &format!("{}?alt=sse", gem("streamGenerateContent")),
        &gemini_req(),
        &[],
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let body = r.text();
    assert!(body.ends_with("}\r\n\r\n"));
    let frames = sse_json(&body);
    assert_eq!(frames.len(), 6);
    for f in &frames[..5] {
        assert_eq!(f["usageMetadata"], json!({"trafficType": "ON_DEMAND"}));
        assert!(f["candidates"][0].get("finishReason").is_none());
    }
    let last = &frames[5];
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(last["usageMetadata"]["candidatesTokenCount"], 6);
    assert_eq!(last["usageMetadata"]["trafficType"], "ON_DEMAND");
    let text: String = frames
        .iter()
        .filter_map(|f| f.pointer("/candidates/0/content/parts/0/text")?.as_str())
        .collect();
    assert_eq!(text, "Hello from the mock gemini provider.");
    // the recorded frame's keys, in its order (`role` before `parts`, createTime, responseId)
    let rec = sse_json(&fixture("vertex/gemini_stream_thought_summary.sse"));
    let top: Vec<&String> = last.as_object().unwrap().keys().collect();
    let rec_top: Vec<&String> = rec[0].as_object().unwrap().keys().collect();
    assert_eq!(top, rec_top);
    let content: Vec<&String> = last["candidates"][0]["content"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(content, ["role", "parts"]);
    assert!(
        body.starts_with("data: {\"candidates\": [{\"content\": {\"role\": \"model\",\"parts\": [")
    );

    // countTokens with Vertex's top-level systemInstruction and tools
    let body = fixture_json("vertex/gemini_count_tokens.request.json");
    let r = call_with(&m, &token, &gem("countTokens"), &body, &[]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(
        sorted_paths(&v),
        sorted_paths(&fixture_json("vertex/gemini_count_tokens.response.json"))
    );
    // "You are a helpful chatbot." 26 + "What is the capital of France?" 30
    assert_eq!(v["totalTokens"], 14);
    assert_eq!(v["totalBillableCharacters"], 56);
    let gen = call_with(&m, &token, &gem("generateContent"), &body, &[])
        .await
        .json();
    assert_eq!(gen["usageMetadata"]["promptTokenCount"], 14);
}

#[tokio::test]
async fn claude_on_vertex() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let token = mint(&m).await;
    let r = call_with(&m, &token, &claude("rawPredict"), &raw_req(), &[]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert!(v["id"].as_str().unwrap().starts_with("msg_vrtx_"));
    assert!(r.header("request-id").unwrap().starts_with("req_vrtx_"));
    assert_eq!(v["model"], "claude-sonnet-4-5@20250929");
    assert_eq!(
        v["content"][0]["text"],
        "Hello from the mock anthropic provider."
    );
    let fix = fixture_json("vertex/anthropic_rawpredict.response.json");
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    let fix_keys: Vec<&String> = fix.as_object().unwrap().keys().collect();
    assert_eq!(keys, fix_keys);
    assert!(r.text().starts_with("{\"model\":"));
    // "Hi Claude" 9 / 4 = 2
    assert_eq!(v["usage"]["input_tokens"], 2);
    // %40 for @ in the path
    let path = format!("{BASE}/anthropic/models/claude-sonnet-4-5%4020250929:rawPredict");
    let r = call_with(&m, &token, &path, &raw_req(), &[]).await;
    assert_eq!(r.json()["model"], "claude-sonnet-4-5@20250929");

    // stream
    let r = call_with(
        &m,
        &token,
        &claude("streamRawPredict"),
        &stream_raw_req(),
        &[],
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    let ev = sse_events(&r.text());
    assert_eq!(ev[0].0, "message_start");
    assert!(ev[0].1["message"]["id"]
        .as_str()
        .unwrap()
        .starts_with("msg_vrtx_"));
    assert_eq!(ev.last().unwrap().0, "message_stop");
    let rec = sse_events(&fixture(
        "vertex/anthropic_streamrawpredict_cache_write.sse",
    ));
    // the recorded message_start's fields are all there
    let ours = key_paths(&ev[0].1["message"]);
    for p in key_paths(&rec[0].1["message"]) {
        assert!(ours.contains(&p), "{p}");
    }
    // the URL decides: `:streamRawPredict` streams even if the body forgot `stream`
    let mut no_flag = stream_raw_req();
    no_flag.as_object_mut().unwrap().remove("stream");
    let r = call_with(&m, &token, &claude("streamRawPredict"), &no_flag, &[]).await;
    assert!(r.text().starts_with("event: message_start"));

    // validation (Anthropic-shaped)
    for (body, needle) in [
        (
            {
                let mut b = raw_req();
                b.as_object_mut().unwrap().remove("anthropic_version");
                b
            },
            "anthropic_version: Field required",
        ),
        (
            {
                let mut b = raw_req();
                b["anthropic_version"] = json!("bedrock-2023-05-31");
                b
            },
            "vertex-2023-10-16",
        ),
        (
            {
                let mut b = raw_req();
                b["model"] = json!("claude");
                b
            },
            "model: Extra inputs are not permitted",
        ),
        (
            {
                let mut b = raw_req();
                b.as_object_mut().unwrap().remove("max_tokens");
                b
            },
            "max_tokens: Field required",
        ),
    ] {
        let r = call_with(&m, &token, &claude("rawPredict"), &body, &[]).await;
        assert_eq!(r.status, 400, "{body}");
        let v = r.json();
        assert_eq!(v["type"], "error");
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(needle),
            "{v}"
        );
    }

    // count-tokens: the model is in the body
    let body = fixture_json("vertex/anthropic_count_tokens.request.json");
    let r = call_with(&m, &token, &count_claude(), &body, &[]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), r#"{"input_tokens":1}"#);
    let mut no_model = body.clone();
    no_model.as_object_mut().unwrap().remove("model");
    assert_eq!(
        call_with(&m, &token, &count_claude(), &no_model, &[])
            .await
            .status,
        400
    );
    // unknown publisher / method: 404
    let r = call_with(
        &m,
        &token,
        &format!("{BASE}/meta/models/llama:rawPredict"),
        &raw_req(),
        &[],
    )
    .await;
    assert_eq!(r.status, 404);
}

fn routes() -> Vec<(String, Value, bool)> {
    vec![
        (gem("generateContent"), gemini_req(), false),
        (
            format!("{}?alt=sse", gem("streamGenerateContent")),
            gemini_req(),
            false,
        ),
        (gem("countTokens"), gemini_req(), false),
        (claude("rawPredict"), raw_req(), true),
        (claude("streamRawPredict"), stream_raw_req(), true),
        (
            count_claude(),
            fixture_json("vertex/anthropic_count_tokens.request.json"),
            true,
        ),
    ]
}

#[tokio::test]
async fn error_faults_on_every_route() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let token = mint(&m).await;
    let envelope = |name: &str| fixture_json(&format!("vertex/{name}.http.json"));
    for (path, body, anthropic) in routes() {
        // 429: Google's dynamic-quota body; for Claude the array-wrapped quota error
        m.script(vec![Behavior {
            status: Some(429),
            ..Default::default()
        }]);
        let r = call_with(&m, &token, &path, &body, &[]).await;
        assert_eq!(r.status, 429, "{path}");
        assert_eq!(
            r.header("content-type"),
            Some("application/json; charset=UTF-8")
        );
        if anthropic {
            assert_eq!(
                r.text(),
                envelope("anthropic_error_429_quota")["body_raw"]
                    .as_str()
                    .unwrap()
            );
        } else {
            assert_eq!(r.json(), envelope("error_429_resource_exhausted")["body"]);
            assert!(r.text().starts_with("{\n  \"error\": {\n"));
        }
        for (status, st, file) in [
            (400, "INVALID_ARGUMENT", Some("error_400_context_length")),
            (
                403,
                "PERMISSION_DENIED",
                Some("error_403_permission_denied"),
            ),
            (401, "UNAUTHENTICATED", None),
            (404, "NOT_FOUND", None),
            (500, "INTERNAL", None),
            (503, "UNAVAILABLE", None),
        ] {
            m.script(vec![Behavior {
                status: Some(status),
                ..Default::default()
            }]);
            let r = call_with(&m, &token, &path, &body, &[]).await;
            assert_eq!(r.status, status, "{path}");
            let v = r.json();
            assert_eq!(v["error"]["status"], st, "{path} {status}");
            assert_eq!(v["error"]["code"], status);
            if let Some(file) = file {
                assert_eq!(v, envelope(file)["body"]);
            }
        }
        // a named fixture, message replaced
        m.script(vec![
            Behavior::fixture("vertex/error_400_invalid_argument").error_message("nope")
        ]);
        let r = call_with(&m, &token, &path, &body, &[]).await;
        assert_eq!(r.status, 400);
        assert_eq!(r.json()["error"]["message"], "nope");
        assert_eq!(r.header("vary"), Some("Origin, X-Origin, Referer"));
        // latency and drop work as everywhere
        m.script(vec![Behavior::fault(Fault::Drop)]);
        let auth = format!("Bearer {token}");
        let c = Conn::send(
            m.addr(),
            "POST",
            &path,
            &[("authorization", &auth)],
            &body.to_string(),
        )
        .await
        .unwrap();
        assert!(c.read_all().await.is_err());
    }
    // Claude's own overload error is Anthropic-shaped
    m.script(vec![Behavior {
        status: Some(529),
        ..Default::default()
    }]);
    let r = call_with(&m, &token, &claude("rawPredict"), &raw_req(), &[]).await;
    assert_eq!(r.status, 529);
    assert_eq!(r.json()["error"]["type"], "overloaded_error");
}

#[tokio::test]
async fn stream_faults() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let token = mint(&m).await;
    m.script(vec![Behavior::fault(Fault::MidstreamError).after(2)]);
    let r = call_with(
        &m,
        &token,
        &format!("{}?alt=sse", gem("streamGenerateContent")),
        &gemini_req(),
        &[],
    )
    .await;
    let body = r.text();
    assert_eq!(sse_json(&body).len(), 2);
    assert!(body.ends_with(&gemini_midstream()));
    m.script(vec![Behavior::fault(Fault::MidstreamError).after(2)]);
    let r = call_with(
        &m,
        &token,
        &claude("streamRawPredict"),
        &stream_raw_req(),
        &[],
    )
    .await;
    let body = r.text();
    assert!(body.contains("event: error\ndata: "), "{body}");
    m.script(vec![Behavior::fault(Fault::Cut).after(1)]);
    let auth = format!("Bearer {token}");
    let c = Conn::send(
        m.addr(),
        "POST",
        &claude("streamRawPredict"),
        &[("authorization", &auth)],
        &stream_raw_req().to_string(),
    )
    .await
    .unwrap();
    let (err, got) = c.read_all().await.unwrap_err();
    assert_eq!(err, "eof");
    assert!(String::from_utf8(got)
        .unwrap()
        .starts_with("event: message_start"));
    // the token endpoint never takes the script
    m.script(vec![Behavior::fault(Fault::Drop)]);
    mint(&m).await;
    let c = Conn::send(
        m.addr(),
        "POST",
        &claude("rawPredict"),
        &[("authorization", &auth)],
        &raw_req().to_string(),
    )
    .await
    .unwrap();
    assert!(c.read_all().await.is_err(), "the API call took the drop");
}

fn gemini_midstream() -> String {
    let fix = fixture("gemini/stream_error_midstream.txt");
    fix[fix.find("\n{").unwrap() + 1..].to_string()
}
