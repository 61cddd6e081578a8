//! `google.rpc.Status` error bodies (MAPPING.md §13).

use std::borrow::Cow;
use std::time::Duration;

use serde::Deserialize;

/// A Gemini error, as the body states it (the HTTP status may differ: an
/// invalid API key is a 400 with reason `API_KEY_INVALID`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeminiError {
    /// `error.code` (an HTTP-like status; 499 for a cancelled stream).
    pub code: u16,
    /// `error.status`: `INVALID_ARGUMENT`, `RESOURCE_EXHAUSTED`, …
    pub status: String,
    pub message: String,
    /// `details[RetryInfo].retryDelay` ("26s", "34.4s"), else a "Please retry
    /// in 36.4s." hint in the message; at most [`MAX_RETRY_DELAY`].
    pub retry_delay: Option<Duration>,
    /// `details[ErrorInfo].reason`: `API_KEY_INVALID`, `SERVICE_DISABLED`, …
    pub reason: Option<String>,
}

#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow)]
    error: Status<'a>,
}

#[derive(Deserialize)]
struct Status<'a> {
    #[serde(default)]
    code: u16,
    #[serde(default, borrow)]
    message: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    status: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    details: Vec<Detail<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Detail<'a> {
    #[serde(rename = "@type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    retry_delay: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reason: Option<Cow<'a, str>>,
}

/// The longest retry delay read from a body, as for a `Retry-After` header:
/// the wait is the upstream's number, and `18446744073709551615s` added to
/// the clock panics.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(3600);

/// Parse an error body: `{"error": {...}}`, or the same wrapped in a
/// one-element array (non-`alt=sse` streaming). `None` if it is not one.
pub fn parse_error(body: &[u8]) -> Option<GeminiError> {
    let body = body.trim_ascii();
    // Checked by hand: serde would also read a struct from a sequence.
    let b: Body = if body.starts_with(b"[") {
        let [b] = serde_json::from_slice::<[Body; 1]>(body).ok()?;
        b
    } else {
        serde_json::from_slice(body).ok()?
    };
    Some(convert(b.error))
}

/// The inner `google.rpc.Status` object (an in-band `error` field).
pub(super) fn parse_status(raw: &str) -> Option<GeminiError> {
    serde_json::from_str(raw).ok().map(convert)
}

fn convert(e: Status) -> GeminiError {
    let message = e.message.as_deref().unwrap_or_default().to_owned();
    let of_type = |suffix: &'static str| {
        e.details
            .iter()
            .filter(move |d| d.kind.as_deref().is_some_and(|k| k.ends_with(suffix)))
    };
    let retry_delay = of_type("google.rpc.RetryInfo")
        .find_map(|d| d.retry_delay.as_deref().and_then(seconds))
        .or_else(|| retry_hint(&message))
        .map(|d| d.min(MAX_RETRY_DELAY));
    let reason = of_type("google.rpc.ErrorInfo")
        .find_map(|d| d.reason.as_deref())
        .map(str::to_owned);
    GeminiError {
        code: e.code,
        status: e.status.as_deref().unwrap_or_default().to_owned(),
        message,
        retry_delay,
        reason,
    }
}

/// A protobuf JSON `Duration`: `"17s"`, `"34.4s"` (decimal, parsed exactly).
fn seconds(s: &str) -> Option<Duration> {
    let s = s.trim().strip_suffix('s')?;
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    let all_digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !all_digits(whole) || !all_digits(frac) || frac.len() > 9 {
        return None;
    }
    let nanos = if frac.is_empty() {
        0
    } else {
        frac.parse::<u32>().ok()? * 10u32.pow(9 - frac.len() as u32)
    };
    Some(Duration::new(whole.parse().ok()?, nanos))
}

/// "… Please retry in 36.4s." in newer quota messages.
fn retry_hint(message: &str) -> Option<Duration> {
    let (_, rest) = message.split_once("retry in ")?;
    let end = rest.find('s')?;
    seconds(&rest[..=end])
}
