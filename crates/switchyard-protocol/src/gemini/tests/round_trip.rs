//! Round trips: whole answers and OpenAI streams through the Gemini stream
//! encoder and back through the translator.

use bytes::Bytes;

use super::response::RESPONSES;
use super::stream::{run, Run};
use super::*;
use crate::ir::StreamEvent;
use crate::sse::SseDecoder;

/// A whole answer as the IR events a stream of it would give.
fn events_of(r: &ir::ChatResponse) -> Vec<StreamEvent> {
    let mut ev = vec![StreamEvent::Start {
        id: r.id.clone(),
        model: r.model.clone(),
        created: 0,
    }];
    if let Some(t) = &r.reasoning {
        ev.push(StreamEvent::ReasoningDelta {
            text: t.clone(),
            signature: None,
        });
    }
    if let Some(t) = &r.text {
        ev.push(StreamEvent::TextDelta(t.clone()));
    }
    if r.reasoning_signature.is_some() {
        ev.push(StreamEvent::ReasoningDelta {
            text: String::new(),
            signature: r.reasoning_signature.clone(),
        });
    }
    for (i, c) in r.tool_calls.iter().enumerate() {
        ev.push(StreamEvent::ToolCallStart {
            index: i as u32,
            id: c.id.clone(),
            name: c.name.clone(),
        });
        // Fragmented, as an OpenAI upstream would send them.
        let (a, b) = c.arguments.split_at(c.arguments.len() / 2);
        for part in [a, b] {
            ev.push(StreamEvent::ToolCallDelta {
                index: i as u32,
                arguments: part.to_owned(),
            });
        }
    }
    ev.push(StreamEvent::Finish {
        reason: r.finish_reason,
        raw: r.raw_finish_reason.clone(),
    });
    ev.push(StreamEvent::Usage(r.usage));
    ev
}

fn encode_stream(events: &[StreamEvent]) -> Vec<u8> {
    let mut enc = StreamEncoder::new();
    let mut frames: Vec<Bytes> = Vec::new();
    for e in events {
        enc.push(e, &mut frames);
    }
    enc.finish(&mut frames);
    enc.finish(&mut frames);
    for f in &frames {
        assert!(
            f.starts_with(b"data: {") && f.ends_with(b"}\r\n\r\n"),
            "{f:?}"
        );
    }
    frames.concat()
}

/// Whole answer → stream frames → translator: the same text, reasoning,
/// calls (ids included), finish and usage as the non-stream decode.
#[test]
fn streamed_and_whole_answers_agree() {
    for name in RESPONSES {
        let whole = decode_response(fixture(name).as_bytes()).unwrap();
        let r = run(&encode_stream(&events_of(&whole)), 64);
        assert!(r.problems.is_empty(), "{name}");
        assert_eq!(r.text(), whole.text.clone().unwrap_or_default(), "{name}");
        assert_eq!(
            r.reasoning(),
            whole.reasoning.clone().unwrap_or_default(),
            "{name}"
        );
        assert_eq!(r.signature(), whole.reasoning_signature, "{name}");
        if fixture(name).contains("\"responseId\"") {
            assert_eq!(r.calls(), whole.tool_calls, "{name}");
        }
        let names: Vec<_> = r
            .calls()
            .into_iter()
            .map(|c| (c.name, c.arguments))
            .collect();
        let want: Vec<_> = whole
            .tool_calls
            .iter()
            .map(|c| (c.name.clone(), c.arguments.clone()))
            .collect();
        assert_eq!(names, want, "{name}");
        assert_eq!(r.finishes(), [whole.finish_reason], "{name}");
        assert_eq!(r.usage().unwrap_or_default(), whole.usage, "{name}");
    }
}

const OPENAI_STREAMS: &[&str] = &[
    "openai/stream_error_midstream.sse",
    "openai/stream_finish_length.sse",
    "openai/stream_json_object.sse",
    "openai/stream_multiple_choices_n3.sse",
    "openai/stream_refusal_content_null.sse",
    "openai/stream_text_usage.sse",
    "openai/stream_text_usage_2024.sse",
    "openai/stream_tool_call.sse",
    "openai/stream_tool_call_strict.sse",
    "openai/stream_tool_calls_parallel.sse",
];

/// OpenAI stream → IR → Gemini frames → IR: nothing a client sees changes.
#[test]
fn openai_streams_round_trip_through_gemini_frames() {
    for name in OPENAI_STREAMS {
        let body = fixture(name);
        let mut dec = SseDecoder::new();
        dec.push(body.as_bytes());
        let mut t = crate::openai::StreamTranslator::default();
        let mut events = Vec::new();
        let mut next = || dec.next_event().unwrap().or_else(|| dec.finish());
        while let Some(ev) = next() {
            let Some(data) = ev.data.as_ref().filter(|_| !ev.is_done_sentinel()) else {
                continue;
            };
            if let Ok(c) = crate::openai::peek_chunk(data) {
                t.push(&c, &mut events);
            }
        }
        assert_eq!(
            events
                .iter()
                .filter(|e| matches!(e, StreamEvent::Finish { .. }))
                .count(),
            usize::from(t.finish.is_some()),
            "{name}: the decoder emits its finish once"
        );
        let original = Run {
            events,
            ..Default::default()
        };
        let back = run(&encode_stream(&original.events), 5);
        assert!(back.problems.is_empty(), "{name}: {:?}", back.problems);
        assert_eq!(back.text(), original.text(), "{name}");
        assert_eq!(back.reasoning(), original.reasoning(), "{name}");
        let parsed = |r: &Run| -> Vec<(String, serde_json::Value)> {
            r.calls()
                .into_iter()
                .map(|c| (c.name, serde_json::from_str(&c.arguments).unwrap()))
                .collect()
        };
        assert_eq!(parsed(&back), parsed(&original), "{name}");
        assert_eq!(back.finishes(), original.finishes(), "{name}");
        let usage = |r: &Run| {
            r.usage().map(|u| ir::Usage {
                cache_write_tokens: 0,
                ..u
            })
        };
        assert_eq!(usage(&back), usage(&original), "{name}");
    }
}
