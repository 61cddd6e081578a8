//! Each provider's stream decoder (SSE events → IR events), and what the
//! gateway then does with those events: every client door's encoder and the
//! answer builder of the cache. Checked on real streams in any chunking
//! (the same IR events must come out), real streams mangled byte by byte,
//! real streams with hostile JSON in their events (repeated 50 times,
//! dropped, swapped), and other providers' streams.

use proptest::prelude::*;
use proptest::sample::Index;
use switchyard_protocol::ir::{AnswerBuilder, StreamEvent};
use switchyard_protocol::responses::ResponsesExtras;
use switchyard_protocol::{anthropic, gemini, openai, responses};

use crate::support::*;

/// What one decoder made of one stream.
#[derive(Debug, PartialEq)]
struct Run {
    events: Vec<StreamEvent>,
    problems: usize,
    /// The decoder's state at the end ([`size`]).
    state: usize,
}

type Decoder = fn(&[&[u8]]) -> Run;

fn openai_run(chunks: &[&[u8]]) -> Run {
    let mut t = openai::StreamTranslator::default();
    let (mut events, mut problems) = (Vec::new(), 0);
    for ev in sse_events(chunks) {
        let Some(data) = ev.data.as_deref().filter(|_| !ev.is_done_sentinel()) else {
            continue;
        };
        // The OpenAI→OpenAI pass reads chunks with the lean peek.
        let _ = openai::peek_pass_chunk(data);
        match openai::peek_chunk(data) {
            Ok(c) => t.push(&c, &mut events),
            Err(_) => problems += 1,
        }
    }
    Run {
        events,
        problems,
        state: size(&t),
    }
}

fn anthropic_run(chunks: &[&[u8]], json_tool: Option<&str>) -> Run {
    let mut t = anthropic::StreamTranslator::new(json_tool);
    let (mut events, mut problems) = (Vec::new(), 0);
    for ev in sse_events(chunks) {
        if t.push_sse(&ev, &mut events).is_err() {
            problems += 1;
        }
    }
    let _ = (t.finish(), t.usage(), t.is_stopped());
    // A resumed answer goes on where this stream left off.
    let mut resumed = anthropic::StreamEncoder::continuing(t.cursor());
    resumed.push(&StreamEvent::TextDelta("more".into()));
    resumed.push(&StreamEvent::ToolCallStart {
        index: 0,
        id: "call".into(),
        name: "f".into(),
    });
    resumed.end();
    Run {
        events,
        problems,
        state: size(&t),
    }
}

fn gemini_run(chunks: &[&[u8]]) -> Run {
    let mut t = gemini::StreamTranslator::new();
    let (mut events, mut problems) = (Vec::new(), 0);
    for ev in sse_events(chunks) {
        if t.push_event(&ev, &mut events).is_err() {
            problems += 1;
        }
    }
    let _ = t.finished();
    Run {
        events,
        problems,
        state: size(&t),
    }
}

fn responses_run(chunks: &[&[u8]]) -> Run {
    let mut t = responses::StreamTranslator::new();
    let (mut events, mut problems) = (Vec::new(), 0);
    for ev in sse_events(chunks) {
        if t.push(&ev, &mut events).is_err() {
            problems += 1;
        }
    }
    let _ = (
        t.is_finished(),
        t.response_id(),
        t.next_sequence(),
        t.usage(),
    );
    Run {
        events,
        problems,
        state: size(&t),
    }
}

const DECODERS: [(&str, Decoder); 5] = [
    ("openai", openai_run),
    ("anthropic", |c| anthropic_run(c, None)),
    ("anthropic+json", |c| {
        anthropic_run(c, Some(anthropic::JSON_TOOL_NAME))
    }),
    ("gemini", gemini_run),
    ("responses", responses_run),
];

/// The bounds every run must keep, for `n` bytes of input, and the events
/// through every client door's encoder and the answer builder.
fn check(name: &str, run: &Run, n: usize) {
    assert!(
        run.events.len() <= 16 + n,
        "{name}: {} events from {n} bytes",
        run.events.len()
    );
    assert!(
        size(&run.events) <= bound(n, 64),
        "{name}: events outgrow the input"
    );
    assert!(
        run.state <= bound(n, 16),
        "{name}: state outgrows the input ({} for {n} bytes)",
        run.state
    );
    let out = encode_everywhere(&run.events);
    // Chunk formats repeat the upstream's id and model on every frame.
    let envelope: usize = run
        .events
        .iter()
        .map(|e| match e {
            StreamEvent::Start { id, model, .. } => id.len() + model.len(),
            _ => 0,
        })
        .max()
        .unwrap_or(0);
    let allowed = bound(n, 1024) + (run.events.len() + 4) * envelope;
    assert!(
        out <= allowed,
        "{name}: {out} bytes encoded from {n} bytes of input"
    );
}

