use serde_json::{json, Value};

use super::{fixture, fixtures};
use crate::ir::{ChatRequest, ContentPart, ImageSource, Message, ResponseFormat, Role, ToolChoice};
use crate::responses::*;

fn decode(name: &str) -> (ChatRequest, ResponsesExtras) {
    decode_request(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn text(m: &Message) -> String {
    m.text()
}

fn roles(r: &ChatRequest) -> Vec<Role> {
    r.messages.iter().map(|m| m.role).collect()
}

fn reasoning_texts(m: &Message) -> Vec<&str> {
    m.content
        .iter()
        .filter_map(|p| match p {
            ContentPart::Reasoning { text, signature } => {
                assert!(signature.is_none(), "summaries carry no signature");
                Some(text.as_str())
            }
            _ => None,
        })
        .collect()
}

fn opaque(m: &Message) -> Vec<&str> {
    m.content
        .iter()
        .filter_map(|p| match p {
            ContentPart::ResponsesItem(raw) => Some(raw.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn every_request_fixture_decodes() {
    for f in fixtures(".request.json") {
        let (req, _) = decode(&f);
        assert!(!req.model.is_empty(), "{f}");
        assert!(!req.messages.is_empty(), "{f}");
        // Every call is answered by a Tool message somewhere after it, or
        // lives in a stored previous response.
        for m in req.messages.iter().filter(|m| m.role == Role::Tool) {
            assert!(m.tool_call_id.is_some(), "{f}");
        }
    }
}

#[test]
fn a_bare_string_input_is_one_user_message() {
    let (req, x) = decode("responses_text.request.json");
    assert_eq!(req.model, "gpt-4o-mini");
    assert_eq!(roles(&req), [Role::User]);
    assert_eq!(text(&req.messages[0]), "What's the weather like in SF?");
    assert!(x.store, "store defaults to true");
    assert!(!req.stream);
    assert_eq!(x, ResponsesExtras::default());
}

#[test]
fn codex_history_groups_into_turns_with_reasoning_kept_opaque() {
    let body = fixture("responses_reasoning_codex.request.json");
    let (req, x) = decode("responses_reasoning_codex.request.json");
    use Role::*;
    assert_eq!(
        roles(&req),
        [System, User, User, Assistant, Tool, Assistant, User]
    );
    assert!(text(&req.messages[0]).starts_with("You are Codex"));
    // reasoning + function_call = one assistant turn
    let turn = &req.messages[3];
    assert_eq!(
        reasoning_texts(turn),
        ["**Counting Python files**\n\nI'll list the repository files with a quick shell command."]
    );
    let raw = opaque(turn);
    assert_eq!(raw.len(), 1);
    assert!(body.contains(raw[0]), "the item is kept byte for byte");
    let item: Value = serde_json::from_str(raw[0]).unwrap();
    let sent: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(item, sent["input"][2]);
    assert_eq!(turn.tool_calls.len(), 1);
    assert_eq!(turn.tool_calls[0].id, "call_Qm1dXyz0AbCdEfGhIjKlMnOp");
    assert_eq!(turn.tool_calls[0].name, "shell_command");
    assert_eq!(
        turn.tool_calls[0].arguments,
        r#"{"command":"git ls-files '*.py' | wc -l","workdir":"/home/dev/demo"}"#
    );
    let result = &req.messages[4];
    assert_eq!(
        result.tool_call_id.as_deref(),
        Some("call_Qm1dXyz0AbCdEfGhIjKlMnOp")
    );
    assert_eq!(text(result), "42\n");
    assert_eq!(text(&req.messages[5]), "There are 42 tracked Python files.");
    // tools: function as is, custom emulated, web_search recorded
    let names: Vec<&str> = req.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["shell_command", "apply_patch"]);
    assert_eq!(req.tools[0].strict, Some(false));
    assert_eq!(req.tools[0].parameters["required"], json!(["command"]));
    let patch = &req.tools[1];
    assert!(patch.description.as_deref().unwrap().contains("FREEFORM"));
    assert_eq!(patch.parameters["required"], json!(["input"]));
    assert_eq!(patch.parameters["properties"]["input"]["type"], "string");
    assert_eq!(x.custom_tools, ["apply_patch"]);
    let search: Value = serde_json::from_str(x.web_search.as_deref().unwrap()).unwrap();
    assert_eq!(search, json!({"type": "web_search"}));
    assert!(x.dropped_tools.is_empty());
    assert_eq!(x.echo.tools.len(), 3, "all three tools are echoed");
    // params
    assert_eq!(req.tool_choice, Some(ToolChoice::Auto));
    assert_eq!(req.parallel_tool_calls, Some(false));
    assert_eq!(
        req.reasoning.as_ref().and_then(|r| r.effort.as_deref()),
        Some("medium")
    );
    assert_eq!(x.reasoning_summary.as_deref(), Some("auto"));
    assert!(!x.store);
    assert!(!x.echo.store);
    assert!(req.stream);
    assert!(x.wants_encrypted_reasoning());
    assert_eq!(
        x.prompt_cache_key.as_deref(),
        Some("0199a6f2-5c1e-7b40-9d3a-2f8e61c0a7d4")
    );
    assert_eq!(x.previous_response_id, None);
}

#[test]
fn function_calls_merge_into_the_preceding_assistant_turn() {
    let (req, _) = decode("responses_function_call_output.request.json");
    assert_eq!(roles(&req), [Role::User, Role::Assistant, Role::Tool]);
    let a = &req.messages[1];
    assert!(a.content.is_empty());
    assert_eq!(a.tool_calls[0].id, "call_YfwRsW8sUxDKipwyhWTzOXCA");
    assert_eq!(a.tool_calls[0].arguments, r#"{"country":"PotatoLand"}"#);
    assert_eq!(text(&req.messages[2]), "Potato City");
    assert_eq!(req.tools[0].description, None);
    assert_eq!(req.tools[0].strict, Some(true));

    // the client's empty assistant message and the call are ONE turn
    let (req, _) = decode("responses_json_schema.request.json");
    assert_eq!(roles(&req), [Role::User, Role::Assistant, Role::Tool]);
    assert_eq!(req.messages[1].tool_calls[0].name, "get_user_country");
    assert!(req.messages[1].content.is_empty(), "empty text dropped");
    match &req.response_format {
        Some(ResponseFormat::JsonSchema {
            name,
            schema,
            strict,
            description,
        }) => {
            assert_eq!(name, "CityLocation");
            assert_eq!(schema["required"], json!(["city", "country"]));
            assert_eq!(*strict, Some(true));
            assert_eq!(*description, None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn system_and_developer_messages_stay_in_place() {
    let (req, x) = decode("responses_instructions_multiturn.request.json");
    use Role::*;
    assert_eq!(roles(&req), [System, User, Assistant, System, User]);
    assert_eq!(
        text(&req.messages[0]),
        "You are a concise travel assistant. Answer in at most two sentences."
    );
    assert_eq!(text(&req.messages[3]), "Use metric units.");
    let last = &req.messages[4];
    assert_eq!(last.content.len(), 2);
    assert_eq!(
        last.content[1],
        ContentPart::Image {
            source: ImageSource::Url(
                "https://upload.wikimedia.org/wikipedia/commons/0/0c/GoldenGateBridge-001.jpg"
                    .into()
            ),
            detail: Some("low".into()),
        }
    );
    assert_eq!(req.max_tokens, Some(256));
    assert_eq!(req.temperature, Some(0.7));
    assert_eq!(x.echo.temperature, 0.7);
    assert_eq!(x.echo.max_output_tokens, Some(256));
    assert_eq!(
        x.echo.instructions.as_deref(),
        Some(text(&req.messages[0]).as_str())
    );
}

#[test]
fn replayed_reasoning_keeps_every_summary_and_the_blob() {
    let body = fixture("responses_reasoning_replay.request.json");
    let (req, x) = decode("responses_reasoning_replay.request.json");
    use Role::*;
    assert_eq!(roles(&req), [System, User, Assistant, Tool]);
    let turn = &req.messages[2];
    let summaries = reasoning_texts(turn);
    assert_eq!(summaries.len(), 5);
    assert!(summaries[0].starts_with("**Creating a structured poem**"));
    assert!(
        summaries[1].contains("line’s initial"),
        "\\u escapes decoded"
    );
    let raw = opaque(turn)[0];
    assert!(body.contains(raw), "raw item text, \\u2019 escapes and all");
    assert!(raw.contains("\"id\": \"rs_68c42d29124881968e24c1ca8c1fc7860e8bc41441c948f6\""));
    assert_eq!(turn.tool_calls[0].name, "update_plan");
    assert_eq!(x.reasoning_summary.as_deref(), Some("detailed"));
    assert_eq!(
        x.echo.reasoning,
        json!({"effort": "low", "summary": "detailed"})
    );
}

#[test]
fn previous_response_id_and_stream_params_land_in_extras() {
    let (req, x) = decode("responses_previous_response_id.request.json");
    assert_eq!(roles(&req), [Role::Tool]);
    assert_eq!(
        x.previous_response_id.as_deref(),
        Some("resp_0435eb6c2aa8e9eb0069e1600000608195818a61245c018620")
    );
    assert_eq!(x.echo.previous_response_id, x.previous_response_id);

    let (req, x) = decode("stream_function_call.request.json");
    assert!(req.stream);
    assert_eq!(req.tool_choice, Some(ToolChoice::Required));
    assert_eq!(x.service_tier.as_deref(), Some("flex"));
    assert_eq!(x.echo.service_tier, "flex");
    assert_eq!(x.reasoning_summary, None);
    assert_eq!(x.previous_response_id, None);

    let (req, x) = decode("stream_text.request.json");
    assert_eq!(roles(&req), [Role::System, Role::User]);
    assert_eq!(text(&req.messages[0]), "Answer directly.");
    assert_eq!(x.include, ["reasoning.encrypted_content"]);
}

#[test]
fn every_tool_choice_variant_maps() {
    let table: Value =
        serde_json::from_str(&fixture("responses_tool_choice_variants.json")).unwrap();
    let tools = json!([
        {"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
        {"type": "function", "name": "get_time"},
        {"type": "custom", "name": "apply_patch"},
        {"type": "mcp", "server_label": "deepwiki"}
    ]);
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let cases: Vec<(&str, Option<ToolChoice>, Option<&str>)> = vec![
        ("auto", Some(ToolChoice::Auto), None),
        ("none", Some(ToolChoice::None), None),
        ("required", Some(ToolChoice::Required), None),
        (
            "specific_function",
            Some(ToolChoice::Named("get_weather".into())),
            None,
        ),
        (
            "specific_custom_tool",
            Some(ToolChoice::Named("apply_patch".into())),
            None,
        ),
        (
            "allowed_subset_auto",
            Some(ToolChoice::Allowed {
                names: names(&["get_weather", "get_time"]),
                required: false,
            }),
            None,
        ),
        (
            "allowed_subset_required",
            Some(ToolChoice::Allowed {
                names: names(&["get_weather"]),
                required: true,
            }),
            None,
        ),
        ("hosted_tool", None, Some("web_search_preview")),
        ("specific_mcp_tool", None, Some("mcp")),
        ("shell", None, Some("shell")),
        ("apply_patch", None, Some("apply_patch")),
    ];
    assert_eq!(cases.len(), table.as_object().unwrap().len(), "every row");
    for (key, choice, forced) in cases {
        let body = json!({"model": "m", "input": "hi", "tools": tools, "tool_choice": table[key]});
        let (req, x) = decode_request(&body.to_string()).unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(req.tool_choice, choice, "{key}");
        assert_eq!(x.forced_hosted.as_deref(), forced, "{key}");
        assert_eq!(x.echo.tool_choice, table[key], "{key}: echoed as sent");
        assert_eq!(x.dropped_tools, ["mcp"], "{key}");
    }
}

fn bad(body: Value) -> FieldError {
    decode_request(&body.to_string()).expect_err("must be rejected")
}

#[test]
fn items_only_openai_can_serve_are_errors_naming_the_item() {
    for kind in [
        "item_reference",
        "web_search_call",
        "computer_call_output",
        "compaction",
    ] {
        let e = bad(json!({"model": "m", "input": [
            {"role": "user", "content": "hi"},
            {"type": kind, "id": "x"}
        ]}));
        assert_eq!(e.param.as_deref(), Some("input[1]"), "{kind}");
        assert!(e.message.contains(kind), "{kind}: {}", e.message);
    }
    let e = bad(json!({"model": "m", "input": [{"role": "tool", "content": "x"}]}));
    assert_eq!(e.param.as_deref(), Some("input[0].role"));
    let e = bad(
        json!({"model": "m", "input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}),
    );
    assert_eq!(e.param.as_deref(), Some("input[0]"));
    assert!(e.message.contains("call_id"));
    let e = bad(
        json!({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}]}),
    );
    assert_eq!(e.param.as_deref(), Some("input[0].content[0].file_id"));
    let e = bad(json!({"input": "hi"}));
    assert_eq!(e.param.as_deref(), Some("model"));
    let e = bad(json!({"model": "m"}));
    assert_eq!(e.param.as_deref(), Some("input"));
    let e = bad(
        json!({"model": "m", "input": "hi", "tool_choice": {"type": "function", "name": "nope"}}),
    );
    assert_eq!(e.param.as_deref(), Some("tool_choice"));
    let e = bad(
        json!({"model": "m", "input": "hi", "text": {"format": {"type": "json_schema", "schema": {}}}}),
    );
    assert_eq!(e.param.as_deref(), Some("text.format.name"));
    let e = bad(json!({"model": "m", "input": "hi", "temperature": 3}));
    assert_eq!(e.param.as_deref(), Some("temperature"));
}

#[test]
fn hosted_tools_are_recorded_never_rejected() {
    let (req, x) = decode_request(
        &json!({"model": "m", "input": "hi", "tools": [
            {"type": "file_search", "vector_store_ids": ["vs"]},
            {"type": "function", "name": "f"},
            {"type": "web_search_preview"},
            {"type": "image_generation"},
            {"type": "code_interpreter", "container": {"type": "auto"}}
        ]})
        .to_string(),
    )
    .unwrap();
    assert_eq!(req.tools.len(), 1);
    assert_eq!(
        req.tools[0].parameters,
        json!({"type": "object", "properties": {}})
    );
    assert_eq!(
        x.dropped_tools,
        ["file_search", "image_generation", "code_interpreter"]
    );
    assert_eq!(
        x.web_search.as_deref(),
        Some(r#"{"type":"web_search_preview"}"#)
    );
}

#[test]
fn custom_tool_calls_become_function_calls_with_an_input_string() {
    let (req, x) = decode_request(
        &json!({"model": "m", "tools": [{"type": "custom", "name": "apply_patch"}], "input": [
            {"role": "user", "content": "patch it"},
            {"type": "custom_tool_call", "call_id": "call_1", "name": "apply_patch",
             "input": "*** Begin Patch\n\"q\"\n*** End Patch"},
            {"type": "custom_tool_call_output", "call_id": "call_1", "output": "Done!"},
            {"role": "assistant", "content": [{"type": "refusal", "refusal": "no more"}]}
        ], "text": {"verbosity": "low"}, "user": "u1", "safety_identifier": "s1",
           "metadata": {"k": "v"}, "truncation": "auto", "store": false})
        .to_string(),
    )
    .unwrap();
    let call = &req.messages[1].tool_calls[0];
    assert_eq!(call.id, "call_1");
    let args: Value = serde_json::from_str(&call.arguments).unwrap();
    assert_eq!(
        args,
        json!({"input": "*** Begin Patch\n\"q\"\n*** End Patch"})
    );
    assert_eq!(req.messages[2].role, Role::Tool);
    assert_eq!(req.messages[2].tool_call_id.as_deref(), Some("call_1"));
    assert_eq!(text(&req.messages[3]), "no more");
    assert!(x.is_custom("apply_patch"));
    assert_eq!(x.verbosity.as_deref(), Some("low"));
    assert_eq!(
        x.echo.text,
        json!({"format": {"type": "text"}, "verbosity": "low"})
    );
    assert_eq!(req.user.as_deref(), Some("u1"));
    assert_eq!(x.safety_identifier.as_deref(), Some("s1"));
    assert_eq!(x.echo.metadata, json!({"k": "v"}));
    assert_eq!(x.echo.truncation, "auto");
    assert!(!x.store && !x.echo.store);
}

#[test]
fn a_second_reasoning_item_after_a_call_starts_a_new_turn() {
    let (req, _) = decode_request(
        &json!({"model": "m", "input": [
            {"role": "user", "content": "go"},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "A"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "B"},
            {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "one"}]},
            {"type": "function_call_output", "call_id": "c2", "output": ""}
        ]})
        .to_string(),
    )
    .unwrap();
    use Role::*;
    assert_eq!(roles(&req), [User, Assistant, Assistant, Tool, Tool]);
    assert!(opaque(&req.messages[1])[0].contains("\"A\""));
    assert!(opaque(&req.messages[2])[0].contains("\"B\""));
    assert_eq!(req.messages[2].tool_calls[0].id, "c2");
    assert_eq!(text(&req.messages[3]), "one");
    assert_eq!(req.messages[4].content, [ContentPart::Text(String::new())]);
}

#[test]
fn the_passthrough_view_replaces_only_the_model() {
    let body = fixture("responses_reasoning_codex.request.json");
    let p = peek_request(&body).unwrap();
    assert_eq!(p.model, "gpt-5-codex");
    assert!(p.stream);
    assert!(!p.store);
    assert_eq!(p.previous_response_id, None);
    let out = String::from_utf8(p.write_upstream(Some("gpt-5-codex-2025"), None)).unwrap();
    assert!(out.starts_with(r#"{"model":"gpt-5-codex-2025","#));
    let blob = r#""encrypted_content": "gAAAAABo0000CONSTRUCTED-opaque-blob-returned-by-the-previous-response==""#;
    assert!(out.contains(blob), "input items go through as text");
    let mut want: Value = serde_json::from_str(&body).unwrap();
    want["model"] = "gpt-5-codex-2025".into();
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), want);

    let body = fixture("responses_previous_response_id.request.json");
    let p = peek_request(&body).unwrap();
    assert!(p.store && !p.stream);
    assert_eq!(
        p.previous_response_id.as_deref(),
        Some("resp_0435eb6c2aa8e9eb0069e1600000608195818a61245c018620")
    );
    assert_eq!(
        peek_request(r#"{"input":"x"}"#)
            .unwrap_err()
            .param
            .as_deref(),
        Some("model")
    );
    assert!(peek_request("[]").is_err());
}

#[test]
fn the_error_envelope_has_the_four_fields() {
    let body = error_body(
        "Previous response with id 'resp_x' not found.",
        "invalid_request_error",
        Some("previous_response_id"),
        Some("previous_response_not_found"),
    );
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        v,
        json!({"error": {"message": "Previous response with id 'resp_x' not found.",
            "type": "invalid_request_error", "param": "previous_response_id",
            "code": "previous_response_not_found"}})
    );
    let v: Value = serde_json::from_slice(&error_body("m", "server_error", None, None)).unwrap();
    assert_eq!(v["error"]["param"], Value::Null);
    assert_eq!(v["error"]["code"], Value::Null);
}
