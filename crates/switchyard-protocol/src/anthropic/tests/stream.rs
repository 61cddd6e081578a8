use bytes::Bytes;
use serde_json::Value;

use super::{fixture, fixtures, json};
use crate::anthropic::*;
use crate::ir::{FinishReason, StreamEvent, Usage};
use crate::sse::SseDecoder;

/// Events, the upstream error (if any) and the translator, for one SSE body.
fn translate(
    sse: &[u8],
    json_tool: Option<&str>,
) -> (Vec<StreamEvent>, Option<StreamError>, StreamTranslator) {
    let mut dec = SseDecoder::new();
    dec.push(sse);
    let mut t = StreamTranslator::new(json_tool);
    let mut out = Vec::new();
    let mut error = None;
    while let Some(ev) = dec.next_event().unwrap() {
        match t.push_sse(&ev, &mut out) {
            Ok(()) => {}
            Err(PushError::Upstream(e)) => error = Some(e),
            Err(PushError::BadJson(e)) => panic!("{e}"),
        }
    }
    (out, error, t)
}

/// What a client ends up with.
#[derive(Debug, Default, PartialEq)]
struct Summary {
    text: String,
    reasoning: String,
    signature: Option<String>,
    /// (index, id, name, arguments)
    tools: Vec<(u32, String, String, String)>,
    finishes: Vec<FinishReason>,
    usage: Usage,
}

fn summarize(events: &[StreamEvent]) -> Summary {
    let mut s = Summary::default();
    for e in events {
        match e {
            StreamEvent::Start { .. } => {}
            StreamEvent::TextDelta(t) => s.text.push_str(t),
            StreamEvent::ReasoningDelta { text, signature } => {
                s.reasoning.push_str(text);
                if signature.is_some() {
                    s.signature.clone_from(signature);
                }
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                s.tools
                    .push((*index, id.clone(), name.clone(), String::new()))
            }
            StreamEvent::ToolCallDelta { index, arguments } => {
                let t = s
                    .tools
                    .iter_mut()
                    .find(|t| t.0 == *index)
                    .expect("delta before start");
                t.3.push_str(arguments);
            }
            StreamEvent::Usage(u) => s.usage = *u,
            StreamEvent::Finish { reason, .. } => s.finishes.push(*reason),
        }
    }
    s
}

#[test]
fn every_anthropic_stream_translates() {
    for f in fixtures("anthropic", ".sse") {
        let (evs, err, t) = translate(fixture(&f).as_bytes(), None);
        assert!(matches!(evs[0], StreamEvent::Start { .. }), "{f}");
        let s = summarize(&evs);
        if f.ends_with("overloaded_midstream.sse") {
            assert_eq!(
                err,
                Some(StreamError {
                    kind: "overloaded_error".into(),
                    message: "Overloaded".into()
                })
            );
            assert!(s.finishes.is_empty());
            assert_eq!(s.text, "Hello! I");
            continue;
        }
        assert_eq!(err, None, "{f}");
        assert_eq!(s.finishes.len(), 1, "{f}: exactly one Finish");
        assert!(t.is_stopped() && t.finish().is_some(), "{f}");
        // Final usage = message_delta's output, message_start's input.
        let body = fixture(&f);
        let delta_line = body
            .lines()
            .find(|l| l.contains("\"message_delta\""))
            .unwrap();
        let delta = json(delta_line.trim_start_matches("data: ").as_bytes());
        assert_eq!(
            s.usage.output_tokens, delta["usage"]["output_tokens"],
            "{f}"
        );
        assert_eq!(Some(s.usage), t.usage(), "{f}");
    }
}

