mod request;
mod response;
mod stream;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/providers/");

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}openai-responses/{name}"))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Fixture file names in `openai-responses/` ending with `suffix`, sorted.
fn fixtures(suffix: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(format!("{ROOT}openai-responses"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(suffix))
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no openai-responses/*{suffix}");
    out
}