/// Bytes written for `events` by every encoder, and by the encoders of
/// whole answers for the answer the events build.
fn encode_everywhere(events: &[StreamEvent]) -> usize {
    let mut total = 0;
    let env = openai::ChunkEnvelope {
        id: "chatcmpl-x".into(),
        model: "m".into(),
        created: 1,
    };
    let mut anthropic = anthropic::StreamEncoder::new();
    let mut gemini = gemini::StreamEncoder::new();
    let extras = ResponsesExtras::default();
    let mut responses = responses::StreamEncoder::new("resp_x", 1, &extras);
    let mut builder = AnswerBuilder::default();
    let mut frames = Vec::new();
    for ev in events {
        total += openai::encode_chunk(&env, ev).len();
        total += anthropic.push(ev).iter().map(|b| b.len()).sum::<usize>();
        gemini.push(ev, &mut frames);
        total += responses.push(ev).iter().map(|b| b.len()).sum::<usize>();
        builder.push(ev);
    }
    total += anthropic.end().iter().map(|b| b.len()).sum::<usize>();
    gemini.finish(&mut frames);
    total += frames.iter().map(|b| b.len()).sum::<usize>();
    total += responses.end().iter().map(|b| b.len()).sum::<usize>();
    if let Some(answer) = builder.finish() {
        total += openai::encode_response(&answer).len();
        total += anthropic::encode_response(&answer).len();
        total += gemini::encode_response(&answer).len();
        total += responses::encode_response(&answer, "resp_x", &extras).len();
        assert!(!answer.stream_events().is_empty());
    }
    total
}

/// `decode` on `bytes` read whole and in the pieces `cuts` makes: the same
/// result, within the bounds.
fn same_and_bounded(name: &str, decode: Decoder, bytes: &[u8], cuts: &[Index]) {
    let whole = decode(&[bytes]);
    let pieces = decode(&split(bytes, cuts));
    assert_eq!(
        without_made_ids(&whole),
        without_made_ids(&pieces),
        "{name}: chunking changed the result"
    );
    check(name, &whole, bytes.len());
}

/// The events with every id blanked: an answer that brings no id of its
/// own gets a fresh one per decode (ids never repeat across answers), so
/// two decodes of the same bytes differ only there.
fn without_made_ids(run: &Run) -> Vec<StreamEvent> {
    run.events
        .iter()
        .cloned()
        .map(|e| match e {
            StreamEvent::Start { model, created, .. } => StreamEvent::Start {
                id: String::new(),
                model,
                created,
            },
            StreamEvent::ToolCallStart { index, name, .. } => StreamEvent::ToolCallStart {
                index,
                id: String::new(),
                name,
            },
            other => other,
        })
        .collect()
}

/// Every decoder (the wrong dialects included) on `bytes`.
fn every_decoder(bytes: Vec<u8>, cuts: Vec<Index>) {
    within("streams", move || {
        for (name, decode) in DECODERS {
            same_and_bounded(name, decode, &bytes, &cuts);
        }
    });
}

/// One decoder on its own dialect's stream.
fn own(name: &'static str, decode: Decoder, bytes: Vec<u8>, cuts: Vec<Index>) {
    within(name, move || same_and_bounded(name, decode, &bytes, &cuts));
}

fn fixtures_of(name: &str) -> &'static [Fixture] {
    match name {
        "openai" => &OPENAI_SSE,
        "anthropic" | "anthropic+json" => &ANTHROPIC_SSE,
        "gemini" => &GEMINI_SSE,
        _ => &RESPONSES_SSE,
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// A real stream of its own dialect: events or a reported problem (a
    /// blocked prompt), and the same in any chunking.
    #[test]
    fn real_streams_in_any_chunking(d in any::<Index>(), f in any::<Index>(), cuts in cuts()) {
        let (name, decode) = *d.get(&DECODERS);
        let f = f.get(fixtures_of(name));
        let run = decode(&[&f.bytes]);
        prop_assert!(
            !run.events.is_empty() || run.problems > 0,
            "{}: nothing from {}", name, f.name
        );
        own(name, decode, f.bytes.clone(), cuts);
    }

    /// Every provider's streams, cut, flipped and re-chunked, through every
    /// decoder (the wrong dialect included).
    #[test]
    fn real_streams_mangled(f in any::<Index>(), edits in edits(), cuts in cuts()) {
        every_decoder(apply(f.get::<Vec<u8>>(&ALL_SSE_HEADS), &edits), cuts);
    }
}

proptest! {
    #![proptest_config(config(128))]

    /// Arbitrary bytes as events' data (bare ones are the SSE decoder's).
    #[test]
    fn arbitrary_events(data in prop::collection::vec(noise(128), 0..8), cuts in cuts()) {
        let mut bytes = Vec::new();
        for d in &data {
            bytes.extend_from_slice(b"data: ");
            bytes.extend_from_slice(d);
            bytes.extend_from_slice(b"\n\n");
        }
        every_decoder(bytes, cuts);
    }
}

proptest! {
    #![proptest_config(config(128))]

    /// A decoder's own streams with hostile JSON in their events, events
    /// repeated up to 50 times, dropped and swapped.
    #[test]
    fn hostile_events(
        d in any::<Index>(),
        f in any::<Index>(),
        edits in stream_edits(),
        cuts in cuts(),
    ) {
        let (name, decode) = *d.get(&DECODERS);
        let bytes = rewrite(&f.get(fixtures_of(name)).bytes, &edits);
        own(name, decode, bytes, cuts);
    }
}
