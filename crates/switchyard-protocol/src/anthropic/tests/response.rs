use serde_json::json;

use super::{fixture, fixtures, json};
use crate::anthropic::*;
use crate::ir::{FinishReason, Usage};

#[test]
fn every_response_fixture_decodes_and_re_encodes() {
    for f in fixtures("anthropic", ".response.json") {
        let body = fixture(&f);
        let r = decode_response(body.as_bytes(), None).unwrap_or_else(|e| panic!("{f}: {e}"));
        let wire = json(body.as_bytes());
        assert_eq!(r.id, wire["id"], "{f}");
        assert_eq!(r.model, wire["model"], "{f}");
        assert_eq!(
            r.raw_finish_reason.as_deref(),
            wire["stop_reason"].as_str(),
            "{f}"
        );
        let u = &wire["usage"];
        assert_eq!(r.usage.output_tokens, u["output_tokens"], "{f}");
        assert_eq!(
            r.usage.cached_input_tokens, u["cache_read_input_tokens"],
            "{f}"
        );
        let n = |k: &str| u[k].as_u64().unwrap_or(0);
        let input =
            n("input_tokens") + n("cache_read_input_tokens") + n("cache_creation_input_tokens");
        assert_eq!(r.usage.input_tokens, input, "{f}");
        let tool_uses = wire["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .count();
        assert_eq!(r.tool_calls.len(), tool_uses, "{f}");

        let again = encode_response(&r);
        let back = decode_response(&again, None).unwrap();
        assert_eq!(back, r, "{f}");
        let out = json(&again);
        assert_eq!(
            out["content"].as_array().map(Vec::len),
            wire["content"].as_array().map(Vec::len),
            "{f}"
        );
        assert_eq!(out["stop_reason"], wire["stop_reason"], "{f}");
        assert_eq!(out["usage"]["input_tokens"], u["input_tokens"], "{f}");
    }
}

#[test]
fn response_details() {
    let r = decode_response(
        fixture("anthropic/messages_tool_use.response.json").as_bytes(),
        None,
    )
    .unwrap();
    assert_eq!(r.finish_reason, FinishReason::ToolCalls);
    assert_eq!(r.tool_calls[0].id, "toolu_013DU6hV4C1M8dJ32ybQFAFi");
    assert_eq!(
        r.tool_calls[0].arguments,
        r#"{"location":"SF","units":"c"}"#
    );
    assert_eq!(r.text, None);

    let r = decode_response(
        fixture("anthropic/messages_text_and_tool_use.response.json").as_bytes(),
        None,
    )
    .unwrap();
    assert!(r
        .text
        .as_deref()
        .unwrap()
        .ends_with("update the current issue list:"));
    assert_eq!(r.tool_calls[0].arguments, "{}");

    let r = decode_response(
        fixture("anthropic/messages_refusal.response.json").as_bytes(),
        None,
    )
    .unwrap();
    assert_eq!(r.finish_reason, FinishReason::ContentFilter);

    let r = decode_response(
        fixture("anthropic/messages_structured_output.response.json").as_bytes(),
        None,
    )
    .unwrap();
    assert_eq!(r.finish_reason, FinishReason::Stop);
    assert!(r.text.unwrap().starts_with("{\"product_name\""));

    // The forced JSON tool comes back as text.
    let body = fixture("anthropic/messages_json_via_forced_tool.response.json");
    let r = decode_response(body.as_bytes(), Some("json")).unwrap();
    assert_eq!(r.finish_reason, FinishReason::Stop);
    assert_eq!(r.raw_finish_reason.as_deref(), Some("tool_use"));
    assert!(r.tool_calls.is_empty());
    let text = r.text.unwrap();
    assert!(
        text.starts_with(r#"{"elements":[{"location":"San Francisco","temperature":-5,"#),
        "{text}"
    );
    assert_eq!(
        json(text.as_bytes()),
        json(body.as_bytes())["content"][0]["input"]
    );
}

#[test]
fn encoded_message_has_the_wire_key_order() {
    let body = fixture("anthropic/messages_text.response.json");
    let r = decode_response(body.as_bytes(), None).unwrap();
    let out = String::from_utf8(encode_response(&r)).unwrap();
    assert_eq!(
        out,
        r#"{"id":"msg_01QgNtCXZKCJgpWHW3NEwmdP","type":"message","role":"assistant","model":"claude-3-5-sonnet-20240620","content":[{"type":"text","text":"Hello! How can I assist you today? Is there anything specific you'd like to know or discuss?"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":16,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":24}}"#
    );
}

#[test]
fn ir_from_other_dialects_encodes() {
    let body = fixture("openai/chat_tool_call.response.json");
    let mut r = crate::openai::peek_response(body.as_bytes())
        .unwrap()
        .to_ir();
    r.usage = Usage {
        input_tokens: 100,
        output_tokens: 7,
        cached_input_tokens: 60,
        cache_write_tokens: 10,
        reasoning_tokens: 3,
    };
    r.reasoning = Some("think".into());
    r.tool_calls.push(crate::ir::ToolCall {
        id: "c2".into(),
        name: "g".into(),
        arguments: "not json".into(),
    });
    let v = json(&encode_response(&r));
    assert!(v["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(
        v["content"][0],
        json!({"type": "thinking", "thinking": "think", "signature": ""})
    );
    assert_eq!(v["content"][1]["type"], "tool_use");
    assert_eq!(v["content"][2]["input"], json!({}));
    assert_eq!(v["stop_reason"], "tool_use");
    assert_eq!(
        v["usage"],
        json!({"input_tokens": 30, "cache_creation_input_tokens": 10, "cache_read_input_tokens": 60, "output_tokens": 7})
    );
    let back = decode_response(&encode_response(&r), None).unwrap();
    assert_eq!(
        back.usage,
        Usage {
            reasoning_tokens: 0,
            ..r.usage
        }
    );
}

#[test]
fn error_bodies_parse() {
    for f in fixtures("anthropic", ".http.json") {
        let env = json(fixture(&f).as_bytes());
        let body = serde_json::to_vec(&env["body"]).unwrap();
        let (kind, message) = parse_error(&body).unwrap_or_else(|| panic!("{f}"));
        assert_eq!(kind, env["body"]["error"]["type"], "{f}");
        assert_eq!(message, env["body"]["error"]["message"], "{f}");
    }
    assert_eq!(parse_error(b"<html>"), None);
    assert_eq!(parse_error(br#"{"type":"message"}"#), None);
}

/// The `message_start` event of `r` replayed as a stream.
fn replayed_start(r: &crate::ir::ChatResponse) -> serde_json::Value {
    let mut enc = StreamEncoder::default();
    let mut text = String::new();
    for ev in r.stream_events() {
        for f in enc.push(&ev) {
            text.push_str(&String::from_utf8_lossy(&f));
        }
    }
    let start = text.find("{\"type\":\"message_start\"").unwrap();
    serde_json::Deserializer::from_str(&text[start..])
        .into_iter()
        .next()
        .unwrap()
        .unwrap()
}

/// An answer that came with no id (a cached or degraded one, an upstream
/// that sends none) gets its own message id, whole or streamed — never the
/// bare `msg_` every such answer would share.
#[test]
fn an_answer_without_an_id_gets_its_own() {
    let r = crate::ir::ChatResponse {
        text: Some("hi".into()),
        ..Default::default()
    };
    let id = |b: &[u8]| json(b)["id"].as_str().unwrap().to_owned();
    let (a, b) = (id(&encode_response(&r)), id(&encode_response(&r)));
    assert!(a.len() > "msg_".len() && a.starts_with("msg_"), "{a}");
    assert_ne!(a, b);
    let streamed = || {
        replayed_start(&r)["message"]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (c, d) = (streamed(), streamed());
    assert!(c.len() > "msg_".len() && c != d && c != a, "{c} {d}");
}

/// A whole answer replayed as a stream (a cache hit) says its input usage in
/// `message_start`, as a live Anthropic stream does; output comes at the end.
#[test]
fn a_replayed_answer_starts_with_its_input_usage() {
    let r = crate::ir::ChatResponse {
        id: "msg_1".into(),
        text: Some("hi".into()),
        usage: Usage {
            input_tokens: 42,
            output_tokens: 7,
            cached_input_tokens: 30,
            cache_write_tokens: 2,
            reasoning_tokens: 0,
        },
        ..Default::default()
    };
    let u = &replayed_start(&r)["message"]["usage"];
    assert_eq!(
        (
            &u["input_tokens"],
            &u["cache_read_input_tokens"],
            &u["output_tokens"]
        ),
        (&json!(10), &json!(30), &json!(0)),
        "{u}"
    );
}
