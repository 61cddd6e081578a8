//! The scripted tool loop (`tool_loop`) and the tool rule, for every wire format, stream and
//! non-stream.

mod common;

use common::*;
use serde_json::{json, Value};
use switchyard_mock::{Behavior, MockServer};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fmt {
    Chat,
    Anthropic,
    Gemini,
    Responses,
}

const ALL: [Fmt; 4] = [Fmt::Chat, Fmt::Anthropic, Fmt::Gemini, Fmt::Responses];

/// What an answer came to.
#[derive(Debug, PartialEq)]
enum Out {
    Call(String, Value),
    Text(String),
}

fn path(f: Fmt, stream: bool) -> &'static str {
    match (f, stream) {
        (Fmt::Chat, _) => "/v1/chat/completions",
        (Fmt::Anthropic, _) => "/v1/messages",
        (Fmt::Gemini, false) => GEM,
        (Fmt::Gemini, true) => GEM_STREAM,
        (Fmt::Responses, _) => RESP,
    }
}

fn bash_schema() -> Value {
    json!({"type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "number"}}, "required": ["command"]})
}

/// A first-turn request offering the tool `tool`.
fn first(f: Fmt, stream: bool, tool: &str) -> Value {
    let s = bash_schema();
    match f {
        Fmt::Chat => json!({"model": "gpt-4o", "stream": stream,
            "messages": [{"role": "user", "content": "list files"}],
            "tools": [{"type": "function", "function": {"name": tool, "parameters": s}}]}),
        Fmt::Anthropic => json!({"model": "claude-x", "max_tokens": 100, "stream": stream,
            "messages": [{"role": "user", "content": "list files"}],
            "tools": [{"name": tool, "input_schema": s}]}),
        Fmt::Gemini => json!({"contents": [{"role": "user", "parts": [{"text": "list files"}]}],
            "tools": [{"functionDeclarations": [{"name": tool, "parameters": s}]}]}),
        Fmt::Responses => json!({"model": "gpt-5", "stream": stream,
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]}],
            "tools": [{"type": "function", "name": tool, "parameters": s}]}),
    }
}

/// The follow-up request carrying the result of the call `(name, args)`.
fn with_result(f: Fmt, stream: bool, name: &str, args: &Value, result: &str) -> Value {
    let mut req = first(f, stream, name);
    match f {
        Fmt::Chat => {
            let msgs = req["messages"].as_array_mut().unwrap();
            msgs.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": name, "arguments": args.to_string()}}]}));
            msgs.push(json!({"role": "tool", "tool_call_id": "call_1", "content": result}));
        }
        Fmt::Anthropic => {
            let msgs = req["messages"].as_array_mut().unwrap();
            msgs.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": name, "input": args}]}));
            // Claude Code appends a reminder text block after the tool_result
            msgs.push(json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": result}]},
                {"type": "text", "text": "<system-reminder>keep going</system-reminder>"}]}));
        }
        Fmt::Gemini => {
            let c = req["contents"].as_array_mut().unwrap();
            c.push(
                json!({"role": "model", "parts": [{"functionCall": {"name": name, "args": args}}]}),
            );
            c.push(json!({"role": "user", "parts": [{"functionResponse": {"name": name, "response": {"result": result}}}]}));
        }
        Fmt::Responses => {
            let items = req["input"].as_array_mut().unwrap();
            items.push(json!({"type": "reasoning", "summary": [], "encrypted_content": "x"}));
            items.push(json!({"type": "function_call", "call_id": "call_1", "name": name, "arguments": args.to_string()}));
            items.push(
                json!({"type": "function_call_output", "call_id": "call_1", "output": result}),
            );
        }
    }
    req
}

fn parse_args(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or(Value::String(s.to_string()))
}

