//! OpenAI-compatible flavors (contract §9): `flavor`, taken from the host
//! when absent, and a model's `reasoning_replay`.

use super::{errs, load};
use crate::config::{Flavor, ReasoningReplay};

fn provider(url: &str, extra: &str) -> String {
    format!(
        "providers:\n  p: {{ protocol: openai, base_url: \"{url}\"{extra} }}\nmodels:\n  - {{ id: p/m, provider: p, model: m }}\n"
    )
}

#[test]
fn the_flavor_is_taken_from_the_host_when_absent() {
    let cases = [
        ("https://api.deepseek.com/v1", Flavor::DeepSeek),
        (
            "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
            Flavor::Qwen,
        ),
        (
            "https://dashscope.aliyuncs.com/compatible-mode/v1",
            Flavor::Qwen,
        ),
        ("https://open.bigmodel.cn/api/paas/v4", Flavor::Zhipu),
        ("https://api.z.ai/api/coding/paas/v4", Flavor::Zhipu),
        ("https://api.moonshot.ai/v1", Flavor::Moonshot),
        ("https://api.moonshot.cn/v1", Flavor::Moonshot),
        ("https://ark.cn-beijing.volces.com/api/v3", Flavor::Ark),
        ("https://api.minimax.io/v1", Flavor::MiniMax),
        ("https://api.minimaxi.com/v1", Flavor::MiniMax),
        ("https://api.openai.com/v1", Flavor::Generic),
        ("http://127.0.0.1:8000/v1", Flavor::Generic),
        // A look-alike is not the provider.
        ("https://notdeepseek.com/v1", Flavor::Generic),
    ];
    for (url, want) in cases {
        let c = load(&provider(url, "")).unwrap();
        assert_eq!(c.providers["p"].flavor, want, "{url}");
    }
}

#[test]
fn an_explicit_flavor_wins_over_the_host() {
    let c = load(&provider("http://127.0.0.1:9/v1", ", flavor: minimax")).unwrap();
    assert_eq!(c.providers["p"].flavor, Flavor::MiniMax);
    let c = load(&provider("https://api.deepseek.com", ", flavor: vllm")).unwrap();
    assert_eq!(c.providers["p"].flavor, Flavor::Vllm);
}

#[test]
fn a_flavor_is_refused_off_the_openai_protocol_or_when_unknown() {
    let e = errs("providers:\n  p: { protocol: anthropic, flavor: deepseek }\nmodels:\n  - { id: p/m, provider: p, model: m }\n");
    assert!(
        e.iter()
            .any(|(_, _, _, m)| m.contains("only applies to `protocol: openai`")),
        "{e:?}"
    );
    let e = errs(&provider("http://h", ", flavor: deepsek"));
    assert!(
        e.iter()
            .any(|(_, _, p, m)| p.ends_with("flavor") && m.contains("deepseek")),
        "{e:?}"
    );
}

#[test]
fn reasoning_replay_defaults_to_auto_and_is_refused_off_openai() {
    let c = load(&provider("https://api.deepseek.com", "")).unwrap();
    assert_eq!(c.deployments["p/m"].reasoning_replay, ReasoningReplay::Auto);
    let c = load(
        &provider("https://api.deepseek.com", "")
            .replace("model: m }", "model: m, reasoning_replay: never }"),
    )
    .unwrap();
    assert_eq!(
        c.deployments["p/m"].reasoning_replay,
        ReasoningReplay::Never
    );
    let e = errs("providers:\n  g: { protocol: gemini, keys: [{ value: k }] }\nmodels:\n  - { id: g/m, provider: g, model: m, reasoning_replay: always }\n");
    assert!(
        e.iter()
            .any(|(_, _, _, m)| m.contains("`reasoning_replay` only applies")),
        "{e:?}"
    );
}

#[test]
fn search_with_tools_is_refused_off_gemini() {
    let e = errs(&provider("http://h", "").replace(
        "model: m }",
        "model: m, capabilities: [search_with_tools] }",
    ));
    assert!(
        e.iter()
            .any(|(_, _, _, m)| m.contains("`search_with_tools` applies to Gemini models only")),
        "{e:?}"
    );
    let c = load("providers:\n  g: { protocol: gemini, keys: [{ value: k }] }\nmodels:\n  - { id: g/m, provider: g, model: gemini-3-pro-preview, capabilities: [search_with_tools] }\n").unwrap();
    assert!(c.deployments["g/m"]
        .capabilities
        .contains(crate::config::Capability::SearchWithTools));
}
