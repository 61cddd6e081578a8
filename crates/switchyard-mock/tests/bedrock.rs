//! Amazon Bedrock over real HTTP: SigV4, Converse / ConverseStream, InvokeModel (+ stream),
//! CountTokens, errors and faults, compared with `fixtures/providers/bedrock/`.

mod common;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use aws_smithy_eventstream::frame::read_message_from;
use aws_smithy_runtime_api::client::identity::Identity;
use common::*;
use serde_json::{json, Value};
use std::time::{Duration, SystemTime};
use switchyard_mock::{AwsCredentials, Behavior, Fault, MockServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CONVERSE: &str = "/model/us.amazon.nova-micro-v1%3A0/converse";
const CONVERSE_STREAM: &str = "/model/us.amazon.nova-micro-v1%3A0/converse-stream";
const INVOKE: &str = "/model/anthropic.claude-3-haiku-20240307-v1:0/invoke";
const INVOKE_STREAM: &str =
    "/model/anthropic.claude-3-haiku-20240307-v1:0/invoke-with-response-stream";
const COUNT: &str = "/model/anthropic.claude-sonnet-4-20250514-v1%3A0/count-tokens";

/// The SigV4 headers (`x-amz-date`, `authorization`, `x-amz-security-token`) for a request
/// signed the way the AWS SDK signs it: `content-type`, `host` and the body.
fn sign_headers(
    creds: &AwsCredentials,
    host: &str,
    path: &str,
    body: &[u8],
    time: SystemTime,
) -> Vec<(String, String)> {
    let identity: Identity = Credentials::new(
        creds.access_key_id.clone(),
        creds.secret_access_key.clone(),
        creds.session_token.clone(),
        None,
        "test",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(&creds.region)
        .name("bedrock")
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let headers = [("content-type", "application/json"), ("host", host)];
    let req =
        SignableRequest::new("POST", path, headers.into_iter(), SignableBody::Bytes(body)).unwrap();
    let (instructions, _) = sign(req, &params).unwrap().into_parts();
    instructions
        .headers()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Send `body` to `path`, signed with `creds` at `time`, plus `extra` headers.
async fn send_signed(
    m: &MockServer,
    creds: &AwsCredentials,
    time: SystemTime,
    path: &str,
    body: &str,
    extra: &[(&str, &str)],
) -> Conn {
    let host = m.addr().to_string();
    let signed = sign_headers(creds, &host, path, body.as_bytes(), time);
    let mut headers: Vec<(&str, &str)> = signed
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    headers.extend_from_slice(extra);
    Conn::send(m.addr(), "POST", path, &headers, body)
        .await
        .unwrap()
}

async fn read(c: Conn) -> Resp {
    tokio::time::timeout(Duration::from_secs(5), c.read_all())
        .await
        .expect("response in time")
        .expect("complete response")
}

/// A request signed with the default credentials and the system clock.
async fn call_signed(m: &MockServer, path: &str, body: &Value, extra: &[(&str, &str)]) -> Resp {
    let c = send_signed(
        m,
        &AwsCredentials::default(),
        SystemTime::now(),
        path,
        &body.to_string(),
        extra,
    )
    .await;
    read(c).await
}

/// A decoded frame: `(headers, payload)`.
type Frame = (Vec<(String, String)>, Vec<u8>);

/// `(headers, payload)` of every event-stream frame; panics on a framing or CRC error.
fn frames(body: &[u8]) -> Vec<Frame> {
    let mut buf = body;
    let mut out = Vec::new();
    while !buf.is_empty() {
        let m = read_message_from(&mut buf).expect("valid frame");
        let headers = m
            .headers()
            .iter()
            .map(|h| {
                (
                    h.name().as_str().to_string(),
                    h.value().as_string().unwrap().as_str().to_string(),
                )
            })
            .collect();
        out.push((headers, m.payload().to_vec()));
    }
    out
}

/// `(:event-type, payload JSON)` of event frames, checking the header order and `p`.
fn events(body: &[u8]) -> Vec<(String, Value)> {
    frames(body)
        .into_iter()
        .map(|(h, p)| {
            let names: Vec<&str> = h.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(names, [":event-type", ":content-type", ":message-type"]);
            assert_eq!(h[1].1, "application/json");
            assert_eq!(h[2].1, "event");
            let v: Value = serde_json::from_slice(&p).unwrap();
            assert!(v["p"].as_str().is_some_and(|p| !p.is_empty()), "{v}");
            assert_eq!(std::str::from_utf8(&p).unwrap(), sorted(&v).to_string());
            (h[0].1.clone(), v)
        })
        .collect()
}

/// `v` with object keys sorted, recursively.
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

fn without_p(v: &Value) -> Value {
    let mut v = v.clone();
    v.as_object_mut().unwrap().remove("p");
    v
}

fn converse_req() -> Value {
    json!({"messages": [{"role": "user", "content": [{"text": "Hello!"}]}],
        "system": [{"text": "You are a chatbot."}], "inferenceConfig": {}})
}

fn invoke_req() -> Value {
    json!({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 100,
        "system": "You are a helpful assistant.", "messages": [{"role": "user", "content": "Hello"}]})
}

fn weather_tools() -> Value {
    json!({"tools": [{"toolSpec": {"name": "get_weather", "description": "Weather",
        "inputSchema": {"json": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"}}}}}}]})
}

/// A raw request with exactly these headers (no `host` added).
async fn raw(m: &MockServer, path: &str, headers: &[(String, String)], body: &[u8]) -> Resp {
    let mut s = tokio::net::TcpStream::connect(m.addr()).await.unwrap();
    let mut req = format!("POST {path} HTTP/1.1\r\ncontent-length: {}\r\n", body.len());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("connection: close\r\n\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    s.write_all(&bytes).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Resp {
        status,
        headers,
        body: rest.as_bytes().to_vec(),
        chunks: Vec::new(),
    }
}

#[tokio::test]
async fn sigv4_vectors_verify_over_http() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let v = fixture_json("bedrock/sigv4/bedrock_vectors.json");
    let c = &v["credentials"];
    // the vectors' frozen clock, a minute on
    m.set_clock(Some(
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_735_689_600 + 60),
    ));
    for t in v["vectors"].as_array().unwrap() {
        let signed = t["signed_request_headers"].as_object().unwrap();
        let mut creds = AwsCredentials::new(
            c["access_key_id"].as_str().unwrap(),
            c["secret_access_key"].as_str().unwrap(),
        )
        .with_region(t["region"].as_str().unwrap());
        if signed.contains_key("X-Amz-Security-Token") {
            creds = creds.with_session_token(c["session_token_when_used"].as_str().unwrap());
        }
        m.set_aws_credentials(creds);
        // the headers as sent: before signing, then the signed set (which repeats some)
        let mut headers: Vec<(String, String)> = Vec::new();
        for (k, v) in t["request_headers_before_signing"]
            .as_object()
            .unwrap()
            .iter()
            .chain(signed)
        {
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case(k));
            headers.push((k.clone(), v.as_str().unwrap().to_string()));
        }
        let url = t["url"].as_str().unwrap();
        let path = &url[url.find(".com").unwrap() + 4..];
        let body = t["body"].as_str().unwrap().as_bytes();
        let r = raw(&m, path, &headers, body).await;
        assert_eq!(r.status, 200, "{}: {}", t["name"], r.text());
        let mut flipped = body.to_vec();
        flipped[body.len() / 2] ^= 1;
        let r = raw(&m, path, &headers, &flipped).await;
        assert_eq!(r.status, 403, "{}", t["name"]);
        assert_eq!(
            r.header("x-amzn-errortype"),
            Some("InvalidSignatureException:http://internal.amazon.com/coral/com.amazon.coral.service/")
        );
        assert!(r
            .text()
            .starts_with(r#"{"message":"The request signature we calculated does not match"#));
    }
    assert_eq!(m.sigv4_verified(), 5);
    assert_eq!(m.sigv4_rejected(), 5);
    m.clear_requests();
    assert_eq!((m.sigv4_verified(), m.sigv4_rejected()), (0, 0));
}

#[tokio::test]
async fn sigv4_refusals() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let body = converse_req().to_string();
    let def = AwsCredentials::default();
    let now = SystemTime::now();
    let errortype = |r: &Resp| {
        r.header("x-amzn-errortype")
            .unwrap()
            .split(':')
            .next()
            .unwrap()
            .to_string()
    };

    // unsigned
    let r = call(m.addr(), CONVERSE, &[], &converse_req()).await;
    assert_eq!(
        (r.status, errortype(&r)),
        (403, "InvalidSignatureException".into())
    );
    assert_eq!(r.json(), json!({"message": "Missing Authentication Token"}));
    // unknown key id
    let other = AwsCredentials::new("AKIDUNKNOWN", "secret");
    let r = read(send_signed(&m, &other, now, CONVERSE, &body, &[]).await).await;
    assert_eq!(
        (r.status, errortype(&r)),
        (403, "UnrecognizedClientException".into())
    );
    assert_eq!(
        r.header("x-amzn-errortype"),
        Some("UnrecognizedClientException:http://internal.amazon.com/coral/com.amazon.coral.service/")
    );
    // wrong secret
    let wrong = AwsCredentials::new("AKIDEXAMPLE", "not-the-secret");
    let r = read(send_signed(&m, &wrong, now, CONVERSE, &body, &[]).await).await;
    assert_eq!(
        (r.status, errortype(&r)),
        (403, "InvalidSignatureException".into())
    );
    // ten minutes off the mock's clock, either way
    for off in [600i64, -600] {
        let t = if off > 0 {
            now + Duration::from_secs(600)
        } else {
            now - Duration::from_secs(600)
        };
        let r = read(send_signed(&m, &def, t, CONVERSE, &body, &[]).await).await;
        assert_eq!(r.status, 403, "{off}");
        assert!(r.text().contains("Signature"), "{}", r.text());
    }
    // a wrong region
    let west = def.clone().with_region("us-west-2");
    let r = read(send_signed(&m, &west, now, CONVERSE, &body, &[]).await).await;
    assert_eq!(r.status, 403);
    assert_eq!(m.sigv4_rejected(), 6);
    assert_eq!(m.sigv4_verified(), 0);

    // temporary credentials: the token must be sent and signed
    let temp = def.clone().with_session_token("FQoGZXIvYXdzEXAMPLE");
    m.set_aws_credentials(temp.clone());
    let r = read(send_signed(&m, &temp, now, CONVERSE, &body, &[]).await).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = read(send_signed(&m, &def, now, CONVERSE, &body, &[]).await).await;
    assert_eq!(r.status, 403, "token missing");
    let other_token = def.clone().with_session_token("other");
    let r = read(send_signed(&m, &other_token, now, CONVERSE, &body, &[]).await).await;
    assert_eq!(r.status, 403, "wrong token");
    assert_eq!((m.sigv4_verified(), m.sigv4_rejected()), (1, 8));

    // the mock's clock moves the window
    m.set_aws_credentials(def.clone());
    m.set_clock(Some(now + Duration::from_secs(3600)));
    let r = read(send_signed(&m, &def, now, CONVERSE, &body, &[]).await).await;
    assert_eq!(r.status, 403);
    let r = read(
        send_signed(
            &m,
            &def,
            now + Duration::from_secs(3600),
            CONVERSE,
            &body,
            &[],
        )
        .await,
    )
    .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn converse_text_matches_fixture() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let r = call_signed(&m, CONVERSE, &converse_req(), &[]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert!(r.header("x-amzn-requestid").is_some());
    let v = r.json();
    // compact, keys alphabetical, the recorded key set
    assert_eq!(r.text(), sorted(&v).to_string());
    assert_eq!(
        key_paths(&v),
        key_paths(&fixture_json("bedrock/converse_text.response.json"))
    );
    assert_eq!(
        v["output"]["message"]["content"][0]["text"],
        "Hello from the mock bedrock provider."
    );
    assert_eq!(v["stopReason"], "end_turn");
    // ("You are a chatbot." 18 + "Hello!" 6) / 4 = 6 input; 6 word pieces
    assert_eq!(
        v["usage"],
        json!({"inputTokens": 6, "outputTokens": 6, "totalTokens": 12})
    );
    assert!(v["metrics"]["latencyMs"].as_u64().unwrap() >= 1);
    // the literal ':' spelling of the model id works the same
    let r = call_signed(
        &m,
        "/model/us.amazon.nova-micro-v1:0/converse",
        &converse_req(),
        &[],
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(m.sigv4_verified(), 2);
}

#[tokio::test]
async fn converse_tool_call_reasoning_result_and_prefill() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let mut body = json!({"messages": [{"role": "user", "content": [{"text": "Weather in Paris?"}]}],
        "toolConfig": weather_tools()});
    body["toolConfig"]["toolChoice"] = json!({"auto": {}});
    let beh = r#"{"reasoning":"Let me look it up.","cached_tokens":1}"#;
    let r = call_signed(&m, CONVERSE, &body, &[("x-mock-behavior", beh)]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(r.text(), sorted(&v).to_string());
    let call = &v["output"]["message"]["content"][0]["toolUse"];
    assert_eq!(call["name"], "get_weather");
    assert_eq!(call["input"], json!({"city": "mock", "days": 1}));
    assert!(call["toolUseId"].as_str().unwrap().starts_with("tooluse_"));
    assert_eq!(v["stopReason"], "tool_use");
    // cache fields under both names, as recorded for Claude
    assert_eq!(v["usage"]["cacheReadInputTokens"], 1);
    assert_eq!(v["usage"]["cacheReadInputTokenCount"], 1);
    assert_eq!(v["usage"]["cacheWriteInputTokens"], 0);

    // reasoning + text: the recorded shape (minus the tool call)
    let r = call_signed(&m, CONVERSE, &converse_req(), &[("x-mock-behavior", beh)]).await;
    let v = r.json();
    let fix = fixture_json("bedrock/converse_tool_use_thinking.response.json");
    let mut fix_text = fix.clone();
    fix_text["output"]["message"]["content"]
        .as_array_mut()
        .unwrap()
        .pop();
    assert_eq!(key_paths(&v), key_paths(&fix_text));
    assert_eq!(
        v["output"]["message"]["content"][0]["reasoningContent"]["reasoningText"]["text"],
        "Let me look it up."
    );

    // a tool result after the call
    let body = json!({"messages": [
        {"role": "user", "content": [{"text": "Weather in Paris?"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather", "input": {"city": "Paris"}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "22°C"}], "status": "success"}}]}
    ], "toolConfig": weather_tools()});
    let v = call_signed(&m, CONVERSE, &body, &[]).await.json();
    assert_eq!(
        v["output"]["message"]["content"][0]["text"],
        "Tool result received: 22°C"
    );
    let body = json!({"messages": [
        {"role": "user", "content": [{"text": "Weather?"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t", "name": "get_weather", "input": {}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t", "content": [{"json": {"temp": 22}}]}}]}
    ], "toolConfig": weather_tools()});
    let v = call_signed(&m, CONVERSE, &body, &[]).await.json();
    assert_eq!(
        v["output"]["message"]["content"][0]["text"],
        r#"Tool result received: {"temp":22}"#
    );

    // prefill: the rest of the answer
    let body = json!({"messages": [
        {"role": "user", "content": [{"text": "Hi"}]},
        {"role": "assistant", "content": [{"text": "Hello from the mock"}]}
    ]});
    let v = call_signed(&m, CONVERSE, &body, &[]).await.json();
    assert_eq!(
        v["output"]["message"]["content"][0]["text"],
        " bedrock provider."
    );
    assert_eq!(v["usage"]["outputTokens"], 2);
}

#[tokio::test]
async fn converse_validation_errors() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    for body in [
        json!({"model": "x", "messages": [{"role": "user", "content": [{"text": "Hi"}]}]}),
        json!({"messages": [{"role": "user", "content": [{"text": "Hi", "cachePoint": {"type": "default"}}]}]}),
        json!({"messages": [{"role": "user", "content": [{"txt": "Hi"}]}]}),
        json!({"messages": [{"role": "assistant", "content": [{"text": "Hi"}]}]}),
        json!({"messages": [{"role": "user", "content": "Hi"}]}),
    ] {
        let r = call_signed(&m, CONVERSE, &body, &[]).await;
        assert_eq!(r.status, 400, "{body}");
        assert_eq!(
            r.header("x-amzn-errortype"),
            Some("ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/")
        );
        let v = r.json();
        assert_eq!(v.as_object().unwrap().len(), 1, "{v}");
        assert!(v["message"].is_string());
    }
    let r = call_signed(&m, CONVERSE, &json!({"model": "x", "messages": []}), &[]).await;
    assert!(r.text().contains("extraneous key [model] is not permitted"));
    // not JSON at all (signed as sent)
    let c = send_signed(
        &m,
        &AwsCredentials::default(),
        SystemTime::now(),
        CONVERSE,
        "{not json",
        &[],
    )
    .await;
    assert_eq!(read(c).await.status, 400);
}

#[tokio::test]
async fn converse_cache_points() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let system = "x".repeat(400);
    let body = json!({"system": [{"text": system}, {"cachePoint": {"type": "default"}}],
        "messages": [{"role": "user", "content": [{"text": "What is 1+20?"}]}]});
    // prompt (400 + 13) / 4 = 103; prefix 400 / 4 = 100
    let first = call_signed(&m, CONVERSE, &body, &[]).await.json();
    assert_eq!(
        first["usage"],
        json!({"cacheReadInputTokenCount": 0, "cacheReadInputTokens": 0,
            "cacheWriteInputTokenCount": 100, "cacheWriteInputTokens": 100,
            "inputTokens": 3, "outputTokens": 6, "totalTokens": 109})
    );
    let fix = fixture_json("bedrock/converse_cache_write.response.json");
    let mut fix_usage = fix["usage"].clone();
    fix_usage.as_object_mut().unwrap().remove("serverToolUsage");
    assert_eq!(key_paths(&first["usage"]), key_paths(&fix_usage));
    let second = call_signed(&m, CONVERSE, &body, &[]).await.json();
    assert_eq!(second["usage"]["cacheReadInputTokens"], 100);
    assert_eq!(second["usage"]["cacheWriteInputTokens"], 0);
    assert_eq!(second["usage"]["inputTokens"], 3);
    assert_eq!(second["usage"]["totalTokens"], 109);
    // the stream reports the same in `metadata`
    let r = call_signed(&m, CONVERSE_STREAM, &body, &[]).await;
    let ev = events(&r.body);
    let (ty, meta) = ev.last().unwrap();
    assert_eq!(ty, "metadata");
    assert_eq!(meta["usage"]["cacheReadInputTokens"], 100);
    // behavior numbers win over the rule
    let r = call_signed(
        &m,
        CONVERSE,
        &body,
        &[("x-mock-behavior", r#"{"cache_write_tokens":7}"#)],
    )
    .await;
    assert_eq!(r.json()["usage"]["cacheWriteInputTokens"], 7);
}

#[tokio::test]
async fn converse_stream_frames() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let r = call_signed(&m, CONVERSE_STREAM, &converse_req(), &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("application/vnd.amazon.eventstream")
    );
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    let ours = events(&r.body);
    let types: Vec<&str> = ours.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        types,
        [
            "messageStart",
            "contentBlockDelta",
            "contentBlockDelta",
            "contentBlockDelta",
            "contentBlockDelta",
            "contentBlockDelta",
            "contentBlockDelta",
            "contentBlockStop",
            "messageStop",
            "metadata"
        ]
    );
    let text: String = ours
        .iter()
        .filter_map(|(_, v)| v.pointer("/delta/text")?.as_str())
        .collect();
    assert_eq!(text, "Hello from the mock bedrock provider.");
    // the recorded frames' shapes, event by event type
    let rec =
        events(&std::fs::read(format!("{FIX}bedrock/converse_stream_text.eventstream")).unwrap());
    for (ty, v) in &ours {
        let (_, f) = rec.iter().find(|(t, _)| t == ty).unwrap();
        let mut f = without_p(f);
        if let Some(u) = f.get_mut("usage").and_then(Value::as_object_mut) {
            u.remove("serverToolUsage");
        }
        assert_eq!(key_paths(&without_p(v)), key_paths(&f), "{ty}");
    }
    assert_eq!(
        ours[9].1["usage"],
        json!({"inputTokens": 6, "outputTokens": 6, "totalTokens": 12})
    );

    // a tool call: contentBlockStart, string fragments of the input
    let body = json!({"messages": [{"role": "user", "content": [{"text": "Weather?"}]}],
        "toolConfig": weather_tools()});
    let r = call_signed(&m, CONVERSE_STREAM, &body, &[]).await;
    let ours = events(&r.body);
    assert_eq!(ours[1].0, "contentBlockStart");
    let rec = events(
        &std::fs::read(format!("{FIX}bedrock/converse_stream_tool_use.eventstream")).unwrap(),
    );
    let rec_start = rec.iter().find(|(t, _)| t == "contentBlockStart").unwrap();
    assert_eq!(
        key_paths(&without_p(&ours[1].1)),
        key_paths(&without_p(&rec_start.1))
    );
    let args: String = ours
        .iter()
        .filter_map(|(_, v)| v.pointer("/delta/toolUse/input")?.as_str())
        .collect();
    assert_eq!(args, r#"{"city":"mock","days":1}"#);
    assert_eq!(ours[ours.len() - 2].1["stopReason"], "tool_use");

    // reasoning: deltas, then the signature, then the stop (`converse_stream_reasoning`)
    let r = call_signed(
        &m,
        CONVERSE_STREAM,
        &converse_req(),
        &[("x-mock-behavior", r#"{"reasoning":"Hmm ok."}"#)],
    )
    .await;
    let ours = events(&r.body);
    assert_eq!(ours[1].1["delta"]["reasoningContent"]["text"], "Hmm");
    assert_eq!(
        ours[3].1["delta"]["reasoningContent"]["signature"],
        "mock_signature"
    );
    assert_eq!(ours[4].0, "contentBlockStop");
    assert_eq!(ours[5].1["contentBlockIndex"], 1);
}

#[tokio::test]
async fn invoke_anthropic() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let r = call_signed(&m, INVOKE, &invoke_req(), &[]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert!(v["id"].as_str().unwrap().starts_with("msg_bdrk_"));
    assert_eq!(v["model"], "anthropic.claude-3-haiku-20240307-v1:0");
    assert_eq!(
        v["content"][0]["text"],
        "Hello from the mock anthropic provider."
    );
    let fix = fixture_json("bedrock/invoke_anthropic.response.json");
    for p in sorted_paths(&fix) {
        assert!(sorted_paths(&v).contains(&p), "{p}");
    }
    // (28 + 5) / 4 = 8 input tokens, 6 output
    assert_eq!(r.header("x-amzn-bedrock-input-token-count"), Some("8"));
    assert_eq!(r.header("x-amzn-bedrock-output-token-count"), Some("6"));
    assert_eq!(
        r.header("x-amzn-bedrock-cache-read-input-token-count"),
        Some("0")
    );
    assert!(r.header("x-amzn-bedrock-invocation-latency").is_some());

    for (body, needle) in [
        (
            {
                let mut b = invoke_req();
                b.as_object_mut().unwrap().remove("anthropic_version");
                b
            },
            "required key [anthropic_version] not found",
        ),
        (
            {
                let mut b = invoke_req();
                b["anthropic_version"] = json!("2023-06-01");
                b
            },
            "anthropic_version",
        ),
        (
            {
                let mut b = invoke_req();
                b["model"] = json!("claude");
                b
            },
            "extraneous key [model]",
        ),
        (
            {
                let mut b = invoke_req();
                b["stream"] = json!(true);
                b
            },
            "extraneous key [stream]",
        ),
        (
            {
                let mut b = invoke_req();
                b.as_object_mut().unwrap().remove("max_tokens");
                b
            },
            "required key [max_tokens]",
        ),
    ] {
        let r = call_signed(&m, INVOKE, &body, &[]).await;
        assert_eq!(r.status, 400, "{body}");
        assert!(r
            .header("x-amzn-errortype")
            .unwrap()
            .starts_with("ValidationException:"));
        assert!(
            r.json()["message"].as_str().unwrap().contains(needle),
            "{}",
            r.text()
        );
    }
}

#[tokio::test]
async fn invoke_stream_chunks() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let r = call_signed(&m, INVOKE_STREAM, &invoke_req(), &[]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("content-type"),
        Some("application/vnd.amazon.eventstream")
    );
    let ours: Vec<Value> = events(&r.body)
        .into_iter()
        .map(|(ty, v)| {
            assert_eq!(ty, "chunk");
            assert_eq!(v.as_object().unwrap().len(), 2, "bytes and p: {v}");
            serde_json::from_slice(&b64decode(v["bytes"].as_str().unwrap())).unwrap()
        })
        .collect();
    let types: Vec<&str> = ours.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let rec = fixture_json("bedrock/invoke_stream_anthropic.decoded.json");
    let rec_types: Vec<&str> = rec["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["payload_bytes_decoded"]["type"].as_str().unwrap())
        .collect();
    fn dedup<'a>(t: &[&'a str]) -> Vec<&'a str> {
        let mut t = t.to_vec();
        t.dedup();
        t
    }
    assert_eq!(dedup(&types), dedup(&rec_types));
    assert!(ours[0]["message"]["id"]
        .as_str()
        .unwrap()
        .starts_with("msg_bdrk_"));
    let stop = ours.last().unwrap();
    let metrics = &stop["amazon-bedrock-invocationMetrics"];
    assert_eq!(metrics["inputTokenCount"], 8);
    assert_eq!(metrics["outputTokenCount"], 6);
    let rec_stop =
        rec["frames"].as_array().unwrap().last().unwrap()["payload_bytes_decoded"].clone();
    assert_eq!(key_paths(stop), key_paths(&rec_stop));
}

#[tokio::test]
async fn count_tokens_both_forms() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let body = fixture_json("bedrock/count_tokens_converse.request.json");
    let r = call_signed(&m, COUNT, &body, &[]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    // "What is the weather in Paris?" = 29 chars → 7
    assert_eq!(r.text(), r#"{"inputTokens":7}"#);
    // what a generation with the same body reports
    let gen = call_signed(&m, CONVERSE, &body["input"]["converse"], &[])
        .await
        .json();
    assert_eq!(gen["usage"]["inputTokens"], 7);

    let body = fixture_json("bedrock/count_tokens_invoke.request.json");
    let r = call_signed(
        &m,
        "/model/anthropic.claude-sonnet-4-20250514-v1:0/count-tokens",
        &body,
        &[],
    )
    .await;
    // "You are helpful." 16 + "How many tokens is this sentence?" 33 → 12
    assert_eq!(r.text(), r#"{"inputTokens":12}"#);
    for bad in [
        json!({}),
        json!({"input": {}}),
        json!({"input": {"invokeModel": {"body": "%%%"}}}),
    ] {
        let r = call_signed(&m, COUNT, &bad, &[]).await;
        assert_eq!(r.status, 400, "{bad}");
        assert!(r
            .header("x-amzn-errortype")
            .unwrap()
            .starts_with("ValidationException"));
    }
}

fn route_bodies() -> Vec<(&'static str, Value)> {
    vec![
        (CONVERSE, converse_req()),
        (CONVERSE_STREAM, converse_req()),
        (INVOKE, invoke_req()),
        (INVOKE_STREAM, invoke_req()),
        (COUNT, json!({"input": {"converse": converse_req()}})),
    ]
}

#[tokio::test]
async fn error_faults_on_every_route() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    for (path, body) in route_bodies() {
        for (status, ty, message) in [
            (429, "ThrottlingException", "Too many tokens, please wait before trying again."),
            (503, "ServiceUnavailableException", "Bedrock is unable to process your request."),
            (400, "ValidationException", "Input is too long for requested model."),
            (403, "AccessDeniedException", "You don't have access to the model with the specified model ID."),
            (404, "ResourceNotFoundException", "This model version has reached the end of its life. Please refer to the AWS documentation for more details."),
            (500, "InternalServerException", "The server encountered an internal error while processing the request."),
        ] {
            m.script(vec![Behavior { status: Some(status), ..Default::default() }]);
            let r = call_signed(&m, path, &body, &[]).await;
            assert_eq!(r.status, status, "{path}");
            assert_eq!(
                r.header("x-amzn-errortype"),
                Some(format!("{ty}:http://internal.amazon.com/coral/com.amazon.bedrock/").as_str()),
                "{path} {status}"
            );
            assert_eq!(r.header("content-type"), Some("application/json"));
            assert_eq!(r.json(), json!({"message": message}), "{path} {status}");
            assert_eq!(r.text(), r.json().to_string(), "compact");
        }
        // a named fixture, with its message replaced
        m.script(vec![Behavior::fixture(
            "bedrock/error_503_too_many_connections",
        )
        .error_message("busy")]);
        let r = call_signed(&m, path, &body, &[]).await;
        assert_eq!(r.status, 503);
        assert_eq!(r.json()["message"], "busy");
        assert!(r.json()["exceptionMetadata"].is_object());
        assert!(r.text().starts_with(r#"{"exceptionMetadata":"#));
        // drop and hang work before the signature is even looked at
        m.script(vec![Behavior::fault(Fault::Drop)]);
        let c = send_signed(
            &m,
            &AwsCredentials::default(),
            SystemTime::now(),
            path,
            &body.to_string(),
            &[],
        )
        .await;
        assert!(c.read_all().await.is_err());
    }
    // a behavior status with a body is served verbatim
    m.script(vec![Behavior::status(418, "teapot")]);
    let r = call_signed(&m, CONVERSE, &converse_req(), &[]).await;
    assert_eq!((r.status, r.text().as_str()), (418, "teapot"));
}

#[tokio::test]
async fn stream_faults() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    for path in [CONVERSE_STREAM, INVOKE_STREAM] {
        let body = if path == CONVERSE_STREAM {
            converse_req()
        } else {
            invoke_req()
        };
        // mid-stream exception: frames, then one exception frame, then the end
        m.script(vec![Behavior::fault(Fault::MidstreamError).after(3)]);
        let r = call_signed(&m, path, &body, &[]).await;
        assert_eq!(r.status, 200);
        let f = frames(&r.body);
        assert_eq!(f.len(), 4, "{path}");
        let (h, p) = f.last().unwrap();
        assert_eq!(
            h.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>(),
            [
                ":exception-type=throttlingException",
                ":content-type=application/json",
                ":message-type=exception"
            ]
        );
        assert_eq!(
            p,
            br#"{"message":"Too many tokens, please wait before trying again."}"#
        );
        // the recorded frame, byte for byte
        let rec = std::fs::read(format!(
            "{FIX}bedrock/stream_exception_throttlingException.eventstream"
        ))
        .unwrap();
        assert!(r.body.ends_with(&rec));
        // another exception type, another message: CRCs still good
        m.script(vec![Behavior {
            bedrock_exception: Some("serviceUnavailableException".into()),
            ..Behavior::fault(Fault::MidstreamError).error_message("gone away")
        }]);
        let r = call_signed(&m, path, &body, &[]).await;
        let f = frames(&r.body);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].0[0].1, "serviceUnavailableException");
        assert_eq!(f[0].1, br#"{"message":"gone away"}"#);
        // cut after 2 frames: 2 whole frames, then the connection ends
        m.script(vec![Behavior::fault(Fault::Cut).after(2)]);
        let c = send_signed(
            &m,
            &AwsCredentials::default(),
            SystemTime::now(),
            path,
            &body.to_string(),
            &[],
        )
        .await;
        let (err, got) = c.read_all().await.unwrap_err();
        assert_eq!(err, "eof");
        assert_eq!(frames(&got).len(), 2);
        // a frame that is no JSON, then the stream goes on
        m.script(vec![Behavior::fault(Fault::BadEvent).after(1)]);
        let r = call_signed(&m, path, &body, &[]).await;
        let f = frames(&r.body);
        assert_eq!(f[1].1, b"{not json");
        assert!(serde_json::from_slice::<Value>(&f[2].1).is_ok());
    }
    // no_finish / no_terminator on ConverseStream
    m.script(vec![
        Behavior::fault(Fault::NoFinish),
        Behavior::fault(Fault::NoTerminator),
    ]);
    let r = call_signed(&m, CONVERSE_STREAM, &converse_req(), &[]).await;
    let types: Vec<String> = events(&r.body).into_iter().map(|(t, _)| t).collect();
    assert!(
        !types.contains(&"messageStop".to_string()) && !types.contains(&"metadata".to_string())
    );
    let r = call_signed(&m, CONVERSE_STREAM, &converse_req(), &[]).await;
    let types: Vec<String> = events(&r.body).into_iter().map(|(t, _)| t).collect();
    assert_eq!(types.last().map(String::as_str), Some("messageStop"));
    // an unknown exception name is a 400 from the mock itself
    let r = call_signed(
        &m,
        CONVERSE_STREAM,
        &converse_req(),
        &[("x-mock-behavior", r#"{"bedrock_exception":"nope"}"#)],
    )
    .await;
    assert_eq!(r.status, 400);
}