/// Read the answer out of any format.
fn outcome(f: Fmt, stream: bool, r: &Resp) -> Out {
    assert_eq!(r.status, 200, "{}", r.text());
    let text = r.text();
    if !stream {
        let v = r.json();
        return match f {
            Fmt::Chat => {
                let m = &v["choices"][0]["message"];
                match m["tool_calls"].get(0) {
                    Some(c) => Out::Call(
                        c["function"]["name"].as_str().unwrap().into(),
                        parse_args(c["function"]["arguments"].as_str().unwrap()),
                    ),
                    None => Out::Text(m["content"].as_str().unwrap().into()),
                }
            }
            Fmt::Anthropic => {
                let b = &v["content"][0];
                match b["type"].as_str().unwrap() {
                    "tool_use" => Out::Call(b["name"].as_str().unwrap().into(), b["input"].clone()),
                    _ => Out::Text(b["text"].as_str().unwrap().into()),
                }
            }
            Fmt::Gemini => {
                let p = &v["candidates"][0]["content"]["parts"][0];
                match p.get("functionCall") {
                    Some(c) => Out::Call(c["name"].as_str().unwrap().into(), c["args"].clone()),
                    None => Out::Text(p["text"].as_str().unwrap().into()),
                }
            }
            Fmt::Responses => responses_out(&v["output"]),
        };
    }
    match f {
        Fmt::Chat => {
            let evs = sse_json(&text);
            let d = |p: &str| -> String {
                evs.iter()
                    .filter_map(|e| e.pointer(p).and_then(Value::as_str))
                    .collect()
            };
            let name = d("/choices/0/delta/tool_calls/0/function/name");
            if name.is_empty() {
                Out::Text(d("/choices/0/delta/content"))
            } else {
                Out::Call(
                    name,
                    parse_args(&d("/choices/0/delta/tool_calls/0/function/arguments")),
                )
            }
        }
        Fmt::Anthropic => {
            let evs = sse_json(&text);
            let start = evs
                .iter()
                .find(|e| e["type"] == "content_block_start")
                .unwrap();
            let d = |p: &str| -> String {
                evs.iter()
                    .filter_map(|e| e.pointer(p).and_then(Value::as_str))
                    .collect()
            };
            if start["content_block"]["type"] == "tool_use" {
                Out::Call(
                    start["content_block"]["name"].as_str().unwrap().into(),
                    parse_args(&d("/delta/partial_json")),
                )
            } else {
                Out::Text(d("/delta/text"))
            }
        }
        Fmt::Gemini => {
            let evs = sse_json(&text);
            match evs[0].pointer("/candidates/0/content/parts/0/functionCall") {
                Some(c) => Out::Call(c["name"].as_str().unwrap().into(), c["args"].clone()),
                None => Out::Text(
                    evs.iter()
                        .filter_map(|e| e.pointer("/candidates/0/content/parts/0/text")?.as_str())
                        .collect(),
                ),
            }
        }
        Fmt::Responses => {
            let evs = sse_events(&text);
            let (name, done) = evs.last().unwrap();
            assert_eq!(name, "response.completed");
            // the streamed deltas agree with the terminal event
            let deltas: String = evs
                .iter()
                .filter(|(n, _)| n.ends_with(".delta"))
                .map(|(_, d)| d["delta"].as_str().unwrap())
                .collect();
            let out = responses_out(&done["response"]["output"]);
            match &out {
                Out::Text(t) => assert_eq!(&deltas, t),
                Out::Call(_, a) => assert_eq!(parse_args(&deltas), *a),
            }
            out
        }
    }
}

fn responses_out(output: &Value) -> Out {
    let item = output.as_array().unwrap().last().unwrap();
    match item["type"].as_str().unwrap() {
        "function_call" => Out::Call(
            item["name"].as_str().unwrap().into(),
            parse_args(item["arguments"].as_str().unwrap()),
        ),
        "custom_tool_call" => Out::Call(
            item["name"].as_str().unwrap().into(),
            Value::String(item["input"].as_str().unwrap().into()),
        ),
        _ => Out::Text(item["content"][0]["text"].as_str().unwrap().into()),
    }
}

#[tokio::test]
async fn tool_rule_every_format() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    for f in ALL {
        for stream in [false, true] {
            let r = call(m.addr(), path(f, stream), &[], &first(f, stream, "Bash")).await;
            assert_eq!(
                outcome(f, stream, &r),
                Out::Call("Bash".into(), json!({"command": "mock", "timeout": 1})),
                "{f:?} stream={stream}"
            );
            let req = with_result(f, stream, "Bash", &json!({"command": "ls"}), "a.txt");
            let r = call(m.addr(), path(f, stream), &[], &req).await;
            assert_eq!(
                outcome(f, stream, &r),
                Out::Text("Tool result received: a.txt".into()),
                "{f:?} stream={stream}"
            );
        }
    }
}

#[tokio::test]
async fn tool_loop_header_every_format() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let b = json!({"tool_loop": {"tool": "Bash", "arguments": {"command": "echo hi"}, "final": "Done: {result}!"}})
        .to_string();
    let h = [("x-mock-behavior", b.as_str())];
    for f in ALL {
        for stream in [false, true] {
            let r = call(m.addr(), path(f, stream), &h, &first(f, stream, "Bash")).await;
            let Out::Call(name, args) = outcome(f, stream, &r) else {
                panic!("{f:?} stream={stream}: no call");
            };
            assert_eq!(
                (name.as_str(), &args),
                ("Bash", &json!({"command": "echo hi"})),
                "{f:?} {stream}"
            );
            let req = with_result(f, stream, &name, &args, "hi\n");
            let r = call(m.addr(), path(f, stream), &h, &req).await;
            assert_eq!(
                outcome(f, stream, &r),
                Out::Text("Done: hi\n!".into()),
                "{f:?} stream={stream}"
            );
        }
    }
}

