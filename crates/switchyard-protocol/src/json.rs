//! Small JSON text helpers shared by the dialects.

/// JSON text without insignificant whitespace, key order and number spelling
/// kept (a `Value` round trip would sort keys). `raw` must be valid JSON.
pub fn compact_json(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut in_str = false;
    let mut escaped = false;
    for c in raw.chars() {
        if in_str {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
        } else if !c.is_ascii_whitespace() {
            if c == '"' {
                in_str = true;
            }
            out.push(c);
        }
    }
    out
}
