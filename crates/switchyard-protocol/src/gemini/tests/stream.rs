use super::*;
use crate::ir::{FinishReason, StreamEvent};
use crate::sse::SseDecoder;

/// What a stream told us, accumulated.
#[derive(Debug, Default)]
pub(super) struct Run {
    pub events: Vec<StreamEvent>,
    pub problems: Vec<StreamProblem>,
    pub finished: bool,
}

impl Run {
    pub(super) fn text(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    pub(super) fn reasoning(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ReasoningDelta { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    pub(super) fn signature(&self) -> Option<String> {
        self.events.iter().rev().find_map(|e| match e {
            StreamEvent::ReasoningDelta { signature, .. } => signature.clone(),
            _ => None,
        })
    }

    /// (id, name, arguments) per call, arguments concatenated.
    pub(super) fn calls(&self) -> Vec<ir::ToolCall> {
        let mut calls: Vec<ir::ToolCall> = Vec::new();
        for e in &self.events {
            match e {
                StreamEvent::ToolCallStart { index, id, name } => {
                    assert_eq!(*index as usize, calls.len(), "indexes count calls");
                    calls.push(ir::ToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        arguments: String::new(),
                    });
                }
                StreamEvent::ToolCallDelta { index, arguments } => {
                    calls[*index as usize].arguments.push_str(arguments)
                }
                _ => {}
            }
        }
        calls
    }

    pub(super) fn finishes(&self) -> Vec<FinishReason> {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::Finish { reason, .. } => Some(*reason),
                _ => None,
            })
            .collect()
    }

    pub(super) fn usage(&self) -> Option<ir::Usage> {
        self.events.iter().rev().find_map(|e| match e {
            StreamEvent::Usage(u) => Some(*u),
            _ => None,
        })
    }
}

/// Decode `bytes` in `step`-byte pieces and translate every event.
pub(super) fn run(bytes: &[u8], step: usize) -> Run {
    let mut dec = SseDecoder::new();
    let mut t = StreamTranslator::new();
    let mut r = Run::default();
    let mut feed = |ev: crate::sse::SseEvent, r: &mut Run| {
        if let Err(p) = t.push_event(&ev, &mut r.events) {
            r.problems.push(p);
        }
    };
    for piece in bytes.chunks(step) {
        dec.push(piece);
        while let Some(ev) = dec.next_event().unwrap() {
            feed(ev, &mut r);
        }
    }
    if let Some(ev) = dec.finish() {
        feed(ev, &mut r);
    }
    r.finished = t.finished();
    assert_eq!(
        t.usage,
        r.usage(),
        "the translator's usage is the last event's"
    );
    r
}

fn run_fixture(name: &str) -> Run {
    let body = fixture(name);
    let whole = run(body.as_bytes(), body.len().max(1));
    let split = run(body.as_bytes(), 7);
    // An answer without `responseId` gets a new id each time: only that differs.
    let (a, b) = if body.contains("\"responseId\"") {
        (whole.events.clone(), split.events.clone())
    } else {
        (
            made_up_ids_blanked(&whole.events),
            made_up_ids_blanked(&split.events),
        )
    };
    assert_eq!(a, b, "{name}: byte splits change nothing");
    whole
}

fn made_up_ids_blanked(events: &[StreamEvent]) -> Vec<StreamEvent> {
    let mut out = events.to_vec();
    for e in &mut out {
        match e {
            StreamEvent::Start { id, .. } | StreamEvent::ToolCallStart { id, .. } => id.clear(),
            _ => {}
        }
    }
    out
}

/// Two answers without `responseId`, alike to the byte (a deterministic
/// upstream, two turns of one conversation): each gets its own id, and every
/// tool call its own id, within the answer and across the two.
#[test]
fn answers_without_a_response_id_never_share_ids() {
    let chunk = r#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}},{"functionCall":{"name":"get_weather","args":{"city":"Oslo"}}}]},"finishReason":"STOP"}],"modelVersion":"gemini-2.5-flash"}"#;
    let body = format!("data: {chunk}\r\n\r\n");
    let (one, two) = (run(body.as_bytes(), body.len()), run(body.as_bytes(), 5));
    let start = |r: &Run| match &r.events[0] {
        StreamEvent::Start { id, .. } => id.clone(),
        e => panic!("{e:?}"),
    };
    assert_ne!(start(&one), start(&two));
    let mut ids: Vec<String> = [one.calls(), two.calls()]
        .concat()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(ids.len(), 4);
    assert!(ids
        .iter()
        .all(|id| name_from_call_id(id) == Some("get_weather")));
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4, "every tool call has its own id: {ids:?}");

    // The same body whole: its own ids again, never the stream's.
    let whole = decode_response(chunk.as_bytes()).unwrap();
    let again = decode_response(chunk.as_bytes()).unwrap();
    assert_ne!(whole.id, again.id);
    let mut all: Vec<&str> = [&whole, &again]
        .iter()
        .flat_map(|r| r.tool_calls.iter().map(|c| c.id.as_str()))
        .chain(ids.iter().map(String::as_str))
        .collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 8, "{all:?}");
}

