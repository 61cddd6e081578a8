//! The doors' stream encoders continuing a broken stream.

use bytes::BytesMut;
use switchyard_protocol::anthropic as an;
use switchyard_protocol::ir::StreamEvent;
use switchyard_protocol::openai::ChunkEnvelope;

use super::anthropic_messages::StreamEncoder as AnthropicEncoder;
use super::openai_chat::StreamEncoder as OpenAiEncoder;
use switchyard_protocol::ir::FinishReason;

fn frames_of(frames: &[u8]) -> Vec<(String, serde_json::Value)> {
    std::str::from_utf8(frames)
        .unwrap()
        .split("\n\n")
        .filter(|f| !f.is_empty())
        .map(|f| {
            let data = f.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            let name = f.lines().find_map(|l| l.strip_prefix("event: "));
            let v: serde_json::Value = serde_json::from_str(data).unwrap_or_default();
            (name.unwrap_or_default().to_owned(), v)
        })
        .collect()
}

fn finish() -> StreamEvent {
    StreamEvent::Finish {
        reason: FinishReason::Stop,
        raw: None,
    }
}

#[test]
fn an_anthropic_continuation_puts_the_trimmed_whitespace_back_in_the_open_block() {
    let at = an::BlockCursor {
        open: Some((2, an::BlockType::Text)),
        next_index: 3,
    };
    let mut enc = AnthropicEncoder::resumed(at, "\n\n".into());
    let mut out = BytesMut::new();
    for ev in [
        StreamEvent::Start {
            id: "msg_x".into(),
            model: "m".into(),
            created: 0,
        },
        StreamEvent::TextDelta("World".into()),
        StreamEvent::TextDelta("!".into()),
        finish(),
    ] {
        enc.encode(&ev, &mut out);
    }
    out.extend_from_slice(&enc.end());
    let frames = frames_of(&out);
    let names: Vec<&str> = frames.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(frames[0].1["index"], 2);
    assert_eq!(frames[0].1["delta"]["text"], "\n\nWorld");
    assert_eq!(frames[1].1["delta"]["text"], "!");
    assert_eq!(frames[2].1["index"], 2);
}

#[test]
fn a_continuation_without_text_still_sends_the_trimmed_whitespace() {
    let at = an::BlockCursor {
        open: Some((0, an::BlockType::Text)),
        next_index: 1,
    };
    let mut enc = AnthropicEncoder::resumed(at, " ".into());
    let mut out = BytesMut::new();
    enc.encode(&finish(), &mut out);
    out.extend_from_slice(&enc.end());
    let frames = frames_of(&out);
    assert_eq!(frames[0].0, "content_block_delta");
    assert_eq!(frames[0].1["delta"]["text"], " ");

    let env = ChunkEnvelope {
        id: "chatcmpl-1".into(),
        model: "m".into(),
        created: 1,
    };
    let mut enc = OpenAiEncoder::resumed(env, false, " ".into());
    let mut out = BytesMut::new();
    enc.encode(&finish(), &mut out);
    let chunks = frames_of(&out);
    assert_eq!(chunks.len(), 2);
    assert_eq!(chunks[0].1["choices"][0]["delta"]["content"], " ");
    assert_eq!(chunks[1].1["choices"][0]["finish_reason"], "stop");
}
