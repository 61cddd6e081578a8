//! Image URLs inlined into the IR (against the loopback origin of
//! `upstream::image_fetch`'s tests), the 400 that names a refused image,
//! and which providers ask for it.

use base64::engine::general_purpose::STANDARD;
use serde_json::{json, Value};
use switchyard_protocol::gemini as gm;
use switchyard_protocol::ir::{Message, Role};

use super::*;
use crate::upstream::image_fetch::tests::{dns, later, origin, png, quick, trusting};

fn image(url: &str) -> ContentPart {
    ContentPart::Image {
        source: ImageSource::Url(url.into()),
        detail: None,
    }
}

fn text(t: &str) -> ContentPart {
    ContentPart::Text(t.into())
}

fn msg(role: Role, content: Vec<ContentPart>) -> Message {
    Message {
        role,
        content,
        ..Message::default()
    }
}

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        model: "m".into(),
        messages,
        ..ChatRequest::default()
    }
}

fn gemini_keeps(url: &str) -> bool {
    super::super::gemini::is_files_api_uri(url)
}

const FILES_URI: &str = "https://generativelanguage.googleapis.com/v1beta/files/abc123";

#[tokio::test]
async fn image_urls_are_fetched_once_and_gemini_gets_them_inline() {
    let o = origin().await;
    let f = trusting(dns(), quick());
    let cat = o.url("localhost", "/cat.png");
    let ir = request(vec![
        msg(Role::System, vec![text("Be brief.")]),
        msg(
            Role::User,
            vec![
                text("What is in these?"),
                image(&cat),
                image(FILES_URI),
                image("data:image/svg+xml,%3Csvg%2F%3E"),
            ],
        ),
        msg(Role::Assistant, vec![text("A cat.")]),
        msg(Role::User, vec![image(&cat), text("And this?")]),
    ]);
    let out = inline_with(&f, &ir, &gemini_keeps, later())
        .await
        .unwrap()
        .expect("a request with image URLs is inlined");
    assert_eq!(o.paths(), ["/cat.png"], "one fetch per distinct URL");
    let body: Value =
        serde_json::from_slice(&gm::encode_request(&out, &gm::Target::default()).unwrap()).unwrap();
    let inline_cat =
        json!({"inlineData": {"mimeType": "image/png", "data": STANDARD.encode(png(4000))}});
    let parts = &body["contents"][0]["parts"];
    assert_eq!(parts[1], inline_cat);
    // Gemini reads its own Files API URIs: left as they are.
    assert_eq!(
        parts[2],
        json!({"fileData": {"mimeType": "image/jpeg", "fileUri": FILES_URI}})
    );
    // A data: URL is already inline: decoded, not fetched.
    assert_eq!(
        parts[3],
        json!({"inlineData": {"mimeType": "image/svg+xml", "data": STANDARD.encode("<svg/>")}})
    );
    assert_eq!(body["contents"][2]["parts"][0], inline_cat);
    assert!(!body.to_string().contains(&cat), "{body}");
    // The request itself is untouched: another candidate gets the URL.
    assert_eq!(ir.messages[1].content[1], image(&cat));
}

#[tokio::test]
async fn a_request_without_image_urls_is_left_alone() {
    let f = trusting(dns(), quick());
    let ir = request(vec![msg(
        Role::User,
        vec![
            text("hi"),
            image(FILES_URI),
            ContentPart::Image {
                source: ImageSource::Base64 {
                    media_type: "image/png".into(),
                    data: "iVBORw0KGgo=".into(),
                },
                detail: None,
            },
        ],
    )]);
    assert_eq!(
        inline_with(&f, &ir, &gemini_keeps, later()).await.unwrap(),
        None
    );
}

#[tokio::test]
async fn an_image_the_gateway_will_not_fetch_is_a_400_naming_it() {
    // The gateway's policy: nothing private trusted. None of these reaches
    // the network.
    let strict = ImageFetcher::builder().build().unwrap();
    let cases = [
        ("http://images.example.com/cat.png?sig=SECRET", "only https"),
        ("https://127.0.0.1/cat.png?sig=SECRET", "non-public"),
        ("https://[::1]:8443/cat.png?sig=SECRET", "non-public"),
        (
            "https://169.254.169.254/latest/meta-data/?sig=SECRET",
            "non-public",
        ),
        ("file:///etc/passwd?sig=SECRET", "only https"),
        ("data:text/html,%3Cb%3E?sig=SECRET", "not an image"),
    ];
    for (url, why) in cases {
        let ir = request(vec![
            msg(Role::System, vec![text("Be brief.")]),
            msg(Role::User, vec![text("What is this?"), image(url)]),
        ]);
        let e = inline_with(&strict, &ir, &gemini_keeps, later())
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidRequest, "{url}");
        assert_eq!(e.code.status().as_u16(), 400);
        assert_eq!(
            e.source,
            Source::Client,
            "{url}: the client's URL, not an outage"
        );
        assert_eq!(e.param.as_deref(), Some("messages[1].content[1]"), "{url}");
        let bare = url.split('?').next().unwrap();
        assert!(e.message.contains(bare), "{url}: {}", e.message);
        assert!(e.message.contains(why), "{url}: {}", e.message);
        assert!(!e.message.contains("SECRET"), "{url}: {}", e.message);
    }
}

