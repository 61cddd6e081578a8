//! What routing needs to know about a request, read once at the door:
//! capabilities it implies, its estimated size, its task and session. Each
//! door reads its own request (`Inbound::facts`); this is the IR reader and
//! the parts every door shares.
//!
//! The size is an estimate of every input token the upstream bills
//! (messages, system, tool definitions, a response schema, images) and of
//! the most output it may produce (the cap × the choices asked for): what
//! context-window fit, tpm and budget reservations are decided on (CONTRACT
//! §8, §10). Text is priced by `tokenize::estimate`; the rest is added up in
//! [`Tally`]. Tool definitions cost what the upstream makes of them
//! ([`Renders`]): OpenAI and Gemini render them compactly, Anthropic and the
//! chat templates of other OpenAI-compatible servers put their JSON into a
//! hidden system prompt.

use http::{HeaderMap, HeaderName};
use serde_json::value::RawValue;
use serde_json::Value;
use switchyard_protocol::ir::{ChatRequest, ContentPart, ResponseFormat, Role};
use switchyard_protocol::passthrough::Fields;

use super::{Door, Inbound};
use crate::config::{Capabilities, Capability, TaskRule};
use crate::names;
use crate::tokenize::{self, estimate};

/// Role and separators around each message (`<|start|>role … <|end|>`).
pub(crate) const PER_MESSAGE: u64 = 4;
/// An earlier tool call's id and separators, besides its name and arguments.
pub(crate) const PER_CALL: u64 = 3;
/// What primes the reply (`<|start|>assistant<|message|>`).
pub(crate) const PRIMING: u64 = 3;
/// When a request gives no output cap, the tpm reservation assumes this
/// many tokens a choice (a budget reservation takes the deployment's
/// `max_output_tokens` or its context window instead).
pub const DEFAULT_OUTPUT: u64 = 256;
/// Anthropic's tool-use system prompt, billed whenever a request carries
/// tools (its docs give 313–346 for earlier models; the recorded
/// claude-haiku-4-5 / claude-opus-4-6 exchanges in the fixtures bill
/// 520–610 beyond the request's own parts).
pub const ANTHROPIC_TOOL_PROMPT: u64 = 560;
/// Anthropic's structured-output prompt (`output_config.format`): the
/// recorded claude-sonnet-4-5 exchange bills ~160 beyond the request.
pub const ANTHROPIC_SCHEMA_PROMPT: u64 = 150;
/// A chat template's tool instructions on OpenAI-compatible servers (the
/// recorded DeepSeek and Qwen exchanges bill 200–310 beyond the request).
pub const TEMPLATE_TOOL_PROMPT: u64 = 250;
/// Bytes of encrypted reasoning (a Responses item's `encrypted_content`)
/// per reasoning token it stands for (the one recorded replay: 9.5 KB for
/// ~1 040 billed tokens).
pub const ENCRYPTED_BYTES_PER_TOKEN: u64 = 9;
/// A response schema's header in the compact rendering (its name line).
pub const SCHEMA_INIT: u64 = 10;

#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Capabilities the request itself implies (tools, images, JSON schema, streaming).
    pub needs: Capabilities,
    /// Capabilities a deployment must declare itself to be a candidate at
    /// all (`embeddings`): unlike `needs`, a deployment that declares no
    /// capabilities is not exempt. Empty for chat.
    pub must_declare: Capabilities,
    /// Estimated input tokens, tool definitions in their compact form
    /// ([`Input::on`] gives the figure for a given upstream).
    pub prompt_tokens: u64,
    /// The estimate's parts, for the upstreams that render tools otherwise.
    pub input: Input,
    /// Output tokens asked for a choice (`max_tokens`), if any.
    pub max_tokens: Option<u32>,
    /// Choices asked for (OpenAI `n`): each may produce `max_tokens`.
    /// 0 is read as 1.
    pub choices: u32,
    /// The door the request came through (`None` for a stream's
    /// continuation, which is always translated): an Anthropic request to
    /// an Anthropic deployment goes as it came.
    pub door: Option<Door>,
    /// `x-switchyard-task`, else the first `task_rules` match (else, on a
    /// route with `classify: true`, the scene classifier's label).
    pub task: Option<String>,
    /// Where `task` came from: `header`, `rule` or `classifier`.
    pub task_source: Option<&'static str>,
    /// `x-switchyard-session`.
    pub session: Option<String>,
}

