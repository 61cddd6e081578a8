//! Small JSON text helpers shared by the dialects.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::openai::FieldError;

/// A request problem at `param`.
pub(crate) fn err(param: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        param: Some(param.into()),
        message: message.into(),
    }
}

/// One top-level field of a request, typed; a bad value is an error at
/// `param`.
pub(crate) fn field<'a, T: Deserialize<'a>>(
    raw: &'a RawValue,
    param: &str,
) -> Result<T, FieldError> {
    serde_json::from_str(raw.get()).map_err(|e| err(param, strip_position(&e)))
}

/// serde's "at line 1 column 9" points into the sub-value, which only confuses.
pub(crate) fn strip_position(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.find(" at line ") {
        Some(i) => s[..i].to_owned(),
        None => s,
    }
}

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