const STREAMS: &[&str] = &[
    "gemini/stream_finish_safety.sse",
    "gemini/stream_function_call_gemini3.sse",
    "gemini/stream_function_call_partial_args.sse",
    "gemini/stream_function_call_thinking.sse",
    "gemini/stream_recitation.sse",
    "gemini/stream_text.sse",
    "gemini/stream_text_long.sse",
];

#[test]
fn every_stream_fixture_finishes_exactly_once() {
    for name in STREAMS {
        let r = run_fixture(name);
        assert!(r.problems.is_empty(), "{name}: {:?}", r.problems);
        assert_eq!(r.finishes().len(), 1, "{name}");
        assert!(r.finished, "{name}");
        assert!(
            matches!(r.events.first(), Some(StreamEvent::Start { .. })),
            "{name}"
        );
        assert!(
            matches!(r.events.last(), Some(StreamEvent::Finish { .. })),
            "{name}"
        );
        assert!(r.usage().is_some(), "{name}");
        for c in r.calls() {
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&c.arguments)
                .unwrap_or_else(|e| panic!("{name}: whole calls: {e}"));
        }
        assert_eq!(r.calls(), run_fixture(name).calls(), "{name}: stable ids");
    }
}

#[test]
fn text_streams() {
    let r = run_fixture("gemini/stream_text.sse");
    assert_eq!(r.text(), "The capital of Wyoming is **Cheyenne**.\n");
    assert_eq!(
        r.events[0],
        StreamEvent::Start {
            id: r
                .events
                .iter()
                .find_map(|e| match e {
                    StreamEvent::Start { id, .. } => Some(id.clone()),
                    _ => None,
                })
                .unwrap(),
            model: "gemini-2.0-flash".into(),
            created: 0
        }
    );
    assert_eq!(r.finishes(), [FinishReason::Stop]);
    let u = r.usage().unwrap();
    assert_eq!((u.input_tokens, u.output_tokens), (7, 10));

    let r = run_fixture("gemini/stream_text_long.sse");
    assert!(r
        .text()
        .starts_with("Okay, let's dive into the world of cats and dogs!"));
    assert_eq!(r.finishes(), [FinishReason::Stop]);

    let r = run_fixture("gemini/stream_recitation.sse");
    assert_eq!(r.text(), "text1text2text3text4text5text6text7text8");
    assert_eq!(r.finishes(), [FinishReason::ContentFilter]);
    assert_eq!(r.usage().unwrap().output_tokens, 261);
    assert!(
        matches!(r.events.last(), Some(StreamEvent::Finish { raw: Some(raw), .. }) if raw == "RECITATION")
    );

    let r = run_fixture("gemini/stream_finish_safety.sse");
    assert_eq!(r.finishes(), [FinishReason::ContentFilter]);
}

