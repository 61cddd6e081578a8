use serde_json::{json, Value};

use super::{fixture, fixtures};
use crate::ir::{ChatResponse, FinishReason, ToolCall, Usage};
use crate::responses::*;

/// (file, text prefix, calls, finish, usage input/output/cached/reasoning)
const ANSWERS: &[(&str, &str, usize, FinishReason, [u64; 4])] = &[
    (
        "responses_function_call.response.json",
        "",
        1,
        FinishReason::ToolCalls,
        [40, 18, 0, 0],
    ),
    (
        "responses_function_call_output.response.json",
        "The capital of PotatoLand is Potato City.",
        0,
        FinishReason::Stop,
        [67, 11, 0, 0],
    ),
    (
        "responses_json_schema.response.json",
        r#"{"city":"Mexico City","country":"Mexico"}"#,
        0,
        FinishReason::Stop,
        [89, 16, 0, 0],
    ),
    (
        "responses_previous_response_id.response.json",
        "The weather in New York is sunny and 72°F.",
        0,
        FinishReason::Stop,
        [139, 14, 0, 0],
    ),
    (
        "responses_reasoning.response.json",
        "12 + 7 = 19\n19 × 3",
        0,
        FinishReason::Stop,
        [865, 163, 0, 128],
    ),
    (
        "responses_reasoning_replay.response.json",
        "Softly old fountains",
        0,
        FinishReason::Stop,
        [2087, 124, 2048, 0],
    ),
    (
        "responses_text.response.json",
        "I can't provide real-time updates",
        0,
        FinishReason::Stop,
        [14, 50, 0, 0],
    ),
];

/// The request each answer belongs to, when the folder has it.
fn request_of(name: &str) -> Option<String> {
    let req = name.replace(".response.json", ".request.json");
    std::path::Path::new(&format!("{}openai-responses/{req}", super::ROOT))
        .exists()
        .then_some(req)
}

fn extras_for(name: &str) -> ResponsesExtras {
    let mut x = match request_of(name) {
        Some(req) => decode_request(&fixture(&req)).unwrap().1,
        None => ResponsesExtras::default(),
    };
    if name == "responses_reasoning.response.json" {
        // its request (not recorded) had these
        x.include = vec!["reasoning.encrypted_content".into()];
        x.store = false;
        x.echo.store = false;
    }
    x
}

#[test]
fn every_answer_fixture_decodes() {
    let listed: Vec<&str> = ANSWERS.iter().map(|a| a.0).collect();
    for f in fixtures(".response.json") {
        // input_tokens.response.json answers /v1/responses/input_tokens.
        assert!(
            listed.contains(&f.as_str()) || f == "input_tokens.response.json",
            "{f} not covered"
        );
    }
    for &(f, text, calls, finish, [i, o, c, r]) in ANSWERS {
        let resp = decode_response(fixture(f).as_bytes()).unwrap_or_else(|e| panic!("{f}: {e:?}"));
        let v: Value = serde_json::from_str(&fixture(f)).unwrap();
        assert_eq!(resp.id, v["id"].as_str().unwrap(), "{f}");
        assert_eq!(resp.model, v["model"].as_str().unwrap(), "{f}");
        assert_eq!(resp.created, v["created_at"].as_u64().unwrap(), "{f}");
        assert!(
            resp.text.as_deref().unwrap_or_default().starts_with(text),
            "{f}"
        );
        assert_eq!(resp.text.is_none(), text.is_empty(), "{f}");
        assert_eq!(resp.tool_calls.len(), calls, "{f}");
        assert_eq!(resp.finish_reason, finish, "{f}");
        assert_eq!(resp.raw_finish_reason.as_deref(), Some("completed"), "{f}");
        let want = Usage {
            input_tokens: i,
            output_tokens: o,
            cached_input_tokens: c,
            cache_write_tokens: 0,
            reasoning_tokens: r,
        };
        assert_eq!(resp.usage, want, "{f}");
    }
}

#[test]
fn calls_and_reasoning_decode_in_detail() {
    let resp =
        decode_response(fixture("responses_function_call.response.json").as_bytes()).unwrap();
    assert_eq!(
        resp.tool_calls,
        [ToolCall {
            id: "call_YfwRsW8sUxDKipwyhWTzOXCA".into(),
            name: "get_capital".into(),
            arguments: r#"{"country":"PotatoLand"}"#.into(),
        }]
    );
    let resp = decode_response(fixture("responses_reasoning.response.json").as_bytes()).unwrap();
    assert!(resp
        .reasoning
        .as_deref()
        .unwrap()
        .starts_with("**Reporting final result**"));
    assert!(resp
        .reasoning_signature
        .as_deref()
        .unwrap()
        .starts_with("gAAAAABpPMlcH0HHEv5"));
}

