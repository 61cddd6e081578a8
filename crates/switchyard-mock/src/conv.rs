//! Reading a request (any protocol) into a [`Conv`].

use serde_json::Value;

/// Wire protocol of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    OpenAi,
    Azure,
    Anthropic,
    Gemini,
    /// OpenAI Responses API (`/v1/responses`).
    Responses,
    /// Amazon Bedrock Converse / ConverseStream (and CountTokens).
    Converse,
    /// Amazon Bedrock InvokeModel / InvokeModelWithResponseStream with an Anthropic body.
    BedrockAnthropic,
    /// Vertex AI `publishers/google` (Gemini).
    VertexGemini,
    /// Vertex AI `publishers/anthropic` (`:rawPredict`, `:streamRawPredict`).
    VertexAnthropic,
}

impl Proto {
    /// Name used in the default answer text.
    pub fn provider_name(self) -> &'static str {
        match self {
            Proto::OpenAi | Proto::Azure | Proto::Responses => "openai",
            Proto::Anthropic | Proto::BedrockAnthropic | Proto::VertexAnthropic => "anthropic",
            Proto::Gemini | Proto::VertexGemini => "gemini",
            Proto::Converse => "bedrock",
        }
    }

    /// A Bedrock route (SigV4, `x-amzn-errortype` errors).
    pub fn is_bedrock(self) -> bool {
        matches!(self, Proto::Converse | Proto::BedrockAnthropic)
    }

    /// A Vertex AI route (OAuth bearer token, google.rpc.Status errors).
    pub fn is_vertex(self) -> bool {
        matches!(self, Proto::VertexGemini | Proto::VertexAnthropic)
    }
}

/// Tool choice, normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    Auto,
    None,
    Named(String),
}

/// What the mock needs to know about a request.
#[derive(Debug, Clone)]
pub struct Conv {
    pub model: String,
    pub stream: bool,
    pub include_usage: bool,
    pub prompt_chars: usize,
    /// (name, JSON schema); a Responses `custom` tool has a null schema and is also
    /// listed in `custom_tools`.
    pub tools: Vec<(String, Value)>,
    /// Names of Responses `custom` (freeform) tools.
    pub custom_tools: Vec<String>,
    pub choice: Choice,
    /// Tool results that come after the last user text (None if there are none).
    pub tool_results: Option<Vec<String>>,
    /// Text of a trailing assistant (`model`) message.
    pub prefill: Option<String>,
    /// Responses API: the request parameters a response echoes (see [`responses`]).
    pub echo: Option<Box<Value>>,
    /// OpenAI `n`: choices in a whole (non-streamed) answer, each billed.
    pub n: u64,
    /// Bedrock Converse: the request has `cachePoint` blocks; the prompt characters before
    /// the last one and a hash of that prefix (with the model).
    pub cache_prefix: Option<(usize, u64)>,
}

impl Conv {
    pub(crate) fn new(model: String) -> Conv {
        Conv {
            model,
            stream: false,
            include_usage: false,
            prompt_chars: 0,
            tools: Vec::new(),
            choice: Choice::Auto,
            custom_tools: Vec::new(),
            tool_results: None,
            prefill: None,
            echo: None,
            n: 1,
            cache_prefix: None,
        }
    }

    /// Count `t` as the text of a new user turn.
    pub(crate) fn user_text(&mut self, t: &str) {
        self.prompt_chars += t.chars().count();
        self.tool_results = None;
    }

    /// Count `t` as a tool result after the last user turn.
    pub(crate) fn tool_result(&mut self, t: String) {
        self.prompt_chars += t.chars().count();
        self.tool_results.get_or_insert_with(Vec::new).push(t);
    }
}

/// Text of an OpenAI/Anthropic `content`: a string, or the concatenated `text` of its parts.
pub fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str).unwrap_or("text") == "text")
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

