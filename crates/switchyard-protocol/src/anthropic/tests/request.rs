use serde_json::{json, Value};

use super::{fixture, fixtures, json};
use crate::anthropic::*;
use crate::ir::{self, ContentPart, Message, Role, ToolChoice};

fn target(model: &str) -> Target<'_> {
    Target {
        model,
        max_output_tokens: None,
        stream: false,
    }
}

fn encode(req: &ir::ChatRequest) -> (Value, Encoded) {
    let e = encode_request(req, &target("claude-x")).unwrap();
    (json(&e.body), e)
}

fn openai_ir(name: &str) -> ir::ChatRequest {
    crate::openai::parse_request(&fixture(name))
        .unwrap()
        .to_ir()
}

/// Equivalent forms: `system` as blocks, a lone text block as a string,
/// dropped `cache_control` / `caller` (documented as lossy).
fn normalize(v: &mut Value) {
    if let Some(Value::String(s)) = v.get("system") {
        v["system"] = json!([{"type": "text", "text": s}]);
    }
    strip(v, &["cache_control", "caller"]);
    for m in v["messages"].as_array_mut().unwrap() {
        let c = &mut m["content"];
        if let Some([b]) = c.as_array().map(Vec::as_slice) {
            if b["type"] == "text" {
                *c = b["text"].clone();
            }
        }
    }
}

fn strip(v: &mut Value, keys: &[&str]) {
    match v {
        Value::Object(m) => {
            for k in keys {
                m.remove(*k);
            }
            m.values_mut().for_each(|v| strip(v, keys));
        }
        Value::Array(a) => a.iter_mut().for_each(|v| strip(v, keys)),
        _ => {}
    }
}

#[test]
fn anthropic_request_fixtures_round_trip_through_the_ir() {
    for f in fixtures("anthropic", ".request.json") {
        let body = fixture(&f);
        let req = decode_request(&body).unwrap_or_else(|e| panic!("{f}: {e}"));
        let t = Target {
            model: &req.model,
            max_output_tokens: None,
            stream: req.stream,
        };
        let enc = encode_request(&req, &t).unwrap();
        let mut got = json(&enc.body);
        let mut want = json(body.as_bytes());
        normalize(&mut want);
        normalize(&mut got);
        if let Some(cfg) = want.as_object_mut().unwrap().remove("output_config") {
            // Structured output goes upstream as the forced `json` tool.
            assert_eq!(enc.json_tool.as_deref(), Some("json"), "{f}");
            want["tools"] = json!([{
                "name": "json",
                "description": "Respond with a JSON object.",
                "input_schema": cfg["format"]["schema"],
            }]);
            want["tool_choice"] = json!({"type": "tool", "name": "json"});
        } else {
            assert_eq!(enc.json_tool, None, "{f}");
        }
        assert_eq!(got, want, "{f}");
        assert_eq!(enc.prefill_trimmed, "", "{f}");
    }
}

/// MAPPING §3 invariants of any encoded body.
fn check_shape(v: &Value, f: &str) {
    assert!(v["max_tokens"].as_u64().unwrap() > 0, "{f}");
    let msgs = v["messages"].as_array().unwrap();
    let mut last = "";
    for m in msgs {
        let role = m["role"].as_str().unwrap();
        assert!(role == "user" || role == "assistant", "{f}");
        assert_ne!(role, last, "{f}: roles must alternate");
        last = role;
        if let Some(blocks) = m["content"].as_array() {
            let results = blocks.iter().filter(|b| b["type"] == "tool_result").count();
            let leading = blocks
                .iter()
                .take_while(|b| b["type"] == "tool_result")
                .count();
            assert_eq!(results, leading, "{f}: tool_results first");
            for b in blocks {
                assert_ne!(b["text"], "", "{f}: no empty text blocks");
            }
        }
    }
}