#[test]
fn stream_contents() {
    let s = summarize(&translate(fixture("anthropic/stream_text.sse").as_bytes(), None).0);
    assert!(s
        .text
        .starts_with("The weather in San Francisco, CA is currently:\n- **Temperature:** 68°F"));
    assert!(s.text.ends_with("It's a nice sunny day!"));
    assert_eq!((s.usage.input_tokens, s.usage.output_tokens), (770, 38));
    assert_eq!(s.finishes, [FinishReason::Stop]);

    // The streamed call equals the one echoed back in the next request.
    let s = summarize(&translate(fixture("anthropic/stream_tool_use.sse").as_bytes(), None).0);
    let next = json(fixture("anthropic/stream_text.request.json").as_bytes());
    let echoed = &next["messages"][1]["content"][0];
    assert_eq!(s.tools.len(), 1);
    let (index, id, name, args) = &s.tools[0];
    assert_eq!(
        (*index, id.as_str(), name.as_str()),
        (0, "toolu_018acGYLtfR52q9yDbWaEdQZ", "get_weather")
    );
    assert_eq!(echoed["id"], id.as_str());
    assert_eq!(json(args.as_bytes()), echoed["input"]);
    assert_eq!(s.finishes, [FinishReason::ToolCalls]);
    assert_eq!(s.usage.output_tokens, 74);

    // Tool index counts tools, not blocks (the call is block 1).
    let s = summarize(
        &translate(
            fixture("anthropic/stream_text_then_tool_use.sse").as_bytes(),
            None,
        )
        .0,
    );
    assert_eq!(s.text, "I'll check the current weather in Paris for you.");
    assert_eq!(s.tools[0].0, 0);
    assert_eq!(
        json(s.tools[0].3.as_bytes()),
        serde_json::json!({"location": "Paris"})
    );

    let s = summarize(
        &translate(
            fixture("anthropic/stream_max_tokens_partial_json.sse").as_bytes(),
            None,
        )
        .0,
    );
    assert_eq!(s.finishes, [FinishReason::Length]);
    assert!(s.tools[0].3.starts_with("{\"filename\": \"taxes.txt\""));
    assert_eq!((s.usage.input_tokens, s.usage.output_tokens), (450, 124));

    let s = summarize(
        &translate(
            fixture("anthropic/stream_text_usage_cache_fields.sse").as_bytes(),
            None,
        )
        .0,
    );
    assert_eq!((s.usage.input_tokens, s.usage.output_tokens), (12, 30));

    let s = summarize(
        &translate(
            fixture("anthropic/stream_structured_output.sse").as_bytes(),
            None,
        )
        .0,
    );
    assert_eq!(s.text, "[12345,67890]");

    // The JSON-mode tool streams out as text and finishes with Stop.
    let s = summarize(
        &translate(
            fixture("anthropic/stream_tool_use.sse").as_bytes(),
            Some("get_weather"),
        )
        .0,
    );
    assert!(s.tools.is_empty());
    assert_eq!(json(s.text.as_bytes()), echoed["input"]);
    assert_eq!(s.finishes, [FinishReason::Stop]);
}

#[test]
fn translator_edge_cases() {
    let mut t = StreamTranslator::new(None);
    let mut out = Vec::new();
    assert!(matches!(
        t.push(Some("content_block_delta"), b"{oops", &mut out),
        Err(PushError::BadJson(_))
    ));
    // Finish seen at message_delta, no message_stop: still exactly one Finish.
    t.push(None, br#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}"#, &mut out).unwrap();
    assert_eq!(t.finish(), Some((FinishReason::Stop, Some("end_turn"))));
    assert!(!t.is_stopped());
    t.push(None, br#"{"type":"message_stop"}"#, &mut out)
        .unwrap();
    let finishes = out
        .iter()
        .filter(|e| matches!(e, StreamEvent::Finish { .. }))
        .count();
    assert_eq!(finishes, 1);
    // Thinking and signatures.
    let mut out = Vec::new();
    let mut t = StreamTranslator::new(None);
    for data in [
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"SIG"}}"#,
    ] {
        t.push(None, data.as_bytes(), &mut out).unwrap();
    }
    let s = summarize(&out);
    assert_eq!(
        (s.reasoning.as_str(), s.signature.as_deref()),
        ("hm", Some("SIG"))
    );
}

fn frames_to_events(frames: &[Bytes]) -> Vec<StreamEvent> {
    let all: Vec<u8> = frames.iter().flat_map(|b| b.iter().copied()).collect();
    let (evs, err, t) = translate(&all, None);
    assert_eq!(err, None);
    assert!(t.is_stopped());
    evs
}

fn encode_all(events: &[StreamEvent]) -> Vec<Bytes> {
    let mut enc = StreamEncoder::new();
    let mut frames: Vec<Bytes> = events.iter().flat_map(|e| enc.push(e)).collect();
    frames.extend(enc.end());
    frames
}

#[test]
fn openai_streams_survive_the_anthropic_encoder() {
    let mut names = fixtures("openai", ".sse");
    for dir in ["azure", "deepseek", "qwen"] {
        names.extend(fixtures(dir, ".sse"));
    }
    for f in names {
        let mut dec = SseDecoder::new();
        dec.push(fixture(&f).as_bytes());
        let mut t = crate::openai::StreamTranslator::default();
        let mut evs = Vec::new();
        while let Some(ev) = dec.next_event().unwrap() {
            let Some(data) = ev.data.as_ref().filter(|_| !ev.is_done_sentinel()) else {
                continue;
            };
            if let Ok(c) = crate::openai::peek_chunk(data) {
                t.push(&c, &mut evs);
            }
        }
        if let Some(reason) = t.finish {
            evs.push(StreamEvent::Finish { reason, raw: None });
        }
        let mut want = summarize(&evs);
        want.usage.reasoning_tokens = 0; // Anthropic has no field for it
        want.finishes = vec![t.finish.unwrap_or(FinishReason::Stop)];

        let got = summarize(&frames_to_events(&encode_all(&evs)));
        assert_eq!(got, want, "{f}");
    }
}

