use bytes::Bytes;
use serde_json::Value;

use super::{fixture, fixtures};
use crate::ir::{FinishReason, StreamEvent, Usage};
use crate::responses::*;
use crate::sse::{SseDecoder, SseEvent};

/// IR events and problems for `sse` fed in the given pieces.
fn translate(pieces: &[&[u8]]) -> (Vec<StreamEvent>, Vec<Problem>, bool) {
    let mut dec = SseDecoder::new();
    let mut t = StreamTranslator::new();
    let (mut out, mut problems) = (Vec::new(), Vec::new());
    let mut feed = |ev: SseEvent, out: &mut Vec<StreamEvent>| {
        if let Err(p) = t.push(&ev, out) {
            problems.push(p);
        }
    };
    for piece in pieces {
        dec.push(piece);
        while let Some(ev) = dec.next_event().unwrap() {
            feed(ev, &mut out);
        }
    }
    if let Some(ev) = dec.finish() {
        feed(ev, &mut out);
    }
    let finished = t.is_finished();
    (out, problems, finished)
}

fn translate_all(sse: &str) -> (Vec<StreamEvent>, Vec<Problem>, bool) {
    translate(&[sse.as_bytes()])
}

/// The SSE events of `pieces` fed in order.
fn sse_events(pieces: &[&[u8]]) -> Vec<SseEvent> {
    let mut dec = SseDecoder::new();
    let mut out = Vec::new();
    for piece in pieces {
        dec.push(piece);
        while let Some(ev) = dec.next_event().unwrap() {
            out.push(ev);
        }
    }
    out.extend(dec.finish());
    out
}

/// Every split point of every stream. The decoder keeps nothing between
/// events, so a split only matters inside the event it falls in: each event
/// is fed in two pieces at each of its byte offsets and must come out whole
/// (and not before its last byte). The small streams are also translated at
/// every split of the whole body (for the two big ones that costs ~20 s of
/// debug-build JSON parsing), and every stream byte by byte.
#[test]
fn every_stream_translates_the_same_at_every_split_point() {
    for f in fixtures(".sse") {
        let body = fixture(&f);
        let bytes = body.as_bytes();
        let whole = translate_all(&body);
        assert!(!whole.0.is_empty(), "{f}");
        for ev in sse_events(&[bytes]) {
            let raw = &ev.raw[..];
            for k in 1..raw.len() {
                let mut dec = SseDecoder::new();
                dec.push(&raw[..k]);
                assert_eq!(dec.next_event().unwrap(), None, "{f}: early at {k}");
                dec.push(&raw[k..]);
                assert_eq!(
                    dec.next_event().unwrap().as_ref(),
                    Some(&ev),
                    "{f}: split at {k}"
                );
            }
        }
        if bytes.len() < 10_000 {
            for k in 1..bytes.len() {
                let pieces: [&[u8]; 2] = [&bytes[..k], &bytes[k..]];
                assert_eq!(translate(&pieces), whole, "{f}: IR split at byte {k}");
            }
        }
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(translate(&singles), whole, "{f}: byte by byte");
    }
}

/// What a client ends up with.
#[derive(Debug, Default, PartialEq)]
struct Summary {
    starts: usize,
    text: String,
    reasoning: String,
    signatures: Vec<String>,
    /// (index, id, name, arguments)
    calls: Vec<(u32, String, String, String)>,
    usage: Option<Usage>,
    finishes: Vec<(FinishReason, Option<String>)>,
}

fn summarize(events: &[StreamEvent]) -> Summary {
    let mut s = Summary::default();
    for e in events {
        match e {
            StreamEvent::Start { .. } => s.starts += 1,
            StreamEvent::TextDelta(t) => s.text.push_str(t),
            StreamEvent::ReasoningDelta { text, signature } => {
                s.reasoning.push_str(text);
                s.signatures.extend(signature.clone());
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                s.calls
                    .push((*index, id.clone(), name.clone(), String::new()))
            }
            StreamEvent::ToolCallDelta { index, arguments } => {
                let c = s
                    .calls
                    .iter_mut()
                    .find(|c| c.0 == *index)
                    .expect("delta before start");
                c.3.push_str(arguments);
            }
            StreamEvent::Usage(u) => s.usage = Some(*u),
            StreamEvent::Finish { reason, raw } => s.finishes.push((*reason, raw.clone())),
        }
    }
    s
}

