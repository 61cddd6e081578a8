//! The Responses door (`POST /v1/responses`) over every upstream protocol,
//! over real HTTP: text, tool loops (function and custom tools), JSON
//! output, usage, streams with their full event sequence, broken streams,
//! stored responses and `previous_response_id`, the passthrough to a
//! Responses-capable deployment, and Codex's own requests.

mod common;

use serde_json::{json, Value};
use switchyard_mock::{Behavior, Fault};

const ALL: &str = r#"
providers:
  oa: { protocol: openai, base_url: "{mock}/v1" }
  rs: { protocol: openai, base_url: "{mock}/v1" }
  an: { protocol: anthropic, base_url: "{mock}", keys: [{ env: TEST_KEY }] }
  gm: { protocol: gemini, base_url: "{mock}", keys: [{ env: TEST_KEY }] }
  az: { protocol: azure, base_url: "{mock}", api_version: 2024-10-21, keys: [{ env: TEST_KEY }] }
models:
  - { id: oa/gpt, provider: oa, model: gpt-4o-mini, max_output_tokens: 1000, capabilities: [tools, streaming, json_schema, prefill] }
  - { id: rs/gpt, provider: rs, model: gpt-5.5, capabilities: [tools, streaming, responses] }
  - { id: an/claude, provider: an, model: claude-sonnet-4-5, max_output_tokens: 2048 }
  - { id: gm/gemini, provider: gm, model: gemini-2.5-flash, max_output_tokens: 4096 }
  - { id: az/gpt, provider: az, model: my-gpt4o }
  - { id: az/resp, provider: az, model: my-gpt5, capabilities: [tools, streaming, responses] }
routes:
  chat: { targets: [oa/gpt], on_stream_interrupt: error }
"#;

/// Every translated lane: (deployment, provider word in the mock's answer, upstream model).
const LANES: [(&str, &str, &str); 4] = [
    ("oa/gpt", "openai", "gpt-4o-mini"),
    ("an/claude", "anthropic", "claude-sonnet-4-5"),
    ("gm/gemini", "gemini", "gemini-2.5-flash"),
    ("az/gpt", "openai", "my-gpt4o"),
];

fn answer(provider: &str) -> String {
    format!("Hello from the mock {provider} provider.")
}

async fn create(h: &common::Harness, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(h.url("/v1/responses"))
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// SSE body → (event type, data) pairs.
fn events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let name = e
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .unwrap_or_default()
                .to_owned();
            let data = e
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .map(|d| serde_json::from_str(d).unwrap())
                .unwrap_or_default();
            (name, data)
        })
        .collect()
}

fn text_of(evs: &[(String, Value)]) -> String {
    evs.iter()
        .filter(|(n, _)| n == "response.output_text.delta")
        .map(|(_, d)| d["delta"].as_str().unwrap().to_owned())
        .collect()
}

fn output_text(body: &Value) -> String {
    body["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "message")
        .flat_map(|i| i["content"].as_array().unwrap().clone())
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect()
}

fn assert_well_numbered(evs: &[(String, Value)], body: &str) {
    for (i, (name, d)) in evs.iter().enumerate() {
        assert_eq!(d["type"].as_str(), Some(name.as_str()), "{body}");
        assert_eq!(d["sequence_number"], i as u64, "event {i} of {body}");
    }
}

#[tokio::test]
async fn text_from_every_upstream_stream_and_not() {
    let h = common::start(ALL).await;
    for (dep, provider, model) in LANES {
        let resp = create(
            &h,
            json!({"model": dep, "instructions": "Be brief.", "input": "Hi"}),
        )
        .await;
        assert_eq!(resp.status(), 200, "{dep}");
        assert_eq!(resp.headers()["x-switchyard-deployment"], dep);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["object"], "response", "{dep}: {body}");
        assert!(body["id"].as_str().unwrap().starts_with("resp_"));
        assert_eq!(body["status"], "completed");
        assert_eq!(body["model"], model, "{dep}");
        assert_eq!(output_text(&body), answer(provider), "{dep}: {body}");
        assert_eq!(body["usage"]["output_tokens"], 6, "{dep}: {body}");
        assert!(body["usage"]["input_tokens"].as_u64().unwrap() > 0);
        assert_eq!(body["instructions"], "Be brief.");

        let resp = create(&h, json!({"model": dep, "input": "Hi", "stream": true})).await;
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let sse = resp.text().await.unwrap();
        let evs = events(&sse);
        assert_well_numbered(&evs, &sse);
        let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names[..4],
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added"
            ],
            "{dep}: {sse}"
        );
        assert_eq!(
            names[names.len() - 4..],
            [
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed"
            ],
            "{dep}: {sse}"
        );
        assert_eq!(text_of(&evs), answer(provider), "{dep}");
        let done = &evs.last().unwrap().1["response"];
        assert_eq!(done["usage"]["output_tokens"], 6, "{dep}: {done}");
        assert_eq!(output_text(done), answer(provider));
        // One response id all along.
        assert_eq!(evs[0].1["response"]["id"], done["id"]);
    }
}