#[tokio::test]
async fn tool_loop_as_server_default() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    m.set_default(Behavior::tool_loop(
        "shell_command",
        json!({"command": "cargo test", "workdir": "/tmp"}),
        "Tests ran: {result}",
    ));
    for f in ALL {
        for stream in [false, true] {
            // the tool is called even though the request offers another one
            let r = call(m.addr(), path(f, stream), &[], &first(f, stream, "Bash")).await;
            assert_eq!(
                outcome(f, stream, &r),
                Out::Call(
                    "shell_command".into(),
                    json!({"command": "cargo test", "workdir": "/tmp"})
                ),
                "{f:?} stream={stream}"
            );
            let req = with_result(f, stream, "shell_command", &json!({}), "ok");
            let r = call(m.addr(), path(f, stream), &[], &req).await;
            assert_eq!(outcome(f, stream, &r), Out::Text("Tests ran: ok".into()));
        }
    }
    // a header replaces the default (here: the plain tool rule)
    let h = [("x-mock-behavior", r#"{"text":"plain"}"#)];
    let r = call(m.addr(), RESP, &h, &first(Fmt::Responses, false, "Bash")).await;
    assert_eq!(
        outcome(Fmt::Responses, false, &r),
        Out::Call("Bash".into(), json!({"command": "mock", "timeout": 1}))
    );
    let r = call(m.addr(), RESP, &h, &responses_req(false)).await;
    assert_eq!(
        outcome(Fmt::Responses, false, &r),
        Out::Text("plain".into())
    );
}

#[tokio::test]
async fn tool_loop_defaults_and_custom_tools() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    // no tool, arguments or final: the tool rule's pick, synthesized arguments, default text
    let h = [("x-mock-behavior", r#"{"tool_loop":{}}"#)];
    let mut req = first(Fmt::Anthropic, false, "Bash");
    req["tool_choice"] = json!({"type": "none"});
    let r = call(m.addr(), "/v1/messages", &h, &req).await;
    assert_eq!(
        outcome(Fmt::Anthropic, false, &r),
        Out::Call("Bash".into(), json!({"command": "mock", "timeout": 1})),
        "the loop calls whatever tool_choice says"
    );
    let req = with_result(Fmt::Anthropic, false, "Bash", &json!({}), "x");
    let r = call(m.addr(), "/v1/messages", &h, &req).await;
    assert_eq!(
        outcome(Fmt::Anthropic, false, &r),
        Out::Text("Tool result received: x".into())
    );
    // `text` stands in for a missing `final`, with {result} filled in
    let h = [(
        "x-mock-behavior",
        r#"{"tool_loop":{"tool":"Bash"},"text":"got {result}"}"#,
    )];
    let req = with_result(Fmt::Chat, true, "Bash", &json!({}), "y");
    let r = call(m.addr(), "/v1/chat/completions", &h, &req).await;
    assert_eq!(outcome(Fmt::Chat, true, &r), Out::Text("got y".into()));
    // a request with no tools at all (an agent's side request): a normal answer
    for b in [r#"{"tool_loop":{}}"#, r#"{"tool_loop":{"tool":"Bash"}}"#] {
        let h = [("x-mock-behavior", b)];
        let r = call(m.addr(), "/v1/chat/completions", &h, &openai_req(false)).await;
        assert_eq!(
            outcome(Fmt::Chat, false, &r),
            Out::Text("Hello from the mock openai provider.".into())
        );
    }
    // Codex's custom apply_patch tool: string arguments are the input
    let h = [(
        "x-mock-behavior",
        r#"{"tool_loop":{"tool":"apply_patch","arguments":"*** Begin Patch\n*** End Patch","final":"patched"}}"#,
    )];
    let req = json!({"model": "gpt-5", "stream": true, "input": "edit",
        "tools": [{"type": "function", "name": "shell_command", "parameters": bash_schema()},
                  {"type": "custom", "name": "apply_patch"}]});
    let r = call(m.addr(), RESP, &h, &req).await;
    assert_eq!(
        outcome(Fmt::Responses, true, &r),
        Out::Call(
            "apply_patch".into(),
            json!("*** Begin Patch\n*** End Patch")
        )
    );
    let evs = sse_events(&r.text());
    assert!(evs
        .iter()
        .any(|(n, _)| n == "response.custom_tool_call_input.delta"));
    let mut req = req;
    req["input"] = json!([{"role": "user", "content": "edit"},
        {"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "p"},
        {"type": "custom_tool_call_output", "call_id": "c", "output": "Success."}]);
    let r = call(m.addr(), RESP, &h, &req).await;
    assert_eq!(
        outcome(Fmt::Responses, true, &r),
        Out::Text("patched".into())
    );
    // a new user turn after the result starts the loop again
    let mut req = with_result(Fmt::Gemini, false, "Bash", &json!({}), "z");
    req["contents"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "user", "parts": [{"text": "again"}]}));
    let h = [(
        "x-mock-behavior",
        r#"{"tool_loop":{"tool":"Bash","arguments":{"command":"ls"}}}"#,
    )];
    let r = call(m.addr(), GEM, &h, &req).await;
    assert_eq!(
        outcome(Fmt::Gemini, false, &r),
        Out::Call("Bash".into(), json!({"command": "ls"}))
    );
    // unknown fields inside tool_loop are rejected
    let h = [("x-mock-behavior", r#"{"tool_loop":{"tools":"Bash"}}"#)];
    let r = call(m.addr(), GEM, &h, &req).await;
    assert_eq!(r.status, 400);
}
