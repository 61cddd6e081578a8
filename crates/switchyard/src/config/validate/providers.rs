//! `providers:` — one block per upstream account/endpoint.
//!
//! Extensions beyond CONTRACT §2: `keys[]` entries are `{ env: VAR, weight: N }`
//! or `{ value: "literal-or-${VAR}", weight: N }` (weight defaults to 1, 0 parks a
//! key; at least one must be > 0); `api_version` (azure only, default
//! `2024-10-21`); `base_url` may be left out for openai, anthropic and gemini
//! (their public endpoints), not for azure, and never has a query string or
//! fragment. A key `value` written in clear (no `${VAR}`) is a warning.

use std::collections::BTreeMap;

use super::super::fields::{self as f, fields, items};
use super::super::node::{At, Node, Sp};
use super::super::raw::{
    entries, section, RawCircuit, RawKey, RawLimits, RawProvider, RawTimeouts,
};
use super::super::Diags;
use super::models::field_at;
use super::{at_least_one, positive, url};
use crate::config::env::Env;
use crate::config::model::*;
use crate::secret::Secret;

const KEYS: &[&str] = &[
    "protocol",
    "base_url",
    "keys",
    "timeouts",
    "limits",
    "circuit",
    "headers",
    "options",
    "api_version",
];
pub const AZURE_API_VERSION: &str = "2024-10-21";

pub fn decode(d: &mut Diags, n: &Node, at: &At) -> Option<RawProvider> {
    let p = fields(d, n, at, KEYS)?;
    let protocols = [
        ("openai", Protocol::OpenAi),
        ("anthropic", Protocol::Anthropic),
        ("gemini", Protocol::Gemini),
        ("azure", Protocol::Azure),
    ];
    let mut raw = RawProvider {
        protocol: p.choice(d, "protocol", &protocols),
        base_url: p.get(d, "base_url", f::string),
        api_version: p.get(d, "api_version", f::string),
        ..Default::default()
    };
    if let Some((kn, kat)) = p.node("keys") {
        for (x, xat) in items(d, kn, &kat).unwrap_or_default() {
            if let Some(k) = fields(d, x, &xat, &["env", "value", "weight"]) {
                raw.keys.push(RawKey {
                    at: k.at.clone(),
                    env: k.get(d, "env", f::string),
                    value: k.get(d, "value", f::string),
                    in_clear: k.node("value").is_some_and(|(n, _)| !n.from_env),
                    weight: k.get(d, "weight", f::uint32),
                });
            }
        }
    }
    if let Some(t) = section(
        d,
        &p,
        "timeouts",
        &["connect", "first_byte", "total", "stream_idle"],
    ) {
        raw.timeouts = RawTimeouts {
            at: t.at.clone(),
            connect: t.get(d, "connect", f::duration),
            first_byte: t.get(d, "first_byte", f::duration),
            total: t.get(d, "total", f::duration),
            stream_idle: t.get(d, "stream_idle", f::duration),
        };
    }
    if let Some(l) = section(
        d,
        &p,
        "limits",
        &["rpm", "tpm", "concurrency", "queue", "queue_timeout"],
    ) {
        raw.limits = RawLimits {
            rpm: l.get(d, "rpm", f::uint32),
            tpm: l.get(d, "tpm", f::uint),
            concurrency: l.get(d, "concurrency", f::uint32),
            queue: l.get(d, "queue", f::uint32),
            queue_timeout: l.get(d, "queue_timeout", f::duration),
        };
    }
    let circuit_keys = [
        "window",
        "min_requests",
        "failure_rate",
        "consecutive_failures",
        "latency_p95",
        "cooldown",
    ];
    if let Some(c) = section(d, &p, "circuit", &circuit_keys) {
        raw.circuit = RawCircuit {
            window: c.get(d, "window", f::duration),
            min_requests: c.get(d, "min_requests", f::uint32),
            failure_rate: c.get(d, "failure_rate", f::float),
            consecutive_failures: c.get(d, "consecutive_failures", f::uint32),
            latency_p95: c.get(d, "latency_p95", f::duration),
            cooldown: c.get(d, "cooldown", f::duration),
        };
    }
    for (name, hat, hn) in entries(d, &p, "headers") {
        if let Some(v) = f::string(d, hn, &hat) {
            raw.headers.push((
                Sp {
                    value: name.to_string(),
                    at: hat,
                },
                v,
            ));
        }
    }
    if let Some((on, oat)) = p.node("options") {
        match f::json(d, on, &oat).map(|j| j.value) {
            Some(serde_json::Value::Object(m)) => raw.options = m,
            Some(_) => d.err(
                &At {
                    pos: on.pos,
                    path: oat.path,
                },
                "expected a mapping of body fields",
            ),
            None => {}
        }
    }
    Some(raw)
}

