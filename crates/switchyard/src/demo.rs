//! The built-in demo: mock providers in this process (speaking the real
//! OpenAI, Anthropic and Gemini wire formats) and a config with four routes
//! over three mock deployments, so `cargo run --release` answers at once.
//! Two routes carry model names the agent CLIs know (`claude-sonnet-5-5` for
//! Claude Code, `gpt-5.5` for Codex), so they can be pointed at it; the
//! mocks take a default behavior from `SWITCHYARD_MOCK_BEHAVIOR` (e.g. a tool
//! loop), as `switchyard mock` does.

use switchyard_mock::MockServer;

use crate::config::{self, Config};

/// The demo config for mocks listening at `mock_url` (e.g. `http://127.0.0.1:41234`).
pub fn config_yaml(mock_url: &str, listen: &str, admin_listen: &str) -> String {
    format!(
        r#"# switchyard demo: three mock deployments, four routes.
server:
  listen: {listen}
  admin_listen: {admin_listen}

providers:
  mock-openai:
    protocol: openai
    base_url: {mock_url}/v1
  mock-anthropic:
    protocol: anthropic
    base_url: {mock_url}
  mock-gemini:
    protocol: gemini
    base_url: {mock_url}

models:
  - id: mock-openai/gpt-4o-mini
    provider: mock-openai
    model: gpt-4o-mini
    context_window: 128000
    max_output_tokens: 16384
    capabilities: [tools, vision, json_schema, streaming, prefill]
    pricing: {{ input: 0.15, output: 0.60, cached_input: 0.075 }}
  - id: mock-anthropic/claude-sonnet
    provider: mock-anthropic
    model: claude-sonnet-4-5
    context_window: 200000
    max_output_tokens: 8192
    capabilities: [tools, vision, streaming, prefill]
    pricing: {{ input: 3.00, output: 15.00, cached_input: 0.30 }}
  - id: mock-gemini/gemini-flash
    provider: mock-gemini
    model: gemini-2.5-flash
    context_window: 1048576
    max_output_tokens: 8192
    capabilities: [tools, vision, json_schema, streaming]
    pricing: {{ input: 0.30, output: 2.50 }}

routes:
  chat:
    strategy: priority
    targets: [mock-openai/gpt-4o-mini, mock-anthropic/claude-sonnet]
    fallbacks: [mock-gemini/gemini-flash]
  cheap:
    strategy: cost
    targets: [mock-gemini/gemini-flash, mock-openai/gpt-4o-mini]
  # For the agent CLIs: the model names they send (`--model` / `model =`).
  # Claude Code asks for up to 128k output tokens: more than gpt-4o-mini's window.
  claude-sonnet-5-5:
    targets: [mock-anthropic/claude-sonnet]
    fallbacks: [mock-gemini/gemini-flash]
  gpt-5.5:
    targets: [mock-openai/gpt-4o-mini]
    fallbacks: [mock-gemini/gemini-flash]

# Ask twice with `"temperature": 0` and the second answer comes from here
# (`x-switchyard-cache: hit`).
cache: {{ backend: memory, ttl: 5m }}

observability:
  log_format: pretty
"#
    )
}

pub struct Demo {
    pub mock: MockServer,
    pub config: Config,
}

/// Start the mocks (default behavior from `SWITCHYARD_MOCK_BEHAVIOR`, if set)
/// and build the demo config, listening on `listen` and `admin_listen`
/// unless `SWITCHYARD_LISTEN` / `SWITCHYARD_ADMIN_LISTEN` say otherwise.
pub async fn start(listen: &str, admin_listen: &str) -> Result<Demo, String> {
    let behavior = match std::env::var(switchyard_mock::BEHAVIOR_ENV) {
        Ok(json) if !json.trim().is_empty() => Some(
            switchyard_mock::Behavior::from_json(&json)
                .map_err(|e| format!("{}: {e}", switchyard_mock::BEHAVIOR_ENV))?,
        ),
        _ => None,
    };
    let mock = MockServer::start("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot start the mock providers: {e}"))?;
    if let Some(b) = behavior {
        mock.set_default(b);
    }
    let yaml = config_yaml(&mock.base_url(), listen, admin_listen);
    // Only the listen addresses may come from outside (`serve --listen`,
    // `SWITCHYARD_LISTEN`…): the demo's config is otherwise its own.
    let env = |name: &str| {
        [config::LISTEN_ENV, config::ADMIN_LISTEN_ENV]
            .contains(&name)
            .then(|| std::env::var(name).ok())
            .flatten()
    };
    let config = config::load_str(&yaml, "<demo>", &env).map_err(|ds| {
        ds.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    })?;
    Ok(Demo { mock, config })
}

/// What to paste to try it.
pub fn curl_line(base: &str) -> String {
    format!(
        "curl -s {base}/v1/chat/completions -H 'content-type: application/json' \\\n  -d '{{\"model\":\"chat\",\"messages\":[{{\"role\":\"user\",\"content\":\"Hello!\"}}]}}'"
    )
}
