//! `providers:` — one block per upstream account/endpoint.
//!
//! Extensions beyond CONTRACT §2: `keys[]` entries are `{ env: VAR, weight: N }`
//! or `{ value: "literal-or-${VAR}", weight: N }` (weight defaults to 1, 0 parks a
//! key; at least one must be > 0); `api_version` (azure only, default
//! `2024-10-21`); `base_url` may be left out for openai, anthropic and gemini
//! (their public endpoints), not for azure, and never has a query string or
//! fragment. A key `value` written in clear (no `${VAR}`) is a warning.

use std::collections::BTreeMap;

use super::super::fields::Fields;
use super::super::fields::{self as f, fields, items, pick};
use super::super::node::{At, Node, Sp};
use super::super::raw::{
    entries, section, RawCircuit, RawCredentials, RawKey, RawLimits, RawProbe, RawProvider,
    RawQuota, RawTimeouts,
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
    "region",
    "project",
    "location",
    "credentials",
    "flavor",
    "probe",
    "quota",
];
/// The keys of a `limits:` mapping (a provider's pool or one deployment's).
pub const LIMIT_KEYS: &[&str] = &["rpm", "tpm", "concurrency", "queue", "queue_timeout"];
pub const AZURE_API_VERSION: &str = "2024-10-21";