#[test]
fn openai_request_fixtures_encode_to_valid_anthropic_bodies() {
    let mut names = fixtures("openai", ".request.json");
    names.push("deepseek/chat_reasoner_multiturn.request.json".into());
    names.push("qwen/chat_tool_call.request.json".into());
    for f in names {
        let (v, _) = encode(&openai_ir(&f));
        check_shape(&v, &f);
        assert_eq!(v["model"], "claude-x");
    }

    let (v, _) = encode(&openai_ir("openai/chat_text.request.json"));
    assert_eq!(
        v,
        json!({"model": "claude-x", "max_tokens": 4096,
            "system": [{"type": "text", "text": "You are a helpful assistant."}],
            "messages": [{"role": "user", "content": "Hello"}]})
    );

    let req = openai_ir("openai/chat_tool_call.request.json");
    let (v, _) = encode(&req);
    assert_eq!(
        v["tools"],
        json!([{"name": "get_weather", "input_schema": req.tools[0].parameters}])
    );
    assert!(v.get("tool_choice").is_none());

    let (v, _) = encode(&openai_ir("openai/chat_tool_result.request.json"));
    assert_eq!(
        v["messages"][1]["content"],
        json!([{"type": "tool_use", "id": "call_CUdUoJpsWWVdxXntucvnol1M",
            "name": "get_weather", "input": {"city": "San Francisco", "state": "CA"}}])
    );
    assert_eq!(
        v["messages"][2],
        json!({"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": "call_CUdUoJpsWWVdxXntucvnol1M",
            "content": "{\"temperature_c\":18,\"condition\":\"fog\"}"}]})
    );

    let (v, _) = encode(&openai_ir("openai/chat_vision.request.json"));
    assert_eq!(v["max_tokens"], 300);
    let blocks = &v["messages"][0]["content"];
    assert_eq!(
        blocks[0],
        json!({"type": "text", "text": "What is in these images?"})
    );
    assert_eq!(blocks[1]["source"]["type"], "url");
    let want = json(fixture("anthropic/messages_vision.request.json").as_bytes());
    assert_eq!(blocks[2], want["messages"][0]["content"][0]);
}

#[test]
fn json_modes_become_a_forced_tool() {
    let (v, e) = encode(&openai_ir("openai/chat_json_schema.request.json"));
    assert_eq!(e.json_tool.as_deref(), Some(JSON_TOOL_NAME));
    let want = json(fixture("anthropic/messages_json_via_forced_tool.request.json").as_bytes());
    assert_eq!(v["tool_choice"], want["tool_choice"]);
    assert_eq!(v["tools"][0]["name"], want["tools"][0]["name"]);
    assert_eq!(
        v["tools"][0]["description"],
        want["tools"][0]["description"]
    );
    assert_eq!(
        v["tools"][0]["input_schema"]["required"],
        json!(["city", "temperature", "units"])
    );

    let (v, e) = encode(&openai_ir("openai/chat_json_object.request.json"));
    assert_eq!(e.json_tool.as_deref(), Some("json"));
    assert_eq!(v["tools"][0]["input_schema"], json!({"type": "object"}));
    assert_eq!(v["tool_choice"], json!({"type": "tool", "name": "json"}));

    // With client tools: the model must call one of them or answer via `json`.
    let mut req = openai_ir("openai/chat_tool_call.request.json");
    req.response_format = Some(ir::ResponseFormat::JsonObject);
    req.tools[0].name = "json".into();
    let (v, e) = encode(&req);
    assert_eq!(e.json_tool.as_deref(), Some("json_"));
    assert_eq!(v["tools"][1]["name"], "json_");
    assert_eq!(v["tool_choice"], json!({"type": "any"}));
}

