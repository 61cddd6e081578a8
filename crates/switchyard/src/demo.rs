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
    DEMO_YAML
        .replace("{mock_url}", mock_url)
        .replace("{listen}", listen)
        .replace("{admin_listen}", admin_listen)
}

/// The demo config's text, with `{mock_url}`, `{listen}` and
/// `{admin_listen}` to fill (the config tests load it too).
pub const DEMO_YAML: &str = include_str!("demo.yaml");

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