#[test]
fn function_call_streams() {
    let r = run_fixture("gemini/stream_function_call_gemini3.sse");
    let calls = r.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].name.as_str(), calls[0].arguments.as_str()),
        ("weather", r#"{"location":"San Francisco"}"#)
    );
    assert_eq!(
        calls[0].id,
        synth_call_id(0, "b36LacjwM668nsEP2tbsgQQ", "weather")
    );
    assert!(r.signature().unwrap().starts_with("EqUCCqIC"));
    assert_eq!(r.finishes(), [FinishReason::ToolCalls]);
    assert_eq!(r.text(), "");
    // The same call as the recorded non-stream answer (a different exchange,
    // so only the id's tag differs).
    let whole =
        decode_response(fixture("gemini/generate_function_call.response.json").as_bytes()).unwrap();
    assert_eq!(
        (&whole.tool_calls[0].name, &whole.tool_calls[0].arguments),
        (&calls[0].name, &calls[0].arguments)
    );

    let r = run_fixture("gemini/stream_function_call_thinking.sse");
    assert!(r.reasoning().starts_with("**Calculating the Days**"));
    let calls = r.calls();
    assert_eq!(
        (
            calls.len(),
            calls[0].name.as_str(),
            calls[0].arguments.as_str()
        ),
        (1, "now", "{}")
    );
    assert_eq!(r.finishes(), [FinishReason::ToolCalls]);
    assert!(r.signature().unwrap().starts_with("CiIBVKhc"));
    // The signature event comes right before the call it belongs to.
    let start = r
        .events
        .iter()
        .position(|e| matches!(e, StreamEvent::ToolCallStart { .. }))
        .unwrap();
    assert!(
        matches!(&r.events[start - 1], StreamEvent::ReasoningDelta { text, signature: Some(_) } if text.is_empty())
    );

    let r = run_fixture("gemini/stream_function_call_partial_args.sse");
    let args: Vec<(String, String)> = r
        .calls()
        .into_iter()
        .map(|c| (c.name, c.arguments))
        .collect();
    assert_eq!(
        args,
        [
            (
                "getWeather".to_owned(),
                r#"{"location":"Boston"}"#.to_owned()
            ),
            (
                "getWeather".to_owned(),
                r#"{"location":"San Francisco"}"#.to_owned()
            )
        ]
    );
    assert_eq!(r.finishes(), [FinishReason::ToolCalls]);
    assert_eq!(r.usage().unwrap().output_tokens, 23 + 132);
}

#[test]
fn blocked_and_broken_streams() {
    let r = run_fixture("gemini/stream_prompt_blocked.sse");
    assert_eq!(
        r.problems,
        [StreamProblem::PromptBlocked {
            reason: "SAFETY".into(),
            message: None
        }]
    );
    assert!(r.events.is_empty() && !r.finished);

    let r = run_fixture("gemini/stream_error_midstream.txt");
    assert_eq!(r.text(), "First Second ");
    assert_eq!(r.finishes().len(), 1);
    match r.problems.as_slice() {
        [StreamProblem::StreamError(e)] => {
            assert_eq!((e.code, e.status.as_str()), (499, "CANCELLED"));
            assert_eq!(e.message, "The operation was cancelled.");
        }
        other => panic!("{other:?}"),
    }

    let mut t = StreamTranslator::new();
    let mut out = Vec::new();
    assert!(matches!(
        t.push(b"{not json", &mut out),
        Err(StreamProblem::Unparsable(_))
    ));
    let err = br#"{"error": {"code": 500, "message": "boom", "status": "INTERNAL"}}"#;
    assert!(matches!(t.push(err, &mut out), Err(StreamProblem::StreamError(e)) if e.code == 500));
    assert!(out.is_empty());
}

/// A Vertex `partialArgs` path far past an array's end is dropped, not a
/// table of four billion nulls; one 30 000 segments deep is dropped, not a
/// value whose drop overflows the stack.
#[test]
fn partial_arg_paths_cannot_grow_without_bound() {
    let call = |path: &str| {
        format!(
            "data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"functionCall\":{{\"name\":\"f\",\
             \"partialArgs\":[{{\"jsonPath\":\"{path}\",\"stringValue\":\"x\"}},\
             {{\"jsonPath\":\"$.ok\",\"stringValue\":\"y\"}}]}}}}]}},\"finishReason\":\"STOP\"}}]}}\r\n\r\n"
        )
    };
    for path in [
        "$[4294967295]".to_owned(),
        "$.a[99999999]".to_owned(),
        format!("${}", ".a".repeat(30_000)),
        format!("${}", "[0]".repeat(30_000)),
    ] {
        let body = call(&path);
        let r = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || run(body.as_bytes(), body.len()))
            .unwrap()
            .join()
            .unwrap();
        // What the bad path left on its way (at most 64 levels) stays
        // small; the good fragment lands.
        let args = &r.calls()[0].arguments;
        assert!(
            args.len() < 1024,
            "{} bytes for {}",
            args.len(),
            &path[..20]
        );
        let v: Value = serde_json::from_str(args).unwrap();
        assert_eq!(v["ok"], "y");
    }
    // In reach: a short gap is filled, as before.
    let r = run(call("$.a[2]").as_bytes(), 64);
    assert_eq!(r.calls()[0].arguments, r#"{"a":[null,null,"x"],"ok":"y"}"#);
}
