mod request;
mod response;
mod stream;

use serde_json::Value;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/providers/");

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn json(s: &[u8]) -> Value {
    serde_json::from_slice(s).unwrap()
}

/// Fixture file names in `dir` ending with `suffix`, sorted.
/// The chat fixtures of `dir` (Messages / Chat Completions bodies; the
/// count_tokens, embeddings and models fixtures are other endpoints').
fn fixtures(dir: &str, suffix: &str) -> Vec<String> {
    const OTHER_ENDPOINTS: [&str; 3] = ["count_tokens", "embeddings", "models_"];
    let mut out: Vec<String> = std::fs::read_dir(format!("{ROOT}{dir}"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(suffix))
        .filter(|n| !OTHER_ENDPOINTS.iter().any(|o| n.starts_with(o)))
        .map(|n| format!("{dir}/{n}"))
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no {dir}/*{suffix}");
    out
}
