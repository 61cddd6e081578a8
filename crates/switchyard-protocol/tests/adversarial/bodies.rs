//! Whole upstream answers and error bodies: every provider's JSON decoder
//! on every provider's recorded bodies (cut, flipped, with hostile values)
//! and on arbitrary bytes. What a decoder returns stays proportional to the
//! body, and an answer it returns can be written for every client door.

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::Value;
use switchyard_protocol::ir::ChatResponse;
use switchyard_protocol::responses::ResponsesExtras;
use switchyard_protocol::{anthropic, gemini, openai, responses};

use crate::support::*;

/// Every body decoder on `body`; the size of all they returned.
fn decode_everything(body: &[u8]) -> usize {
    let mut answers: Vec<ChatResponse> = Vec::new();
    let mut out = 0;
    // OpenAI-compatible answers, forwarded (peeks) or translated.
    if let Ok(p) = openai::peek_response(body) {
        answers.push(p.to_ir());
        out += size(&p);
    }
    if let Ok(u) = openai::peek_usage(body) {
        out += size(&u);
        let _ = u.usage.map(|u| u.to_ir().total());
    }
    out += size(&openai::peek_chunk(body).map(|c| size(&c)).ok());
    out += size(&openai::peek_pass_chunk(body).map(|c| size(&c)).ok());
    if let Ok(e) = serde_json::from_slice::<openai::WireErrorBody>(body) {
        out += size(&e) + size(&e.error.code_str());
    }
    // Anthropic.
    for json_tool in [None, Some(anthropic::JSON_TOOL_NAME)] {
        if let Ok(r) = anthropic::decode_response(body, json_tool) {
            answers.push(r);
        }
    }
    out += size(&anthropic::parse_error(body));
    // Gemini.
    match gemini::decode_candidates(body) {
        Ok(all) => answers.extend(all),
        Err(e) => out += size(&e) + e.to_string().len(),
    }
    if let Ok(r) = gemini::decode_response(body) {
        answers.push(r);
    }
    out += size(&gemini::parse_error(body));
    // Responses.
    match responses::decode_response(body) {
        Ok(r) => answers.push(r),
        Err(e) => out += size(&e),
    }
    for a in &answers {
        out += size(a);
        let _ = a.usage.total();
    }
    // Written back for each client door.
    let extras = ResponsesExtras::default();
    let written: usize = answers
        .iter()
        .map(|a| {
            openai::encode_response(a).len()
                + anthropic::encode_response(a).len()
                + gemini::encode_response(a).len()
                + responses::encode_response(a, "resp_x", &extras).len()
        })
        .sum();
    out + written / 8
}

fn bodies(body: Vec<u8>) {
    within("bodies", move || {
        let out = decode_everything(&body);
        assert!(
            out <= bound(body.len(), 64),
            "{out} bytes made of a {}-byte body",
            body.len()
        );
    });
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_bytes(body in noise(1024)) {
        bodies(body);
    }
}

proptest! {
    #![proptest_config(config(160))]

    #[test]
    fn real_bodies_mangled(f in any::<Index>(), edits in edits()) {
        bodies(apply(&f.get(&SMALL_BODIES).bytes, &edits));
    }

    #[test]
    fn real_bodies_with_hostile_values(f in any::<Index>(), hs in hostiles()) {
        let f = f.get(&SMALL_BODIES);
        let Ok(doc) = serde_json::from_slice::<Value>(&f.bytes) else {
            // Error bodies recorded as text (an HTML page): only mangled.
            return Ok(());
        };
        bodies(plant(&doc, &hs).into_bytes());
    }
}

/// Every recorded body, whole and cut short at spaced points: a body cut by
/// a dropped connection is the commonest bad input of all.
#[test]
fn every_real_body_cut_anywhere() {
    for f in BODIES.iter() {
        let b = &f.bytes;
        // Every byte of the first and last 8, and 12 cuts between; the
        // long lists (embeddings, models) at 4 points only.
        let (spaced, edge) = if b.len() > 8 * 1024 { (4, 0) } else { (12, 8) };
        let step = (b.len() / spaced).max(1);
        let cuts = (0..b.len())
            .step_by(step)
            .chain(0..edge.min(b.len()))
            .chain(b.len().saturating_sub(edge)..=b.len());
        for cut in cuts {
            let n = decode_everything(&b[..cut]);
            assert!(n <= bound(cut, 64), "{} cut at {cut}", f.name);
        }
    }
}