#[test]
fn tool_choice_variants_match_the_lookup_table() {
    let table = json(fixture("anthropic/messages_tool_choice_variants.json").as_bytes());
    let mut req = openai_ir("openai/chat_tool_call.request.json");
    for (key, choice, parallel) in [
        ("auto", ToolChoice::Auto, None),
        ("auto_no_parallel", ToolChoice::Auto, Some(false)),
        ("any", ToolChoice::Required, None),
        (
            "specific_tool",
            ToolChoice::Named("get_weather".into()),
            None,
        ),
        ("none", ToolChoice::None, Some(false)),
    ] {
        req.tool_choice = Some(choice);
        req.parallel_tool_calls = parallel;
        assert_eq!(encode(&req).0["tool_choice"], table[key], "{key}");
    }
    // Allowed subset: only those tools are sent.
    let mut other = req.tools[0].clone();
    other.name = "other".into();
    req.tools.push(other);
    req.parallel_tool_calls = None;
    req.tool_choice = Some(ToolChoice::Allowed {
        names: vec!["other".into()],
        required: true,
    });
    let (v, _) = encode(&req);
    assert_eq!(v["tools"].as_array().unwrap().len(), 1);
    assert_eq!(v["tools"][0]["name"], "other");
    assert_eq!(v["tool_choice"], table["any"]);
}

fn msg(role: Role, text: &str) -> Message {
    Message {
        role,
        content: vec![ContentPart::Text(text.into())],
        ..Message::default()
    }
}

fn tool_msg(id: &str, text: &str, is_error: bool) -> Message {
    Message {
        tool_call_id: Some(id.into()),
        is_error,
        ..msg(Role::Tool, text)
    }
}

fn call(id: &str, args: &str) -> ir::ToolCall {
    ir::ToolCall {
        id: id.into(),
        name: "f".into(),
        arguments: args.into(),
    }
}

#[test]
fn conversation_rules() {
    let mut asst = msg(Role::Assistant, "");
    asst.content.insert(
        0,
        ContentPart::Reasoning {
            text: "hmm".into(),
            signature: Some("sig".into()),
        },
    );
    asst.content.push(ContentPart::Reasoning {
        text: "unsigned".into(),
        signature: None,
    });
    asst.content
        .push(ContentPart::RedactedReasoning("opaque".into()));
    asst.tool_calls = vec![call("a", r#"{"x": 1}"#), call("b", "")];
    let mut req = ir::ChatRequest {
        messages: vec![
            msg(Role::System, "s1"),
            msg(Role::User, "u1"),
            msg(Role::User, "u2"),
            asst,
            tool_msg("a", "ra", false),
            tool_msg("b", "boom", true),
            msg(Role::User, "more"),
            msg(Role::System, "s2"),
            msg(Role::Assistant, "prefill \n"),
        ],
        temperature: Some(1.7),
        top_k: Some(5),
        stop: vec!["END".into()],
        user: Some("u-1".into()),
        reasoning: Some(ir::ReasoningConfig {
            effort: None,
            budget_tokens: Some(2048),
        }),
        max_tokens: None,
        ..ir::ChatRequest::default()
    };
    req.provider_options.insert("top_k".into(), json!(9));
    req.provider_options
        .insert("service_tier".into(), json!("auto"));
    let e = encode_request(
        &req,
        &Target {
            model: "m",
            max_output_tokens: Some(8000),
            stream: true,
        },
    )
    .unwrap();
    assert_eq!(e.prefill_trimmed, " \n");
    let v = json(&e.body);
    check_shape(&v, "synthetic");
    assert_eq!(
        v,
        json!({
            "model": "m", "max_tokens": 8000,
            "system": [{"type": "text", "text": "s1"}, {"type": "text", "text": "s2"}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "u1"}, {"type": "text", "text": "u2"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "tool_use", "id": "a", "name": "f", "input": {"x": 1}},
                    {"type": "tool_use", "id": "b", "name": "f", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": "ra"},
                    {"type": "tool_result", "tool_use_id": "b", "content": "boom", "is_error": true},
                    {"type": "text", "text": "more"}]},
                {"role": "assistant", "content": "prefill"}],
            "temperature": 1.0, "top_k": 9, "stop_sequences": ["END"],
            "metadata": {"user_id": "u-1"},
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "stream": true, "service_tier": "auto"
        })
    );

    let mut bad = msg(Role::Assistant, "");
    bad.tool_calls = vec![call("call_9", "{not json")];
    req.messages.push(bad);
    let err = encode_request(&req, &target("m")).unwrap_err();
    assert!(err.to_string().contains("call_9"), "{err}");
}