impl Facts {
    pub fn read(inbound: &Inbound<'_>, headers: &HeaderMap, rules: &[TaskRule]) -> Facts {
        let mut f = inbound.facts();
        // A continuation is always translated (never passed through).
        f.door = (!matches!(inbound, Inbound::Resume(_))).then(|| inbound.door());
        // JSON mode on an Anthropic upstream, asked for in another dialect,
        // is a forced tool: its tool prompt is billed.
        f.input.forced_tool = f.needs.contains(Capability::JsonSchema)
            && !matches!(inbound, Inbound::Anthropic { .. });
        if inbound.stream() {
            f.needs.insert(Capability::Streaming);
        }
        let header = |name: &HeaderName| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        f.task = header(&names::TASK).map(str::to_owned);
        f.task_source = f.task.as_ref().map(|_| "header");
        if f.task.is_none() && !rules.is_empty() {
            f.task = match_rules(rules, &inbound.last_user_text().to_lowercase());
            f.task_source = f.task.as_ref().map(|_| "rule");
        }
        f.session = header(&names::SESSION).map(|s| s.chars().take(200).collect());
        f
    }

    /// Choices the answer may hold (at least one).
    pub fn choices(&self) -> u32 {
        self.choices.max(1)
    }

    /// The most output the request may produce: the cap (or `default`
    /// when it gives none) for every choice.
    pub fn output_worst(&self, default: u64) -> u64 {
        self.max_tokens
            .map_or(default, u64::from)
            .saturating_mul(u64::from(self.choices()))
    }

    /// Tokens to reserve against rpm/tpm limits before the answer is known
    /// (the client's own limits; a deployment's adds what its upstream
    /// makes of the tools, [`Input::extra`]).
    pub fn estimated_total(&self) -> u64 {
        self.prompt_tokens + self.output_worst(DEFAULT_OUTPUT)
    }

    /// The input estimate on an upstream that renders tools `r`'s way.
    pub fn prompt_on(&self, r: Renders) -> u64 {
        self.prompt_tokens
            .saturating_add_signed(self.input.extra(r))
    }

    /// Facts of a request in the IR. `raw` holds parts as the client sent
    /// them, when the door has them (tool definitions, hosted ones too):
    /// their JSON is read as it came, not re-serialized from the IR.
    pub fn from_ir(ir: &ChatRequest, raw: Raw<'_>) -> Facts {
        let mut needs = Capabilities::default();
        if !ir.tools.is_empty() {
            needs.insert(Capability::Tools);
        }
        let schema = match &ir.response_format {
            Some(ResponseFormat::JsonSchema { name, schema, .. }) => {
                needs.insert(Capability::JsonSchema);
                Some((name, schema))
            }
            _ => None,
        };
        let mut t = Tally::default();
        for m in &ir.messages {
            t.message();
            if let Some(n) = &m.name {
                t.text(n);
            }
            for p in &m.content {
                match p {
                    ContentPart::Text(s) | ContentPart::Reasoning { text: s, .. } => t.text(s),
                    ContentPart::Image { .. } => {
                        needs.insert(Capability::Vision);
                        t.binary();
                    }
                    // Opaque to every upstream but the one that made it,
                    // which drops it from earlier turns.
                    ContentPart::RedactedReasoning(_) => {}
                    ContentPart::ResponsesItem(item) => t.item(item),
                }
            }
            for c in &m.tool_calls {
                t.call(&c.name, &c.arguments);
            }
        }
        for tool in &ir.tools {
            t.tool_compact(&tool.name, tool.description.as_deref(), &tool.parameters);
        }
        match raw.tools {
            Some(tools) => t.tools_json(tools.get()),
            None if !ir.tools.is_empty() => {
                let list: Vec<Value> = ir
                    .tools
                    .iter()
                    .map(|x| serde_json::json!({"name": x.name, "description": x.description, "parameters": x.parameters}))
                    .collect();
                t.tools_json(&Value::Array(list).to_string());
            }
            None => {}
        }
        if let Some((name, s)) = schema {
            t.schema(name, s);
        }
        match raw.options {
            Some(o) => t.json(o.get()),
            None if !ir.provider_options.is_empty() => {
                t.json(&Value::Object(ir.provider_options.clone()).to_string())
            }
            None => {}
        }
        t.finish(needs, ir.max_tokens, ir.n.unwrap_or(1))
    }
}

