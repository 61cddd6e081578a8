//! The AWS default credential chain end to end (contract §9,
//! `credentials: default`): the real binary, started with an environment
//! the test controls entirely (nothing inherited: no `AWS_ACCESS_KEY_ID`,
//! no `~/.aws`, no instance metadata), signs its Bedrock requests with
//! what the chain found —
//!
//! * a shared credentials file's `[default]` profile, and a config file's
//!   `[profile …]` chosen by `AWS_PROFILE` with an `aws_session_token`;
//! * web identity: `AWS_WEB_IDENTITY_TOKEN_FILE` + `AWS_ROLE_ARN`, the token
//!   exchanged at the mock's STS (`AWS_ENDPOINT_URL_STS` or the global
//!   `AWS_ENDPOINT_URL`, plain http) for
//!   temporary credentials, once per lifetime, refreshed in the background
//!   before they expire;
//!
//! and the mock verifies each signature (with the session token). No
//! secret — secret keys, session tokens, the web identity token — ever
//! appears in the process's output or in `/admin/state`.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use switchyard_mock::{AwsCredentials, MockServer};

const YAML: &str = r#"
providers:
  bedrock:
    protocol: bedrock
    region: us-east-1
    base_url: "{mock}"
    credentials: default
models:
  - id: bedrock/claude
    provider: bedrock
    model: "anthropic.claude-sonnet-4-5-20250929-v1:0"
    capabilities: [streaming]
routes:
  chat: { targets: [bedrock/claude] }
"#;

const TEXT: &str = "Hello from the mock bedrock provider.";
/// The gateway's log filter here: everything at debug, and the AWS SDK's
/// credential, STS, request and signing code and the gateway's own at
/// trace (the SDK dumps its requests and canonical requests there).
const LOG: &str = "debug,switchyard=trace,aws_config=trace,aws_sdk_sts=trace,aws_smithy_runtime=trace,aws_smithy_runtime_api=trace,aws_sigv4=trace";
const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/switchyard-gateway";

/// A gateway process with nothing of the test's environment but `envs`.
struct Gateway {
    child: Option<Child>,
    port: u16,
    admin_port: u16,
    dir: tempfile::TempDir,
}

