//! The same-dialect hop: a Responses request forwarded to a Responses
//! upstream (OpenAI) as it came, with only `model` replaced. Reading four
//! fields is all the routing needs; items, tools and encrypted reasoning
//! blobs go through byte for byte.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::request_in::{err, field};
use super::FieldError;
use crate::passthrough::{self, Fields, Splice};

/// A Responses body split into its raw top-level fields, plus the few the
/// gateway reads.
#[derive(Debug)]
pub struct RequestPeek<'a> {
    pub fields: Fields<'a>,
    pub model: Cow<'a, str>,
    pub stream: bool,
    /// `store` (default `true`).
    pub store: bool,
    pub previous_response_id: Option<Cow<'a, str>>,
    /// Client `provider_options` (unwrapped into the upstream body).
    pub provider_options: Option<Map<String, Value>>,
    /// `max_output_tokens` (the output cap reservations assume).
    pub max_output_tokens: Option<u32>,
}

/// Split `body` and read `model`, `stream`, `store`, `previous_response_id`,
/// `max_output_tokens` (and `provider_options`, refused when it would
/// replace a field the gateway owns); nothing else is parsed or validated.
pub fn peek_request(body: &str) -> Result<RequestPeek<'_>, FieldError> {
    let fields = passthrough::parse_object(body).map_err(|message| FieldError {
        param: None,
        message,
    })?;
    let mut model: Option<Cow<str>> = None;
    let (mut stream, mut store) = (false, true);
    let mut previous_response_id = None;
    let mut provider_options = None;
    let mut max_output_tokens = None;
    for (key, raw) in &fields {
        match key.as_ref() {
            "model" => model = field(raw, "model")?,
            "stream" => stream = field::<Option<bool>>(raw, "stream")?.unwrap_or(false),
            "store" => store = field::<Option<bool>>(raw, "store")?.unwrap_or(true),
            "previous_response_id" => previous_response_id = field(raw, "previous_response_id")?,
            "provider_options" => provider_options = crate::json::provider_options(raw)?,
            "max_output_tokens" => max_output_tokens = field(raw, "max_output_tokens")?,
            _ => {}
        }
    }
    let model = model
        .filter(|m| !m.is_empty())
        .ok_or_else(|| err("model", "`model` is required"))?;
    Ok(RequestPeek {
        fields,
        model,
        stream,
        store,
        previous_response_id,
        provider_options,
        max_output_tokens,
    })
}

impl RequestPeek<'_> {
    /// The upstream body: the client's fields in order and byte for byte,
    /// `model` replaced by the upstream's name (`None` leaves it out),
    /// `provider_options` unwrapped, then the provider's `options` (they win).
    pub fn write_upstream(
        &self,
        model: Option<&str>,
        options: Option<&Map<String, Value>>,
    ) -> Vec<u8> {
        passthrough::write(
            &self.fields,
            &Splice {
                model,
                replace: &[],
                remove: &["provider_options"],
                client_options: self.provider_options.as_ref(),
                provider_options: options,
            },
        )
    }
}