/// How an upstream puts tool definitions into the prompt it bills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renders {
    /// OpenAI's own API, Azure, Gemini: a compact, TypeScript-like form
    /// (names, types, descriptions).
    Compact,
    /// Anthropic: the JSON, inside a hidden tool-use system prompt.
    Anthropic,
    /// Other OpenAI-compatible servers (DeepSeek, Qwen, vLLM, …): the
    /// JSON, inside their chat template's tool instructions.
    Template,
}

/// The parts of an input estimate that depend on the upstream: tool
/// definitions and a response schema, in their compact form (part of
/// `Facts::prompt_tokens`) and as JSON text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Input {
    pub compact: u64,
    pub json: u64,
    /// The request carries tool definitions.
    pub tools: bool,
    /// A response schema was asked for.
    pub json_schema: bool,
    /// … through a door other than Anthropic's (an Anthropic upstream
    /// emulates it with a forced tool).
    pub forced_tool: bool,
    /// Parts only the Anthropic passthrough carries (documents, search
    /// results, server tool calls and results): the IR, and so every
    /// translation, leaves them out.
    pub passthrough_only: u64,
}

impl Input {
    /// What an upstream that renders these parts `r`'s way bills beyond
    /// the compact estimate (`Facts::prompt_tokens`).
    pub fn extra(&self, r: Renders) -> i64 {
        let hidden = match r {
            Renders::Compact => return 0,
            Renders::Anthropic => {
                let tool_prompt = self.tools || (self.json_schema && self.forced_tool);
                let schema_prompt = self.json_schema && !self.forced_tool;
                u64::from(tool_prompt) * ANTHROPIC_TOOL_PROMPT
                    + u64::from(schema_prompt) * ANTHROPIC_SCHEMA_PROMPT
                    + self.passthrough_only
            }
            Renders::Template => u64::from(self.tools) * TEMPLATE_TOOL_PROMPT,
        };
        (self.json + hidden) as i64 - self.compact as i64
    }
}

/// Parts of a request as the client sent them (see [`Facts::from_ir`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Raw<'a> {
    /// The `tools` array.
    pub tools: Option<&'a RawValue>,
    /// `provider_options`: whatever it adds goes upstream too.
    pub options: Option<&'a RawValue>,
}

impl<'a> Raw<'a> {
    /// The parts of a body's fields.
    pub fn of(fields: &Fields<'a>) -> Raw<'a> {
        let get = |name: &str| {
            fields
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| *v)
                .filter(|v| v.get() != "null")
        };
        Raw {
            tools: get("tools"),
            options: get("provider_options"),
        }
    }
}

/// An input estimate, added up part by part: what `tokenize::count_chat`
/// counts exactly, with the hot-path [`estimate`] for text.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tally {
    tokens: u64,
    input: Input,
}

impl Tally {
    /// A message's role and separators.
    pub fn message(&mut self) {
        self.tokens += PER_MESSAGE;
    }

    pub fn text(&mut self, s: &str) {
        self.tokens += estimate::text(s);
    }

    /// JSON text (call arguments, raw items).
    pub fn json(&mut self, s: &str) {
        self.tokens += estimate::json(s);
    }

    /// A response schema, as JSON text where the upstream puts it into a
    /// prompt. OpenAI's and Gemini's own rendering bills between the
    /// compact form and the JSON (the recorded exchanges: 0.7–0.8 of the
    /// JSON): the midpoint.
    pub fn schema(&mut self, name: &str, schema: &Value) {
        self.input.json_schema = true;
        let json = estimate::json(&schema.to_string());
        let compact = SCHEMA_INIT + estimate::text(name) + schema_compact(schema);
        self.input.compact += (compact + json) / 2;
        self.input.json += json;
    }