#[tokio::test]
async fn a_function_tool_loop_through_every_upstream() {
    let h = common::start(ALL).await;
    let tools = json!([{"type": "function", "name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}, "strict": false}]);
    for (dep, _, _) in LANES {
        for stream in [false, true] {
            let resp = create(&h, json!({"model": dep, "input": "Weather in Paris?", "tools": tools, "stream": stream})).await;
            let first = if stream {
                let sse = resp.text().await.unwrap();
                let evs = events(&sse);
                assert_well_numbered(&evs, &sse);
                assert!(
                    evs.iter()
                        .any(|(n, _)| n == "response.function_call_arguments.delta"),
                    "{dep}: {sse}"
                );
                evs.last().unwrap().1["response"].clone()
            } else {
                resp.json::<Value>().await.unwrap()
            };
            assert_eq!(first["status"], "completed", "{dep}: {first}");
            let call = first["output"]
                .as_array()
                .unwrap()
                .iter()
                .find(|i| i["type"] == "function_call")
                .unwrap_or_else(|| panic!("{dep} stream={stream}: {first}"))
                .clone();
            assert_eq!(call["name"], "get_weather");
            let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
            assert_eq!(args, json!({"city": "mock"}), "{dep}");
            let second: Value = create(&h, json!({
                "model": dep, "tools": tools, "store": false,
                "input": [
                    {"role": "user", "content": "Weather in Paris?"},
                    {"type": "function_call", "call_id": call["call_id"], "name": "get_weather", "arguments": call["arguments"]},
                    {"type": "function_call_output", "call_id": call["call_id"], "output": "18C and sunny"}
                ]
            }))
            .await
            .json()
            .await
            .unwrap();
            assert_eq!(
                output_text(&second),
                "Tool result received: 18C and sunny",
                "{dep}: {second}"
            );
        }
    }
}

/// Codex's tools on a deployment without the Responses API: `apply_patch`
/// (custom) becomes a one-string function and comes back as a
/// `custom_tool_call`; `web_search` and other hosted tools are left out and
/// named; a forced hosted tool is refused.
#[tokio::test]
async fn custom_tools_come_back_as_custom_calls_and_hosted_ones_are_named() {
    let h = common::start(ALL).await;
    let tools = json!([
        {"type": "custom", "name": "apply_patch", "description": "Apply a patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
        {"type": "web_search", "external_web_access": false},
        {"type": "file_search", "vector_store_ids": ["vs_1"]}
    ]);
    for (dep, _, _) in LANES {
        let resp = create(&h, json!({"model": dep, "input": "Patch it", "tools": tools, "tool_choice": {"type": "custom", "name": "apply_patch"}})).await;
        assert_eq!(resp.status(), 200, "{dep}");
        // Anthropic runs the web search itself (see the web_search test).
        let dropped = if dep == "an/claude" {
            "file_search"
        } else {
            "web_search,file_search"
        };
        assert_eq!(
            resp.headers()["x-switchyard-dropped-tools"],
            dropped,
            "{dep}"
        );
        let body: Value = resp.json().await.unwrap();
        let call = body["output"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["type"] == "custom_tool_call")
            .unwrap_or_else(|| panic!("{dep}: {body}"))
            .clone();
        assert_eq!(call["name"], "apply_patch");
        assert_eq!(call["input"], "mock", "{dep}: {call}");
        let d = h.decisions().last().unwrap().clone();
        let logged: Vec<&str> = d["dropped_tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert_eq!(logged.join(","), dropped, "{d}");
    }
    // What the OpenAI upstream saw: a function with one string parameter.
    let sent = h
        .mock
        .requests()
        .into_iter()
        .find(|r| r.path_and_query == "/v1/chat/completions")
        .unwrap()
        .json
        .unwrap();
    assert_eq!(sent["tools"].as_array().unwrap().len(), 1, "{sent}");
    assert_eq!(sent["tools"][0]["function"]["name"], "apply_patch");
    assert_eq!(
        sent["tools"][0]["function"]["parameters"]["properties"]["input"]["type"],
        "string"
    );
    // Forcing a hosted tool the deployment cannot run is the client's error.
    let resp = create(&h, json!({"model": "oa/gpt", "input": "Search", "tools": tools, "tool_choice": {"type": "file_search"}})).await;
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_request");
    assert_eq!(body["error"]["param"], "tool_choice");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("file_search"));
}

#[tokio::test]
async fn json_schema_output_from_every_upstream() {
    let h = common::start(ALL).await;
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false});
    for (dep, _, _) in LANES {
        // The mock answers this text where the upstream has a JSON mode;
        // Anthropic's forced tool gets arguments from the schema instead.
        let mock = json!({"mock": {"text": "{\"city\":\"Paris\"}"}});
        let resp = create(&h, json!({"model": dep, "input": "City?", "provider_options": mock, "text": {"format": {"type": "json_schema", "name": "city", "schema": schema, "strict": true}}})).await;
        assert_eq!(resp.status(), 200, "{dep}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["text"]["format"]["type"], "json_schema", "{body}");
        let answer: Value = serde_json::from_str(&output_text(&body))
            .unwrap_or_else(|e| panic!("{dep}: not JSON ({e}): {body}"));
        assert!(answer["city"].is_string(), "{dep}: {answer}");
    }
    let sent = h.mock.requests()[0].json.clone().unwrap();
    assert_eq!(sent["response_format"]["type"], "json_schema");
    assert_eq!(sent["response_format"]["json_schema"]["schema"], schema);
}

/// A stream that breaks after its first byte, from every upstream, ends
/// with `error` then `response.failed` (the route says not to resume).
#[tokio::test]
async fn a_broken_stream_from_every_upstream_ends_with_response_failed() {
    let h = common::start(ALL).await;
    for (dep, _, _) in LANES {
        let sse = create(&h, json!({"model": dep, "input": "Hi", "stream": true, "provider_options": {"mock": {"fault": "cut", "after_events": 3}}}))
            .await
            .text()
            .await
            .unwrap();
        let evs = events(&sse);
        assert_well_numbered(&evs, &sse);
        let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names[names.len() - 2..],
            ["error", "response.failed"],
            "{dep}: {sse}"
        );
    }
}

#[tokio::test]
async fn a_broken_stream_ends_with_error_then_response_failed() {
    let h = common::start(ALL).await;
    h.mock.set_default(Behavior::fault(Fault::Cut).after(3));
    let sse = create(&h, json!({"model": "chat", "input": "Hi", "stream": true}))
        .await
        .text()
        .await
        .unwrap();
    let evs = events(&sse);
    assert_well_numbered(&evs, &sse);
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names[names.len() - 2..],
        ["error", "response.failed"],
        "{sse}"
    );
    assert!(!names.contains(&"response.completed"), "{sse}");
    let failed = &evs.last().unwrap().1["response"];
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"]["code"], "server_error");
    assert_eq!(evs[0].1["response"]["id"], failed["id"]);
}

#[tokio::test]
async fn a_cut_stream_is_resumed_inside_the_same_response() {
    let h =
        common::start(&ALL.replace("on_stream_interrupt: error", "on_stream_interrupt: resume"))
            .await;
    h.mock.script(vec![Behavior::fault(Fault::Cut).after(3)]);
    let sse = create(&h, json!({"model": "chat", "input": "Hi", "stream": true}))
        .await
        .text()
        .await
        .unwrap();
    let evs = events(&sse);
    assert_well_numbered(&evs, &sse);
    assert_eq!(text_of(&evs), answer("openai"), "{sse}");
    assert_eq!(
        evs.iter().filter(|(n, _)| n == "response.created").count(),
        1
    );
    assert_eq!(evs.last().unwrap().0, "response.completed", "{sse}");
    assert_eq!(
        output_text(&evs.last().unwrap().1["response"]),
        answer("openai")
    );
    let d = h.decision(0).await;
    assert_eq!(d["attempts"][1]["resumed"], true, "{d}");
}

#[tokio::test]
async fn stored_responses_continue_on_any_deployment_and_can_be_read_and_deleted() {
    let h = common::start(ALL).await;
    let first: Value = create(
        &h,
        json!({"model": "an/claude", "instructions": "Be brief.", "input": "My name is Ada."}),
    )
    .await
    .json()
    .await
    .unwrap();
    let id = first["id"].as_str().unwrap().to_owned();
    // Continued on another deployment and protocol: the history goes along,
    // the instructions do not.
    let second = create(&h, json!({"model": "gm/gemini", "previous_response_id": id, "input": "What is my name?", "stream": true})).await;
    assert_eq!(second.status(), 200);
    let evs = events(&second.text().await.unwrap());
    let second_id = evs.last().unwrap().1["response"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let sent = h.mock.requests().last().unwrap().json.clone().unwrap();
    let contents = sent["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 3, "{sent}");
    assert_eq!(contents[0]["parts"][0]["text"], "My name is Ada.");
    assert_eq!(contents[1]["role"], "model");
    assert_eq!(contents[1]["parts"][0]["text"], answer("anthropic"));
    assert!(
        sent.get("systemInstruction").is_none(),
        "instructions are not inherited: {sent}"
    );
    // A streamed answer is stored too, and chains on.
    let third = create(
        &h,
        json!({"model": "oa/gpt", "previous_response_id": second_id, "input": "And again?"}),
    )
    .await;
    assert_eq!(third.status(), 200);
    let sent = h.mock.requests().last().unwrap().json.clone().unwrap();
    assert_eq!(sent["messages"].as_array().unwrap().len(), 5, "{sent}");
    // GET returns it as the client got it; DELETE removes it.
    let got: Value = reqwest::get(h.url(&format!("/v1/responses/{id}")))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got, first);
    let c = reqwest::Client::new();
    let del = c
        .delete(h.url(&format!("/v1/responses/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(del.status(), 200);
    assert_eq!(del.json::<Value>().await.unwrap()["deleted"], true);
    assert_eq!(
        reqwest::get(h.url(&format!("/v1/responses/{id}")))
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(
        c.delete(h.url(&format!("/v1/responses/{id}")))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    // Unknown (or deleted) previous_response_id: 400 naming the param.
    let resp = create(
        &h,
        json!({"model": "oa/gpt", "previous_response_id": id, "input": "Hi"}),
    )
    .await;
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["param"], "previous_response_id");
    assert_eq!(body["error"]["code"], "invalid_request");
    // store: false keeps nothing.
    let body: Value = create(
        &h,
        json!({"model": "oa/gpt", "store": false, "input": "Hi"}),
    )
    .await
    .json()
    .await
    .unwrap();
    let gone = reqwest::get(h.url(&format!("/v1/responses/{}", body["id"].as_str().unwrap())))
        .await
        .unwrap();
    assert_eq!(gone.status(), 404);
}

/// To a deployment that serves the Responses API itself, the body goes to
/// its `/responses` as it came (model aside), the answer comes back as the
/// upstream wrote it, and items the IR cannot hold pass too.
#[tokio::test]
async fn a_responses_deployment_gets_the_request_as_it_came() {
    let h = common::start(ALL).await;
    let body = json!({"model": "rs/gpt", "input": [{"type": "item_reference", "id": "msg_1"}, {"role": "user", "content": "Hi"}], "store": false, "prompt_cache_key": "k-1", "include": ["reasoning.encrypted_content"], "client_metadata": {"x": 1}});
    let resp = create(&h, body.clone()).await;
    assert_eq!(resp.status(), 200);
    let got: Value = resp.json().await.unwrap();
    assert_eq!(got["model"], "gpt-5.5");
    let rec = h.mock.requests()[0].clone();
    assert_eq!(rec.path_and_query, "/v1/responses");
    let sent = rec.json.unwrap();
    let mut expected = body.clone();
    expected["model"] = json!("gpt-5.5");
    assert_eq!(sent, expected);
    // Azure's Responses API: the resource's /openai/v1/responses, the
    // deployment named in the body, the key in `api-key`.
    let mut az = body.clone();
    az["model"] = json!("az/resp");
    assert_eq!(create(&h, az).await.status(), 200);
    let rec = h.mock.requests().last().unwrap().clone();
    assert_eq!(rec.path_and_query, "/openai/v1/responses");
    assert_eq!(rec.json.as_ref().unwrap()["model"], "my-gpt5");
    assert!(rec.header("api-key").is_some());
    // The same request to a translating deployment cannot be expressed.
    let mut other = body.clone();
    other["model"] = json!("oa/gpt");
    let resp = create(&h, other).await;
    assert_eq!(resp.status(), 400);
    assert!(resp.text().await.unwrap().contains("item_reference"));
    // Streams pass through event by event, numbered by the upstream.
    let sse = create(
        &h,
        json!({"model": "rs/gpt", "input": "Hi", "stream": true}),
    )
    .await
    .text()
    .await
    .unwrap();
    let evs = events(&sse);
    assert_well_numbered(&evs, &sse);
    assert_eq!(evs.last().unwrap().0, "response.completed");
    let d = h.decision(3).await;
    assert_eq!(
        d["tokens"]["output"],
        evs.last().unwrap().1["response"]["usage"]["output_tokens"],
        "{d}"
    );
}

/// Codex's own requests (recorded from the CLI, `fixtures/agents/codex/`)
/// through every upstream protocol.
#[tokio::test]
async fn codex_requests_complete_a_tool_loop_through_every_upstream() {
    let h = common::start(ALL).await;
    let load = |name: &str| -> Value {
        let path = format!(
            "{}/../../fixtures/agents/codex/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let rec: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        rec["body"].clone()
    };
    let first = load("tool_loop_01_responses_function_call");
    let second = load("tool_loop_02_responses_function_call_output");
    let mut lanes: Vec<&str> = LANES.iter().map(|l| l.0).collect();
    lanes.push("rs/gpt");
    for dep in lanes {
        let mut body = first.clone();
        body["model"] = json!(dep);
        let resp = create(&h, body).await;
        assert_eq!(resp.status(), 200, "{dep}");
        let sse = resp.text().await.unwrap();
        let evs = events(&sse);
        assert_eq!(evs.last().unwrap().0, "response.completed", "{dep}: {sse}");
        assert!(
            evs.iter().any(|(n, d)| n == "response.output_item.done"
                && (d["item"]["type"] == "function_call"
                    || d["item"]["type"] == "custom_tool_call")),
            "{dep}: {sse}"
        );
        let mut body = second.clone();
        body["model"] = json!(dep);
        let resp = create(&h, body).await;
        assert_eq!(resp.status(), 200, "{dep}");
        let sse = resp.text().await.unwrap();
        let evs = events(&sse);
        assert_eq!(evs.last().unwrap().0, "response.completed", "{dep}: {sse}");
        assert!(text_of(&evs).contains("switchyard-tool-ok"), "{dep}: {sse}");
    }
}

/// A client nobody here wrote: async-openai's typed Responses API (its
/// types fail on a missing required field or an unknown event shape).
#[tokio::test]
async fn async_openai_reads_every_answer_and_event() {
    use async_openai::types::responses::{CreateResponse, ResponseStreamEvent};
    use futures_util::StreamExt;
    let h = common::start(ALL).await;
    let client = async_openai::Client::with_config(
        async_openai::config::OpenAIConfig::new()
            .with_api_base(h.url("/v1"))
            .with_api_key("x"),
    );
    let tools = json!([{"type": "function", "name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}, "strict": false}]);
    let mut lanes: Vec<(&str, String)> = LANES.iter().map(|l| (l.0, answer(l.1))).collect();
    lanes.push(("rs/gpt", answer("openai")));
    for (dep, text) in lanes {
        let req: CreateResponse =
            serde_json::from_value(json!({"model": dep, "input": "Hi"})).unwrap();
        let r = client
            .responses()
            .create(req)
            .await
            .unwrap_or_else(|e| panic!("{dep}: {e}"));
        assert_eq!(r.output_text().as_deref(), Some(text.as_str()), "{dep}");
        assert!(r.usage.is_some(), "{dep}");
        let req: CreateResponse = serde_json::from_value(
            json!({"model": dep, "input": "Weather in Paris?", "tools": tools}),
        )
        .unwrap();
        let mut stream = client.responses().create_stream(req).await.unwrap();
        let (mut n, mut completed, mut calls) = (0, false, 0);
        while let Some(ev) = stream.next().await {
            let ev = ev.unwrap_or_else(|e| panic!("{dep}: event {n}: {e}"));
            n += 1;
            match ev {
                ResponseStreamEvent::ResponseFunctionCallArgumentsDone(_) => calls += 1,
                ResponseStreamEvent::ResponseCompleted(_) => completed = true,
                _ => {}
            }
        }
        assert!(completed && calls == 1, "{dep}: {n} events, {calls} calls");
    }
}

/// `web_search` becomes the deployment's own search where it has one:
/// Anthropic's server tool, Gemini's Google Search (only without function
/// tools, which Gemini will not combine with it); elsewhere it is named as
/// dropped.
#[tokio::test]
async fn web_search_becomes_the_providers_own_search() {
    let h = common::start(ALL).await;
    let search = json!({"type": "web_search"});
    let func = json!({"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}});
    let resp = create(
        &h,
        json!({"model": "an/claude", "input": "News?", "tools": [search, func]}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("x-switchyard-dropped-tools").is_none());
    let sent = h.mock.requests().last().unwrap().json.clone().unwrap();
    assert!(
        sent["tools"]
            .as_array()
            .unwrap()
            .contains(&json!({"type": "web_search_20250305", "name": "web_search"})),
        "{sent}"
    );
    let resp = create(
        &h,
        json!({"model": "gm/gemini", "input": "News?", "tools": [search]}),
    )
    .await;
    assert!(resp.headers().get("x-switchyard-dropped-tools").is_none());
    let sent = h.mock.requests().last().unwrap().json.clone().unwrap();
    assert_eq!(sent["tools"], json!([{"googleSearch": {}}]), "{sent}");
    let resp = create(
        &h,
        json!({"model": "gm/gemini", "input": "News?", "tools": [search, func]}),
    )
    .await;
    assert_eq!(resp.headers()["x-switchyard-dropped-tools"], "web_search");
    let sent = h.mock.requests().last().unwrap().json.clone().unwrap();
    assert!(
        sent["tools"][0].get("functionDeclarations").is_some(),
        "{sent}"
    );
    assert_eq!(sent["tools"].as_array().unwrap().len(), 1);
}

/// Codex sends its encrypted reasoning items back on the next turn: to a
/// deployment that serves the Responses API they go byte for byte; every
/// other deployment gets the conversation without them (never a blob it
/// could not read) and answers.
#[tokio::test]
async fn encrypted_reasoning_survives_to_openai_and_is_dropped_elsewhere() {
    let h = common::start(ALL).await;
    let path = format!(
        "{}/../../fixtures/agents/codex/gpt55_reasoning_02_responses_reasoning_replay.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let blob = rec["body"]["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "reasoning")
        .unwrap()["encrypted_content"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut lanes: Vec<&str> = LANES.iter().map(|l| l.0).collect();
    lanes.push("rs/gpt");
    for dep in lanes {
        let mut body = rec["body"].clone();
        body["model"] = json!(dep);
        let resp = create(&h, body).await;
        assert_eq!(resp.status(), 200, "{dep}");
        let sse = resp.text().await.unwrap();
        assert_eq!(
            events(&sse).last().unwrap().0,
            "response.completed",
            "{dep}: {sse}"
        );
        let sent = h.mock.requests().last().unwrap().body.clone();
        let sent = String::from_utf8_lossy(&sent);
        assert_eq!(sent.contains(&blob), dep == "rs/gpt", "{dep}: {sent}");
    }
}

/// A stream that continues a stored conversation and breaks is resumed with
/// that conversation, not just the request's own input.
#[tokio::test]
async fn a_resumed_stream_keeps_the_stored_conversation() {
    let h =
        common::start(&ALL.replace("on_stream_interrupt: error", "on_stream_interrupt: resume"))
            .await;
    let first: Value = create(&h, json!({"model": "chat", "input": "My name is Ada."}))
        .await
        .json()
        .await
        .unwrap();
    h.mock.script(vec![Behavior::fault(Fault::Cut).after(3)]);
    let sse = create(&h, json!({"model": "chat", "previous_response_id": first["id"], "input": "Hi", "stream": true}))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(
        events(&sse).last().unwrap().0,
        "response.completed",
        "{sse}"
    );
    let reqs = h.mock.requests();
    let continuation = reqs.last().unwrap().json.clone().unwrap();
    let msgs = continuation["messages"].as_array().unwrap();
    // history (user, assistant), this turn's user, the prefill.
    assert_eq!(msgs.len(), 4, "{continuation}");
    assert_eq!(msgs[0]["content"], "My name is Ada.");
    assert_eq!(msgs[3]["role"], "assistant");
}

/// Two tenants of one gateway: (client id, virtual key).
const TENANTS: [(&str, &str); 2] = [("team", "key-team"), ("team/sub", "key-sub")];

fn with_tenants() -> String {
    let sha = |k: &str| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(k.as_bytes()));
    let clients: String = TENANTS
        .iter()
        .map(|(id, key)| format!("  - {{ id: \"{id}\", key_sha256: \"{}\" }}\n", sha(key)))
        .collect();
    format!("{ALL}clients:\n{clients}")
}

async fn create_as(h: &common::Harness, key: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(h.url("/v1/responses"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// The request the upstream got that carried `previous_response_id: id`, if any.
fn forwarded_with(h: &common::Harness, id: &str) -> usize {
    h.mock
        .requests()
        .iter()
        .filter(|r| {
            r.json
                .as_ref()
                .is_some_and(|j| j["previous_response_id"] == id)
        })
        .count()
}

/// A refusal of `previous_response_id`, as for an id that never existed.
async fn refused_as_unknown(r: reqwest::Response, id: &str) {
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_request", "{body}");
    assert_eq!(body["error"]["param"], "previous_response_id", "{body}");
    assert_eq!(
        body["error"]["message"],
        format!("Previous response with id '{id}' not found."),
        "no hint that someone else has it: {body}"
    );
}

/// Contract §8: a `previous_response_id` belongs to the client it was
/// given to. On the passthrough (stream or not) the upstream's ids are
/// recorded as their client's and forwarded for that client only; another
/// client naming one gets the 400 of an unknown id and the upstream never
/// sees it; the gateway's own ids are refused the same way.
#[tokio::test]
async fn another_clients_previous_response_id_is_refused_and_never_reaches_the_upstream() {
    let h = common::start(&with_tenants()).await;
    let [(_, a), (_, b)] = TENANTS;
    // The passthrough, a whole answer: the upstream's id.
    let first: Value = create_as(
        &h,
        a,
        json!({"model": "rs/gpt", "input": "My PIN is 4711."}),
    )
    .await
    .json()
    .await
    .unwrap();
    let upstream_id = first["id"].as_str().unwrap().to_owned();
    // A streamed one: its id comes in `response.created`.
    let sse = create_as(
        &h,
        a,
        json!({"model": "rs/gpt", "input": "Hi", "stream": true}),
    )
    .await
    .text()
    .await
    .unwrap();
    let streamed_id = events(&sse)[0].1["response"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The gateway's own (a translated answer).
    let translated: Value = create_as(
        &h,
        a,
        json!({"model": "oa/gpt", "input": "My PIN is 4711."}),
    )
    .await
    .json()
    .await
    .unwrap();
    let own_id = translated["id"].as_str().unwrap().to_owned();
    for id in [&upstream_id, &streamed_id] {
        // The owner continues it on the passthrough: forwarded as it came.
        let r = create_as(
            &h,
            a,
            json!({"model": "rs/gpt", "previous_response_id": id, "input": "And?"}),
        )
        .await;
        assert_eq!(r.status(), 200, "{id}");
        assert_eq!(forwarded_with(&h, id), 1, "{id}");
        // Anyone else: refused before any upstream, stream or not, on any
        // deployment.
        for (model, stream) in [
            ("rs/gpt", false),
            ("rs/gpt", true),
            ("az/resp", false),
            ("oa/gpt", false),
        ] {
            let before = h.mock.request_count();
            let r = create_as(&h, b, json!({"model": model, "previous_response_id": id, "input": "What is my PIN?", "stream": stream})).await;
            refused_as_unknown(r, id).await;
            assert_eq!(h.mock.request_count(), before, "{model}: no upstream call");
        }
        assert_eq!(
            forwarded_with(&h, id),
            1,
            "{id} reached the upstream for its owner only"
        );
    }
    // The gateway's own id: continued for its owner, refused to the other.
    let r = create_as(
        &h,
        a,
        json!({"model": "an/claude", "previous_response_id": own_id, "input": "And?"}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let before = h.mock.request_count();
    for model in ["oa/gpt", "rs/gpt"] {
        let r = create_as(
            &h,
            b,
            json!({"model": model, "previous_response_id": own_id, "input": "What is my PIN?"}),
        )
        .await;
        refused_as_unknown(r, &own_id).await;
    }
    // An id nobody was given is refused alike, even on the passthrough
    // (the upstream may have it from someone else's key).
    let r = create_as(
        &h,
        a,
        json!({"model": "rs/gpt", "previous_response_id": "resp_abc", "input": "Hi"}),
    )
    .await;
    refused_as_unknown(r, "resp_abc").await;
    // Nor can it be slipped in as a provider option.
    let r = create_as(&h, b, json!({"model": "rs/gpt", "input": "Hi", "provider_options": {"previous_response_id": upstream_id}})).await;
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["error"]["param"], "provider_options.previous_response_id",
        "{body}"
    );
    assert_eq!(
        h.mock.request_count(),
        before,
        "none of these reached an upstream"
    );
    assert_eq!(forwarded_with(&h, &upstream_id), 1);
}

/// Client `team` can never name a response of client `team/sub` (nor the
/// reverse): not by GET or DELETE, not as `previous_response_id`, however
/// the id is written; what it gets is the answer to an unknown id.
#[tokio::test]
async fn team_and_team_sub_never_reach_each_others_stored_responses() {
    let h = common::start(&with_tenants()).await;
    let [(_, team), (_, sub)] = TENANTS;
    let stored: Value = create_as(
        &h,
        sub,
        json!({"model": "oa/gpt", "input": "Sub's secret plan."}),
    )
    .await
    .json()
    .await
    .unwrap();
    let id = stored["id"].as_str().unwrap().to_owned();
    let c = reqwest::Client::new();
    let get = |key: &'static str, path: String| {
        let c = c.clone();
        let url = h.url(&format!("/v1/responses/{path}"));
        async move { c.get(url).bearer_auth(key).send().await.unwrap() }
    };
    let unknown: Value = get(team, "resp_nope".into()).await.json().await.unwrap();
    for path in [id.clone(), format!("sub%2F{id}")] {
        let r = get(team, path.clone()).await;
        assert_eq!(r.status(), 404, "GET {path}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], unknown["error"]["code"]);
        assert_eq!(body["error"]["param"], "id");
        let del = c
            .delete(h.url(&format!("/v1/responses/{path}")))
            .bearer_auth(team)
            .send()
            .await
            .unwrap();
        assert_eq!(del.status(), 404, "DELETE {path}");
    }
    for prev in [id.clone(), format!("sub/{id}")] {
        let before = h.mock.request_count();
        let r = create_as(
            &h,
            team,
            json!({"model": "oa/gpt", "previous_response_id": prev, "input": "What was the plan?"}),
        )
        .await;
        refused_as_unknown(r, &prev).await;
        assert_eq!(h.mock.request_count(), before);
    }
    // Still there for its owner.
    let mine = get(sub, id.clone()).await;
    assert_eq!(mine.status(), 200);
    assert_eq!(mine.json::<Value>().await.unwrap(), stored);
    // And the other way round: team's response is not team/sub's.
    let own: Value = create_as(
        &h,
        team,
        json!({"model": "oa/gpt", "input": "Team's plan."}),
    )
    .await
    .json()
    .await
    .unwrap();
    let own_id = own["id"].as_str().unwrap();
    assert_eq!(get(sub, own_id.to_owned()).await.status(), 404);
    assert_eq!(get(team, own_id.to_owned()).await.status(), 200);
}
