use super::*;
use crate::ir;

fn fixture(name: &str) -> String {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/providers/");
    std::fs::read_to_string(format!("{root}{name}")).unwrap()
}

#[test]
fn every_openai_request_fixture_parses() {
    for f in [
        "openai/chat_text.request.json",
        "openai/chat_json_object.request.json",
        "openai/chat_json_schema.request.json",
        "openai/chat_tool_call.request.json",
        "openai/chat_tool_result.request.json",
        "openai/chat_vision.request.json",
        "deepseek/chat_text.request.json",
        "deepseek/chat_reasoner_multiturn.request.json",
        "qwen/chat_tool_call.request.json",
    ] {
        let body = fixture(f);
        let view = parse_request(&body).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(!view.typed.messages.is_empty(), "{f}");
    }
}

#[test]
fn tool_result_fixture_reaches_the_ir() {
    let body = fixture("openai/chat_tool_result.request.json");
    let ir = parse_request(&body).unwrap().to_ir();
    let asst = ir
        .messages
        .iter()
        .find(|m| !m.tool_calls.is_empty())
        .unwrap();
    let tool = ir
        .messages
        .iter()
        .find(|m| m.role == ir::Role::Tool)
        .unwrap();
    assert_eq!(
        tool.tool_call_id.as_deref(),
        Some(asst.tool_calls[0].id.as_str())
    );
}

#[test]
fn vision_fixture_keeps_image_parts() {
    let body = fixture("openai/chat_vision.request.json");
    let ir = parse_request(&body).unwrap().to_ir();
    let images = ir.messages[0]
        .content
        .iter()
        .filter(|p| matches!(p, ir::ContentPart::Image { .. }))
        .count();
    assert!(images >= 1);
}

fn err(body: &str) -> FieldError {
    parse_request(body).unwrap_err()
}