pub fn check(
    d: &mut Diags,
    raw: &[(Sp<String>, RawProvider)],
    env: Env,
) -> BTreeMap<String, Provider> {
    raw.iter()
        .map(|(name, p)| (name.value.clone(), provider(d, name, p, env)))
        .collect()
}

fn provider(d: &mut Diags, name: &Sp<String>, p: &RawProvider, env: Env) -> Provider {
    let protocol = match &p.protocol {
        Some(v) => v.value,
        None => {
            d.missing(
                &field_at(&name.at, "protocol"),
                "missing `protocol` (openai | anthropic | gemini | azure)",
            );
            Protocol::OpenAi
        }
    };
    let default_url = match protocol {
        Protocol::OpenAi => Some("https://api.openai.com/v1"),
        Protocol::Anthropic => Some("https://api.anthropic.com"),
        Protocol::Gemini => Some("https://generativelanguage.googleapis.com"),
        Protocol::Azure => None,
    };
    let base_url = match (&p.base_url, default_url) {
        (Some(u), _) if u.value.contains(['?', '#']) => {
            // The adapter appends paths after it: a query or fragment would
            // end up in the middle of every URL (and a `?key=` leaks a key).
            d.err(
                &u.at,
                "must not have a query string or a fragment: the gateway appends the API's paths to it (a key goes in `keys`, a header in `headers`)",
            );
            String::new()
        }
        (Some(u), _) => url(d, u, &["http", "https"]).unwrap_or_default(),
        (None, Some(u)) => u.to_string(),
        (None, None) => {
            d.missing(
                &field_at(&name.at, "base_url"),
                "missing `base_url` (the Azure resource endpoint)",
            );
            String::new()
        }
    };
    let api_version = match (&p.api_version, protocol) {
        (Some(v), Protocol::Azure) => Some(v.value.clone()),
        (None, Protocol::Azure) => Some(AZURE_API_VERSION.to_string()),
        (Some(v), _) => {
            d.err(&v.at, "`api_version` only applies to `protocol: azure`");
            None
        }
        (None, _) => None,
    };
    let mut headers = Vec::new();
    for (k, v) in &p.headers {
        if http::HeaderName::from_bytes(k.value.as_bytes()).is_err() {
            d.err(&k.at, format!("`{}` is not a valid header name", k.value));
        } else if http::HeaderValue::from_str(&v.value).is_err() {
            d.err(&v.at, "not a valid header value");
        }
        headers.push((k.value.clone(), v.value.clone()));
    }
    Provider {
        id: name.value.clone(),
        protocol,
        base_url,
        keys: keys(d, &p.keys, env),
        timeouts: timeouts(d, &p.timeouts),
        limits: limits(d, &p.limits),
        circuit: circuit(d, &p.circuit),
        headers,
        options: p.options.clone(),
        api_version,
    }
}

