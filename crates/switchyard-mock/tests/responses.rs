//! OpenAI Responses API: wire shapes against the fixtures, answers, faults.

mod common;

use common::*;
use serde_json::{json, Value};
use switchyard_mock::{Behavior, Fault, MockServer};

fn fix_events(name: &str) -> Vec<(String, Value)> {
    sse_events(&fixture(&format!("openai-responses/{name}")))
}

/// Check the framing rules and return the events.
fn framed(body: &str) -> Vec<Value> {
    assert!(!body.contains("[DONE]"));
    assert!(body.starts_with("event: response.created\ndata: {\"type\":\"response.created\","));
    let evs = sse_events(body);
    for (i, (name, data)) in evs.iter().enumerate() {
        assert_eq!(data["type"], name.as_str(), "event name = data.type");
        assert_eq!(data["sequence_number"], i, "sequence_number on every event");
        assert_eq!(data, &order_2026(data), "type first, then alphabetical");
    }
    // compact JSON, one frame per event
    for frame in body.split("\n\n").filter(|f| !f.is_empty()) {
        let data = frame.split_once("\ndata: ").unwrap().1;
        assert_eq!(
            data,
            serde_json::from_str::<Value>(data).unwrap().to_string()
        );
    }
    evs.into_iter().map(|(_, d)| d).collect()
}

fn types(evs: &[Value]) -> Vec<String> {
    let mut t: Vec<String> = evs
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect();
    t.dedup();
    t
}

