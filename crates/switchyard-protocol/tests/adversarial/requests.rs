//! Client request bodies: the OpenAI, Anthropic and Responses front doors'
//! decoders and peeks, on arbitrary text, real requests (those of the
//! providers' docs and of Claude Code and Codex) cut and flipped, and real
//! requests with hostile values. A body they accept forwards as valid JSON
//! and translates to every upstream dialect with a body proportional to it.

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Map, Value};
use switchyard_protocol::ir::ChatRequest;
use switchyard_protocol::{anthropic, gemini, openai, passthrough, responses};

use crate::support::*;

fn valid_json(body: &[u8], what: &str) {
    if let Err(e) = serde_json::from_slice::<&serde_json::value::RawValue>(body) {
        panic!(
            "{what}: the upstream body is not JSON ({e}): {}",
            String::from_utf8_lossy(body)
        );
    }
}

/// Every front door's decoder on `body`; the bytes of what was made of it.
fn decode_everything(body: &str) -> usize {
    let mut irs: Vec<ChatRequest> = Vec::new();
    let mut options = Map::new();
    options.insert("seed".into(), Value::from(7));
    // OpenAI Chat Completions, forwarded (fields spliced) and translated.
    if let Ok(view) = openai::parse_request(body) {
        let upstream = view.write_upstream(&openai::UpstreamEdits {
            model: Some("upstream-model"),
            force_include_usage: true,
            options: Some(&options),
        });
        valid_json(&upstream, "openai passthrough");
        irs.push(view.to_ir());
    }
    // Anthropic Messages: the passthrough peek, the decoder, count_tokens.
    let _ = anthropic::peek_request(body);
    if let Ok(r) = anthropic::decode_request(body) {
        irs.push(r);
    }
    if let Ok(fields) = passthrough::parse_object(body) {
        if let Ok(r) = anthropic::decode_count_fields(&fields) {
            irs.push(r);
        }
    }
    // Responses: the passthrough peek and the decoder.
    if let Ok(peek) = responses::peek_request(body) {
        let upstream = peek.write_upstream(Some("upstream-model"), Some(&options));
        valid_json(&upstream, "responses passthrough");
    }
    if let Ok((r, extras)) = responses::decode_request(body) {
        let _ = (extras.is_custom("f"), extras.wants_encrypted_reasoning());
        irs.push(r);
    }
    irs.iter().map(|r| size(r) / 4 + encode_everywhere(r)).sum()
}

/// The request for every upstream dialect; the bytes written.
fn encode_everywhere(r: &ChatRequest) -> usize {
    let mut n = openai::encode_request(r, Some("m"), &Map::new()).len();
    let target = anthropic::Target {
        model: "m",
        max_output_tokens: Some(1024),
        stream: r.stream,
    };
    if let Ok(e) = anthropic::encode_request(r, &target) {
        valid_json(&e.body, "anthropic request");
        n += e.body.len();
    }
    let target = gemini::Target {
        max_output_tokens: Some(1024),
        missing_signature: Some(gemini::SKIP_SIGNATURE_VALIDATOR),
    };
    if let Ok(b) = gemini::encode_request(r, &target) {
        valid_json(&b, "gemini request");
        n += b.len();
    }
    n
}

fn requests(body: Vec<u8>) {
    within("requests", move || {
        // The front doors refuse a body that is not UTF-8 before this.
        let body = String::from_utf8_lossy(&body).into_owned();
        let out = decode_everything(&body);
        assert!(
            out <= bound(body.len(), 32),
            "{out} bytes made of a {}-byte request",
            body.len()
        );
    });
}

fn all_requests() -> Vec<&'static Fixture> {
    [&OPENAI_REQUESTS, &ANTHROPIC_REQUESTS, &RESPONSES_REQUESTS]
        .into_iter()
        .flat_map(|s| s.iter())
        .collect()
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_text(body in noise(1024)) {
        requests(body);
    }
}

proptest! {
    // Fewer: the agents' requests are 40 to 90 KB each.
    #![proptest_config(config(64))]

    #[test]
    fn real_requests_mangled(f in any::<Index>(), edits in edits()) {
        requests(apply(&f.get(&all_requests()).bytes, &edits));
    }

    #[test]
    fn real_requests_with_hostile_values(f in any::<Index>(), hs in hostiles()) {
        let doc: Value = serde_json::from_slice(&f.get(&all_requests()).bytes).unwrap();
        requests(plant(&doc, &hs).into_bytes());
    }
}

/// Every real request decodes through its own door (so the properties
/// above start from bodies that reach past the first check).
#[test]
fn every_real_request_is_accepted_by_its_door() {
    // Azure names the deployment in the URL: its bodies have no `model`.
    for f in OPENAI_REQUESTS
        .iter()
        .filter(|f| !f.name.contains("azure/"))
    {
        let body = std::str::from_utf8(&f.bytes).unwrap();
        openai::parse_request(body).unwrap_or_else(|e| panic!("{}: {e}", f.name));
    }
    for f in ANTHROPIC_REQUESTS.iter() {
        let body = std::str::from_utf8(&f.bytes).unwrap();
        anthropic::decode_request(body).unwrap_or_else(|e| panic!("{}: {e}", f.name));
    }
    for f in RESPONSES_REQUESTS.iter() {
        let body = std::str::from_utf8(&f.bytes).unwrap();
        responses::decode_request(body).unwrap_or_else(|e| panic!("{}: {e}", f.name));
    }
}