#[tokio::test]
async fn a_failed_fetch_is_a_400_naming_the_image() {
    let o = origin().await;
    let f = trusting(dns(), quick());
    let ir = request(vec![msg(
        Role::User,
        vec![
            image(&o.url("localhost", "/cat.png")),
            image(&o.url("localhost", "/missing.png")),
        ],
    )]);
    let e = inline_with(&f, &ir, &gemini_keeps, later())
        .await
        .unwrap_err();
    assert_eq!(e.param.as_deref(), Some("messages[0].content[1]"));
    assert!(e.message.contains("/missing.png"), "{}", e.message);
    assert!(e.message.contains("HTTP 404"), "{}", e.message);
}

#[tokio::test]
async fn at_most_so_many_urls_are_fetched_for_one_request() {
    let o = origin().await;
    let f = trusting(dns(), quick());
    let parts = (0..=MAX_IMAGES)
        .map(|i| image(&o.url("localhost", &format!("/cat.png?n={i}"))))
        .collect();
    let ir = request(vec![msg(Role::User, parts)]);
    let e = inline_with(&f, &ir, &gemini_keeps, later())
        .await
        .unwrap_err();
    let last = format!("messages[0].content[{MAX_IMAGES}]");
    assert_eq!(e.param.as_deref(), Some(last.as_str()));
    assert!(e.message.contains("at most 32"), "{}", e.message);
    assert!(o.paths().is_empty(), "refused before any fetch");
    // The same URL many times is one fetch.
    let parts = (0..=MAX_IMAGES)
        .map(|_| image(&o.url("localhost", "/cat.png")))
        .collect();
    let ir = request(vec![msg(Role::User, parts)]);
    assert!(inline_with(&f, &ir, &gemini_keeps, later())
        .await
        .unwrap()
        .is_some());
    assert_eq!(o.paths(), ["/cat.png"]);
}

/// Gemini (Developer API and Vertex) and Bedrock's Converse take only
/// inline images; Claude (Anthropic, Vertex, Bedrock's InvokeModel) and
/// OpenAI take URLs. What each reads itself stays a URL.
#[test]
fn only_providers_that_take_inline_images_ask_for_the_fetch() {
    let sa = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/providers/vertex/oauth/service_account.test.json"
    );
    let yaml = format!(
        r#"
providers:
  gm: {{ protocol: gemini, base_url: "https://g", keys: [{{ env: K }}] }}
  vx: {{ protocol: vertex, project: p, location: us-east5, credentials: {{ file: "{sa}" }} }}
  bd: {{ protocol: bedrock, region: us-east-1, credentials: {{ env_prefix: AWS_T }} }}
  an: {{ protocol: anthropic, base_url: "https://a", keys: [{{ env: K }}] }}
  oa: {{ protocol: openai, base_url: "https://o/v1", keys: [{{ env: K }}] }}
models:
  - {{ id: gm/g, provider: gm, model: gemini-2.5-flash }}
  - {{ id: vx/g, provider: vx, model: gemini-2.5-pro }}
  - {{ id: vx/c, provider: vx, model: "claude-sonnet-4-5@20250929" }}
  - {{ id: bd/converse, provider: bd, model: "anthropic.claude-v1:0" }}
  - {{ id: bd/invoke, provider: bd, model: "anthropic.claude-v1:0", api: invoke }}
  - {{ id: an/c, provider: an, model: claude-sonnet-4-5 }}
  - {{ id: oa/g, provider: oa, model: gpt-4o }}
"#
    );
    let env = |name: &str| match name {
        "K" => Some("k".to_owned()),
        "AWS_T_ACCESS_KEY_ID" => Some("AKID".to_owned()),
        "AWS_T_SECRET_ACCESS_KEY" => Some("secret".to_owned()),
        _ => None,
    };
    let cfg = crate::config::load_str(&yaml, "t.yaml", &env).unwrap();
    let gs = "gs://bucket/cat.png";
    let cases = [
        ("gm/g", true, [true, false]),
        ("vx/g", true, [false, true]),
        ("vx/c", false, [true, true]),
        ("bd/converse", true, [false, false]),
        ("bd/invoke", false, [false, false]),
        ("an/c", false, [false, false]),
        ("oa/g", false, [false, false]),
    ];
    for (id, inline, [keeps_files, keeps_gs]) in cases {
        let d = &cfg.deployments[id];
        let p = crate::adapters::provider_for(&cfg.providers[&d.provider]).unwrap();
        let api = p.for_deployment(d).unwrap_or(p);
        assert_eq!(api.inline_images(), inline, "{id}");
        if inline {
            assert_eq!(api.keeps_image_url(FILES_URI), keeps_files, "{id}");
            assert_eq!(api.keeps_image_url(gs), keeps_gs, "{id}");
            assert!(
                !api.keeps_image_url("https://images.example.com/a.png"),
                "{id}"
            );
        }
    }
}
