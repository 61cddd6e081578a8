//! Reading a request (any protocol) into a [`Conv`].

use serde_json::Value;

/// Wire protocol of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    OpenAi,
    Azure,
    Anthropic,
    Gemini,
}

impl Proto {
    /// Name used in the default answer text.
    pub fn provider_name(self) -> &'static str {
        match self {
            Proto::OpenAi | Proto::Azure => "openai",
            Proto::Anthropic => "anthropic",
            Proto::Gemini => "gemini",
        }
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
    /// (name, JSON schema)
    pub tools: Vec<(String, Value)>,
    pub choice: Choice,
    /// Tool results that come after the last user text (None if there are none).
    pub tool_results: Option<Vec<String>>,
    /// Text of a trailing assistant (`model`) message.
    pub prefill: Option<String>,
}

impl Conv {
    fn new(model: String) -> Conv {
        Conv {
            model,
            stream: false,
            include_usage: false,
            prompt_chars: 0,
            tools: Vec::new(),
            choice: Choice::Auto,
            tool_results: None,
            prefill: None,
        }
    }

    fn user_text(&mut self, t: &str) {
        self.prompt_chars += t.chars().count();
        self.tool_results = None;
    }

    fn tool_result(&mut self, t: String) {
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
        let user = m.get("role").and_then(Value::as_str) == Some("user");
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
        let user = m.get("role").and_then(Value::as_str).unwrap_or("user") != "model";
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
