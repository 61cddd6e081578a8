//! JSON serialization styles used on the wire.

use bytes::Bytes;
use serde_json::Value;

/// Compact JSON (`{"a":1,"b":[2]}`).
pub fn compact(v: &Value) -> String {
    v.to_string()
}

/// 2-space pretty JSON with a trailing newline.
pub fn pretty_nl(v: &Value) -> Bytes {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    Bytes::from(s)
}

/// The Responses API's style: 2-space pretty JSON, non-ASCII escaped as `\uXXXX` (UTF-16,
/// surrogate pairs above U+FFFF), no trailing newline.
pub fn pretty_ascii(v: &Value) -> Bytes {
    let s = serde_json::to_string_pretty(v).unwrap_or_default();
    if s.is_ascii() {
        return Bytes::from(s);
    }
    // Outside strings JSON is ASCII, so every non-ASCII char sits in a string: escape it.
    let mut out = String::with_capacity(s.len() + 16);
    for ch in s.chars() {
        if ch.is_ascii() {
            out.push(ch);
        } else {
            let mut buf = [0u16; 2];
            for unit in ch.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    Bytes::from(out)
}

/// Gemini's SSE style: `": "` after keys, `","` between members, no other spaces
/// (`{"candidates": [{"content": {"parts": [{"text": "x"}],"role": "model"}}]}`).
pub fn gemini_compact(v: &Value) -> String {
    let mut out = String::with_capacity(256);
    write_gemini(v, &mut out);
    out
}

fn write_gemini(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            out.push('{');
            for (i, (k, val)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_gemini(val, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, val) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_gemini(val, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ascii_style() {
        let v = serde_json::json!({"t": "20°C 😀"});
        let s = super::pretty_ascii(&v);
        assert_eq!(&s[..], b"{\n  \"t\": \"20\\u00b0C \\ud83d\\ude00\"\n}");
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&s).unwrap(), v);
    }

    #[test]
    fn gemini_style() {
        let v = serde_json::json!({"candidates":[{"content":{"parts":[{"text":"The"}],"role":"model"}}],"n":[1,2]});
        assert_eq!(
            super::gemini_compact(&v),
            r#"{"candidates": [{"content": {"parts": [{"text": "The"}],"role": "model"}}],"n": [1,2]}"#
        );
    }
}

/// `bytes` with the value of every `"message"` member (a JSON string, in any spacing) replaced
/// by `message`, JSON-escaped; every other byte as it was. Works on SSE frames too.
pub fn with_message(bytes: &[u8], message: &str) -> Bytes {
    let quoted = Value::String(message.to_owned()).to_string();
    let escaped = &quoted.as_bytes()[1..quoted.len() - 1];
    const KEY: &[u8] = b"\"message\"";
    let mut out = Vec::with_capacity(bytes.len() + escaped.len());
    let mut i = 0;
    while i < bytes.len() {
        let Some(at) = find(&bytes[i..], KEY).map(|p| i + p) else {
            break;
        };
        let mut j = skip_ws(bytes, at + KEY.len());
        if bytes.get(j) != Some(&b':') {
            out.extend_from_slice(&bytes[i..at + KEY.len()]);
            i = at + KEY.len();
            continue;
        }
        j = skip_ws(bytes, j + 1);
        if bytes.get(j) != Some(&b'"') {
            out.extend_from_slice(&bytes[i..j]);
            i = j;
            continue;
        }
        let end = string_end(bytes, j + 1);
        out.extend_from_slice(&bytes[i..=j]);
        out.extend_from_slice(escaped);
        i = end;
    }
    out.extend_from_slice(&bytes[i.min(bytes.len())..]);
    Bytes::from(out)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// The index of the closing quote of the JSON string whose content starts at `i`.
fn string_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i,
            _ => i += 1,
        }
    }
    b.len()
}

#[cfg(test)]
mod message_tests {
    use super::with_message;

    #[test]
    fn only_the_message_strings_change() {
        let sse = b"event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Over\\\"loaded\"}}\n\n";
        let got = with_message(sse, "key \"k\" bad");
        assert_eq!(
            std::str::from_utf8(&got).unwrap(),
            "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"key \\\"k\\\" bad\"}}\n\n"
        );
        let two = with_message(
            b"{\"message\":\"a\",\"x\":{\"message\" : \"b\"},\"type\":\"message\"}",
            "m",
        );
        assert_eq!(
            &two[..],
            b"{\"message\":\"m\",\"x\":{\"message\" : \"m\"},\"type\":\"message\"}"
        );
    }
}