fn str_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// OpenAI / Azure chat completions request.
pub fn openai(body: &Value, model_override: Option<&str>) -> Conv {
    let model = model_override
        .map(str::to_string)
        .or_else(|| str_of(body, "model"))
        .unwrap_or_default();
    let mut c = Conv::new(model);
    c.stream = body.get("stream").and_then(Value::as_bool) == Some(true);
    c.n = body
        .get("n")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .clamp(1, 128);
    c.include_usage = body
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        == Some(true);
    let msgs = body
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let (history, last) = split_prefill(msgs, |m| {
        m.get("role").and_then(Value::as_str) == Some("assistant")
            && m.get("tool_calls").is_none_or(|t| t.is_null())
    });
    for m in history {
        let content = m.get("content").map(content_text).unwrap_or_default();
        match m.get("role").and_then(Value::as_str).unwrap_or("") {
            "user" => c.user_text(&content),
            "tool" | "function" => c.tool_result(content),
            _ => c.prompt_chars += content.chars().count(),
        }
    }
    if let Some(m) = last {
        c.prefill = m.get("content").map(content_text);
    }
    for t in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(f) = t.get("function") {
            if let Some(name) = str_of(f, "name") {
                let schema = f.get("parameters").cloned().unwrap_or(Value::Null);
                c.tools.push((name, schema));
            }
        }
    }
    c.choice = match body.get("tool_choice") {
        Some(Value::String(s)) if s == "none" => Choice::None,
        Some(v @ Value::Object(_)) => match v.pointer("/function/name").and_then(Value::as_str) {
            Some(n) => Choice::Named(n.to_string()),
            None => Choice::Auto,
        },
        _ => Choice::Auto,
    };
    c
}

/// Anthropic messages request.
pub fn anthropic(body: &Value) -> Conv {
    let mut c = Conv::new(str_of(body, "model").unwrap_or_default());
    c.stream = body.get("stream").and_then(Value::as_bool) == Some(true);
    if let Some(sys) = body.get("system") {
        c.prompt_chars += content_text(sys).chars().count();
    }
    let msgs = body
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let (history, last) = split_prefill(msgs, |m| {
        m.get("role").and_then(Value::as_str) == Some("assistant")
            && !has_block(m.get("content"), "tool_use")
    });
    for m in history {
        // A user message that carries tool results is a tool-result turn: its text blocks
        // (Claude Code appends reminders after `tool_result`) do not start a new user turn.
        let user = m.get("role").and_then(Value::as_str) == Some("user")
            && !has_block(m.get("content"), "tool_result");
        match m.get("content") {
            Some(Value::String(s)) if user => c.user_text(s),
            Some(Value::String(s)) => c.prompt_chars += s.chars().count(),
            Some(Value::Array(blocks)) => {
                for b in blocks {
                    match b.get("type").and_then(Value::as_str).unwrap_or("") {
                        "text" => {
                            let t = b.get("text").and_then(Value::as_str).unwrap_or("");
                            if user {
                                c.user_text(t)
                            } else {
                                c.prompt_chars += t.chars().count()
                            }
                        }
                        "tool_result" => {
                            c.tool_result(b.get("content").map(content_text).unwrap_or_default())
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(m) = last {
        c.prefill = m.get("content").map(content_text);
    }
    for t in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(name) = str_of(t, "name") {
            let schema = t.get("input_schema").cloned().unwrap_or(Value::Null);
            c.tools.push((name, schema));
        }
    }
    c.choice = match body.pointer("/tool_choice/type").and_then(Value::as_str) {
        Some("none") => Choice::None,
        Some("tool") => match body.pointer("/tool_choice/name").and_then(Value::as_str) {
            Some(n) => Choice::Named(n.to_string()),
            None => Choice::Auto,
        },
        _ => Choice::Auto,
    };
    c
}

fn has_block(content: Option<&Value>, ty: &str) -> bool {
    content.and_then(Value::as_array).is_some_and(|b| {
        b.iter()
            .any(|b| b.get("type").and_then(Value::as_str) == Some(ty))
    })
}

/// Gemini generateContent request (`model` and `stream` come from the URL).
pub fn gemini(body: &Value, model: &str, stream: bool) -> Conv {
    let mut c = Conv::new(model.to_string());
    c.stream = stream;
    let get = |v: &'_ Value, camel: &str, snake: &str| -> Option<Value> {
        v.get(camel).or_else(|| v.get(snake)).cloned()
    };
    if let Some(sys) = get(body, "systemInstruction", "system_instruction") {
        for p in sys
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(t) = p.get("text").and_then(Value::as_str) {
                c.prompt_chars += t.chars().count();
            }
        }
    }
    let contents = body
        .get("contents")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let (history, last) = split_prefill(contents, |m| {
        m.get("role").and_then(Value::as_str) == Some("model")
            && !m
                .get("parts")
                .and_then(Value::as_array)
                .is_some_and(|ps| ps.iter().any(|p| p.get("functionCall").is_some()))
    });
    for m in history {
        let parts = m.get("parts").and_then(Value::as_array);
        let has_response = parts.is_some_and(|ps| {
            ps.iter().any(|p| {
                p.get("functionResponse")
                    .or(p.get("function_response"))
                    .is_some()
            })
        });
        // As for Anthropic: text beside a functionResponse does not start a new user turn.
        let user =
            m.get("role").and_then(Value::as_str).unwrap_or("user") != "model" && !has_response;
        for p in m
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(t) = p.get("text").and_then(Value::as_str) {
                if user {
                    c.user_text(t)
                } else {
                    c.prompt_chars += t.chars().count()
                }
            } else if let Some(fr) = get(p, "functionResponse", "function_response") {
                let resp = fr.get("response").cloned().unwrap_or(Value::Null);
                let text = match resp.as_object() {
                    Some(o) if o.len() == 1 && o.get("result").is_some_and(Value::is_string) => {
                        o["result"].as_str().unwrap_or_default().to_string()
                    }
                    _ => resp.to_string(),
                };
                c.tool_result(text);
            }
        }
    }
    if let Some(m) = last {
        let t: String = m
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|p| p.get("thought").and_then(Value::as_bool) != Some(true))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect();
        c.prefill = Some(t);
    }
    for t in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let decls = get(t, "functionDeclarations", "function_declarations");
        for d in decls
            .as_ref()
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = str_of(d, "name") {
                let schema = get(d, "parameters", "parameters")
                    .or_else(|| get(d, "parametersJsonSchema", "parameters_json_schema"))
                    .unwrap_or(Value::Null);
                c.tools.push((name, schema));
            }
        }
    }
    if let Some(cfg) = get(body, "toolConfig", "tool_config") {
        if let Some(fc) = get(&cfg, "functionCallingConfig", "function_calling_config") {
            let mode = fc.get("mode").and_then(Value::as_str).unwrap_or("AUTO");
            let allowed = get(&fc, "allowedFunctionNames", "allowed_function_names");
            let first = allowed
                .as_ref()
                .and_then(Value::as_array)
                .and_then(|a| a.first())
                .and_then(Value::as_str);
            c.choice = match (mode, first) {
                ("NONE", _) => Choice::None,
                (_, Some(n)) => Choice::Named(n.to_string()),
                _ => Choice::Auto,
            };
        }
    }
    c
}

