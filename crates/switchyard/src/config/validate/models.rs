//! `models:` — deployments. A deployment's id is `id`, or `provider/model` when absent.

use std::collections::BTreeMap;

use super::super::fields::{self as f, fields, pick};
use super::super::node::{At, Node, Sp};
use super::super::raw::{section, RawModel};
use super::super::Diags;
use super::non_negative;
use crate::config::model::*;

const KEYS: &[&str] = &[
    "id",
    "provider",
    "model",
    "context_window",
    "max_output_tokens",
    "capabilities",
    "pricing",
    "region",
    "api",
    "reasoning_replay",
    "limits",
];

/// Capability names, for `capabilities` and a route's `require`.
pub fn capability(d: &mut Diags, n: &Node, at: &At) -> Option<Sp<Capability>> {
    let s = f::string(d, n, at)?;
    let choices: Vec<(&str, Capability)> =
        Capability::ALL.iter().map(|c| (c.as_str(), *c)).collect();
    pick(d, &s, &choices)
}

pub fn decode(d: &mut Diags, n: &Node, at: &At) -> Option<RawModel> {
    let m = fields(d, n, at, KEYS)?;
    let keys = ["input", "output", "cached_input", "cache_write"];
    let pricing = section(d, &m, "pricing", &keys).map(|p| {
        let at = p.at.clone();
        (
            at,
            p.get(d, "input", f::float),
            p.get(d, "output", f::float),
            p.get(d, "cached_input", f::float),
            p.get(d, "cache_write", f::float),
        )
    });
    Some(RawModel {
        at: m.at.clone(),
        id: m.get(d, "id", f::string),
        provider: m.get(d, "provider", f::string),
        model: m.get(d, "model", f::string),
        context_window: m.get(d, "context_window", f::uint32),
        max_output_tokens: m.get(d, "max_output_tokens", f::uint32),
        capabilities: m
            .list(d, "capabilities", capability)
            .map(|l| l.value)
            .unwrap_or_default(),
        pricing,
        region: m.get(d, "region", f::string),
        api: m.choice(
            d,
            "api",
            &[
                ("converse", BedrockApi::Converse),
                ("invoke", BedrockApi::Invoke),
            ],
        ),
        reasoning_replay: m.choice(
            d,
            "reasoning_replay",
            &[
                ("auto", ReasoningReplay::Auto),
                ("always", ReasoningReplay::Always),
                ("never", ReasoningReplay::Never),
            ],
        ),
        limits: super::providers::decode_limits(d, &m),
    })
}