    /// An image or another inline binary.
    pub fn binary(&mut self) {
        self.tokens += estimate::BINARY_TOKENS;
    }

    /// An earlier tool call the conversation carries.
    pub fn call(&mut self, name: &str, arguments: &str) {
        self.tokens += PER_CALL;
        self.text(name);
        self.json(arguments);
    }

    /// A raw Responses item the IR keeps as it came (a reasoning item): its
    /// encrypted reasoning is billed as the tokens it stands for (its
    /// summary is a `Reasoning` part, counted as text).
    pub fn item(&mut self, item: &str) {
        const KEY: &str = "\"encrypted_content\":";
        let Some(at) = item.find(KEY) else { return };
        let rest = item[at + KEY.len()..].trim_start();
        let len = rest
            .strip_prefix('"')
            .and_then(|r| r.find('"'))
            .unwrap_or(0) as u64;
        self.tokens += len.div_ceil(ENCRYPTED_BYTES_PER_TOKEN);
    }

    /// A tool definition, in the compact form (OpenAI's cookbook counting,
    /// `tokenize::count_tools`, with estimated text).
    pub fn tool_compact(&mut self, name: &str, description: Option<&str>, parameters: &Value) {
        if !self.input.tools {
            self.input.tools = true;
            self.input.compact += tokenize::FUNC_END;
        }
        let desc = description.unwrap_or_default();
        self.input.compact += tokenize::FUNC_INIT + estimate::text(name) + estimate::text(desc);
        self.input.compact += schema_compact(parameters);
    }

    /// Every tool definition as JSON text (the `tools` array).
    pub fn tools_json(&mut self, s: &str) {
        self.input.tools = true;
        self.input.json += estimate::json(s);
    }

    /// The facts of what was added up.
    pub fn finish(self, needs: Capabilities, max_tokens: Option<u32>, choices: u32) -> Facts {
        Facts {
            needs,
            prompt_tokens: self.tokens + self.input.compact + PRIMING,
            input: self.input,
            max_tokens,
            choices,
            ..Facts::default()
        }
    }
}

/// A JSON Schema's properties the way the compact rendering spells them:
/// per property its name, type and description (an `enum`'s items; a
/// nested object's or array's own properties).
fn schema_compact(schema: &Value) -> u64 {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return 0;
    };
    if props.is_empty() {
        return 0;
    }
    let mut n = tokenize::PROP_INIT;
    for (key, p) in props {
        n += tokenize::PROP_KEY + estimate::text(key);
        match p.get("type") {
            Some(Value::String(ty)) => n += estimate::text(ty),
            Some(other) => n += estimate::json(&other.to_string()),
            None => {}
        }
        if let Some(d) = p.get("description").and_then(Value::as_str) {
            n += estimate::text(d);
        }
        for item in p
            .get("enum")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            n += tokenize::ENUM_ITEM
                + match item {
                    Value::String(s) => estimate::text(s),
                    other => estimate::json(&other.to_string()),
                };
        }
        n += schema_compact(p);
        if let Some(items) = p.get("items") {
            n += schema_compact(items);
        }
        for alt in ["anyOf", "oneOf"] {
            if let Some(a) = p.get(alt) {
                n += estimate::json(&a.to_string());
            }
        }
    }
    n
}

/// The first rule whose keyword or regex matches the last user message.
fn match_rules(rules: &[TaskRule], text: &str) -> Option<String> {
    if text.is_empty() {
        return None;
    }
    rules
        .iter()
        .find(|r| {
            r.keywords.iter().any(|k| text.contains(k.as_str()))
                || r.regex.as_ref().is_some_and(|re| re.is_match(text))
        })
        .map(|r| r.task.clone())
}

pub(crate) fn last_user(ir: &ChatRequest) -> String {
    ir.messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map(|m| m.text())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