#[test]
fn anthropic_streams_survive_a_round_trip() {
    for f in fixtures("anthropic", ".sse") {
        let (evs, err, _) = translate(fixture(&f).as_bytes(), None);
        if err.is_some() {
            continue;
        }
        let back = frames_to_events(&encode_all(&evs));
        assert_eq!(summarize(&back), summarize(&evs), "{f}");
    }
}

fn payloads(frames: &[Bytes]) -> Vec<(String, Value)> {
    frames
        .iter()
        .map(|f| {
            let s = std::str::from_utf8(f).unwrap();
            let (head, data) = s.split_once('\n').unwrap();
            assert!(s.ends_with("\n\n"));
            let name = head.strip_prefix("event: ").unwrap().to_owned();
            let v = json(data.strip_prefix("data: ").unwrap().trim_end().as_bytes());
            assert_eq!(v["type"], name.as_str());
            (name, v)
        })
        .collect()
}

#[test]
fn encoder_emits_the_anthropic_sequence() {
    let evs = [
        StreamEvent::Start {
            id: "chatcmpl-1".into(),
            model: "gpt".into(),
            created: 1,
        },
        StreamEvent::Usage(Usage {
            input_tokens: 10,
            cached_input_tokens: 4,
            ..Usage::default()
        }),
        StreamEvent::TextDelta("hi".into()),
        StreamEvent::ToolCallStart {
            index: 0,
            id: "a".into(),
            name: "f".into(),
        },
        StreamEvent::ToolCallStart {
            index: 1,
            id: "b".into(),
            name: "g".into(),
        },
        StreamEvent::ToolCallDelta {
            index: 0,
            arguments: "{\"x\":".into(),
        },
        StreamEvent::ToolCallDelta {
            index: 1,
            arguments: "{}".into(),
        },
        StreamEvent::ToolCallDelta {
            index: 0,
            arguments: "1}".into(),
        },
        StreamEvent::Finish {
            reason: FinishReason::ToolCalls,
            raw: None,
        },
        StreamEvent::Usage(Usage {
            input_tokens: 10,
            cached_input_tokens: 4,
            output_tokens: 9,
            ..Usage::default()
        }),
    ];
    let frames = encode_all(&evs);
    let p = payloads(&frames);
    let names: Vec<&str> = p.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    let m = &p[0].1["message"];
    assert_eq!(m["id"], "msg_chatcmpl-1");
    assert_eq!(m["content"], serde_json::json!([]));
    assert_eq!(m["stop_reason"], Value::Null);
    assert_eq!(
        (
            m["usage"]["input_tokens"].as_u64(),
            m["usage"]["cache_read_input_tokens"].as_u64()
        ),
        (Some(6), Some(4))
    );
    assert_eq!(
        p[4].1["content_block"],
        serde_json::json!({"type": "tool_use", "id": "a", "name": "f", "input": {}})
    );
    assert_eq!(
        p[5].1["delta"],
        serde_json::json!({"type": "input_json_delta", "partial_json": ""})
    );
    // Interleaved deltas go to their own block.
    let idx: Vec<u64> = p[9..12]
        .iter()
        .map(|(_, v)| v["index"].as_u64().unwrap())
        .collect();
    assert_eq!(idx, [1, 2, 1]);
    assert_eq!(
        p[13].1["delta"],
        serde_json::json!({"stop_reason": "tool_use", "stop_sequence": null})
    );
    assert_eq!(p[13].1["usage"]["output_tokens"], 9);

    let s = summarize(&frames_to_events(&frames));
    assert_eq!(s.tools[0].3, "{\"x\":1}");
    assert_eq!(s.tools[1].3, "{}");
    assert_eq!(s.usage.input_tokens, 10);

    let e = error_frame("overloaded_error", "Overloaded");
    assert_eq!(
        &e[..],
        b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
    );
    let (_, err, _) = translate(&e, None);
    assert_eq!(err.unwrap().kind, "overloaded_error");
}

