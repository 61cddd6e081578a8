//! Tools, tool choice, JSON modes and `generationConfig`.

use serde_json::json;

use super::*;
use crate::ir::ToolChoice;

#[test]
fn json_schema_requests() {
    let body = encode(&openai_ir("openai/chat_json_schema.request.json"));
    let gc = &body["generationConfig"];
    assert_eq!(gc["responseMimeType"], "application/json");
    assert_eq!(gc["responseSchema"]["type"], "object");
    assert_eq!(
        gc["responseSchema"]["properties"]["units"]["enum"],
        json!(["c", "f"])
    );
    assert_no_keys(
        &body,
        &["additionalProperties", "$schema", "strict", "title"],
    );

    // A schema already in Gemini's dialect passes through unchanged.
    let golden = json_fixture("gemini/generate_json.request.json");
    let req = ir::ChatRequest {
        messages: vec![user("Suggest 3 color palettes as JSON.")],
        response_format: Some(ir::ResponseFormat::JsonSchema {
            name: "palettes".into(),
            schema: golden["generationConfig"]["responseSchema"].clone(),
            strict: Some(true),
            description: None,
        }),
        ..Default::default()
    };
    assert_eq!(encode(&req), golden);

    let req = ir::ChatRequest {
        response_format: Some(ir::ResponseFormat::JsonObject),
        ..req
    };
    assert_eq!(
        encode(&req)["generationConfig"],
        json!({"responseMimeType": "application/json"})
    );
}

#[test]
fn tool_choice_variants_match_the_lookup_table() {
    let table = json_fixture("gemini/tool_config_variants.json");
    let base = openai_ir("openai/chat_tool_call.request.json");
    let with = |c: ToolChoice| {
        encode(&ir::ChatRequest {
            tool_choice: Some(c),
            ..base.clone()
        })["toolConfig"]
            .clone()
    };
    assert_eq!(with(ToolChoice::Auto), table["auto"]);
    assert_eq!(with(ToolChoice::None), table["none"]);
    assert_eq!(with(ToolChoice::Required), table["any_required"]);
    assert_eq!(
        with(ToolChoice::Named("get_weather".into())),
        table["any_specific"]
    );
    let allowed = |required| {
        with(ToolChoice::Allowed {
            names: vec!["get_weather".into()],
            required,
        })
    };
    assert_eq!(allowed(true), table["any_specific"]);
    assert_eq!(
        allowed(false),
        json!({"functionCallingConfig": {"mode": "AUTO", "allowedFunctionNames": ["get_weather"]}})
    );
}

#[test]
fn generation_config_and_options() {
    let mut req = ir::ChatRequest {
        messages: vec![user("hi")],
        stop: (1..=7).map(|i| format!("s{i}")).collect(),
        seed: Some(42),
        presence_penalty: Some(0.5),
        frequency_penalty: Some(-0.5),
        reasoning: Some(ir::ReasoningConfig {
            effort: None,
            budget_tokens: Some(2048),
        }),
        user: Some("end-user".into()),
        ..Default::default()
    };
    req.provider_options.insert(
        "generationConfig".into(),
        json!({"thinkingConfig": {"thinkingLevel": "high"}, "mediaResolution": "MEDIA_RESOLUTION_LOW"}),
    );
    let target = Target {
        max_output_tokens: Some(1000),
        ..Default::default()
    };
    let body = encode_with(&req, &target);
    assert_eq!(
        body["generationConfig"],
        json!({
            "maxOutputTokens": 1000,
            "stopSequences": ["s1", "s2", "s3", "s4", "s5"],
            "seed": 42,
            "presencePenalty": 0.5,
            "frequencyPenalty": -0.5,
            "thinkingConfig": {"thinkingBudget": 2048, "includeThoughts": true, "thinkingLevel": "high"},
            "mediaResolution": "MEDIA_RESOLUTION_LOW"
        })
    );
    req.provider_options.clear();
    req.max_tokens = Some(10);
    req.reasoning = Some(ir::ReasoningConfig {
        effort: Some("medium".into()),
        budget_tokens: None,
    });
    let gc = &encode_with(&req, &target)["generationConfig"];
    assert_eq!(gc["maxOutputTokens"], 10);
    assert_eq!(
        gc["thinkingConfig"],
        json!({"thinkingBudget": 8192, "includeThoughts": true})
    );
}
