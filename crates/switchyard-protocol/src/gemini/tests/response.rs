use std::time::Duration;

use super::*;
use crate::ir::FinishReason;

fn decode(name: &str) -> ir::ChatResponse {
    decode_response(fixture(name).as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub(super) const RESPONSES: &[&str] = &[
    "gemini/generate_finish_safety.response.json",
    "gemini/generate_function_call.response.json",
    "gemini/generate_function_call_parallel.response.json",
    "gemini/generate_function_call_thinking.response.json",
    "gemini/generate_function_response.response.json",
    "gemini/generate_json.response.json",
    "gemini/generate_text.response.json",
    "gemini/generate_text_gemini3.response.json",
    "gemini/generate_thought_summary.response.json",
    "gemini/generate_usage_cached_thoughts.response.json",
];

#[test]
fn text_responses() {
    let r = decode("gemini/generate_text.response.json");
    assert_eq!(
        r.text.as_deref(),
        Some("Google's headquarters, also known as the Googleplex, is located in **Mountain View, California**.\n")
    );
    assert_eq!(r.model, "gemini-2.0-flash");
    assert!(r.id.starts_with("gemini-"), "synthesized: {}", r.id);
    assert_eq!(
        (r.finish_reason, r.raw_finish_reason.as_deref()),
        (FinishReason::Stop, Some("STOP"))
    );
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (7, 22));
    assert!(r.tool_calls.is_empty() && r.reasoning.is_none());

    let r = decode("gemini/generate_text_gemini3.response.json");
    assert_eq!(r.id, "Un6LacrVMcjUxs0PmJfWoQc");
    assert!(r.text.unwrap().starts_with("There are **3** r's"));
    assert!(r.reasoning_signature.unwrap().starts_with("EtoFCtcF"));
    let u = r.usage;
    assert_eq!(
        (u.input_tokens, u.output_tokens, u.reasoning_tokens),
        (9, 28 + 244, 244)
    );
    assert_eq!(u.total(), 281);

    let u = decode("gemini/generate_usage_cached_thoughts.response.json").usage;
    assert_eq!((u.input_tokens, u.cached_input_tokens), (12013, 11243));
    assert_eq!((u.output_tokens, u.reasoning_tokens), (15 + 73, 73));
    assert_eq!(u.total(), 12101);

    let r = decode("gemini/generate_thought_summary.response.json");
    assert_eq!(r.text.as_deref(), Some("Mountain View"));
    assert!(r
        .reasoning
        .unwrap()
        .starts_with("**Thinking About Google's Headquarters**"));

    let r = decode("gemini/generate_json.response.json");
    let v: serde_json::Value = serde_json::from_str(r.text.as_deref().unwrap()).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 3);
    assert_eq!(r.usage, ir::Usage::default());

    let r = decode("gemini/generate_function_response.response.json");
    assert_eq!(
        r.text.as_deref(),
        Some("It's currently foggy in San Francisco at about 18°C.")
    );
    assert_eq!(r.usage.total(), 75);
}

