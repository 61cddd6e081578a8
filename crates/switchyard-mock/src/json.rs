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