#[test]
fn bad_inputs_name_the_offending_param() {
    assert_eq!(
        err(r#"{"messages":[{"role":"user","content":"x"}]}"#)
            .param
            .as_deref(),
        Some("model")
    );
    assert_eq!(err(r#"{"model":"m"}"#).param.as_deref(), Some("messages"));
    assert_eq!(
        err(r#"{"model":"m","messages":[]}"#).param.as_deref(),
        Some("messages")
    );
    assert_eq!(
        err(r#"{"model":"m","messages":"hi"}"#).param.as_deref(),
        Some("messages")
    );
    let e = err(
        r#"{"model":"m","messages":[{"role":"user","content":"x"},{"role":"robot","content":"y"}]}"#,
    );
    assert_eq!(e.param.as_deref(), Some("messages[1]"));
    assert!(e.message.contains("robot"), "{}", e.message);
    let e = err(r#"{"model":"m","messages":[{"role":"user","content":5}]}"#);
    assert_eq!(e.param.as_deref(), Some("messages[0]"));
    assert!(e.message.contains("content"), "{}", e.message);
    assert_eq!(
        err(r#"{"model":"m","messages":[{"role":"user","content":"x"}],"temperature":"hot"}"#)
            .param
            .as_deref(),
        Some("temperature")
    );
    assert_eq!(
        err(r#"{"model":"m","messages":[{"role":"user","content":"x"}],"temperature":3}"#)
            .param
            .as_deref(),
        Some("temperature")
    );
    assert_eq!(
        err(r#"{"model":"m","messages":[{"role":"user","content":"x"}],"stream":"yes"}"#)
            .param
            .as_deref(),
        Some("stream")
    );
    assert_eq!(
        err(r#"{"model":"m","messages":[{"role":"tool","content":"x"}]}"#)
            .param
            .as_deref(),
        Some("messages[0]")
    );
    assert_eq!(
        err(r#"{"model":"m","messages":[{"role":"user","content":"x"}],"n":0}"#)
            .param
            .as_deref(),
        Some("n")
    );
    assert_eq!(
        err(r#"{"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"required"}"#)
            .param
            .as_deref(),
        Some("tool_choice")
    );
    // Not JSON, not an object, trailing garbage, duplicate keys.
    for body in [
        "{",
        "[1]",
        r#"{"model":"m"} x"#,
        r#"{"model":"a","model":"b"}"#,
    ] {
        assert_eq!(err(body).param, None, "{body}");
    }
}

#[test]
fn upstream_body_keeps_client_bytes_and_rewrites_only_what_it_must() {
    let body = r#"{"model":"chat","messages":[{"role":"user","content":"h\u00e9"}],"stream":true,"stream_options":{"include_usage":false},"x_custom":{"a" : 1},"provider_options":{"top_k":5}}"#;
    let view = parse_request(body).unwrap();
    let mut opts = serde_json::Map::new();
    opts.insert("mock".into(), serde_json::json!({"chunks": 2}));
    let out = view.write_upstream(&UpstreamEdits {
        model: Some("gpt-4o"),
        force_include_usage: true,
        options: Some(&opts),
    });
    let out = String::from_utf8(out).unwrap();
    assert_eq!(
        out,
        r#"{"model":"gpt-4o","messages":[{"role":"user","content":"h\u00e9"}],"stream":true,"x_custom":{"a" : 1},"stream_options":{"include_usage":true},"top_k":5,"mock":{"chunks":2}}"#
    );
}

#[test]
fn non_stream_body_does_not_get_stream_options() {
    let view =
        parse_request(r#"{"model":"chat","messages":[{"role":"user","content":"x"}]}"#).unwrap();
    let out = view.write_upstream(&UpstreamEdits {
        model: Some("m"),
        force_include_usage: true,
        options: None,
    });
    assert_eq!(
        out,
        br#"{"model":"m","messages":[{"role":"user","content":"x"}]}"#
    );
}

#[test]
fn response_fixtures_peek_usage_and_finish() {
    let body = fixture("openai/chat_text.response.json");
    let r = peek_response(body.as_bytes()).unwrap().to_ir();
    assert_eq!(r.model, "gpt-5.1-chat-latest");
    assert_eq!(r.usage.input_tokens, 20);
    assert_eq!(r.usage.output_tokens, 18);
    let body = fixture("openai/chat_tool_call.response.json");
    let r = peek_response(body.as_bytes()).unwrap().to_ir();
    assert_eq!(r.finish_reason, ir::FinishReason::ToolCalls);
    assert_eq!(r.tool_calls[0].name, "get_weather");
    let body = fixture("deepseek/chat_json_after_tool.response.json");
    let r = peek_response(body.as_bytes()).unwrap().to_ir();
    assert_eq!(r.usage.input_tokens, 495);
}

fn translate(sse: &str) -> (Vec<ir::StreamEvent>, StreamTranslator) {
    let mut dec = crate::sse::SseDecoder::new();
    dec.push(sse.as_bytes());
    let mut t = StreamTranslator::default();
    let mut out = Vec::new();
    while let Some(ev) = dec.next_event().unwrap() {
        if ev.is_done_sentinel() || ev.data.is_none() {
            continue;
        }
        let c = peek_chunk(ev.data.as_ref().unwrap()).unwrap();
        t.push(&c, &mut out);
    }
    (out, t)
}

#[test]
fn stream_fixtures_translate_to_ir_events() {
    let (evs, t) = translate(&fixture("openai/stream_tool_calls_parallel.sse"));
    let starts: Vec<_> = evs
        .iter()
        .filter(|e| matches!(e, ir::StreamEvent::ToolCallStart { .. }))
        .collect();
    assert_eq!(starts.len(), 2);
    assert_eq!(t.finish, Some(ir::FinishReason::ToolCalls));
    let (evs, t) = translate(&fixture("openai/stream_text_usage.sse"));
    let text: String = evs
        .iter()
        .filter_map(|e| match e {
            ir::StreamEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert!(text.starts_with("**Holiday Name:**"));
    assert_eq!(t.usage.unwrap().output_tokens, 300);
    let (evs, _) = translate(&fixture("deepseek/stream_reasoning.sse"));
    assert!(evs
        .iter()
        .any(|e| matches!(e, ir::StreamEvent::ReasoningDelta { .. })));
    // Qwen sends id "" on later fragments: one start per call, never a blank id.
    let (evs, _) = translate(&fixture("qwen/stream_tool_call.sse"));
    for e in &evs {
        if let ir::StreamEvent::ToolCallStart { id, .. } = e {
            assert!(!id.is_empty());
        }
    }
}

/// A server that sends tool calls without ids (some OpenAI-compatible ones):
/// each call still starts, with an id of its own, whole or streamed, and two
/// alike answers never share one.
#[test]
fn tool_calls_without_ids_get_ids_of_their_own() {
    let sse = concat!(
        "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[",
        "{\"index\":0,\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}},",
        "{\"index\":1,\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\n",
        "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    );
    let starts = |evs: Vec<ir::StreamEvent>| -> Vec<String> {
        evs.into_iter()
            .filter_map(|e| match e {
                ir::StreamEvent::ToolCallStart { id, .. } => Some(id),
                _ => None,
            })
            .collect()
    };
    let mut ids = [starts(translate(sse).0), starts(translate(sse).0)].concat();
    let body = r#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[
        {"type":"function","function":{"name":"f","arguments":"{}"}},
        {"type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#;
    let whole = peek_response(body.as_bytes()).unwrap().to_ir();
    ids.extend(whole.tool_calls.into_iter().map(|c| c.id));
    assert_eq!(ids.len(), 6, "{ids:?}");
    assert!(ids.iter().all(|id| id.starts_with("call_")), "{ids:?}");
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 6, "{ids:?}");
}

#[test]
fn ir_encodes_back_to_openai_shapes() {
    let body = fixture("openai/chat_tool_call.response.json");
    let r = peek_response(body.as_bytes()).unwrap().to_ir();
    let again = encode_response(&r);
    let back = peek_response(&again).unwrap().to_ir();
    assert_eq!(back.tool_calls, r.tool_calls);
    assert_eq!(back.usage, r.usage);
    let env = ChunkEnvelope {
        id: "c1".into(),
        model: "m".into(),
        created: 1,
    };
    let chunk = encode_chunk(&env, &ir::StreamEvent::TextDelta("hi".into()));
    let v: serde_json::Value = serde_json::from_slice(&chunk).unwrap();
    assert_eq!(v["choices"][0]["delta"]["content"], "hi");
    assert_eq!(v["object"], "chat.completion.chunk");
}

/// Every fixture of an OpenAI-compatible provider whose name ends so.
fn compatible_fixtures(suffix: &str) -> Vec<std::path::PathBuf> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/providers/");
    let mut out = Vec::new();
    for dir in ["openai", "deepseek", "qwen", "azure"] {
        for entry in std::fs::read_dir(format!("{root}{dir}")).unwrap() {
            let path = entry.unwrap().path();
            if path.to_string_lossy().ends_with(suffix) {
                out.push(path);
            }
        }
    }
    out
}

#[test]
fn usage_peek_agrees_with_the_full_parse_on_every_answer_fixture() {
    let mut seen = 0;
    for path in compatible_fixtures(".response.json") {
        let body = std::fs::read(&path).unwrap();
        let full = peek_response(&body).unwrap();
        let quick = peek_usage(&body).unwrap();
        assert_eq!(quick.model, full.model, "{path:?}");
        let usage = |u: Option<&WireUsage>| u.map(WireUsage::to_ir);
        assert_eq!(
            usage(quick.usage.as_ref()),
            usage(full.usage.as_ref()),
            "{path:?}"
        );
        seen += 1;
    }
    assert!(seen >= 8, "only {seen} fixtures");
}

#[test]
fn usage_peek_is_not_fooled_by_text_and_refuses_cut_answers() {
    // Text that spells out keys is escaped inside its string: never a key.
    let body = br#"{"id":"x","model":"m-1","choices":[{"message":{"role":"assistant",
        "content":"say \"model\": \"evil\" and \"usage\": {\"prompt_tokens\": 999}"},
        "finish_reason":"stop"}],"usage" : {"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}"#;
    let p = peek_usage(body).unwrap();
    assert_eq!(p.model.as_deref(), Some("m-1"));
    let u = p.usage.unwrap().to_ir();
    assert_eq!((u.input_tokens, u.output_tokens), (3, 4));
    // No usage, null usage: none.
    assert!(peek_usage(br#"{"model":"m"}"#).unwrap().usage.is_none());
    assert!(peek_usage(br#"{"model":"m","usage":null}"#)
        .unwrap()
        .usage
        .is_none());
    // Cut in half, or not JSON at all.
    let cut = &body[..body.len() / 2];
    assert!(peek_usage(cut).is_err());
    assert!(peek_usage(b"<html>502 Bad Gateway</html>").is_err());
    assert!(peek_usage(b"").is_err());
}

/// The stream pass reads each chunk with the lean `PassChunk`; on every
/// OpenAI-compatible stream fixture it must see what the full peek sees.
#[test]
fn pass_chunk_agrees_with_the_full_peek_on_every_stream_fixture() {
    let mut checked = 0;
    for path in compatible_fixtures(".sse") {
        let mut dec = crate::sse::SseDecoder::new();
        dec.push(&std::fs::read(&path).unwrap());
        while let Some(ev) = dec.next_event().unwrap() {
            let Some(data) = ev.data.as_ref().filter(|_| !ev.is_done_sentinel()) else {
                continue;
            };
            let (full, lean) = match (peek_chunk(data), peek_pass_chunk(data)) {
                (Ok(f), Ok(l)) => (f, l),
                (Err(_), Err(_)) => continue,
                (f, l) => panic!("{path:?}: full {:?} vs lean {:?}", f.is_ok(), l.is_ok()),
            };
            let what = format!("{path:?} {}", String::from_utf8_lossy(data));
            assert_eq!(full.error.is_some(), lean.error.is_some(), "{what}");
            assert_eq!(full.choices.len(), lean.choices.len(), "{what}");
            for (f, l) in full.choices.iter().zip(&lean.choices) {
                let (fd, ld) = (f.delta.as_ref(), l.delta.as_ref());
                assert_eq!(
                    fd.and_then(|d| d.content.as_deref()),
                    ld.and_then(|d| d.content.as_deref()),
                    "{what}"
                );
                assert_eq!(
                    fd.is_some_and(|d| d.tool_calls.is_some()),
                    ld.is_some_and(|d| d.tool_calls.is_some()),
                    "{what}"
                );
                assert_eq!(f.finish_reason, l.finish_reason, "{what}");
            }
            assert_eq!(
                full.usage.as_ref().map(|u| u.to_ir()),
                lean.usage.as_ref().map(|u| u.to_ir()),
                "{what}"
            );
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} chunks checked");
}

#[test]
fn a_chunk_that_is_not_utf8_is_refused() {
    let data = b"{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}";
    assert!(matches!(peek_pass_chunk(data), Err(PeekError::NotUtf8)));
    assert!(peek_chunk(data).is_err());
}

/// However the usage object is shaped, the peek's answer is serde's.
#[test]
fn usage_peek_agrees_with_serde_on_unusual_usage_objects() {
    for usage in [
        r#"{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}"#,
        r#"{ "prompt_tokens" : 10 , "completion_tokens":0,
            "prompt_tokens_details": {"cached_tokens": 8, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 2} }"#,
        r#"{"prompt_tokens":5,"prompt_cache_hit_tokens":4,"prompt_cache_miss_tokens":1}"#,
        r#"{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":null}}"#,
        r#"{"prompt_tokens":5,"prompt_tokens_details":{}}"#,
        r#"{"prompt_tokens":5,"note":"a \"string\" value","completion_tokens":1}"#,
        r#"{"prompt_tokens":5.5,"completion_tokens":1}"#,
        r#"{"prompt_tokens":-1}"#,
        r#"{"prompt_tokens":null,"completion_tokens":1}"#,
        r#"{"prompt_tokens":[1],"completion_tokens":1}"#,
        r#"{"prompt_tokens":012}"#,
        r#"{"prompt_tokens":18446744073709551616}"#,
        r#"{"completion_tokens":2,"extra":{"nested":{"deep":1}}}"#,
        "{}",
    ] {
        let body = format!(r#"{{"model":"m","choices":[],"usage":{usage}}}"#);
        let quick = peek_usage(body.as_bytes()).map(|p| p.usage.map(|u| u.to_ir()));
        let full = serde_json::from_str::<WireUsage>(usage)
            .ok()
            .map(|u| u.to_ir());
        assert_eq!(quick.unwrap(), full, "{usage}");
    }
}

/// An upstream's tool-call `index` of 4294967295 is one call, not a table
/// of four billion ids (that was a 96 GiB allocation): IR indices count the
/// calls in order, whatever numbers the upstream uses.
#[test]
fn tool_call_indices_are_counted_not_trusted() {
    let sse = concat!(
        r#"data: {"choices":[{"delta":{"tool_calls":[{"index":4294967295,"id":"a","function":{"name":"f","arguments":"{"}}]}}]}"#,
        "\n\n",
        r#"data: {"choices":[{"delta":{"tool_calls":[{"index":7,"id":"b","function":{"name":"g"}}]}}]}"#,
        "\n\n",
        r#"data: {"choices":[{"delta":{"tool_calls":[{"index":4294967295,"id":"","function":{"arguments":"}"}}]}}]}"#,
        "\n\n",
    );
    let (events, _) = translate(sse);
    let calls: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            ir::StreamEvent::ToolCallStart { index, id, .. } => Some((*index, id.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(calls, [(0, "a"), (1, "b")]);
    assert!(events.contains(&ir::StreamEvent::ToolCallDelta {
        index: 0,
        arguments: "}".into()
    }));
}

/// The compatible providers' recorded streams (MAPPING §18) fed split
/// anywhere give the same events as fed whole: reasoning, text, one
/// finish and the usage, wherever each provider puts it (on the finish
/// chunk for DeepSeek and GLM, after it for Qwen, keep-alive comments
/// between events for DeepSeek, no `finish_reason` key at all before the
/// last chunk for GLM).
#[test]
fn compatible_streams_split_anywhere_read_the_same() {
    let cases = [
        ("deepseek/stream_reasoning_raw.sse", 212, 198),
        ("deepseek/stream_keepalive.sse", 0, 0),
        ("zhipu/stream_thinking.sse", 564, 561),
        ("qwen/stream_reasoning.sse", 1355, 1084),
    ];
    for (name, output, reasoning) in cases {
        let sse = fixture(name);
        let (whole, t) = translate(&sse);
        let reasoned = whole
            .iter()
            .any(|e| matches!(e, ir::StreamEvent::ReasoningDelta { .. }));
        assert!(reasoned, "{name}");
        let finishes = whole
            .iter()
            .filter(|e| matches!(e, ir::StreamEvent::Finish { .. }))
            .count();
        assert_eq!(finishes, 1, "{name}");
        if output > 0 {
            let u = t.usage.unwrap_or_else(|| panic!("{name}: no usage"));
            assert_eq!(
                (u.output_tokens, u.reasoning_tokens),
                (output, reasoning),
                "{name}"
            );
        }
        // Every byte around the boundaries of the first and last events
        // (where the role, the first text, the finish and the usage are)
        // and a stride through the rest: every byte of 170 KB is minutes.
        let ends: Vec<usize> = sse.match_indices("\n\n").map(|(i, _)| i).collect();
        let edges = ends.iter().take(12).chain(ends.iter().rev().take(4));
        let mut points: Vec<usize> = edges
            .flat_map(|&i| i.saturating_sub(2)..i + 3)
            .chain((0..sse.len()).step_by(499))
            .filter(|&at| at <= sse.len() && sse.is_char_boundary(at))
            .collect();
        points.sort_unstable();
        points.dedup();
        for at in points {
            let mut dec = crate::sse::SseDecoder::new();
            let mut t = StreamTranslator::default();
            let mut out = Vec::new();
            for piece in [&sse[..at], &sse[at..]] {
                dec.push(piece.as_bytes());
                while let Some(ev) = dec.next_event().unwrap() {
                    if let Some(data) = ev.data.as_ref().filter(|_| !ev.is_done_sentinel()) {
                        t.push(&peek_chunk(data).unwrap(), &mut out);
                    }
                }
            }
            assert_eq!(out, whole, "{name} split at {at}");
        }
    }
}