#[test]
fn client_request_decodes_to_the_ir() {
    let req = decode_request(&fixture("anthropic/messages_tool_result.request.json")).unwrap();
    assert_eq!(
        req.messages[1].tool_calls[0].arguments,
        r#"{"location":"SF","units":"c"}"#
    );
    assert_eq!(req.messages[2].role, Role::Tool);
    assert_eq!(
        req.messages[2].tool_call_id.as_deref(),
        Some("toolu_013DU6hV4C1M8dJ32ybQFAFi")
    );

    let req = decode_request(&fixture(
        "anthropic/messages_text_system_blocks.request.json",
    ))
    .unwrap();
    assert_eq!(req.messages[0].role, Role::System);
    assert_eq!(req.messages[1].role, Role::System);
    assert_eq!(
        (req.top_k, req.user.as_deref()),
        (Some(40), Some("user-123"))
    );

    let body = r#"{"model":"m","max_tokens":5,"stream":true,
      "thinking":{"type":"enabled","budget_tokens":1024},
      "tools":[{"name":"f","input_schema":{"type":"object"}}],
      "tool_choice":{"type":"any","disable_parallel_tool_use":true},
      "messages":[{"role":"user","content":[
        {"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"r"}],"is_error":true},
        {"type":"text","text":"and then"}]},
        {"role":"assistant","content":[{"type":"thinking","thinking":"x","signature":"s"},{"type":"text","text":"ok"}]}],
      "system":"sys"}"#;
    let req = decode_request(body).unwrap();
    assert!(req.stream);
    assert_eq!(req.tool_choice, Some(ToolChoice::Required));
    assert_eq!(req.parallel_tool_calls, Some(false));
    assert_eq!(req.reasoning.unwrap().budget_tokens, Some(1024));
    let roles: Vec<Role> = req.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::System, Role::Tool, Role::User, Role::Assistant]
    );
    assert!(req.messages[1].is_error);
    assert_eq!(req.messages[2].text(), "and then");
    assert_eq!(
        req.messages[3].content[0],
        ContentPart::Reasoning {
            text: "x".into(),
            signature: Some("s".into())
        }
    );

    let peek = peek_request(body).unwrap();
    assert_eq!((peek.model.as_ref(), peek.stream), ("m", true));
    assert_eq!(
        peek_request(r#"{"stream":true}"#)
            .unwrap_err()
            .param
            .as_deref(),
        Some("model")
    );
}

