//! Small JSON text helpers shared by the dialects.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::openai::FieldError;

/// A request problem at `param`.
pub(crate) fn err(param: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        param: Some(param.into()),
        message: message.into(),
    }
}

/// One top-level field of a request, typed; a bad value is an error at
/// `param`.
pub(crate) fn field<'a, T: Deserialize<'a>>(
    raw: &'a RawValue,
    param: &str,
) -> Result<T, FieldError> {
    serde_json::from_str(raw.get()).map_err(|e| err(param, strip_position(&e)))
}

/// Keys a client's `provider_options` may not set (CONTRACT §8): the
/// gateway sets or meters them — the model, the conversation, the output
/// caps, the choices, streaming and its usage, tools — so a client could
/// otherwise reach a model it may not use, or spend past what it reserved.
/// Gemini's snake_case spellings and OpenAI's legacy `functions` are the
/// same keys under other names. (Deployment `options` are the operator's.)
pub const RESERVED_OPTIONS: &[&str] = &[
    "model",
    "messages",
    "input",
    "system",
    "instructions",
    "contents",
    "systemInstruction",
    "system_instruction",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "generationConfig",
    "generation_config",
    "n",
    "candidateCount",
    "candidate_count",
    "stream",
    "stream_options",
    "tools",
    "tool_choice",
    "toolConfig",
    "tool_config",
    "functions",
    "function_call",
];

/// A client's `provider_options`: an object that adds fields, never one
/// that replaces a field the gateway owns ([`RESERVED_OPTIONS`]).
pub(crate) fn provider_options(
    raw: &RawValue,
) -> Result<Option<serde_json::Map<String, serde_json::Value>>, FieldError> {
    let options: Option<serde_json::Map<String, serde_json::Value>> =
        field(raw, "provider_options")?;
    if let Some(key) = options
        .iter()
        .flat_map(|o| o.keys())
        .find(|k| RESERVED_OPTIONS.contains(&k.as_str()))
    {
        return Err(err(
            format!("provider_options.{key}"),
            format!(
                "provider_options.{key}: `{key}` is set by the gateway; provider_options may add fields, not replace one"
            ),
        ));
    }
    Ok(options)
}

/// serde's "at line 1 column 9" points into the sub-value, which only confuses.
pub(crate) fn strip_position(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.find(" at line ") {
        Some(i) => s[..i].to_owned(),
        None => s,
    }
}

/// JSON text without insignificant whitespace, key order and number spelling
/// kept (a `Value` round trip would sort keys). `raw` must be valid JSON.
pub fn compact_json(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut in_str = false;
    let mut escaped = false;
    for c in raw.chars() {
        if in_str {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
        } else if !c.is_ascii_whitespace() {
            if c == '"' {
                in_str = true;
            }
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod options_tests {
    use super::RESERVED_OPTIONS;

    /// Every door refuses `provider_options` that would replace what the
    /// gateway sets or meters, naming the key; other keys are added.
    #[test]
    fn provider_options_add_and_never_replace() {
        for key in RESERVED_OPTIONS {
            let options = format!(r#"{{"top_k":5,"{key}":1}}"#);
            let param = Some(format!("provider_options.{key}"));
            let chat = format!(
                r#"{{"model":"chat","messages":[{{"role":"user","content":"hi"}}],"provider_options":{options}}}"#
            );
            let e = crate::openai::parse_request(&chat).unwrap_err();
            assert_eq!(e.param, param, "chat: {e:?}");
            let messages = format!(
                r#"{{"model":"chat","max_tokens":5,"messages":[{{"role":"user","content":"hi"}}],"provider_options":{options}}}"#
            );
            let e = crate::anthropic::decode_request(&messages).unwrap_err();
            assert_eq!(e.param, param, "messages: {e:?}");
            let responses =
                format!(r#"{{"model":"chat","input":"hi","provider_options":{options}}}"#);
            let e = crate::responses::peek_request(&responses).unwrap_err();
            assert_eq!(e.param, param, "responses peek: {e:?}");
            let e = crate::responses::decode_request(&responses).unwrap_err();
            assert_eq!(e.param, param, "responses: {e:?}");
        }
        let ok = r#"{"model":"chat","messages":[{"role":"user","content":"hi"}],"provider_options":{"top_k":5,"safetySettings":[]}}"#;
        let view = crate::openai::parse_request(ok).unwrap();
        assert_eq!(view.typed.provider_options.unwrap().len(), 2);
    }
}