/// Output items with ids reduced to their prefix (ids derive from the
/// response id and cannot equal the upstream's random ones) and `logprobs`
/// dropped (the 2025-06 capture lacks them).
fn normalized_output(v: &Value) -> Vec<Value> {
    let mut items = v["output"].as_array().unwrap().clone();
    for item in &mut items {
        let id = item["id"].as_str().unwrap();
        let prefix = id.split('_').next().unwrap().to_owned();
        item["id"] = prefix.into();
        for part in item["content"].as_array_mut().into_iter().flatten() {
            part.as_object_mut().unwrap().remove("logprobs");
        }
    }
    items
}

/// Fields the 2026 API added that the encoder does not write.
const NOT_WRITTEN: &[&str] = &[
    "billing",
    "completed_at",
    "frequency_penalty",
    "presence_penalty",
    "prompt_cache_retention",
];

#[test]
fn answers_re_encode_to_the_fixture() {
    for &(f, ..) in ANSWERS {
        let want: Value = serde_json::from_str(&fixture(f)).unwrap();
        let resp = decode_response(fixture(f).as_bytes()).unwrap();
        let x = extras_for(f);
        let id = want["id"].as_str().unwrap();
        let body = encode_response(&resp, id, &x);
        let got: Value = serde_json::from_slice(&body).unwrap();
        for k in [
            "id",
            "object",
            "created_at",
            "model",
            "status",
            "usage",
            "error",
            "incomplete_details",
        ] {
            assert_eq!(got[k], want[k], "{f}: {k}");
        }
        assert_eq!(
            normalized_output(&got),
            normalized_output(&want),
            "{f}: output"
        );
        for k in want.as_object().unwrap().keys() {
            assert!(
                got.get(k).is_some() || NOT_WRITTEN.contains(&k.as_str()),
                "{f}: `{k}` missing"
            );
        }
        if request_of(f).is_some() {
            for k in [
                "instructions",
                "tools",
                "tool_choice",
                "reasoning",
                "temperature",
                "top_p",
                "max_output_tokens",
                "parallel_tool_calls",
                "store",
                "previous_response_id",
                "truncation",
                "metadata",
                "user",
            ] {
                assert_eq!(got[k], want[k], "{f}: echoed `{k}`");
            }
            assert_eq!(
                got["text"]["format"]["type"], want["text"]["format"]["type"],
                "{f}"
            );
        }
        let text = String::from_utf8(body).unwrap();
        assert!(
            text.contains(r#""temperature":1.0"#) && text.contains(r#""top_p":1.0"#),
            "{f}: floats"
        );
    }
}

#[test]
fn a_plain_answer_re_encodes_to_the_whole_fixture() {
    let f = "responses_text.response.json";
    let mut want: Value = serde_json::from_str(&fixture(f)).unwrap();
    let resp = decode_response(fixture(f).as_bytes()).unwrap();
    let body = encode_response(&resp, want["id"].as_str().unwrap(), &extras_for(f));
    let mut got: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        got["output"][0]["id"], "msg_689a0b2545288193953c892439b42e2800b2e36c65a1fd4b",
        "the item id derives from the response id"
    );
    got["output"][0]["id"] = Value::Null;
    want["output"][0]["id"] = Value::Null;
    assert_eq!(got, want);
}

fn answer(finish: FinishReason) -> ChatResponse {
    ChatResponse {
        id: "up".into(),
        model: "claude-x".into(),
        created: 7,
        text: Some("partial".into()),
        finish_reason: finish,
        usage: Usage {
            input_tokens: 5,
            output_tokens: 16,
            cached_input_tokens: 2,
            cache_write_tokens: 0,
            reasoning_tokens: 3,
        },
        ..ChatResponse::default()
    }
}

fn encode(resp: &ChatResponse, x: &ResponsesExtras) -> Value {
    serde_json::from_slice(&encode_response(resp, "resp_abc", x)).unwrap()
}

