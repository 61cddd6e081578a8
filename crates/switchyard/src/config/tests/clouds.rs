//! Cloud providers (contract §9): Bedrock's region, credentials and `api`.

use super::{errs, load, one};
use crate::config::{BedrockApi, CloudCredentials, Protocol};

const MODEL: &str = "models:\n  - { id: b/m, provider: b, model: \"anthropic.claude-v1:0\" }\n";

#[test]
fn bedrock_defaults_to_the_chain_and_its_regional_endpoint() {
    let c = load(&format!(
        "providers:\n  b: {{ protocol: bedrock, region: eu-west-1 }}\n{MODEL}"
    ))
    .unwrap();
    let b = &c.providers["b"];
    assert_eq!(b.protocol, Protocol::Bedrock);
    assert_eq!(
        b.base_url,
        "https://bedrock-runtime.eu-west-1.amazonaws.com"
    );
    assert_eq!(b.region.as_deref(), Some("eu-west-1"));
    assert_eq!(b.credentials, Some(CloudCredentials::Default));
    assert_eq!(c.deployments["b/m"].api, BedrockApi::Converse);
}

#[test]
fn env_prefix_credentials_are_read_at_load_and_never_shown() {
    let c = load(&format!(
        "providers:\n  b:\n    protocol: bedrock\n    region: us-east-1\n    base_url: http://127.0.0.1:9\n    credentials: {{ env_prefix: TEAM_A_AWS }}\n{}",
        MODEL.replace("model: ", "api: invoke, model: ")
    ))
    .unwrap();
    let b = &c.providers["b"];
    assert_eq!(b.base_url, "http://127.0.0.1:9");
    let Some(CloudCredentials::AwsKeys {
        access_key_id,
        secret_access_key,
        session_token,
        ..
    }) = &b.credentials
    else {
        panic!("{:?}", b.credentials)
    };
    assert_eq!(access_key_id, "AKIDTEAMA");
    assert_eq!(secret_access_key.expose(), "team-a-secret");
    assert_eq!(session_token.as_ref().unwrap().expose(), "team-a-token");
    let shown = format!("{:?}", b.credentials);
    assert!(
        !shown.contains("team-a-secret") && !shown.contains("team-a-token"),
        "{shown}"
    );
    assert_eq!(c.deployments["b/m"].api, BedrockApi::Invoke);
}

#[test]
fn bedrock_refuses_keys_and_needs_a_region_and_both_halves_of_a_key() {
    one(
        "providers:\n  b:\n    protocol: bedrock\n    region: us-east-1\n    keys: [{ env: BOT_KEY }]\n",
        5,
        12,
        "providers.b.keys[0]",
        "takes `credentials`, never `keys`",
    );
    one(
        "providers:\n  b: { protocol: bedrock }\n",
        2,
        3,
        "providers.b.region",
        "missing `region` (or set AWS_REGION)",
    );
    one(
        "providers:\n  b:\n    protocol: bedrock\n    region: us-east-1\n    credentials: { env_prefix: HALF_AWS }\n",
        5,
        32,
        "providers.b.credentials.env_prefix",
        "`HALF_AWS_SECRET_ACCESS_KEY` is not set or empty",
    );
    one(
        "providers:\n  b:\n    protocol: bedrock\n    region: us-east-1\n    credentials: fromfile\n",
        5,
        18,
        "providers.b.credentials",
        "unknown value `fromfile`; expected one of: default",
    );
}

#[test]
fn cloud_keys_only_apply_to_cloud_providers() {
    let e = errs(
        "providers:\n  o:\n    protocol: openai\n    region: us-east-1\n    credentials: default\nmodels:\n  - { provider: o, model: m, api: invoke }\n",
    );
    let paths: Vec<&str> = e.iter().map(|d| d.2.as_str()).collect();
    assert_eq!(
        paths,
        [
            "providers.o.region",
            "providers.o.credentials",
            "models[0].api"
        ],
        "{e:?}"
    );
}
