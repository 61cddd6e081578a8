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

/// Codex's recorded request (function `shell_command`, custom `apply_patch`,
/// hosted `web_search`), as the Responses door reads it: a model that takes
/// Google Search beside function declarations gets both, functions first;
/// any other model gets only the functions (2.x answers 400 to the pair);
/// a search alone, or functions alone, go as they are either way.
#[test]
fn google_search_goes_beside_functions_only_where_the_model_takes_both() {
    let body = fixture("openai-responses/responses_reasoning_codex.request.json");
    let (mut req, extras) = crate::responses::decode_request(&body).unwrap();
    req.web_search = extras.web_search.is_some();
    assert!(req.web_search);
    let names: Vec<&str> = req.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["shell_command", "apply_patch"]);
    let tools_for = |req: &ir::ChatRequest, search_with_tools: bool| -> Value {
        let traits = ModelTraits { search_with_tools };
        let body = encode_request_for(req, &Target::default(), traits).unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        v.get("tools").cloned().unwrap_or(Value::Null)
    };
    let declared = |tools: &Value| -> Vec<String> {
        tools[0]["functionDeclarations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap().to_owned())
            .collect()
    };

    let both = tools_for(&req, true);
    assert_eq!(both.as_array().unwrap().len(), 2, "{both}");
    assert_eq!(declared(&both), ["shell_command", "apply_patch"]);
    assert_eq!(both[1], json!({"googleSearch": {}}));

    let plain = tools_for(&req, false);
    assert_eq!(plain.as_array().unwrap().len(), 1, "{plain}");
    assert_eq!(declared(&plain), ["shell_command", "apply_patch"]);
    // The default encoder is the model without the trait.
    let default: Value =
        serde_json::from_slice(&encode_request(&req, &Target::default()).unwrap()).unwrap();
    assert_eq!(default["tools"], plain);

    let mut search_only = req.clone();
    search_only.tools.clear();
    search_only.tool_choice = None;
    for traits in [true, false] {
        assert_eq!(
            tools_for(&search_only, traits),
            json!([{"googleSearch": {}}])
        );
    }
    let mut functions_only = req.clone();
    functions_only.web_search = false;
    for traits in [true, false] {
        let tools = tools_for(&functions_only, traits);
        assert_eq!(tools.as_array().unwrap().len(), 1, "{tools}");
        assert_eq!(declared(&tools), ["shell_command", "apply_patch"]);
    }
}