#[tokio::test]
async fn text_non_stream_matches_fixture() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let req = fixture_json("openai-responses/responses_text.request.json");
    let r = call(m.addr(), RESP, &[], &req).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("openai-version"), Some("2020-10-01"));
    let v = r.json();
    let fix = fixture_json("openai-responses/responses_text.response.json");
    assert_eq!(
        key_paths(&v),
        key_paths(&fix),
        "same keys in the same order"
    );
    // 2-space pretty, no trailing newline
    assert_eq!(r.text(), serde_json::to_string_pretty(&v).unwrap());
    assert!(v["id"].as_str().unwrap().starts_with("resp_"));
    assert!(v["output"][0]["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(v["model"], "gpt-4o-mini");
    assert_eq!(v["status"], "completed");
    assert_eq!(
        v["output"][0]["content"][0]["text"],
        "Hello from the mock openai provider."
    );
    assert!(r.text().contains("\"temperature\": 1.0"), "floats as 1.0");
    // "What's the weather like in SF?" = 30 chars → 7; 6 word pieces
    assert_eq!(
        v["usage"],
        json!({"input_tokens": 7, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 6, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 13})
    );
    // the short path, and non-ASCII escaped like the API
    let mut req = req;
    req["mock"] = json!({"text": "20°C"});
    let r = call(m.addr(), "/responses", &[], &req).await;
    assert!(r.text().contains(r#""text": "20\u00b0C""#), "{}", r.text());
    assert!(r.text().is_ascii());
}

#[tokio::test]
async fn function_call_non_stream_and_result() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let req = fixture_json("openai-responses/responses_function_call.request.json");
    let v = call(m.addr(), RESP, &[], &req).await.json();
    let mut fix = fixture_json("openai-responses/responses_function_call.response.json");
    fix.as_object_mut().unwrap().remove("billing");
    assert_eq!(
        sorted_paths(&v),
        sorted_paths(&fix),
        "recorder-sorted fixture"
    );
    // wire order of the item, as streamed in stream_function_call.sse
    let streamed = fix_events("stream_function_call.sse")
        .into_iter()
        .find(|(n, d)| n == "response.output_item.done" && d["item"]["type"] == "function_call")
        .unwrap()
        .1;
    let item = &v["output"][0];
    assert_eq!(key_paths(item), key_paths(&streamed["item"]));
    assert_eq!(item["type"], "function_call");
    assert_eq!(item["name"], "get_capital");
    assert_eq!(item["arguments"], r#"{"country":"mock"}"#);
    assert_eq!(item["status"], "completed");
    assert!(item["id"].as_str().unwrap().starts_with("fc_"));
    assert!(item["call_id"].as_str().unwrap().starts_with("call_"));
    // the tool is echoed flat in the API's order (its schema as sent)
    assert_eq!(tool_paths(&v["tools"]), tool_paths(&streamed_tools()));
    assert_eq!(v["tools"][0]["name"], "get_capital");

    let req = fixture_json("openai-responses/responses_function_call_output.request.json");
    let v = call(m.addr(), RESP, &[], &req).await.json();
    assert_eq!(
        v["output"][0]["content"][0]["text"],
        "Tool result received: Potato City"
    );

    // tool_choice none → text; a named function among several
    let mut req = fixture_json("openai-responses/responses_function_call.request.json");
    req["tool_choice"] = json!("none");
    let v = call(m.addr(), RESP, &[], &req).await.json();
    assert_eq!(v["output"][0]["type"], "message");
    req["tools"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "function", "name": "count",
        "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}));
    req["tool_choice"] = json!({"type": "function", "name": "count"});
    let v = call(m.addr(), RESP, &[], &req).await.json();
    assert_eq!(v["output"][0]["name"], "count");
    assert_eq!(v["output"][0]["arguments"], r#"{"n":1}"#);
    req["tool_choice"] = json!({"type": "allowed_tools", "mode": "required",
        "tools": [{"type": "mcp", "server_label": "x"}, {"type": "function", "name": "count"}]});
    let v = call(m.addr(), RESP, &[], &req).await.json();
    assert_eq!(v["output"][0]["name"], "count");
}

/// Key paths of echoed tools: the tool's own keys in order, its schema's sorted.
fn tool_paths(tools: &Value) -> (Vec<String>, Vec<String>) {
    let p = key_paths(tools);
    let (schema, mut own): (Vec<String>, Vec<String>) =
        p.into_iter().partition(|k| k.starts_with("[].parameters."));
    own.dedup();
    let mut schema: Vec<String> = schema
        .into_iter()
        .map(|k| {
            k.replace(".properties.country", ".properties.P")
                .replace(".properties.result", ".properties.P")
        })
        .collect();
    schema.sort();
    (own, schema)
}

fn streamed_tools() -> Value {
    fix_events("stream_function_call.sse")[0].1["response"]["tools"].clone()
}

#[tokio::test]
async fn text_stream_matches_fixture() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let req = fixture_json("openai-responses/stream_text.request.json");
    let r = call(m.addr(), RESP, &[], &req).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    let body = r.text();
    let ours = framed(&body);
    let fix: Vec<Value> = fix_events("stream_text.sse")
        .into_iter()
        .map(|e| e.1)
        .collect();
    assert_eq!(
        shapes(&ours),
        shapes(&fix),
        "every event shape and key order"
    );
    assert_eq!(types(&ours), types(&fix));
    // 2 + added + part + 6 deltas + text.done + part.done + item.done + completed
    assert_eq!(ours.len(), 14);
    assert_eq!(r.chunks.len(), 14, "flushed event by event");
    let text: String = ours
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Hello from the mock openai provider.");
    let done = ours.last().unwrap();
    assert_eq!(done["type"], "response.completed");
    assert_eq!(done["response"]["status"], "completed");
    assert_eq!(done["response"]["instructions"], "Answer directly.");
    assert_eq!(done["response"]["service_tier"], "default");
    assert_eq!(ours[0]["response"]["service_tier"], "auto");
    assert_eq!(ours[0]["response"]["usage"], Value::Null);
    // "Answer directly." + "What is 2+2?" = 28 chars → 7
    assert_eq!(done["response"]["usage"]["input_tokens"], 7);
    assert_eq!(done["response"]["usage"]["output_tokens"], 6);
    assert_eq!(
        done["response"]["output"][0]["content"][0]["text"],
        "Hello from the mock openai provider."
    );
    assert_eq!(ours[0]["response"]["id"], done["response"]["id"]);
}

#[tokio::test]
async fn function_call_stream_matches_fixture() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let req = fixture_json("openai-responses/stream_function_call.request.json");
    let body = call(m.addr(), RESP, &[], &req).await.text();
    let ours = framed(&body);
    // the fixture's item events (2025 order re-ordered to 2026), reasoning item left out
    let fix: Vec<Value> = fix_events("stream_function_call.sse")
        .into_iter()
        .map(|e| order_2026(&e.1))
        .filter(|e| e.get("response").is_none() && e["item"]["type"] != "reasoning")
        .collect();
    let item_events = |evs: &[Value]| -> Vec<Value> {
        evs.iter()
            .filter(|e| e.get("response").is_none())
            .cloned()
            .collect()
    };
    assert_eq!(shapes(&item_events(&ours)), shapes(&fix));
    assert_eq!(types(&item_events(&ours)), types(&fix));
    let args: String = ours
        .iter()
        .filter(|e| e["type"] == "response.function_call_arguments.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(args, r#"{"result":1}"#);
    let added = ours
        .iter()
        .find(|e| e["type"] == "response.output_item.added")
        .unwrap();
    assert_eq!(added["output_index"], 0);
    assert_eq!(added["item"]["arguments"], "");
    assert_eq!(added["item"]["status"], "in_progress");
    let done = ours.last().unwrap();
    assert_eq!(done["type"], "response.completed");
    assert_eq!(done["response"]["output"][0]["name"], "final_result");
    assert_eq!(done["response"]["tool_choice"], "required");
    assert_eq!(done["response"]["service_tier"], "flex", "echoed tier");
    assert_eq!(done["response"]["reasoning"]["effort"], "low");
    // the Response objects are those of the 2026 stream_text.sse, tools echoed as recorded
    let text_fix = fix_events("stream_text.sse");
    for e in [&ours[0], done] {
        let mut r = e["response"].clone();
        r["tools"] = json!([]);
        r["output"] = json!([]);
        let mut f = text_fix[if e == done { 13 } else { 0 }].1["response"].clone();
        f["tools"] = json!([]);
        f["output"] = json!([]);
        assert_eq!(key_paths(&r), key_paths(&f), "{}", e["type"]);
        assert_eq!(
            tool_paths(&e["response"]["tools"]),
            tool_paths(&streamed_tools())
        );
    }
}

#[tokio::test]
async fn reasoning_item_with_summary() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let h = [(
        "x-mock-behavior",
        r#"{"reasoning":"Let me think.","text":"Yes."}"#,
    )];
    let mut req = responses_req(false);
    req["include"] = json!(["reasoning.encrypted_content"]);
    let v = call(m.addr(), RESP, &h, &req).await.json();
    let fix = fixture_json("openai-responses/responses_reasoning.response.json");
    assert_eq!(key_paths(&v["output"]), key_paths(&fix["output"]));
    assert_eq!(v["output"][0]["type"], "reasoning");
    assert!(v["output"][0]["id"].as_str().unwrap().starts_with("rs_"));
    assert_eq!(
        v["output"][0]["summary"],
        json!([{"type": "summary_text", "text": "Let me think."}])
    );
    assert_eq!(v["output"][1]["content"][0]["text"], "Yes.");
    assert_eq!(v["usage"]["output_tokens_details"]["reasoning_tokens"], 3);
    assert_eq!(v["usage"]["output_tokens"], 4);
    // without include: no encrypted_content
    let v = call(m.addr(), RESP, &h, &responses_req(false)).await.json();
    assert_eq!(
        key_paths(&v["output"][0]),
        [
            ".id",
            ".type",
            ".summary",
            ".summary[].type",
            ".summary[].text"
        ]
    );

    req["stream"] = json!(true);
    let body = call(m.addr(), RESP, &h, &req).await.text();
    let ours = framed(&body);
    let fix: Vec<Value> = fix_events("stream_reasoning_summary.sse")
        .into_iter()
        .map(|e| order_2026(&e.1))
        .filter(|e| e["type"].as_str().unwrap().contains("reasoning_summary"))
        .collect();
    let summary_events: Vec<Value> = ours
        .iter()
        .filter(|e| e["type"].as_str().unwrap().contains("reasoning_summary"))
        .cloned()
        .collect();
    assert_eq!(shapes(&summary_events), shapes(&fix));
    assert_eq!(types(&summary_events), types(&fix));
    let t = types(&ours);
    assert_eq!(
        t[2..5],
        [
            "response.output_item.added",
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta"
        ]
    );
    let msg_added = ours
        .iter()
        .filter(|e| e["type"] == "response.output_item.added")
        .nth(1)
        .unwrap();
    assert_eq!(msg_added["output_index"], 1);
    assert_eq!(msg_added["item"]["type"], "message");
    let done = ours.last().unwrap();
    assert_eq!(
        done["response"]["output"][0]["summary"][0]["text"],
        "Let me think."
    );
    assert_eq!(done["response"]["output"][1]["content"][0]["text"], "Yes.");
}

#[tokio::test]
async fn codex_request_custom_tools_and_outputs() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    // Codex: instructions, reasoning items, function_call_output, then a new user turn.
    let req = fixture_json("openai-responses/responses_reasoning_codex.request.json");
    let ours = framed(&call(m.addr(), RESP, &[], &req).await.text());
    let done = &ours.last().unwrap()["response"];
    let item = &done["output"][0];
    assert_eq!(item["type"], "function_call");
    assert_eq!(item["name"], "shell_command", "first function tool");
    let args: Value = serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args["command"], "mock");
    // a custom tool named in tool_choice → custom_tool_call with input "mock"
    let mut req2 = req.clone();
    req2["stream"] = json!(false);
    req2["tool_choice"] = json!({"type": "custom", "name": "apply_patch"});
    let v = call(m.addr(), RESP, &[], &req2).await.json();
    let item = &v["output"][0];
    assert_eq!(
        key_paths(item),
        [".id", ".type", ".status", ".call_id", ".input", ".name"]
    );
    assert_eq!(item["type"], "custom_tool_call");
    assert_eq!(item["name"], "apply_patch");
    assert_eq!(item["input"], "mock");
    assert!(item["id"].as_str().unwrap().starts_with("ctc_"));
    // streamed custom call: input deltas
    req2["stream"] = json!(true);
    let ours = framed(&call(m.addr(), RESP, &[], &req2).await.text());
    let t = types(&ours);
    assert!(t.contains(&"response.custom_tool_call_input.delta".to_string()));
    let done_ev = ours
        .iter()
        .find(|e| e["type"] == "response.custom_tool_call_input.done")
        .unwrap();
    assert_eq!(done_ev["input"], "mock");
    // only custom tools offered: the custom one is called
    let only_custom = json!({"model": "gpt-5", "input": "patch it",
        "tools": [{"type": "custom", "name": "apply_patch"}, {"type": "web_search"}]});
    let v = call(m.addr(), RESP, &[], &only_custom).await.json();
    assert_eq!(v["output"][0]["type"], "custom_tool_call");
    // only hosted tools: text
    let hosted = json!({"model": "gpt-5", "input": "hi", "tools": [{"type": "web_search"}]});
    let v = call(m.addr(), RESP, &[], &hosted).await.json();
    assert_eq!(v["output"][0]["type"], "message");
    // custom_tool_call_output and part-array outputs are tool results
    let res = json!({"model": "gpt-5", "tools": [{"type": "custom", "name": "apply_patch"}],
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "patch"}]},
            {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "x"},
            {"type": "custom_tool_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "Done!"}]}]});
    let v = call(m.addr(), RESP, &[], &res).await.json();
    assert_eq!(
        v["output"][0]["content"][0]["text"],
        "Tool result received: Done!"
    );
}

#[tokio::test]
async fn faults_on_responses() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    // error envelopes: status, headers, body in wire order, byte length as recorded
    for name in [
        "error_400_invalid_request",
        "error_400_model_not_found",
        "error_400_previous_response_not_found",
        "error_429_insufficient_quota",
        "error_429_rate_limit",
    ] {
        let env = fixture_json(&format!("openai-responses/{name}.http.json"));
        let h = format!(r#"{{"fixture":"openai-responses/{name}"}}"#);
        let r = call(
            m.addr(),
            RESP,
            &[("x-mock-behavior", &h)],
            &responses_req(true),
        )
        .await;
        assert_eq!(
            u64::from(r.status),
            env["status"].as_u64().unwrap(),
            "{name}"
        );
        for (k, v) in env["headers"].as_object().unwrap() {
            if k != "content-length" {
                assert_eq!(r.header(k), v.as_str(), "{name} header {k}");
            }
        }
        if name == "error_400_invalid_request" {
            // a 2025 capture: its recorded content-length proves the format
            assert_eq!(r.header("content-length"), Some("236"));
        }
        assert_eq!(r.json(), env["body"], "{name}");
        assert_eq!(
            key_paths(&r.json()),
            [
                ".error",
                ".error.message",
                ".error.type",
                ".error.param",
                ".error.code"
            ],
            "{name}"
        );
        assert_eq!(r.text(), serde_json::to_string_pretty(&r.json()).unwrap());
    }

    // in-band error: `error` + `response.failed`, numbered on, as in stream_error_failed.sse
    m.script(vec![Behavior::fault(Fault::MidstreamError).after(2)]);
    let body = call(m.addr(), RESP, &[], &responses_req(true)).await.text();
    let ours = framed(&body);
    let fix = fix_events("stream_error_failed.sse");
    assert_eq!(
        types(&ours),
        types(&fix.iter().map(|e| e.1.clone()).collect::<Vec<_>>())
    );
    assert_eq!(ours[2], fix[2].1, "the fixture's error event");
    assert_eq!(ours[3]["response"]["status"], "failed");
    assert_eq!(ours[3]["response"]["error"], fix[3].1["response"]["error"]);
    assert_eq!(ours[3]["response"]["id"], ours[0]["response"]["id"]);
    m.script(vec![Behavior::fault(Fault::MidstreamError).after(5)]);
    let ours = framed(&call(m.addr(), RESP, &[], &responses_req(true)).await.text());
    assert_eq!(ours.len(), 7);
    assert_eq!(ours[5]["type"], "error");

    // cut after 3 events
    m.script(vec![Behavior::fault(Fault::Cut).after(3)]);
    let c = Conn::send(
        m.addr(),
        "POST",
        RESP,
        &[],
        &responses_req(true).to_string(),
    )
    .await
    .unwrap();
    let (err, got) = c.read_all().await.unwrap_err();
    assert_eq!(err, "eof");
    assert_eq!(sse_events(&String::from_utf8(got).unwrap()).len(), 3);

    // no_finish / no_terminator: no response.completed
    for f in [Fault::NoFinish, Fault::NoTerminator] {
        m.script(vec![Behavior::fault(f)]);
        let body = call(m.addr(), RESP, &[], &responses_req(true)).await.text();
        let ours = framed(&body);
        assert_eq!(ours.last().unwrap()["type"], "response.output_item.done");
    }

    // bad event, then the stream goes on
    m.script(vec![Behavior::fault(Fault::BadEvent).after(2)]);
    let body = call(m.addr(), RESP, &[], &responses_req(true)).await.text();
    assert_eq!(sse_data(&body)[2], "{not json");
    assert!(body.ends_with("}\n\n") && body.contains("event: response.completed\n"));

    // non-stream: malformed JSON, chunk delay, latency
    m.script(vec![Behavior::fault(Fault::MalformedJson)]);
    let r = call(m.addr(), RESP, &[], &responses_req(false)).await;
    assert_eq!(r.status, 200);
    assert!(serde_json::from_slice::<Value>(&r.body).is_err());
    m.script(vec![Behavior::default().chunk_delay(30).latency(50)]);
    let t0 = std::time::Instant::now();
    let r = call(m.addr(), RESP, &[], &responses_req(true)).await;
    assert!(t0.elapsed() >= std::time::Duration::from_millis(50 + 30 * 13));
    assert_eq!(sse_events(&r.text()).len(), 14);

    // keys: the OpenAI 401
    m.set_valid_keys(vec!["good".into()]);
    let r = call(
        m.addr(),
        RESP,
        &[("authorization", "Bearer bad")],
        &responses_req(false),
    )
    .await;
    assert_eq!(r.status, 401);
    assert_eq!(
        r.json(),
        fixture_json("openai/error_401_invalid_api_key.http.json")["body"]
    );
    let r = call(
        m.addr(),
        RESP,
        &[("authorization", "Bearer good")],
        &responses_req(false),
    )
    .await;
    assert_eq!(r.status, 200);
    m.set_valid_keys(vec![]);

    // the mock's own errors are Responses-shaped (pretty, no newline)
    let r = call(m.addr(), RESP, &[], &json!({"input": "hi"})).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["type"], "invalid_request_error");
    assert!(!r.text().ends_with('\n'));
}