fn usage(i: u64, o: u64, r: u64) -> Option<Usage> {
    Some(Usage {
        input_tokens: i,
        output_tokens: o,
        reasoning_tokens: r,
        ..Usage::default()
    })
}

#[test]
fn streams_decode_to_the_right_ir() {
    let (evs, problems, finished) = translate_all(&fixture("stream_text.sse"));
    assert!(problems.is_empty() && finished);
    assert_eq!(
        evs[0],
        StreamEvent::Start {
            id: "resp_0dbef2d9d14a548c00696d5e6f5080819086a0a3791c4d6b0c".into(),
            model: "gpt-5.2-2025-12-11".into(),
            created: 1768775279,
        }
    );
    let s = summarize(&evs);
    assert_eq!(s.text, "2+2 = 4");
    assert_eq!(s.usage, usage(20, 10, 0));
    assert_eq!(s.finishes, [(FinishReason::Stop, Some("completed".into()))]);
    assert!(matches!(evs.last(), Some(StreamEvent::Finish { .. })));

    let (evs, _, finished) = translate_all(&fixture("stream_function_call.sse"));
    assert!(finished);
    let s = summarize(&evs);
    assert_eq!(
        s.calls,
        [(
            0,
            "call_CWXgs68YprAjp6t0371hiPOI".into(),
            "final_result".into(),
            r#"{"result":6666}"#.into()
        )],
        "index 0 although output_index is 1"
    );
    assert_eq!(s.signatures.len(), 1);
    assert!(
        s.signatures[0].starts_with("gAAAAABoyXvxI6jw"),
        "the final encrypted_content"
    );
    assert_eq!(s.usage, usage(53, 469, 448));
    assert_eq!(
        s.finishes,
        [(FinishReason::ToolCalls, Some("completed".into()))]
    );

    let (evs, _, _) = translate_all(&fixture("stream_reasoning_summary.sse"));
    let s = summarize(&evs);
    assert!(s
        .reasoning
        .starts_with("**Calculating step-by-step using calculator**"));
    assert!(s.reasoning.ends_with("reporting the final product."));
    assert_eq!(s.calls[0].2, "calculator");
    assert_eq!(s.calls[0].3, r#"{"a":12,"b":7,"op":"add"}"#);
    assert_eq!(
        s.usage,
        usage(134, 28, 0),
        "reasoning_tokens 0 despite a summary"
    );
    assert_eq!(s.finishes[0].0, FinishReason::ToolCalls);

    let (evs, _, finished) = translate_all(&fixture("stream_incomplete_max_output_tokens.sse"));
    assert!(finished);
    let s = summarize(&evs);
    assert_eq!(
        s.text,
        "Rivers are vital parts of Earth's water cycle, carrying fresh water from mountains to the"
    );
    assert_eq!(
        s.finishes,
        [(FinishReason::Length, Some("max_output_tokens".into()))]
    );
    assert_eq!(s.usage, usage(16, 16, 0));
}

#[test]
fn an_in_band_failure_is_reported_once_with_its_code() {
    let (evs, problems, finished) = translate_all(&fixture("stream_error_failed.sse"));
    assert!(!finished, "no terminal success event");
    assert_eq!(summarize(&evs).finishes, []);
    assert_eq!(
        problems.len(),
        1,
        "`error` and `response.failed` are one failure"
    );
    match &problems[0] {
        Problem::Upstream(e) => {
            assert_eq!(e.code, "insufficient_quota");
            assert!(e.message.starts_with("You exceeded your current quota"));
        }
        other => panic!("{other:?}"),
    }
    // response.failed alone, and the SDK's flat error shape
    let (_, problems, _) = translate_all(
        "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"rate_limit_exceeded\",\"message\":\"slow\"}}}\n\n",
    );
    assert_eq!(
        problems,
        [Problem::Upstream(UpstreamError {
            code: "rate_limit_exceeded".into(),
            message: "slow".into()
        })]
    );
    let (_, problems, _) = translate_all(
        "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\"}\n\n",
    );
    assert_eq!(
        problems,
        [Problem::Upstream(UpstreamError {
            code: "server_error".into(),
            message: "boom".into()
        })]
    );
    let (_, problems, _) = translate_all("event: response.output_text.delta\ndata: {nope\n\n");
    assert!(matches!(problems[..], [Problem::Unparsable(_)]));
}

#[test]
fn custom_tool_call_input_streams_as_json_arguments() {
    let sse = concat!(
        "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":\"ctc_1\",\"type\":\"custom_tool_call\",\"call_id\":\"call_9\",\"name\":\"apply_patch\",\"input\":\"\"}}\n\n",
        "event: response.custom_tool_call_input.delta\ndata: {\"type\":\"response.custom_tool_call_input.delta\",\"item_id\":\"ctc_1\",\"output_index\":0,\"delta\":\"*** Begin \\\"Patch\\\"\\n\"}\n\n",
        "event: response.custom_tool_call_input.done\ndata: {\"type\":\"response.custom_tool_call_input.done\",\"item_id\":\"ctc_1\",\"output_index\":0,\"input\":\"*** Begin \\\"Patch\\\"\\n\"}\n\n",
        "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"id\":\"ctc_1\",\"type\":\"custom_tool_call\",\"call_id\":\"call_9\",\"name\":\"apply_patch\",\"input\":\"*** Begin \\\"Patch\\\"\\n\"}}\n\n",
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"output\":[]}}\n\n",
    );
    let s = summarize(&translate_all(sse).0);
    assert_eq!(s.calls.len(), 1);
    let args: Value = serde_json::from_str(&s.calls[0].3).unwrap();
    assert_eq!(args, serde_json::json!({"input": "*** Begin \"Patch\"\n"}));
    assert_eq!(s.finishes[0].0, FinishReason::ToolCalls);
}

// === encoding ===

/// (event type, output_index, content_index, summary_index, sequence_number)
type Shape = (String, Option<u64>, Option<u64>, Option<u64>, Option<u64>);

fn shapes(sse: &[u8]) -> (Vec<Shape>, Vec<Value>) {
    let mut dec = SseDecoder::new();
    dec.push(sse);
    let (mut out, mut payloads) = (Vec::new(), Vec::new());
    while let Some(ev) = dec.next_event().unwrap() {
        let v: Value = serde_json::from_str(ev.data_str().unwrap()).unwrap();
        let name = ev.event_str().unwrap().to_owned();
        assert_eq!(v["type"], name.as_str(), "event: equals data.type");
        let n = |k: &str| v.get(k).and_then(Value::as_u64);
        out.push((
            name,
            n("output_index"),
            n("content_index"),
            n("summary_index"),
            n("sequence_number"),
        ));
        payloads.push(v);
    }
    (out, payloads)
}

fn extras_with_encrypted() -> ResponsesExtras {
    ResponsesExtras {
        include: vec!["reasoning.encrypted_content".into()],
        ..ResponsesExtras::default()
    }
}

fn encode(events: &[StreamEvent], enc: &mut StreamEncoder) -> Vec<u8> {
    let mut out: Vec<Bytes> = Vec::new();
    for e in events {
        out.extend(enc.push(e));
    }
    out.extend(enc.end());
    out.concat()
}

#[test]
fn re_encoded_streams_have_the_fixture_event_structure() {
    for f in fixtures(".sse")
        .into_iter()
        .filter(|f| f != "stream_error_failed.sse")
    {
        let body = fixture(&f);
        let (events, problems, _) = translate_all(&body);
        assert!(problems.is_empty(), "{f}");
        let mut enc = StreamEncoder::new("resp_test", 0, &extras_with_encrypted());
        let ours = encode(&events, &mut enc);
        let (want, want_payloads) = shapes(body.as_bytes());
        let (got, payloads) = shapes(&ours);
        let strip = |v: &[Shape]| {
            v.iter()
                .map(|s| (s.0.clone(), s.1, s.2, s.3))
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(&got), strip(&want), "{f}");
        let seqs: Vec<Option<u64>> = got.iter().map(|s| s.4).collect();
        let want_seqs: Vec<Option<u64>> = (0..got.len() as u64).map(Some).collect();
        assert_eq!(seqs, want_seqs, "{f}: sequence_number 0..n");
        // the terminal Response holds the same items and usage
        let (last, want_last) = (
            &payloads[payloads.len() - 1],
            &want_payloads[want_payloads.len() - 1],
        );
        let r = &last["response"];
        let w = &want_last["response"];
        assert_eq!(r["status"], w["status"], "{f}");
        assert_eq!(r["usage"], w["usage"], "{f}");
        assert_eq!(r["incomplete_details"], w["incomplete_details"], "{f}");
        assert_eq!(r["model"], w["model"], "{f}: the model that served");
        assert_eq!(r["created_at"], w["created_at"], "{f}");
        assert_eq!(r["id"], "resp_test");
        let items = |r: &Value| {
            r["output"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| {
                    let mut i = i.clone();
                    let o = i.as_object_mut().unwrap();
                    o.remove("id");
                    // Re-issued once more in the terminal event; the
                    // translator keeps output_item.done's (checked below).
                    if let Some(e) = o.get_mut("encrypted_content") {
                        *e = e.is_string().into();
                    }
                    i
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(items(r), items(w), "{f}: output items (ids aside)");
        // every output_item.done equals its item in the terminal event
        let dones: Vec<&Value> = payloads
            .iter()
            .filter(|p| p["type"] == "response.output_item.done")
            .map(|p| &p["item"])
            .collect();
        let all: Vec<&Value> = r["output"].as_array().unwrap().iter().collect();
        assert_eq!(dones, all, "{f}");
        let sent = |p: &[Value]| {
            p.iter()
                .filter(|p| p["type"] == "response.output_item.done")
                .map(|p| p["item"]["encrypted_content"].clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            sent(&payloads),
            sent(&want_payloads),
            "{f}: final blobs kept"
        );
        assert!(enc.end().is_empty(), "{f}: end is idempotent");
    }
}

#[test]
fn the_error_path_writes_error_then_response_failed() {
    let body = fixture("stream_error_failed.sse");
    let (events, problems, _) = translate_all(&body);
    let Problem::Upstream(e) = &problems[0] else {
        panic!()
    };
    let mut enc = StreamEncoder::new("resp_err", 0, &ResponsesExtras::default());
    let mut out: Vec<Bytes> = events.iter().flat_map(|ev| enc.push(ev)).collect();
    out.extend(enc.error(&e.code, &e.message));
    let (got, payloads) = shapes(&out.concat());
    let (want, want_payloads) = shapes(body.as_bytes());
    assert_eq!(got, want, "types and sequence numbers");
    assert_eq!(payloads[2]["error"], want_payloads[2]["error"]);
    let failed = &payloads[3]["response"];
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"], want_payloads[3]["response"]["error"]);
    assert_eq!(failed["usage"], Value::Null);
    assert!(
        enc.end().is_empty() && enc.error("x", "y").is_empty(),
        "nothing after failure"
    );
}

#[test]
fn usage_after_finish_and_item_switches_are_handled() {
    let mut enc = StreamEncoder::new("resp_x", 42, &ResponsesExtras::default());
    let u = Usage {
        input_tokens: 3,
        output_tokens: 4,
        ..Usage::default()
    };
    let events = [
        StreamEvent::Start {
            id: "up".into(),
            model: "m".into(),
            created: 0,
        },
        StreamEvent::ReasoningDelta {
            text: "hmm".into(),
            signature: Some("sig".into()),
        },
        StreamEvent::TextDelta("Hi".into()),
        StreamEvent::ToolCallStart {
            index: 0,
            id: "call_a".into(),
            name: "f".into(),
        },
        StreamEvent::ToolCallDelta {
            index: 0,
            arguments: "{}".into(),
        },
        StreamEvent::ToolCallStart {
            index: 1,
            id: "call_b".into(),
            name: "g".into(),
        },
        StreamEvent::ToolCallDelta {
            index: 0,
            arguments: "late".into(),
        },
        StreamEvent::ToolCallDelta {
            index: 1,
            arguments: "{\"x\":1}".into(),
        },
        StreamEvent::Finish {
            reason: FinishReason::ToolCalls,
            raw: None,
        },
        StreamEvent::Usage(u),
    ];
    let (got, payloads) = shapes(&encode(&events, &mut enc));
    let kinds: Vec<&str> = got.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let outs: Vec<Option<u64>> = got.iter().map(|s| s.1).collect();
    assert_eq!(outs[2..8], [Some(0); 6]);
    assert_eq!(outs[8..14], [Some(1); 6]);
    assert_eq!(outs[14..18], [Some(2); 4]);
    assert_eq!(outs[18..22], [Some(3); 4]);
    let r = &payloads[22]["response"];
    assert_eq!(r["created_at"], 42, "Start had none");
    assert_eq!(r["model"], "m");
    assert_eq!(
        r["usage"]["total_tokens"], 7,
        "usage after finish still lands"
    );
    assert!(
        r["output"][0].get("encrypted_content").is_none(),
        "not included"
    );
    assert_eq!(
        r["output"][2]["arguments"], "{}",
        "a late delta for a closed call is dropped"
    );
    assert_eq!(r["output"][3]["arguments"], "{\"x\":1}");
    assert_eq!(r["output"][3]["call_id"], "call_b");
    assert_eq!(
        payloads[14]["item"]["arguments"], "",
        "added with empty arguments"
    );
    assert_eq!(payloads[14]["item"]["status"], "in_progress");
    // the frame text: type first, sequence_number last
    let frame = enc_frame_text(&events);
    assert!(frame.starts_with("event: response.created\ndata: {\"type\":\"response.created\","));
    assert!(frame.contains(",\"sequence_number\":0}\n\n"));
}

fn enc_frame_text(events: &[StreamEvent]) -> String {
    let mut enc = StreamEncoder::new("resp_x", 42, &ResponsesExtras::default());
    String::from_utf8(encode(events, &mut enc)).unwrap()
}

#[test]
fn custom_tool_calls_stream_as_custom_tool_call_items() {
    let x = ResponsesExtras {
        custom_tools: vec!["apply_patch".into()],
        ..ResponsesExtras::default()
    };
    let mut enc = StreamEncoder::new("resp_c", 1, &x);
    let events = [
        StreamEvent::ToolCallStart {
            index: 0,
            id: "call_p".into(),
            name: "apply_patch".into(),
        },
        StreamEvent::ToolCallDelta {
            index: 0,
            arguments: "{\"input\":\"*** Begin".into(),
        },
        StreamEvent::ToolCallDelta {
            index: 0,
            arguments: " Patch\\n\"}".into(),
        },
    ];
    let (got, payloads) = shapes(&encode(&events, &mut enc));
    let kinds: Vec<&str> = got.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.custom_tool_call_input.delta",
            "response.custom_tool_call_input.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    assert_eq!(payloads[2]["item"]["type"], "custom_tool_call");
    assert_eq!(payloads[2]["item"]["input"], "");
    assert_eq!(payloads[3]["delta"], "*** Begin Patch\n");
    assert_eq!(payloads[5]["item"]["input"], "*** Begin Patch\n");
    assert_eq!(payloads[5]["item"]["call_id"], "call_p");
}

#[test]
fn a_continued_stream_goes_on_in_the_open_message() {
    let extras = ResponsesExtras::default();
    let mut first = StreamEncoder::new("resp_k", 5, &extras);
    let mut out: Vec<Bytes> = Vec::new();
    out.extend(first.push(&StreamEvent::Start {
        id: "a".into(),
        model: "m1".into(),
        created: 0,
    }));
    out.extend(first.push(&StreamEvent::TextDelta("Hello, ".into())));
    let at = first.cursor();
    assert!(at.started);
    assert!(
        matches!(&at.open, Some(OpenItem { kind: OpenKind::Message { text }, .. }) if text == "Hello, ")
    );
    // the first upstream broke off; a second one continues the answer
    let mut second = StreamEncoder::continuing(at, &extras);
    out.extend(second.push(&StreamEvent::Start {
        id: "b".into(),
        model: "m2".into(),
        created: 9,
    }));
    out.extend(second.push(&StreamEvent::TextDelta("world".into())));
    out.extend(second.push(&StreamEvent::Finish {
        reason: FinishReason::Stop,
        raw: None,
    }));
    out.extend(second.end());
    let (got, payloads) = shapes(&out.concat());
    let kinds: Vec<&str> = got.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let seqs: Vec<Option<u64>> = got.iter().map(|s| s.4).collect();
    assert_eq!(seqs, (0..10).map(Some).collect::<Vec<_>>());
    assert_eq!(payloads[4]["item_id"], payloads[5]["item_id"], "same item");
    assert_eq!(payloads[6]["text"], "Hello, world");
    let r = &payloads[9]["response"];
    assert_eq!(r["id"], "resp_k");
    assert_eq!(
        r["model"], "m1",
        "the stream's model does not change mid-way"
    );
    assert_eq!(r["created_at"], 5);
    assert_eq!(r["output"][0]["content"][0]["text"], "Hello, world");
}

/// The sequence number after `u64::MAX` stays `u64::MAX` (in a debug build
/// it was a panic; a wrapped 0 would restart the client's sequence).
#[test]
fn a_sequence_number_at_the_top_of_u64_saturates() {
    let mut t = StreamTranslator::new();
    let data = br#"{"type":"response.in_progress","sequence_number":18446744073709551615}"#;
    t.push_data(None, data, &mut Vec::new()).unwrap();
    assert_eq!(t.next_sequence(), u64::MAX);
}