fn keys(d: &mut Diags, raw: &[RawKey], env: Env) -> Vec<ProviderKey> {
    let mut out = Vec::new();
    for (i, k) in raw.iter().enumerate() {
        let weight = k.weight.as_ref().map_or(1, |w| w.value);
        let (label, secret) = match (&k.env, &k.value) {
            (Some(var), None) => match env(&var.value).filter(|v| !v.is_empty()) {
                Some(v) => (format!("env:{}", var.value), v),
                None => {
                    d.err(
                        &var.at,
                        format!("environment variable `{}` is not set or empty", var.value),
                    );
                    continue;
                }
            },
            (None, Some(v)) if v.value.is_empty() => {
                d.err(&v.at, "the key is empty");
                continue;
            }
            (None, Some(v)) => {
                if k.in_clear {
                    d.warn(
                        &v.at,
                        "the key is written in clear in the config: anyone who can read the file has it; use `env: VAR` (or `value: ${VAR}`)",
                    );
                }
                (format!("inline#{i}"), v.value.clone())
            }
            _ => {
                d.err(&k.at, "a key needs exactly one of `env` or `value`");
                continue;
            }
        };
        out.push(ProviderKey {
            label,
            secret: Secret::new(secret),
            weight,
        });
    }
    if !raw.is_empty()
        && raw
            .iter()
            .all(|k| k.weight.as_ref().is_some_and(|w| w.value == 0))
    {
        let at = raw[0].weight.as_ref().map_or(&raw[0].at, |w| &w.at);
        d.err(at, "every key has weight 0; at least one must be > 0");
    }
    out
}

fn timeouts(d: &mut Diags, t: &RawTimeouts) -> Timeouts {
    let def = Timeouts::default();
    let out = Timeouts {
        connect: positive(d, &t.connect, def.connect),
        first_byte: positive(d, &t.first_byte, def.first_byte),
        total: positive(d, &t.total, def.total),
        stream_idle: positive(d, &t.stream_idle, def.stream_idle),
    };
    if out.first_byte > out.total {
        let at = t
            .first_byte
            .as_ref()
            .or(t.total.as_ref())
            .map_or(&t.at, |v| &v.at);
        d.err(
            at,
            format!(
                "first_byte ({:?}) must not exceed total ({:?})",
                out.first_byte, out.total
            ),
        );
    }
    out
}

fn limits(d: &mut Diags, l: &RawLimits) -> Limits {
    let queue = l.queue.as_ref().map_or(0, |q| q.value);
    let queue_timeout = match &l.queue_timeout {
        Some(t) if t.value.is_zero() && queue > 0 => {
            d.err(&t.at, "must be greater than zero when `queue` > 0");
            t.value
        }
        Some(t) => t.value,
        // A waiting room needs a bound; 2s unless told.
        None if queue > 0 => std::time::Duration::from_secs(2),
        None => std::time::Duration::ZERO,
    };
    Limits {
        rpm: at_least_one(d, &l.rpm),
        tpm: at_least_one(d, &l.tpm),
        concurrency: at_least_one(d, &l.concurrency),
        queue,
        queue_timeout,
    }
}

fn circuit(d: &mut Diags, c: &RawCircuit) -> Circuit {
    let def = Circuit::default();
    let failure_rate = match &c.failure_rate {
        Some(r) if !(r.value > 0.0 && r.value <= 1.0) => {
            d.err(&r.at, format!("must be in (0, 1], found {}", r.value));
            def.failure_rate
        }
        Some(r) => r.value,
        None => def.failure_rate,
    };
    Circuit {
        window: positive(d, &c.window, def.window),
        min_requests: at_least_one(d, &c.min_requests).unwrap_or(def.min_requests),
        failure_rate,
        consecutive_failures: at_least_one(d, &c.consecutive_failures)
            .unwrap_or(def.consecutive_failures),
        latency_p95: c
            .latency_p95
            .as_ref()
            .map(|v| positive(d, &Some(v.clone()), v.value)),
        cooldown: positive(d, &c.cooldown, def.cooldown),
    }
}
