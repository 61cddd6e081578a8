use super::*;

fn decode_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
    let mut d = SseDecoder::new();
    let mut out = Vec::new();
    for c in chunks {
        d.push(c);
        while let Some(ev) = d.next_event().unwrap() {
            out.push(ev);
        }
    }
    out.extend(d.finish());
    out
}

fn datas(evs: &[SseEvent]) -> Vec<String> {
    evs.iter()
        .filter_map(|e| e.data_str().map(str::to_owned))
        .collect()
}

#[test]
fn lf_crlf_and_cr_terminators() {
    let evs = decode_all(&[b"data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d\n\n"]);
    assert_eq!(datas(&evs), ["a", "b", "c", "d"]);
    assert_eq!(&evs[1].raw[..], b"data: b\r\n\r\n");
}

#[test]
fn named_events_multiline_data_and_comments() {
    let evs = decode_all(&[b": keep-alive\n\nevent: ping\ndata: {}\n\ndata: x\ndata: y\n\n"]);
    assert_eq!(evs.len(), 3);
    assert_eq!(evs[0].data, None);
    assert_eq!(evs[1].event_str(), Some("ping"));
    assert_eq!(evs[2].data_str(), Some("x\ny"));
}

#[test]
fn no_space_after_colon_and_done_sentinel() {
    let evs = decode_all(&[b"data:[DONE]\n\n"]);
    assert!(evs[0].is_done_sentinel());
}

#[test]
fn unterminated_tail_is_returned_at_finish() {
    let evs = decode_all(&[b"data: a\n\ndata: tail"]);
    assert_eq!(datas(&evs), ["a", "tail"]);
}

#[test]
fn every_split_point_of_real_fixtures_gives_the_same_events() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/providers/");
    for f in [
        "openai/stream_tool_call.sse",
        "anthropic/stream_text.sse",
        "gemini/stream_text.sse",
        "deepseek/stream_keepalive.sse",
    ] {
        let bytes = std::fs::read(format!("{root}{f}")).unwrap();
        let whole = decode_all(&[&bytes]);
        assert!(whole.len() > 2, "{f}");
        // Every two-way split, then a 3-byte drip.
        for cut in 0..bytes.len() {
            let split = decode_all(&[&bytes[..cut], &bytes[cut..]]);
            assert_eq!(whole, split, "{f} split at {cut}");
        }
        let drip: Vec<&[u8]> = bytes.chunks(3).collect();
        assert_eq!(whole, decode_all(&drip), "{f} drip");
    }
}

#[test]
fn oversized_event_is_an_error_not_unbounded_growth() {
    let mut d = SseDecoder::new();
    let big = vec![b'x'; MAX_EVENT_BYTES + 1];
    d.push(b"data: ");
    d.push(&big);
    assert_eq!(d.next_event(), Err(EventTooLarge));
}

#[test]
fn encoders() {
    assert_eq!(&data_frame(b"{}")[..], b"data: {}\n\n");
    assert_eq!(
        &named_frame("ping", b"{}")[..],
        b"event: ping\ndata: {}\n\n"
    );
}

/// Asked again after `finish`, the decoder has nothing more and does not
/// scan from offsets into bytes it dropped (a whitespace tail with a line
/// end in it left a stale offset, and the next call sliced past the end).
#[test]
fn a_decoder_asked_again_after_finish_is_empty() {
    let mut d = SseDecoder::new();
    d.push(b"data: a\n\n \n ");
    assert!(d.next_event().unwrap().is_some());
    assert_eq!(d.next_event(), Ok(None));
    assert_eq!(d.finish(), None);
    assert_eq!(d.next_event(), Ok(None));
    d.push(b"data: b\n\n");
    assert_eq!(d.next_event().unwrap().unwrap().data_str(), Some("b"));
}

/// One long line arriving a byte at a time is scanned once: each read used
/// to rescan the line from its start (1 MiB was 5·10^11 bytes of work).
#[test]
fn a_long_line_dripped_byte_by_byte_is_scanned_once() {
    let line = vec![b'x'; 128 * 1024];
    let started = std::time::Instant::now();
    let mut d = SseDecoder::new();
    d.push(b"data: ");
    for b in line.chunks(1) {
        d.push(b);
        assert_eq!(d.next_event(), Ok(None));
    }
    d.push(b"\n\n");
    let ev = d.next_event().unwrap().unwrap();
    assert_eq!(ev.data.unwrap().len(), line.len());
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
}