/// Split off a trailing message matching `is_prefill`.
fn split_prefill(
    msgs: &[Value],
    is_prefill: impl Fn(&Value) -> bool,
) -> (&[Value], Option<&Value>) {
    match msgs.split_last() {
        Some((last, rest)) if is_prefill(last) => (rest, Some(last)),
        _ => (msgs, None),
    }
}

/// Text of a Responses `content` / `output`: a string, or the concatenated `text` of its
/// `input_text` / `output_text` / `text` parts.
fn responses_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| {
                matches!(
                    p.get("type").and_then(Value::as_str).unwrap_or("text"),
                    "input_text" | "output_text" | "text"
                )
            })
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// OpenAI Responses request (`POST /v1/responses`, also `/v1/responses/input_tokens`).
///
/// `input` is a string (one user message) or items: `message` (also without `type`), whose
/// user text starts a turn and whose other roles only count; `function_call_output` and
/// `custom_tool_call_output`, which are tool results; everything else (`function_call`,
/// `custom_tool_call`, `reasoning`, `item_reference`, hosted-tool items) is ignored.
pub fn responses(body: &Value) -> Conv {
    let mut c = Conv::new(str_of(body, "model").unwrap_or_default());
    c.stream = body.get("stream").and_then(Value::as_bool) == Some(true);
    if let Some(i) = body.get("instructions").and_then(Value::as_str) {
        c.prompt_chars += i.chars().count();
    }
    match body.get("input") {
        Some(Value::String(s)) => c.user_text(s),
        Some(Value::Array(items)) => {
            for it in items {
                let ty = it.get("type").and_then(Value::as_str);
                let ty = ty.unwrap_or(if it.get("role").is_some() {
                    "message"
                } else {
                    ""
                });
                match ty {
                    "message" => {
                        let text = it.get("content").map(responses_text).unwrap_or_default();
                        if it.get("role").and_then(Value::as_str) == Some("user") {
                            c.user_text(&text)
                        } else {
                            c.prompt_chars += text.chars().count()
                        }
                    }
                    "function_call_output" | "custom_tool_call_output" => {
                        c.tool_result(it.get("output").map(responses_text).unwrap_or_default())
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    for t in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(name) = str_of(t, "name") else {
            continue;
        };
        match t.get("type").and_then(Value::as_str) {
            Some("function") => {
                let schema = t.get("parameters").cloned().unwrap_or(Value::Null);
                c.tools.push((name, schema));
            }
            Some("custom") => {
                c.tools.push((name.clone(), Value::Null));
                c.custom_tools.push(name);
            }
            _ => {}
        }
    }
    let tc = body.get("tool_choice");
    c.choice = match tc {
        Some(Value::String(s)) if s == "none" => Choice::None,
        Some(v @ Value::Object(_)) => match v.get("type").and_then(Value::as_str) {
            Some("function" | "custom") => match str_of(v, "name") {
                Some(n) => Choice::Named(n),
                None => Choice::Auto,
            },
            Some("allowed_tools") => v
                .get("tools")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|t| {
                    matches!(
                        t.get("type").and_then(Value::as_str),
                        Some("function" | "custom")
                    )
                })
                .find_map(|t| str_of(t, "name"))
                .map_or(Choice::Auto, Choice::Named),
            _ => Choice::Auto,
        },
        _ => Choice::Auto,
    };
    c.echo = Some(Box::new(responses_echo(body)));
    c
}

/// The request parameters a Responses body echoes, with the API's defaults (floats as
/// `1.0`), in no particular order (the renderer picks them by name).
fn responses_echo(body: &Value) -> Value {
    let get = |k: &str, default: Value| -> Value {
        match body.get(k) {
            Some(v) if !v.is_null() => v.clone(),
            _ => default,
        }
    };
    let tools: Vec<Value> = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|t| {
            if t.get("type").and_then(Value::as_str) != Some("function") {
                return t.clone();
            }
            // Echoed flat, in the API's order, `description: null` and `strict: true` filled in.
            let f = |k: &str, d: Value| t.get(k).cloned().unwrap_or(d);
            serde_json::json!({
                "type": "function",
                "description": f("description", Value::Null),
                "name": f("name", Value::Null),
                "parameters": f("parameters", Value::Null),
                "strict": f("strict", Value::Bool(true))
            })
        })
        .collect();
    let reasoning = body.get("reasoning");
    let pick = |k: &str| {
        reasoning
            .and_then(|r| r.get(k))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let text = body.get("text");
    let include_encrypted = body
        .get("include")
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter()
                .any(|i| i.as_str() == Some("reasoning.encrypted_content"))
        });
    serde_json::json!({
        "instructions": get("instructions", Value::Null),
        "max_output_tokens": get("max_output_tokens", Value::Null),
        "max_tool_calls": get("max_tool_calls", Value::Null),
        "parallel_tool_calls": get("parallel_tool_calls", Value::Bool(true)),
        "previous_response_id": get("previous_response_id", Value::Null),
        "prompt_cache_key": get("prompt_cache_key", Value::Null),
        "prompt_cache_retention": get("prompt_cache_retention", Value::Null),
        "reasoning": {"effort": pick("effort"), "summary": pick("summary")},
        "safety_identifier": get("safety_identifier", Value::Null),
        "service_tier": get("service_tier", Value::String("auto".into())),
        "store": get("store", Value::Bool(true)),
        "temperature": get("temperature", Value::from(1.0)),
        "frequency_penalty": get("frequency_penalty", Value::from(0.0)),
        "presence_penalty": get("presence_penalty", Value::from(0.0)),
        "text": {
            "format": text.and_then(|t| t.get("format")).cloned().unwrap_or(serde_json::json!({"type": "text"})),
            "verbosity": text.and_then(|t| t.get("verbosity")).cloned().unwrap_or(Value::String("medium".into()))
        },
        "tool_choice": get("tool_choice", Value::String("auto".into())),
        "tools": tools,
        "top_logprobs": get("top_logprobs", Value::from(0)),
        "top_p": get("top_p", Value::from(1.0)),
        "truncation": get("truncation", Value::String("disabled".into())),
        "user": get("user", Value::Null),
        "metadata": get("metadata", serde_json::json!({})),
        "include_encrypted": include_encrypted
    })
}