#[test]
fn cut_short_answers_are_incomplete() {
    let x = ResponsesExtras::default();
    let v = encode(&answer(FinishReason::Length), &x);
    assert_eq!(v["status"], "incomplete");
    assert_eq!(
        v["incomplete_details"],
        json!({"reason": "max_output_tokens"})
    );
    assert_eq!(v["output"][0]["status"], "incomplete", "the last item too");
    assert_eq!(
        v["usage"],
        json!({"input_tokens": 5, "input_tokens_details": {"cached_tokens": 2}, "output_tokens": 16,
               "output_tokens_details": {"reasoning_tokens": 3}, "total_tokens": 21})
    );
    let v = encode(&answer(FinishReason::ContentFilter), &x);
    assert_eq!(v["status"], "incomplete");
    assert_eq!(v["incomplete_details"], json!({"reason": "content_filter"}));
    // a refusal is a completed answer with a refusal part
    let mut r = answer(FinishReason::ContentFilter);
    r.refusal = Some("I can't help with that.".into());
    let v = encode(&r, &x);
    assert_eq!(v["status"], "completed");
    assert_eq!(v["incomplete_details"], Value::Null);
    assert_eq!(
        v["output"][0]["content"][1],
        json!({"type": "refusal", "refusal": "I can't help with that."})
    );
    let back = decode_response(&serde_json::to_vec(&v).unwrap()).unwrap();
    assert_eq!(back.finish_reason, FinishReason::ContentFilter);
    assert_eq!(back.refusal.as_deref(), Some("I can't help with that."));
}

#[test]
fn items_come_in_order_and_custom_calls_are_custom_tool_calls() {
    let mut x = ResponsesExtras {
        custom_tools: vec!["apply_patch".into()],
        ..ResponsesExtras::default()
    };
    let mut r = answer(FinishReason::ToolCalls);
    r.reasoning = Some("thinking".into());
    r.reasoning_signature = Some("sig".into());
    r.tool_calls = vec![
        ToolCall {
            id: "call_1".into(),
            name: "shell".into(),
            arguments: r#"{"cmd":"ls"}"#.into(),
        },
        ToolCall {
            id: "toolu_2".into(),
            name: "apply_patch".into(),
            arguments: r#"{"input":"*** Begin Patch\n"}"#.into(),
        },
    ];
    let v = encode(&r, &x);
    let kinds: Vec<&str> = v["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["reasoning", "message", "function_call", "custom_tool_call"]
    );
    assert_eq!(v["status"], "completed");
    assert_eq!(v["output"][0]["id"], "rs_abc");
    assert_eq!(
        v["output"][0]["summary"],
        json!([{"type": "summary_text", "text": "thinking"}])
    );
    assert!(
        v["output"][0].get("encrypted_content").is_none(),
        "not asked for"
    );
    assert_eq!(v["output"][1]["id"], "msg_abc");
    assert_eq!(
        v["output"][2],
        json!({"id": "fc_abc_0", "type": "function_call", "status": "completed",
               "arguments": r#"{"cmd":"ls"}"#, "call_id": "call_1", "name": "shell"})
    );
    assert_eq!(
        v["output"][3],
        json!({"id": "ctc_abc_1", "type": "custom_tool_call", "status": "completed",
               "call_id": "toolu_2", "name": "apply_patch", "input": "*** Begin Patch\n"})
    );
    x.include = vec!["reasoning.encrypted_content".into()];
    let v = encode(&r, &x);
    assert_eq!(v["output"][0]["encrypted_content"], "sig");
    // and back: the custom call is the emulated function call again
    let back = decode_response(&serde_json::to_vec(&v).unwrap()).unwrap();
    assert_eq!(back.tool_calls, r.tool_calls);
    assert_eq!(back.finish_reason, FinishReason::ToolCalls);
    assert_eq!(back.reasoning_signature.as_deref(), Some("sig"));
}

#[test]
fn a_failed_body_is_the_upstream_error() {
    let body = json!({"id": "resp_1", "object": "response", "status": "failed",
        "error": {"code": "rate_limit_exceeded", "message": "Please try again in 2.363s."}, "output": []});
    assert_eq!(
        decode_response(&serde_json::to_vec(&body).unwrap()),
        Err(DecodeError::Failed(UpstreamError {
            code: "rate_limit_exceeded".into(),
            message: "Please try again in 2.363s.".into(),
        }))
    );
    assert!(matches!(
        decode_response(b"[1]"),
        Err(DecodeError::Unparsable(_))
    ));
    let body = json!({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": []});
    let r = decode_response(&serde_json::to_vec(&body).unwrap()).unwrap();
    assert_eq!(r.finish_reason, FinishReason::Length);
    assert_eq!(r.raw_finish_reason.as_deref(), Some("max_output_tokens"));
}