#[test]
fn bad_client_requests_name_the_param() {
    let p = |body: &str| decode_request(body).unwrap_err().param;
    let ok_msgs = r#""messages":[{"role":"user","content":"x"}]"#;
    assert_eq!(
        p(&format!(r#"{{"max_tokens":1,{ok_msgs}}}"#)).as_deref(),
        Some("model")
    );
    assert_eq!(
        p(&format!(r#"{{"model":"m",{ok_msgs}}}"#)).as_deref(),
        Some("max_tokens")
    );
    assert_eq!(
        p(r#"{"model":"m","max_tokens":1}"#).as_deref(),
        Some("messages")
    );
    assert_eq!(
        p(r#"{"model":"m","max_tokens":1,"messages":[]}"#).as_deref(),
        Some("messages")
    );
    for (body, param) in [
        (r#"[{"role":"robot","content":"x"}]"#, "messages[0].role"),
        (r#"[{"role":"user","content":5}]"#, "messages[0].content"),
        (
            r#"[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":[{"type":"text"}]}]"#,
            "messages[2].content[0]",
        ),
        (
            r#"[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]"#,
            "messages[0].content[0]",
        ),
        (
            r#"[{"role":"user","content":[{"type":"image","source":{"type":"base64"}}]}]"#,
            "messages[0].content[0].source",
        ),
        (r#"[{"role":"user"}]"#, "messages[0]"),
    ] {
        let body = format!(r#"{{"model":"m","max_tokens":1,"messages":{body}}}"#);
        assert_eq!(p(&body).as_deref(), Some(param), "{body}");
    }
    for (extra, param) in [
        (r#""temperature":1.5"#, "temperature"),
        (r#""max_tokens":0"#, "max_tokens"),
        (r#""system":[{"type":"text"}]"#, "system[0]"),
        (
            r#""tool_choice":{"type":"tool","name":"nope"}"#,
            "tool_choice",
        ),
        (r#""tools":[{"name":"f"}]"#, "tools[0].input_schema"),
        (r#""stream":"yes""#, "stream"),
    ] {
        let body = format!(
            r#"{{"model":"m",{ok_msgs},{extra}{}}}"#,
            if param == "max_tokens" {
                ""
            } else {
                r#","max_tokens":1"#
            }
        );
        assert_eq!(p(&body).as_deref(), Some(param), "{body}");
    }
    assert_eq!(p("{").as_deref(), None);
    assert_eq!(p(r#"{"model":"a","model":"b"}"#).as_deref(), None);
}

/// What Claude Code really sends (recorded from the CLI, `fixtures/agents/`):
/// a `system` message in the middle of `messages`, adaptive thinking,
/// `context_management`, `output_config`, `cache_control` everywhere,
/// thinking blocks replayed with a signature. Every request decodes, the
/// mid-conversation system message stays where it was.
#[test]
fn claude_code_requests_decode_with_system_messages_in_place() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/agents/claude_code"
    );
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let rec: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let body = serde_json::to_string(&rec["body"]).unwrap();
        let req = decode_request(&body).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let wire = rec["body"]["messages"].as_array().unwrap();
        let wire_system = wire.iter().position(|m| m["role"] == "system");
        if let Some(at) = wire_system {
            // Leading System messages come from `system`; the in-place one
            // follows the turns that came before it.
            let lead = req
                .messages
                .iter()
                .take_while(|m| m.role == Role::System)
                .count();
            let before: usize = wire[..at].len();
            let ir_at = req
                .messages
                .iter()
                .enumerate()
                .skip(lead)
                .find(|(_, m)| m.role == Role::System)
                .map(|(i, _)| i)
                .unwrap_or_else(|| panic!("{path:?}: the system message was lost"));
            assert!(
                ir_at >= lead + before,
                "{path:?}: moved ahead of earlier turns"
            );
            assert!(!req.messages[ir_at].text().is_empty(), "{path:?}");
            seen += 1;
        }
        assert!(!req.tools.is_empty(), "{path:?}: tools");
        assert!(req.stream, "{path:?}");
    }
    assert!(
        seen >= 3,
        "the recordings have mid-conversation system messages"
    );
}

#[test]
fn unknown_blocks_are_dropped_and_bad_roles_still_refused() {
    let req = decode_request(
        r#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"}}]}]}"#,
    )
    .unwrap();
    assert_eq!(req.messages.len(), 1);
    assert_eq!(
        req.messages[0].content,
        vec![ContentPart::Text("hi".into())]
    );
    let e = decode_request(
        r#"{"model":"m","max_tokens":5,"messages":[{"role":"robot","content":"hi"}]}"#,
    )
    .unwrap_err();
    assert_eq!(e.param.as_deref(), Some("messages[0].role"));
}

/// Blocks only Anthropic understands go through the passthrough and are
/// dropped by a translation; a search result's `source` is a URL string,
/// not an image source, and must not make the request invalid.
#[test]
fn search_results_and_documents_decode_and_are_left_out() {
    let body = r#"{"model":"m","max_tokens":5,"messages":[
        {"role":"user","content":[
            {"type":"search_result","source":"https://example.com","title":"t","content":[{"type":"text","text":"x"}]},
            {"type":"document","source":{"type":"text","media_type":"text/plain","data":"doc"}},
            {"type":"text","text":"Summarise."}]},
        {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"s","input":{}}]},
        {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[
            {"type":"search_result","source":"https://example.com","title":"t","content":[{"type":"text","text":"y"}]},
            {"type":"text","text":"found"}]}]}]}"#;
    let req = decode_request(body).unwrap();
    assert_eq!(req.messages[0].text(), "Summarise.");
    assert_eq!(req.messages[2].text(), "found");
}