#[test]
fn a_continuing_encoder_writes_into_the_open_text_block() {
    let at = BlockCursor {
        open: Some((1, BlockType::Text)),
        next_index: 2,
    };
    let mut enc = StreamEncoder::continuing(at);
    assert_eq!(enc.cursor(), at);
    let mut frames = Vec::new();
    for ev in [
        StreamEvent::Start {
            id: "msg_2".into(),
            model: "m".into(),
            created: 0,
        },
        StreamEvent::Usage(Usage {
            input_tokens: 12,
            ..Usage::default()
        }),
        StreamEvent::TextDelta(" world".into()),
        StreamEvent::Finish {
            reason: FinishReason::Stop,
            raw: None,
        },
        StreamEvent::Usage(Usage {
            input_tokens: 12,
            output_tokens: 3,
            ..Usage::default()
        }),
    ] {
        frames.extend(enc.push(&ev));
    }
    frames.extend(enc.end());
    let p = payloads(&frames);
    let names: Vec<&str> = p.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(p[0].1["index"], 1);
    assert_eq!(p[0].1["delta"]["text"], " world");
    assert_eq!(p[1].1["index"], 1);
    assert_eq!(p[2].1["usage"]["output_tokens"], 3);
}

#[test]
fn a_continuing_encoder_between_blocks_opens_the_next_index() {
    for open in [None, Some((0, BlockType::Thinking))] {
        let mut enc = StreamEncoder::continuing(BlockCursor {
            open,
            next_index: 1,
        });
        let mut frames = enc.push(&StreamEvent::TextDelta("more".into()));
        frames.extend(enc.end());
        let p = payloads(&frames);
        let mut expect = vec![("content_block_start", 1)];
        if open.is_some() {
            // The thinking block left open is closed first.
            expect.insert(0, ("content_block_stop", 0));
        }
        expect.extend([("content_block_delta", 1), ("content_block_stop", 1)]);
        let got: Vec<(&str, u64)> = p
            .iter()
            .filter(|(_, v)| v.get("index").is_some())
            .map(|(n, v)| (n.as_str(), v["index"].as_u64().unwrap()))
            .collect();
        assert_eq!(got, expect, "{open:?}");
        assert_eq!(p[p.len() - 1].0, "message_stop");
        assert!(p.iter().all(|(n, _)| n != "message_start"));
    }
}

#[test]
fn the_translator_knows_which_block_is_open() {
    let mut t = StreamTranslator::new(None);
    let mut out = Vec::new();
    let mut push = |t: &mut StreamTranslator, data: &str| {
        t.push(None, data.as_bytes(), &mut out).unwrap();
        t.cursor()
    };
    let start = r#"{"type":"message_start","message":{"id":"m","model":"x","usage":{"input_tokens":1,"output_tokens":1}}}"#;
    assert_eq!(push(&mut t, start), BlockCursor::default());
    let thinking = r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#;
    assert_eq!(push(&mut t, thinking).open, Some((0, BlockType::Thinking)));
    let stop0 = r#"{"type":"content_block_stop","index":0}"#;
    assert_eq!(
        push(&mut t, stop0),
        BlockCursor {
            open: None,
            next_index: 1
        }
    );
    let text =
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#;
    push(&mut t, text);
    let delta =
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi"}}"#;
    assert_eq!(
        push(&mut t, delta),
        BlockCursor {
            open: Some((1, BlockType::Text)),
            next_index: 2
        }
    );
    let tool = r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#;
    assert_eq!(push(&mut t, tool).open, Some((2, BlockType::ToolUse)));
}

/// A content block numbered 4294967295 is dropped, not a table of four
/// billion blocks (that was a 32 GiB allocation); blocks numbered in
/// reach go on as before.
#[test]
fn a_block_index_far_out_is_dropped() {
    let sse = br#"event: message_start
data: {"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":3}}}

event: content_block_start
data: {"type":"content_block_start","index":4294967295,"content_block":{"type":"tool_use","id":"t1","name":"f","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":4294967295,"delta":{"type":"input_json_delta","partial_json":"{}"}}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"t2","name":"g","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}}

"#;
    let (events, error, t) = translate(sse, None);
    assert!(error.is_none());
    let calls: Vec<_> = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                StreamEvent::ToolCallStart { .. } | StreamEvent::ToolCallDelta { .. }
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            &StreamEvent::ToolCallStart {
                index: 0,
                id: "t2".into(),
                name: "g".into()
            },
            &StreamEvent::ToolCallDelta {
                index: 0,
                arguments: r#"{"a":1}"#.into()
            }
        ]
    );
    assert_eq!(t.cursor().next_index, 3);
}

/// Counts add up saturating (a wrapped sum would bill a huge input as a
/// tiny one; in a debug build it was a panic).
#[test]
fn usage_at_the_top_of_u64_saturates() {
    let sse = br#"event: message_start
data: {"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":18446744073709551615,"cache_read_input_tokens":1,"cache_creation_input_tokens":1}}}

"#;
    let (_, _, t) = translate(sse, None);
    assert_eq!(t.usage().unwrap().input_tokens, u64::MAX);
}