impl Gateway {
    /// `switchyard serve` on [`YAML`] against `mock`, in a fresh directory
    /// (also its `HOME`) holding `files` (name, content), with `envs` and
    /// only them (plus [`LOG`] as `RUST_LOG`, so that the secret checks
    /// read a talkative log, and no instance metadata service); `{dir}` in a
    /// variable's value is that directory. Waits for `/readyz`.
    async fn start(
        mock: &MockServer,
        files: &[(&str, String)],
        envs: &[(&str, String)],
    ) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        for (name, content) in files {
            std::fs::write(dir.path().join(name), content).unwrap();
        }
        let port = common::free_port();
        let admin_port = std::iter::repeat_with(common::free_port)
            .find(|p| *p != port)
            .unwrap();
        let yaml = format!(
            "server:\n  listen: 127.0.0.1:{port}\n  admin_listen: 127.0.0.1:{admin_port}\n{}\nusage:\n  path: {d}/usage.db\n",
            YAML.replace("{mock}", &mock.base_url())
        );
        std::fs::write(dir.path().join("gateway.yaml"), yaml).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchyard"));
        cmd.args(["serve", "--config"])
            .arg(dir.path().join("gateway.yaml"))
            .current_dir(dir.path())
            .env_clear()
            .env("HOME", dir.path())
            // Files that do not exist unless a test writes them.
            .env("AWS_CONFIG_FILE", dir.path().join("aws-config"))
            .env(
                "AWS_SHARED_CREDENTIALS_FILE",
                dir.path().join("aws-credentials"),
            )
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("RUST_LOG", LOG)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.path().join("stdout.log")).unwrap())
            .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap());
        for (k, v) in envs {
            cmd.env(k, v.replace("{dir}", &d));
        }
        let mut gw = Gateway {
            child: Some(cmd.spawn().unwrap()),
            port,
            admin_port,
            dir,
        };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(500))
            .build()
            .unwrap();
        let readyz = gw.admin("/readyz");
        let child = gw.child.as_mut().unwrap();
        let ready = common::poll_within(Duration::from_secs(15), || {
            let exited = child.try_wait().ok().flatten();
            let probe = http.get(&readyz).send();
            async move {
                if let Some(status) = exited {
                    return Some(Err(status));
                }
                match probe.await {
                    Ok(r) if r.status() == 200 => Some(Ok(())),
                    _ => None,
                }
            }
        })
        .await;
        match ready {
            Some(Ok(())) => gw,
            Some(Err(status)) => panic!("the gateway exited ({status}):\n{}", gw.output()),
            None => panic!("the gateway was not ready within 15 s:\n{}", gw.output()),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn admin(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.admin_port)
    }

    /// Everything the process wrote, standard output and error.
    fn output(&self) -> String {
        let read = |f: &str| std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default();
        format!("{}\n{}", read("stdout.log"), read("stderr.log"))
    }

    /// A chat request on route `chat`: its status and body.
    async fn chat(&self, stream: bool) -> (u16, String) {
        let r = reqwest::Client::new()
            .post(self.url("/v1/chat/completions"))
            .json(&json!({"model": "chat", "stream": stream, "messages": common::user("hi")}))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    /// A chat request that must be answered with the mock's text.
    async fn answered(&self, stream: bool) {
        let (status, body) = self.chat(stream).await;
        assert_eq!(status, 200, "stream={stream}: {body}");
        let text = if stream {
            common::sse_text(&body)
        } else {
            let v: Value = serde_json::from_str(&body).unwrap();
            v["choices"][0]["message"]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(text, TEXT, "stream={stream}: {body}");
    }

    /// Panics, naming which one (never printing it), if any of `secrets`
    /// is in the process's output or its `/admin/state`.
    async fn assert_never_shows(&self, secrets: &[(&str, &str)]) {
        let state = reqwest::get(self.admin("/admin/state"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(state.contains("bedrock/claude"), "{state}");
        let output = self.output();
        assert!(
            output.len() > 1000,
            "a debug log was written ({} bytes)",
            output.len()
        );
        assert!(
            output.contains("default_credentials_chain"),
            "the AWS chain's own log is in the output"
        );
        for (what, secret) in secrets {
            assert!(
                secret.len() >= 16,
                "{what} is distinctive enough to look for"
            );
            assert!(
                !output.contains(secret),
                "the {what} is in the gateway's output"
            );
            assert!(!state.contains(secret), "the {what} is in /admin/state");
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The Bedrock calls the mock received (not STS's).
fn bedrock_calls(mock: &MockServer) -> Vec<switchyard_mock::RecordedRequest> {
    mock.requests()
        .into_iter()
        .filter(|r| r.path_and_query.starts_with("/model/"))
        .collect()
}

/// The access key id a signed request names.
fn signed_with(r: &switchyard_mock::RecordedRequest) -> String {
    let auth = r.header("authorization").unwrap_or_default();
    auth.split("Credential=")
        .nth(1)
        .and_then(|c| c.split('/').next())
        .unwrap_or_default()
        .to_owned()
}

fn random_hex(n: usize) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::new();
    while out.len() < n {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(out.len());
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(n);
    out
}

/// A profile in the shared credentials file (`[default]`, long-term keys)
/// and one in the config file (`[profile temp]`, with a session token and
/// a region of its own, which the config's `region` overrides): each signs
/// as the mock expects, the session token in `X-Amz-Security-Token`.
#[tokio::test]
async fn shared_file_profiles_sign_bedrock_requests() {
    let plain = AwsCredentials::new(
        "AKIAPROFILEDEFAULT01",
        format!("profileDefaultSecret/{}", random_hex(20)),
    );
    let temp = AwsCredentials::new(
        "ASIAPROFILETEMPORARY",
        format!("profileTempSecret/{}", random_hex(22)),
    )
    .with_session_token(format!("FwoGZXIvYXdzEProfileSession{}", random_hex(40)));
    let files = {
        let credentials = format!(
            "[default]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
            plain.access_key_id, plain.secret_access_key
        );
        let config = format!(
            "[default]\nregion = us-west-2\n\n[profile temp]\nregion = eu-west-1\naws_access_key_id = {}\naws_secret_access_key = {}\naws_session_token = {}\n",
            temp.access_key_id,
            temp.secret_access_key,
            temp.session_token.as_deref().unwrap()
        );
        [("credentials", credentials), ("config", config)]
    };
    let file_envs = |profile: Option<&str>| {
        let mut envs = vec![
            (
                "AWS_SHARED_CREDENTIALS_FILE",
                "{dir}/credentials".to_owned(),
            ),
            ("AWS_CONFIG_FILE", "{dir}/config".to_owned()),
        ];
        if let Some(p) = profile {
            envs.push(("AWS_PROFILE", p.to_owned()));
        }
        envs
    };

    let mock_plain = MockServer::start("127.0.0.1:0").await.unwrap();
    mock_plain.set_aws_credentials(plain.clone());
    let mock_temp = MockServer::start("127.0.0.1:0").await.unwrap();
    mock_temp.set_aws_credentials(temp.clone());
    let (plain_envs, temp_envs) = (file_envs(None), file_envs(Some("temp")));
    let (gw_plain, gw_temp) = tokio::join!(
        Gateway::start(&mock_plain, &files, &plain_envs),
        Gateway::start(&mock_temp, &files, &temp_envs),
    );

    for (gw, mock, creds) in [
        (&gw_plain, &mock_plain, &plain),
        (&gw_temp, &mock_temp, &temp),
    ] {
        gw.answered(false).await;
        gw.answered(true).await;
        let who = &creds.access_key_id;
        assert_eq!(
            (mock.sigv4_verified(), mock.sigv4_rejected()),
            (2, 0),
            "{who}"
        );
        for r in bedrock_calls(mock) {
            assert_eq!(signed_with(&r), *who);
            let auth = r.header("authorization").unwrap();
            assert!(
                auth.contains("/us-east-1/bedrock/aws4_request"),
                "the config's region, not the profile's: {auth}"
            );
            let token = r.header("x-amz-security-token");
            assert_eq!(token, creds.session_token.as_deref(), "{who}");
            assert_eq!(
                auth.contains("x-amz-security-token"),
                token.is_some(),
                "the session token is signed: {auth}"
            );
        }
    }
    let secrets = [
        (
            "default profile's secret key",
            plain.secret_access_key.as_str(),
        ),
        ("temp profile's secret key", temp.secret_access_key.as_str()),
        (
            "temp profile's session token",
            temp.session_token.as_deref().unwrap(),
        ),
    ];
    gw_plain.assert_never_shows(&secrets).await;
    gw_temp.assert_never_shows(&secrets).await;
}

/// A gateway in the web identity environment of a pod (EKS IRSA, GitHub
/// OIDC …): `token` in the token file, STS at the mock (plain http) by
/// `sts_var` (`AWS_ENDPOINT_URL_STS` or `AWS_ENDPOINT_URL`).
async fn web_identity_gateway(mock: &MockServer, token: &str, sts_var: &'static str) -> Gateway {
    let files = [("web-identity-token", token.to_owned())];
    let envs = [
        (
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "{dir}/web-identity-token".to_owned(),
        ),
        ("AWS_ROLE_ARN", ROLE_ARN.to_owned()),
        ("AWS_ROLE_SESSION_NAME", "switchyard-test".to_owned()),
        (sts_var, mock.base_url()),
    ];
    Gateway::start(mock, &files, &envs).await
}

/// The STS exchanges the mock saw (their form bodies), as the SDK sent them.
fn sts_calls(mock: &MockServer) -> Vec<String> {
    mock.requests()
        .into_iter()
        .filter(|r| r.path_and_query == "/")
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect()
}

/// Web identity: the token is exchanged at STS once, and the temporary
/// credentials (with their session token) sign every request of their
/// lifetime; STS is not asked again per request.
#[tokio::test]
async fn web_identity_is_exchanged_at_sts_once_for_many_requests() {
    let mock = MockServer::start("127.0.0.1:0").await.unwrap();
    let token = format!("eyJhbGciOiJSUzI1NiJ9.mock-oidc.{}", random_hex(32));
    mock.set_web_identity_token(Some(&token));
    let gw = web_identity_gateway(&mock, &token, "AWS_ENDPOINT_URL_STS").await;
    for i in 0..10 {
        gw.answered(i % 3 == 0).await;
    }
    assert_eq!(mock.sts_requests(), 1, "one exchange, not one per request");
    let issued = mock.sts_credentials();
    assert_eq!(issued.len(), 1);
    let creds = &issued[0];
    assert_eq!((mock.sigv4_verified(), mock.sigv4_rejected()), (10, 0));
    for r in bedrock_calls(&mock) {
        assert_eq!(signed_with(&r), creds.access_key_id);
        assert_eq!(
            r.header("x-amz-security-token"),
            creds.session_token.as_deref()
        );
    }
    let sts = sts_calls(&mock);
    assert_eq!(sts.len(), 1);
    for part in [
        "Action=AssumeRoleWithWebIdentity",
        "Version=2011-06-15",
        "RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fswitchyard-gateway",
        "RoleSessionName=switchyard-test",
    ] {
        assert!(sts[0].contains(part), "{part} in the STS call");
    }
    let stats: Value = reqwest::get(format!("{}/mock/stats", mock.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["sts_requests"], 1, "{stats}");
    gw.assert_never_shows(&[
        ("web identity token", &token),
        ("STS secret key", &creds.secret_access_key),
        ("STS session token", creds.session_token.as_deref().unwrap()),
    ])
    .await;
}

/// Credentials that live 4 s are exchanged again before they expire, in
/// the background (STS is asked again while no request comes), and the
/// requests that follow are signed with the new set: none is refused,
/// also after the first sets expired.
#[tokio::test]
async fn short_lived_sts_credentials_are_refreshed_before_they_expire() {
    let mock = MockServer::start("127.0.0.1:0").await.unwrap();
    let token = format!("eyJhbGciOiJSUzI1NiJ9.mock-oidc.{}", random_hex(32));
    mock.set_web_identity_token(Some(&token));
    mock.set_sts_lifetime(4);
    let gw = web_identity_gateway(&mock, &token, "AWS_ENDPOINT_URL_STS").await;
    gw.answered(false).await;
    assert_eq!(bedrock_calls(&mock).len(), 1);
    // No request now: the refresh is the background task's.
    common::eventually(
        || async { mock.sts_requests() >= 2 },
        "STS asked again before the first set expires",
    )
    .await;
    assert_eq!(bedrock_calls(&mock).len(), 1, "no request in between");
    // Requests go on past the expiry of the first sets.
    let mut n = 1;
    common::eventually(
        || {
            n += 1;
            let stream = n % 2 == 0;
            let (gw, mock) = (&gw, &mock);
            async move {
                gw.answered(stream).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
                mock.sts_requests() >= 4
            }
        },
        "two more refreshes while requests keep coming",
    )
    .await;
    assert_eq!(
        mock.sigv4_rejected(),
        0,
        "no request signed with an expired set"
    );
    let calls = bedrock_calls(&mock);
    let keys: std::collections::BTreeSet<String> = calls.iter().map(signed_with).collect();
    assert!(keys.len() >= 3, "the new sets are used: {keys:?}");
    let issued = mock.sts_credentials();
    assert_eq!(issued.len(), mock.sts_requests());
    let mut secrets = vec![("web identity token", token.as_str())];
    for c in &issued {
        secrets.push(("an STS secret key", c.secret_access_key.as_str()));
        secrets.push(("an STS session token", c.session_token.as_deref().unwrap()));
    }
    gw.assert_never_shows(&secrets).await;
}

/// A web identity token STS refuses: no credentials, so requests are
/// `auth_failed` with STS's reason, the chain is asked again (backing
/// off), and the token is shown nowhere.
#[tokio::test]
async fn a_refused_web_identity_token_is_auth_failed_and_never_shown() {
    let mock = MockServer::start("127.0.0.1:0").await.unwrap();
    let wanted = format!("eyJhbGciOiJSUzI1NiJ9.wanted.{}", random_hex(32));
    mock.set_web_identity_token(Some(&wanted));
    let sent = format!("eyJhbGciOiJSUzI1NiJ9.stolen.{}", random_hex(32));
    // STS found through the global variable this time.
    let gw = web_identity_gateway(&mock, &sent, "AWS_ENDPOINT_URL").await;
    let (status, body) = gw.chat(false).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (401, Some("auth_failed")),
        "{v}"
    );
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("InvalidIdentityToken") || message.contains("identity provider"),
        "STS's reason: {message}"
    );
    assert!(!body.contains(&sent) && !body.contains(&wanted));
    assert!(bedrock_calls(&mock).is_empty(), "nothing unsigned went out");
    common::eventually(
        || async { mock.sts_requests() >= 2 },
        "the chain asked again",
    )
    .await;
    assert!(mock.sts_credentials().is_empty());
    gw.assert_never_shows(&[
        ("web identity token sent", &sent),
        ("web identity token wanted", &wanted),
    ])
    .await;
}