pub fn decode(d: &mut Diags, n: &Node, at: &At) -> Option<RawProvider> {
    let p = fields(d, n, at, KEYS)?;
    let protocols = [
        ("openai", Protocol::OpenAi),
        ("anthropic", Protocol::Anthropic),
        ("gemini", Protocol::Gemini),
        ("azure", Protocol::Azure),
        ("bedrock", Protocol::Bedrock),
        ("vertex", Protocol::Vertex),
    ];
    let mut raw = RawProvider {
        protocol: p.choice(d, "protocol", &protocols),
        flavor: p.choice(d, "flavor", &Flavor::ALL.map(|f| (f.as_str(), f))),
        base_url: p.get(d, "base_url", f::string),
        api_version: p.get(d, "api_version", f::string),
        region: p.get(d, "region", f::string),
        project: p.get(d, "project", f::string),
        location: p.get(d, "location", f::string),
        credentials: p
            .node("credentials")
            .and_then(|(n, at)| credentials(d, n, &at)),
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
    raw.limits = decode_limits(d, &p);
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
    let probe_at = p.node("probe").map(|(_, at)| at);
    if let (Some(c), Some(at)) = (
        section(d, &p, "probe", &["every", "kind", "max_share", "model"]),
        probe_at,
    ) {
        raw.probe = Some(RawProbe {
            at,
            every: c.get(d, "every", f::duration),
            kind: c.choice(
                d,
                "kind",
                &[
                    ("auth", ProbeKind::Auth),
                    ("completion", ProbeKind::Completion),
                ],
            ),
            max_share: c.get(d, "max_share", f::float),
            model: c.get(d, "model", f::string),
        });
    }
    let quota_at = p.node("quota").map(|(_, at)| at);
    if let (Some(q), Some(at)) = (section(d, &p, "quota", &["shift", "stop"]), quota_at) {
        raw.quota = Some(RawQuota {
            at,
            shift: q.get(d, "shift", f::float),
            stop: q.get(d, "stop", f::float),
        });
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

/// `limits:` under `parent` (a provider or a model), empty when absent.
pub fn decode_limits(d: &mut Diags, parent: &Fields<'_>) -> RawLimits {
    let Some(l) = section(d, parent, "limits", LIMIT_KEYS) else {
        return RawLimits::default();
    };
    RawLimits {
        rpm: l.get(d, "rpm", f::uint32),
        tpm: l.get(d, "tpm", f::uint),
        concurrency: l.get(d, "concurrency", f::uint32),
        queue: l.get(d, "queue", f::uint32),
        queue_timeout: l.get(d, "queue_timeout", f::duration),
    }
}

/// `credentials: default`, `{ env_prefix: NAME }` (AWS) or `{ file: PATH }`
/// (a Google service-account key).
fn credentials(d: &mut Diags, n: &Node, at: &At) -> Option<Sp<RawCredentials>> {
    let value = if n.text().is_some() {
        let s = f::string(d, n, at)?;
        pick(d, &s, &[("default", ())])?;
        RawCredentials::Default
    } else {
        let c = fields(d, n, at, &["env_prefix", "file"])?;
        match (
            c.get(d, "env_prefix", f::string),
            c.get(d, "file", f::string),
        ) {
            (Some(prefix), None) => RawCredentials::EnvPrefix(prefix),
            (None, Some(file)) => RawCredentials::File(file),
            _ => {
                d.err(at, "exactly one of `env_prefix` (AWS) or `file` (Google)");
                return None;
            }
        }
    };
    Some(Sp {
        value,
        at: at.clone(),
    })
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
                "missing `protocol` (openai | anthropic | gemini | azure | bedrock)",
            );
            Protocol::OpenAi
        }
    };
    let cloud = cloud(d, name, p, protocol, env);
    let bedrock_url = cloud
        .region
        .as_ref()
        .map(|r| format!("https://bedrock-runtime.{r}.amazonaws.com"));
    let vertex_url = cloud.location.as_deref().map(|l| match l {
        "global" => "https://aiplatform.googleapis.com".to_owned(),
        l => format!("https://{l}-aiplatform.googleapis.com"),
    });
    let default_url = match protocol {
        Protocol::OpenAi => Some("https://api.openai.com/v1"),
        Protocol::Anthropic => Some("https://api.anthropic.com"),
        Protocol::Gemini => Some("https://generativelanguage.googleapis.com"),
        Protocol::Azure => None,
        Protocol::Bedrock => bedrock_url.as_deref().or(Some("")),
        Protocol::Vertex => vertex_url.as_deref().or(Some("")),
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
    if matches!(protocol, Protocol::Bedrock | Protocol::Vertex) {
        if let Some(k) = p.keys.first() {
            d.err(
                &k.at,
                format!(
                    "`protocol: {}` takes `credentials`, never `keys` (contract §9)",
                    protocol.as_str()
                ),
            );
        }
    }
    let flavor = flavor(d, p, protocol, &base_url);
    Provider {
        id: name.value.clone(),
        protocol,
        flavor,
        base_url,
        keys: keys(d, &p.keys, env),
        timeouts: timeouts(d, &p.timeouts),
        limits: limits(d, &p.limits),
        circuit: circuit(d, &p.circuit),
        headers,
        options: p.options.clone(),
        api_version,
        region: cloud.region,
        project: cloud.project,
        location: cloud.location,
        credentials: cloud.credentials,
        probe: p.probe.as_ref().map(|r| probe(d, r, protocol)),
        quota: p
            .quota
            .as_ref()
            .map_or_else(Quota::default, |q| quota(d, q)),
    }
}

/// `quota: { shift, stop }`: fractions of rpm/tpm used, 0 < shift < stop ≤ 1.
fn quota(d: &mut Diags, r: &RawQuota) -> Quota {
    let def = Quota::default();
    let shift = match &r.shift {
        Some(s) if !(s.value > 0.0 && s.value < 1.0) => {
            d.err(&s.at, format!("must be in (0, 1), found {}", s.value));
            None
        }
        Some(s) => Some(s.value),
        None => Some(def.shift),
    };
    let stop = match &r.stop {
        Some(s) if !(s.value > 0.0 && s.value <= 1.0) => {
            d.err(&s.at, format!("must be in (0, 1], found {}", s.value));
            None
        }
        Some(s) => Some(s.value),
        None => Some(def.stop),
    };
    match (shift, stop) {
        (Some(shift), Some(stop)) if shift >= stop => {
            let at = r
                .shift
                .as_ref()
                .or(r.stop.as_ref())
                .map_or(&r.at, |v| &v.at);
            d.err(
                at,
                format!(
                    "`shift` ({shift}) must be below `stop` ({stop}): traffic moves away past `shift` and stops at `stop`"
                ),
            );
            def
        }
        (Some(shift), Some(stop)) => Quota { shift, stop },
        _ => def,
    }
}

/// `probe:`. Checked against the deployments (`model` names one of the
/// provider's) with the models, in `models.rs`.
fn probe(d: &mut Diags, r: &RawProbe, protocol: Protocol) -> Probe {
    let kind = r.kind.as_ref().map_or(ProbeKind::Auth, |k| k.value);
    // Listing models is the free call; Bedrock and Vertex list models on a
    // control-plane API the gateway does not sign for.
    if kind == ProbeKind::Auth && matches!(protocol, Protocol::Bedrock | Protocol::Vertex) {
        let at = r.kind.as_ref().map_or(&r.at, |k| &k.at);
        d.err(
            at,
            format!(
                "not supported yet (`kind: auth` on `protocol: {}`: no free call to make); set `kind: completion`",
                protocol.as_str()
            ),
        );
    }
    let max_share = match &r.max_share {
        Some(s) if !(s.value > 0.0 && s.value <= 1.0) => {
            d.err(&s.at, format!("must be in (0, 1], found {}", s.value));
            Probe::DEFAULT_MAX_SHARE
        }
        Some(s) => s.value,
        None => Probe::DEFAULT_MAX_SHARE,
    };
    let every = positive(d, &r.every, Probe::DEFAULT_EVERY);
    if every < std::time::Duration::from_secs(1) {
        if let Some(e) = &r.every {
            d.err(&e.at, "must be at least 1s");
        }
    }
    Probe {
        every,
        kind,
        max_share,
        model: r.model.as_ref().map(|m| m.value.clone()),
    }
}

/// `flavor`: OpenAI protocol only; absent, taken from the host.
fn flavor(d: &mut Diags, p: &RawProvider, protocol: Protocol, base_url: &str) -> Flavor {
    match (&p.flavor, protocol) {
        (Some(f), Protocol::OpenAi) => f.value,
        (Some(f), _) => {
            d.err(&f.at, "`flavor` only applies to `protocol: openai`");
            Flavor::Generic
        }
        (None, Protocol::OpenAi) => base_url
            .parse::<http::Uri>()
            .ok()
            .and_then(|u| u.host().map(Flavor::from_host))
            .unwrap_or_default(),
        (None, _) => Flavor::Generic,
    }
}

/// A cloud provider's place and credentials.
#[derive(Default)]
struct Cloud {
    region: Option<String>,
    project: Option<String>,
    location: Option<String>,
    credentials: Option<CloudCredentials>,
}

/// `region` and `credentials`: Bedrock's (the config's region wins over
/// `AWS_REGION`; credentials default to the platform's chain); refused on
/// other protocols.
fn cloud(d: &mut Diags, name: &Sp<String>, p: &RawProvider, protocol: Protocol, env: Env) -> Cloud {
    if protocol != Protocol::Bedrock {
        if let Some(r) = &p.region {
            d.err(&r.at, "`region` only applies to `protocol: bedrock`");
        }
    }
    if protocol != Protocol::Vertex {
        for v in [&p.project, &p.location].into_iter().flatten() {
            d.err(&v.at, "only applies to `protocol: vertex`");
        }
    }
    match protocol {
        Protocol::Bedrock => bedrock(d, name, p, env),
        Protocol::Vertex => vertex(d, name, p),
        _ => {
            if let Some(c) = &p.credentials {
                d.err(
                    &c.at,
                    "`credentials` only applies to `protocol: bedrock` and `protocol: vertex`",
                );
            }
            Cloud::default()
        }
    }
}

/// Vertex: `project` and `location` required; credentials the Google
/// default or a key file.
fn vertex(d: &mut Diags, name: &Sp<String>, p: &RawProvider) -> Cloud {
    let mut required = |v: &Option<Sp<String>>, key: &str| match v {
        Some(v) if v.value.is_empty() => {
            d.err(&v.at, "must not be empty");
            None
        }
        Some(v) => Some(v.value.clone()),
        None => {
            d.missing(&field_at(&name.at, key), format!("missing `{key}`"));
            None
        }
    };
    let project = required(&p.project, "project");
    let location = required(&p.location, "location");
    let credentials = match p.credentials.as_ref().map(|c| &c.value) {
        None | Some(RawCredentials::Default) => Some(CloudCredentials::Default),
        Some(RawCredentials::File(f)) => Some(CloudCredentials::GoogleFile(f.value.clone().into())),
        Some(RawCredentials::EnvPrefix(e)) => {
            d.err(
                &e.at,
                "`env_prefix` is for AWS credentials; Vertex takes `file` or `default`",
            );
            None
        }
    };
    Cloud {
        project,
        location,
        credentials,
        ..Cloud::default()
    }
}

/// Bedrock: a region, and the AWS chain or fixed keys.
fn bedrock(d: &mut Diags, name: &Sp<String>, p: &RawProvider, env: Env) -> Cloud {
    let region = match &p.region {
        Some(r) if r.value.is_empty() => {
            d.err(&r.at, "must not be empty");
            None
        }
        Some(r) => Some(r.value.clone()),
        None => env("AWS_REGION").filter(|r| !r.is_empty()),
    };
    if region.is_none() && p.region.is_none() {
        d.missing(
            &field_at(&name.at, "region"),
            "missing `region` (or set AWS_REGION)",
        );
    }
    let credentials = match p.credentials.as_ref().map(|c| &c.value) {
        None | Some(RawCredentials::Default) => Some(CloudCredentials::Default),
        Some(RawCredentials::EnvPrefix(prefix)) => aws_keys(d, prefix, env),
        Some(RawCredentials::File(f)) => {
            d.err(
                &f.at,
                "`file` is for a Google service account; Bedrock takes `env_prefix` or `default`",
            );
            None
        }
    };
    Cloud {
        region,
        credentials,
        ..Cloud::default()
    }
}

/// `{PREFIX}_ACCESS_KEY_ID`, `{PREFIX}_SECRET_ACCESS_KEY` and the optional
/// `{PREFIX}_SESSION_TOKEN`, read now.
fn aws_keys(d: &mut Diags, prefix: &Sp<String>, env: Env) -> Option<CloudCredentials> {
    let var = |suffix: &str| format!("{}_{suffix}", prefix.value);
    let read = |suffix: &str| env(&var(suffix)).filter(|v| !v.is_empty());
    let (id, secret) = (read("ACCESS_KEY_ID"), read("SECRET_ACCESS_KEY"));
    for (value, suffix) in [(&id, "ACCESS_KEY_ID"), (&secret, "SECRET_ACCESS_KEY")] {
        if value.is_none() {
            d.err(
                &prefix.at,
                format!("environment variable `{}` is not set or empty", var(suffix)),
            );
        }
    }
    Some(CloudCredentials::AwsKeys {
        prefix: prefix.value.clone(),
        access_key_id: id?,
        secret_access_key: Secret::new(secret?),
        session_token: read("SESSION_TOKEN").map(Secret::new),
    })
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

pub fn limits(d: &mut Diags, l: &RawLimits) -> Limits {
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

/// A completion probe's `model` must be one the provider serves (one of
/// its deployments' upstream models): a probe of a model nobody routes to
/// would say nothing about what requests will find.
pub fn check_probe_models(
    d: &mut Diags,
    raw: &[(Sp<String>, RawProvider)],
    providers: &BTreeMap<String, Provider>,
    deployments: &BTreeMap<String, Deployment>,
) {
    for (name, rp) in raw {
        let Some(m) = rp.probe.as_ref().and_then(|p| p.model.as_ref()) else {
            continue;
        };
        let Some(p) = providers.get(&name.value) else {
            continue;
        };
        let served: Vec<&str> = deployments
            .values()
            .filter(|dep| dep.provider == p.id)
            .map(|dep| dep.model.as_str())
            .collect();
        if p.probe
            .as_ref()
            .is_some_and(|pr| pr.kind == ProbeKind::Auth)
        {
            d.err(
                &m.at,
                "has no effect with `kind: auth`; set `kind: completion` or remove it",
            );
        } else if !served.contains(&m.value.as_str()) {
            d.err(
                &m.at,
                format!(
                    "no deployment of `{}` serves `{}` (its models: {})",
                    p.id,
                    m.value,
                    super::models::list(&served)
                ),
            );
        }
    }
}