pub fn check(
    d: &mut Diags,
    raw: &[RawModel],
    providers: &BTreeMap<String, Provider>,
) -> (BTreeMap<String, Deployment>, Vec<String>) {
    let mut deployments = BTreeMap::new();
    let mut order = Vec::new();
    for m in raw {
        let provider = match &m.provider {
            Some(p) if !providers.contains_key(&p.value) => {
                let known: Vec<&str> = providers.keys().map(String::as_str).collect();
                d.err(
                    &p.at,
                    format!(
                        "unknown provider `{}`; defined providers: {}",
                        p.value,
                        list(&known)
                    ),
                );
                p.value.clone()
            }
            Some(p) => p.value.clone(),
            None => {
                d.missing(&field_at(&m.at, "provider"), "missing `provider`");
                String::new()
            }
        };
        let model = match &m.model {
            Some(v) if v.value.is_empty() => {
                d.err(&v.at, "must not be empty");
                String::new()
            }
            Some(v) => v.value.clone(),
            None => {
                d.missing(
                    &field_at(&m.at, "model"),
                    "missing `model` (the name the upstream knows)",
                );
                String::new()
            }
        };
        let id = match &m.id {
            Some(v) if v.value.is_empty() => {
                d.err(&v.at, "must not be empty");
                continue;
            }
            Some(v) => v.clone(),
            None => Sp {
                value: format!("{provider}/{model}"),
                at: m.at.clone(),
            },
        };
        if deployments.contains_key(&id.value) {
            let how = if m.id.is_some() {
                ""
            } else {
                " (from provider/model; set `id` to tell them apart)"
            };
            d.err(
                &id.at,
                format!("duplicate deployment id `{}`{how}", id.value),
            );
            continue;
        }
        let positive = |d: &mut Diags, v: &Option<Sp<u32>>| {
            let v = v.as_ref()?;
            if v.value == 0 {
                d.err(&v.at, "must be greater than zero");
            }
            Some(v.value)
        };
        let context_window = positive(d, &m.context_window);
        let max_output_tokens = positive(d, &m.max_output_tokens);
        if let (Some(c), Some(o)) = (context_window, &m.max_output_tokens) {
            if o.value > c {
                d.err(
                    &o.at,
                    format!(
                        "max_output_tokens ({}) exceeds context_window ({c})",
                        o.value
                    ),
                );
            }
        }
        let pricing = m
            .pricing
            .as_ref()
            .map(|(at, input, output, cached, write)| {
                for (v, key) in [(input, "input"), (output, "output")] {
                    if v.is_none() {
                        d.missing(
                            &field_at(at, key),
                            format!("missing `{key}` (USD per million tokens)"),
                        );
                    }
                }
                Pricing {
                    input: non_negative(d, input).unwrap_or(0.0),
                    output: non_negative(d, output).unwrap_or(0.0),
                    cached_input: non_negative(d, cached),
                    cache_write: non_negative(d, write),
                }
            });
        // Anthropic has no embeddings API: a deployment there that says it
        // serves embeddings asks for something no build can do.
        let anthropic = providers
            .get(&provider)
            .is_some_and(|p| p.protocol == Protocol::Anthropic);
        if let Some(c) = m
            .capabilities
            .iter()
            .find(|c| anthropic && c.value == Capability::Embeddings)
        {
            d.err(
                &c.at,
                "`embeddings` is not supported on `protocol: anthropic` (Anthropic has no embeddings API)",
            );
        }
        // Google Search beside functions is a Gemini model's trait: on any
        // other provider the capability would be accepted and do nothing.
        let gemini = providers
            .get(&provider)
            .is_some_and(|p| matches!(p.protocol, Protocol::Gemini | Protocol::Vertex));
        if let Some(c) = m
            .capabilities
            .iter()
            .find(|c| !gemini && c.value == Capability::SearchWithTools)
        {
            d.err(
                &c.at,
                "`search_with_tools` applies to Gemini models only (`protocol: gemini` or `vertex`)",
            );
        }
        let bedrock = providers
            .get(&provider)
            .is_some_and(|p| p.protocol == Protocol::Bedrock);
        if let Some(a) = m.api.as_ref().filter(|_| !bedrock) {
            d.err(&a.at, "`api` only applies to `protocol: bedrock` providers");
        }
        let openai = providers
            .get(&provider)
            .is_some_and(|p| p.protocol == Protocol::OpenAi);
        if let Some(r) = m.reasoning_replay.as_ref().filter(|_| !openai) {
            d.err(
                &r.at,
                "`reasoning_replay` only applies to `protocol: openai` providers",
            );
        }
        order.push(id.value.clone());
        deployments.insert(
            id.value.clone(),
            Deployment {
                id: id.value,
                provider,
                model,
                context_window,
                max_output_tokens,
                capabilities: m.capabilities.iter().map(|c| c.value).collect(),
                pricing,
                region: m.region.as_ref().map(|r| r.value.clone()),
                api: m.api.as_ref().map(|a| a.value).unwrap_or_default(),
                reasoning_replay: m
                    .reasoning_replay
                    .as_ref()
                    .map(|r| r.value)
                    .unwrap_or_default(),
                limits: super::providers::limits(d, &m.limits),
            },
        );
    }
    (deployments, order)
}

/// Where a missing key would go: its parent's position, the key's path.
pub fn field_at(parent: &At, key: &str) -> At {
    parent.child(parent.pos, key)
}

pub fn list(names: &[&str]) -> String {
    if names.is_empty() {
        "(none)".into()
    } else {
        names.join(", ")
    }
}