#[test]
fn function_call_responses() {
    let r = decode("gemini/generate_function_call.response.json");
    assert_eq!(r.finish_reason, FinishReason::ToolCalls);
    assert_eq!(r.raw_finish_reason.as_deref(), Some("STOP"));
    assert_eq!(r.tool_calls.len(), 1);
    let c = &r.tool_calls[0];
    assert_eq!(
        (c.name.as_str(), c.arguments.as_str()),
        ("weather", r#"{"location":"San Francisco"}"#)
    );
    assert_eq!(c.id, synth_call_id(0, "m36LaZGyCLz1xs0PtNSB-QU", "weather"));
    assert!(r.reasoning_signature.unwrap().starts_with("EskgCsYg"));
    assert_eq!(r.text, None);
    assert_eq!(
        (r.usage.output_tokens, r.usage.reasoning_tokens),
        (15 + 893, 893)
    );

    let r = decode("gemini/generate_function_call_parallel.response.json");
    let args: Vec<&str> = r.tool_calls.iter().map(|c| c.arguments.as_str()).collect();
    assert_eq!(
        args,
        [r#"{"y":1,"x":2}"#, r#"{"y":3,"x":4}"#, r#"{"y":5,"x":6}"#]
    );
    // No responseId: the answer's made-up id gives its calls their tag.
    let ids: Vec<String> = r.tool_calls.iter().map(|c| c.id.clone()).collect();
    assert_eq!(
        ids,
        (0..3)
            .map(|n| synth_call_id(n, &r.id, "sum"))
            .collect::<Vec<_>>()
    );
    assert_eq!(r.finish_reason, FinishReason::ToolCalls);

    let r = decode("gemini/generate_function_call_thinking.response.json");
    assert!(r.reasoning.unwrap().contains("New Year's Eve"));
    assert_eq!(r.tool_calls[0].name, "now");
    assert_eq!(r.tool_calls[0].arguments, "{}");
    assert!(r.reasoning_signature.unwrap().starts_with("CtQOAVSo"));
}

#[test]
fn safety_and_blocked_prompts() {
    let r = decode("gemini/generate_finish_safety.response.json");
    assert_eq!(r.finish_reason, FinishReason::ContentFilter);
    assert_eq!(r.raw_finish_reason.as_deref(), Some("SAFETY"));
    assert!(r.text.is_some(), "partial text is kept");

    let blocked = |name: &str| decode_response(fixture(name).as_bytes()).unwrap_err();
    assert_eq!(
        blocked("gemini/generate_prompt_blocked.response.json"),
        DecodeError::PromptBlocked {
            reason: "SAFETY".into(),
            message: None
        }
    );
    assert_eq!(
        blocked("gemini/generate_prompt_blocked_with_message.response.json"),
        DecodeError::PromptBlocked {
            reason: "SAFETY".into(),
            message: Some("Reasons".into())
        }
    );
    assert!(matches!(
        decode_response(b"{}"),
        Err(DecodeError::NoCandidates)
    ));
    assert!(matches!(
        decode_response(b"nope"),
        Err(DecodeError::Json(_))
    ));
    let body = json_fixture("gemini/error_503_unavailable.http.json")["body"].to_string();
    assert!(
        matches!(decode_response(body.as_bytes()), Err(DecodeError::Upstream(e)) if e.code == 503)
    );
}

#[test]
fn finish_reason_table() {
    for (raw, calls, want) in [
        ("STOP", false, FinishReason::Stop),
        ("STOP", true, FinishReason::ToolCalls),
        ("MAX_TOKENS", true, FinishReason::Length),
        ("RECITATION", false, FinishReason::ContentFilter),
        ("IMAGE_SAFETY", false, FinishReason::ContentFilter),
        ("SPII", false, FinishReason::ContentFilter),
        ("MALFORMED_FUNCTION_CALL", false, FinishReason::Error),
        ("TOO_MANY_TOOL_CALLS", true, FinishReason::Error),
        ("LANGUAGE", false, FinishReason::Stop),
        ("OTHER", false, FinishReason::Stop),
        ("FINISH_REASON_UNSPECIFIED", false, FinishReason::Stop),
    ] {
        assert_eq!(finish_reason(raw, calls), want, "{raw}");
    }
}

#[test]
fn responses_survive_an_encode_decode_round_trip() {
    for name in RESPONSES {
        let r = decode(name);
        let again = decode_response(&encode_response(&r)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let strip = |mut r: ir::ChatResponse| {
            // Ids synthesized without a responseId get the re-encoded id's tag.
            r.tool_calls.iter_mut().for_each(|c| c.id.clear());
            r
        };
        assert_eq!(strip(again.clone()), strip(r.clone()), "{name}");
        if fixture(name).contains("\"responseId\"") {
            assert_eq!(again.tool_calls, r.tool_calls, "{name}");
        }
    }
}

#[test]
fn error_bodies_parse() {
    for (name, code, status) in [
        ("error_400_api_key_invalid", 400, "INVALID_ARGUMENT"),
        ("error_400_context_length", 400, "INVALID_ARGUMENT"),
        ("error_400_invalid_argument", 400, "INVALID_ARGUMENT"),
        ("error_403_missing_api_key", 403, "PERMISSION_DENIED"),
        ("error_403_service_disabled", 403, "PERMISSION_DENIED"),
        ("error_404_model_not_found", 404, "NOT_FOUND"),
        ("error_429_resource_exhausted", 429, "RESOURCE_EXHAUSTED"),
        ("error_500_internal", 500, "INTERNAL"),
        ("error_503_unavailable", 503, "UNAVAILABLE"),
    ] {
        let env = json_fixture(&format!("gemini/{name}.http.json"));
        assert_eq!(env["status"], code, "{name}");
        let e = parse_error(env["body"].to_string().as_bytes()).unwrap_or_else(|| panic!("{name}"));
        assert_eq!((e.code, e.status.as_str()), (code, status), "{name}");
        assert!(!e.message.is_empty(), "{name}");
        let want_reason = match name {
            "error_400_api_key_invalid" => Some("API_KEY_INVALID"),
            "error_403_service_disabled" => Some("SERVICE_DISABLED"),
            _ => None,
        };
        assert_eq!(e.reason.as_deref(), want_reason, "{name}");
        let want_delay = (code == 429).then_some(Duration::from_secs(26));
        assert_eq!(e.retry_delay, want_delay, "{name}");
    }
    let e = parse_error(
        br#"[{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Quota exceeded. Please retry in 36.4s."}}]"#,
    )
    .unwrap();
    assert_eq!(e.retry_delay, Some(Duration::from_millis(36_400)));
    let e = parse_error(
        br#"{"error": {"code": 429, "message": "x", "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.5s"}]}}"#,
    )
    .unwrap();
    assert_eq!(e.retry_delay, Some(Duration::from_millis(500)));
    assert_eq!(parse_error(b"{\"candidates\": []}"), None);
    assert_eq!(parse_error(b"<html>"), None);
}

/// Token counts add up saturating: `u64::MAX` plus one is not one (a
/// wrapped sum would bill a huge answer as a tiny one; in a debug build it
/// was a panic).
#[test]
fn usage_at_the_top_of_u64_saturates() {
    let body = br#"{"candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}],
        "usageMetadata":{"promptTokenCount":18446744073709551615,"toolUsePromptTokenCount":1,
        "candidatesTokenCount":18446744073709551615,"thoughtsTokenCount":2}}"#;
    let u = decode_response(body).unwrap().usage;
    assert_eq!((u.input_tokens, u.output_tokens), (u64::MAX, u64::MAX));
    assert_eq!(u.total(), u64::MAX);
}

/// A retry delay of u64::MAX seconds is read as the longest one kept (an
/// hour, as for a `Retry-After` header): the gateway adds it to the clock
/// to cool a key down, and `Instant + 584 billion years` panics.
#[test]
fn a_retry_delay_past_any_clock_is_capped() {
    for delay in ["18446744073709551615s", "18446744073709551615.999999999s"] {
        let body = format!(
            r#"{{"error": {{"code": 429, "message": "x", "details": [{{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "{delay}"}}]}}}}"#
        );
        let e = parse_error(body.as_bytes()).unwrap();
        assert_eq!(e.retry_delay, Some(MAX_RETRY_DELAY));
        assert!(std::time::Instant::now()
            .checked_add(e.retry_delay.unwrap())
            .is_some());
    }
    let e = parse_error(br#"{"error": {"code": 429, "message": "Please retry in 99999999999s."}}"#)
        .unwrap();
    assert_eq!(e.retry_delay, Some(MAX_RETRY_DELAY));
}
