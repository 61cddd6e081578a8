//! What a Responses request says that the IR has no field for, and the
//! request parameters every Responses answer must echo back.
//!
//! None of this goes into `ChatRequest::provider_options`: those are merged
//! into *any* upstream body, and `prompt_cache_key` or `service_tier` would be
//! an unknown-field 400 at Anthropic or Gemini. The gateway reads these fields
//! and decides per deployment.

use serde_json::{Map, Value};

/// The Responses-only part of a decoded request.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponsesExtras {
    /// `store` (default `true`): the client expects the answer to be
    /// retrievable through `previous_response_id` later.
    pub store: bool,
    pub previous_response_id: Option<String>,
    /// `conversation` (a string id or `{id}`), as raw JSON text: like
    /// `previous_response_id` it must not be ignored.
    pub conversation: Option<String>,
    /// `include[]`, e.g. `reasoning.encrypted_content`.
    pub include: Vec<String>,
    /// Names of `custom` (freeform) tools, emulated in the IR as functions
    /// with one string parameter `input`; their calls go back to the client
    /// as `custom_tool_call` items.
    pub custom_tools: Vec<String>,
    /// A hosted `web_search` / `web_search_preview` tool was declared: its
    /// JSON text as sent (the gateway maps it to a provider search tool or
    /// names it as dropped).
    pub web_search: Option<String>,
    /// Other hosted tool types the IR cannot carry (`file_search`, `mcp`, …),
    /// in request order; the gateway names them in a header.
    pub dropped_tools: Vec<String>,
    /// `tool_choice` forces a hosted tool: its type (`web_search_preview`,
    /// `file_search`, `mcp`, `shell`, …). The IR `tool_choice` is left unset.
    pub forced_hosted: Option<String>,
    /// `reasoning.summary` (`auto` | `concise` | `detailed`).
    pub reasoning_summary: Option<String>,
    /// `text.verbosity` (`low` | `medium` | `high`).
    pub verbosity: Option<String>,
    pub prompt_cache_key: Option<String>,
    pub service_tier: Option<String>,
    /// `truncation` (`auto` | `disabled`).
    pub truncation: Option<String>,
    pub metadata: Option<Map<String, Value>>,
    /// `safety_identifier` (also copied to `ChatRequest::user` when `user`
    /// is absent).
    pub safety_identifier: Option<String>,
    /// What the answer echoes.
    pub echo: Echo,
}

impl Default for ResponsesExtras {
    fn default() -> Self {
        ResponsesExtras {
            store: true,
            previous_response_id: None,
            conversation: None,
            include: Vec::new(),
            custom_tools: Vec::new(),
            web_search: None,
            dropped_tools: Vec::new(),
            forced_hosted: None,
            reasoning_summary: None,
            verbosity: None,
            prompt_cache_key: None,
            service_tier: None,
            truncation: None,
            metadata: None,
            safety_identifier: None,
            echo: Echo::default(),
        }
    }
}

impl ResponsesExtras {
    /// `name` is a tool the client declared as `custom`.
    pub fn is_custom(&self, name: &str) -> bool {
        self.custom_tools.iter().any(|c| c == name)
    }

    /// The client asked for `reasoning.encrypted_content` in the output.
    pub fn wants_encrypted_reasoning(&self) -> bool {
        self.include
            .iter()
            .any(|i| i == "reasoning.encrypted_content")
    }
}

/// Request parameters echoed in every Response object (typed SDKs fail on a
/// missing required field), with the API's defaults when the client left
/// them out. `tools`, `tool_choice`, `text` and `reasoning` are echoed as the
/// client sent them.
#[derive(Debug, Clone, PartialEq)]
pub struct Echo {
    pub instructions: Option<String>,
    pub tools: Vec<Value>,
    pub tool_choice: Value,
    pub text: Value,
    pub reasoning: Value,
    pub temperature: f64,
    pub top_p: f64,
    pub top_logprobs: u32,
    pub max_output_tokens: Option<u32>,
    pub max_tool_calls: Option<u32>,
    pub parallel_tool_calls: bool,
    pub store: bool,
    pub background: bool,
    pub previous_response_id: Option<String>,
    pub prompt_cache_key: Option<String>,
    pub safety_identifier: Option<String>,
    pub user: Option<String>,
    pub service_tier: String,
    pub truncation: String,
    pub metadata: Value,
}

impl Default for Echo {
    fn default() -> Self {
        Echo {
            instructions: None,
            tools: Vec::new(),
            tool_choice: Value::from("auto"),
            text: serde_json::json!({"format": {"type": "text"}, "verbosity": "medium"}),
            reasoning: serde_json::json!({"effort": null, "summary": null}),
            temperature: 1.0,
            top_p: 1.0,
            top_logprobs: 0,
            max_output_tokens: None,
            max_tool_calls: None,
            parallel_tool_calls: true,
            store: true,
            background: false,
            previous_response_id: None,
            prompt_cache_key: None,
            safety_identifier: None,
            user: None,
            service_tier: "default".into(),
            truncation: "disabled".into(),
            metadata: Value::Object(Map::new()),
        }
    }
}

impl Echo {
    /// Insert the echoed fields into a Response object.
    pub fn write_into(&self, o: &mut Map<String, Value>) {
        let opt = |s: &Option<String>| s.clone().map_or(Value::Null, Value::from);
        o.insert("instructions".into(), opt(&self.instructions));
        o.insert("tools".into(), Value::Array(self.tools.clone()));
        o.insert("tool_choice".into(), self.tool_choice.clone());
        o.insert("text".into(), self.text.clone());
        o.insert("reasoning".into(), self.reasoning.clone());
        o.insert("temperature".into(), self.temperature.into());
        o.insert("top_p".into(), self.top_p.into());
        o.insert("top_logprobs".into(), self.top_logprobs.into());
        o.insert("max_output_tokens".into(), self.max_output_tokens.into());
        o.insert("max_tool_calls".into(), self.max_tool_calls.into());
        o.insert(
            "parallel_tool_calls".into(),
            self.parallel_tool_calls.into(),
        );
        o.insert("store".into(), self.store.into());
        o.insert("background".into(), self.background.into());
        o.insert(
            "previous_response_id".into(),
            opt(&self.previous_response_id),
        );
        o.insert("prompt_cache_key".into(), opt(&self.prompt_cache_key));
        o.insert("safety_identifier".into(), opt(&self.safety_identifier));
        o.insert("user".into(), opt(&self.user));
        o.insert("service_tier".into(), self.service_tier.clone().into());
        o.insert("truncation".into(), self.truncation.clone().into());
        o.insert("metadata".into(), self.metadata.clone());
    }
}
