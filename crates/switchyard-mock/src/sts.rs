//! AWS STS `AssumeRoleWithWebIdentity` (the web-identity step of the AWS default credential
//! chain: `AWS_WEB_IDENTITY_TOKEN_FILE` + `AWS_ROLE_ARN`, with `AWS_ENDPOINT_URL_STS` pointed
//! at the mock), and the temporary credentials it issues, which the Bedrock routes then
//! accept for SigV4 until they expire.
//!
//! The request is the AWS Query protocol as the SDKs send it: `POST /`, a form body
//! `Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=…&RoleSessionName=…&
//! WebIdentityToken=…` (unsigned). The answer is STS's XML
//! (`<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult>…<Credentials>
//! <AccessKeyId/><SecretAccessKey/><SessionToken/><Expiration/></Credentials>…`), refusals
//! STS's `<ErrorResponse><Error><Type/><Code/><Message/></Error><RequestId/>` with a 400
//! (`InvalidIdentityToken` for a token the mock does not accept, `ValidationError`,
//! `InvalidAction`). No message ever repeats the token.

use std::collections::HashMap;
use std::sync::Arc;

use http::{HeaderMap, Response};

use crate::faults::{self, full, Body};
use crate::server::Shared;
use crate::sigv4::{AwsCredentials, Rejection};

/// The web identity token the mock accepts unless told otherwise
/// ([`MockServer::set_web_identity_token`](crate::MockServer::set_web_identity_token)).
pub const DEFAULT_WEB_IDENTITY_TOKEN: &str = "mock-web-identity-token";
/// How long issued credentials live unless told otherwise
/// ([`MockServer::set_sts_lifetime`](crate::MockServer::set_sts_lifetime)), in seconds.
pub const DEFAULT_STS_LIFETIME_SECS: u64 = 3600;

const NS: &str = "https://sts.amazonaws.com/doc/2011-06-15/";
const VERSION: &str = "2011-06-15";
const EXPIRED: &str = "The security token included in the request is expired";

/// Issued credentials and when they expire (Unix seconds on the mock's clock).
#[derive(Debug, Clone)]
pub struct Issued {
    pub credentials: Arc<AwsCredentials>,
    pub expires: i64,
}

#[derive(Debug)]
pub struct State {
    /// The token `AssumeRoleWithWebIdentity` accepts (`None`: any non-empty one).
    pub web_identity_token: Option<String>,
    pub lifetime_secs: u64,
    /// `AssumeRoleWithWebIdentity` requests, granted or not.
    pub requests: usize,
    /// Every set issued, by access key id.
    pub issued: HashMap<String, Issued>,
    /// Sets issued so far (numbers the next one).
    pub count: u64,
}

impl Default for State {
    fn default() -> Self {
        State {
            web_identity_token: Some(DEFAULT_WEB_IDENTITY_TOKEN.to_string()),
            lifetime_secs: DEFAULT_STS_LIFETIME_SECS,
            requests: 0,
            issued: HashMap::new(),
            count: 0,
        }
    }
}

/// `<` `>` `&` escaped for XML text (quotes need none there).
fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            c => out.push(c),
        }
    }
    out
}

/// A request id in STS's UUID form, from a counter.
fn request_id(n: u64) -> String {
    format!("5f1c0e2a-{:04x}-4d2b-9c1e-{:012x}", n & 0xffff, n)
}

/// `2026-01-01T00:00:00Z`, as STS writes `Expiration`.
fn iso8601(secs: i64) -> String {
    let amz = crate::time::from_unix_secs(secs)
        .map(crate::time::amz_date)
        .unwrap_or_else(|| "19700101T000000Z".into());
    // `YYYYMMDDTHHMMSSZ` → `YYYY-MM-DDTHH:MM:SSZ`
    format!(
        "{}-{}-{}T{}:{}:{}Z",
        &amz[0..4],
        &amz[4..6],
        &amz[6..8],
        &amz[9..11],
        &amz[11..13],
        &amz[13..15]
    )
}

fn error(status: u16, code: &str, message: &str, n: u64) -> Response<Body> {
    let body = format!(
        "<ErrorResponse xmlns=\"{NS}\">\n  <Error>\n    <Type>Sender</Type>\n    <Code>{code}</Code>\n    <Message>{}</Message>\n  </Error>\n  <RequestId>{}</RequestId>\n</ErrorResponse>\n",
        xml_escape(message),
        request_id(n)
    );
    faults::response(
        status,
        Some("text/xml"),
        [("x-amzn-requestid".to_string(), request_id(n))],
        full(body),
    )
}

/// The form's parameters, decoded (a repeated key: the last one).
fn form(body: &[u8]) -> HashMap<String, String> {
    String::from_utf8_lossy(body)
        .split('&')
        .filter(|kv| !kv.is_empty())
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            Some((
                crate::vertex::form_decode(k)?,
                crate::vertex::form_decode(v)?,
            ))
        })
        .collect()
}

/// `POST /` with `Action=AssumeRoleWithWebIdentity`.
pub(crate) fn answer(shared: &Shared, body: &[u8]) -> Response<Body> {
    let now = crate::time::unix_secs(shared.now());
    let region = shared.aws_credentials().region.clone();
    let mut st = shared.sts.lock().expect("sts lock");
    st.requests += 1;
    let n = st.requests as u64;
    let p = form(body);
    let get = |k: &str| p.get(k).map(String::as_str).filter(|v| !v.is_empty());
    match get("Action") {
        Some("AssumeRoleWithWebIdentity") => {}
        Some(other) => {
            let other: String = other.chars().take(64).collect();
            let m = format!("Could not find operation {other} for version {VERSION}");
            return error(400, "InvalidAction", &m, n);
        }
        None => return error(400, "MissingAction", "Missing Action", n),
    }
    if get("Version") != Some(VERSION) {
        return error(
            400,
            "InvalidAction",
            &format!(
                "Could not find operation AssumeRoleWithWebIdentity for version {}",
                get("Version")
                    .unwrap_or_default()
                    .chars()
                    .take(16)
                    .collect::<String>()
            ),
            n,
        );
    }
    let (Some(role_arn), Some(session), Some(token)) = (
        get("RoleArn"),
        get("RoleSessionName"),
        get("WebIdentityToken"),
    ) else {
        let missing: Vec<&str> = [
            ("roleArn", "RoleArn"),
            ("roleSessionName", "RoleSessionName"),
            ("webIdentityToken", "WebIdentityToken"),
        ]
        .into_iter()
        .filter(|(_, k)| get(k).is_none())
        .map(|(name, _)| name)
        .collect();
        let m = format!(
            "{} validation error{} detected: {}",
            missing.len(),
            if missing.len() == 1 { "" } else { "s" },
            missing
                .iter()
                .map(|f| format!(
                    "Value null at '{f}' failed to satisfy constraint: Member must not be null"
                ))
                .collect::<Vec<_>>()
                .join("; ")
        );
        return error(400, "ValidationError", &m, n);
    };
    // arn:aws:iam::123456789012:role/Name
    let role = role_arn
        .strip_prefix("arn:aws:iam::")
        .and_then(|r| r.split_once(":role/"))
        .filter(|(account, name)| {
            account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit()) && !name.is_empty()
        });
    let Some((account, role_name)) = role else {
        let m = format!(
            "{} is invalid",
            role_arn.chars().take(128).collect::<String>()
        );
        return error(400, "ValidationError", &m, n);
    };
    if st
        .web_identity_token
        .as_deref()
        .is_some_and(|want| want != token)
    {
        // As STS: the token is never repeated back.
        return error(
            400,
            "InvalidIdentityToken",
            "Couldn't retrieve verification key from your identity provider,  please reference AssumeRoleWithWebIdentity documentation for requirements",
            n,
        );
    }
    st.count += 1;
    let k = st.count;
    let access_key_id = format!("ASIAMOCK{k:012}");
    let secret = format!("mockStsSecret{k:06}/{}", random_hex(14));
    let session_token = format!("IQoJmockStsSession{k:06}{}", random_hex(48));
    let expires = now.saturating_add(i64::try_from(st.lifetime_secs).unwrap_or(i64::MAX));
    let creds = AwsCredentials::new(access_key_id.clone(), secret.clone())
        .with_session_token(session_token.clone())
        .with_region(region);
    st.issued.insert(
        access_key_id.clone(),
        Issued {
            credentials: Arc::new(creds),
            expires,
        },
    );
    let session = xml_escape(&session.chars().take(64).collect::<String>());
    let role_name = xml_escape(role_name);
    let body = format!(
        "<AssumeRoleWithWebIdentityResponse xmlns=\"{NS}\">\n  <AssumeRoleWithWebIdentityResult>\n    <SubjectFromWebIdentityToken>system:serviceaccount:default:switchyard</SubjectFromWebIdentityToken>\n    <Audience>sts.amazonaws.com</Audience>\n    <AssumedRoleUser>\n      <Arn>arn:aws:sts::{account}:assumed-role/{role_name}/{session}</Arn>\n      <AssumedRoleId>AROAMOCK{k:012}:{session}</AssumedRoleId>\n    </AssumedRoleUser>\n    <Credentials>\n      <SessionToken>{session_token}</SessionToken>\n      <SecretAccessKey>{secret}</SecretAccessKey>\n      <Expiration>{}</Expiration>\n      <AccessKeyId>{access_key_id}</AccessKeyId>\n    </Credentials>\n    <Provider>arn:aws:iam::{account}:oidc-provider/oidc.mock.switchyard</Provider>\n  </AssumeRoleWithWebIdentityResult>\n  <ResponseMetadata>\n    <RequestId>{}</RequestId>\n  </ResponseMetadata>\n</AssumeRoleWithWebIdentityResponse>\n",
        iso8601(expires),
        request_id(n)
    );
    faults::response(
        200,
        Some("text/xml"),
        [("x-amzn-requestid".to_string(), request_id(n))],
        full(body),
    )
}

fn random_hex(len: usize) -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..len)
        .map(|_| char::from_digit(rng.random_range(0..16), 16).unwrap_or('0'))
        .collect()
}

/// The access key id a SigV4 `Authorization` header names.
fn access_key_of(headers: &HeaderMap) -> Option<&str> {
    let auth = headers.get("authorization")?.to_str().ok()?;
    let cred = auth.split("Credential=").nth(1)?;
    cred.split('/').next()
}

/// The credentials a Bedrock request must be signed with: a set STS issued when the request
/// names one (refused once it expired on the mock's clock), else the ones of
/// [`MockServer::set_aws_credentials`](crate::MockServer::set_aws_credentials).
pub(crate) fn signing_credentials(
    shared: &Shared,
    headers: &HeaderMap,
) -> Result<Arc<AwsCredentials>, Rejection> {
    if let Some(key) = access_key_of(headers) {
        let st = shared.sts.lock().expect("sts lock");
        if let Some(issued) = st.issued.get(key) {
            if crate::time::unix_secs(shared.now()) >= issued.expires {
                return Err(Rejection::ExpiredToken(EXPIRED.into()));
            }
            return Ok(issued.credentials.clone());
        }
    }
    Ok(shared.aws_credentials())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiration_is_iso8601() {
        assert_eq!(iso8601(1_735_689_600), "2025-01-01T00:00:00Z");
        assert_eq!(iso8601(1_767_225_599), "2025-12-31T23:59:59Z");
    }

    #[test]
    fn the_form_is_decoded() {
        let p = form(b"Action=AssumeRoleWithWebIdentity&RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fr&WebIdentityToken=a+b");
        assert_eq!(p["Action"], "AssumeRoleWithWebIdentity");
        assert_eq!(p["RoleArn"], "arn:aws:iam::123456789012:role/r");
        assert_eq!(p["WebIdentityToken"], "a b");
    }

    /// One raw HTTP/1.1 request: the status and the body.
    async fn post(
        addr: std::net::SocketAddr,
        path: &str,
        headers: &str,
        body: &str,
    ) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!(
            "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/x-www-form-urlencoded\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        tcp.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        tcp.read_to_string(&mut out).await.unwrap();
        let status = out[9..12].parse().unwrap();
        let body = out
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default();
        (status, body)
    }

    #[tokio::test]
    async fn web_identity_is_exchanged_for_credentials_that_expire() {
        let mock = crate::MockServer::start("127.0.0.1:0").await.unwrap();
        mock.set_web_identity_token(Some("right-token"));
        mock.set_sts_lifetime(60);
        let form = |token: &str| {
            format!("Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fr&RoleSessionName=s&WebIdentityToken={token}")
        };
        let (status, body) = post(mock.addr(), "/", "", &form("wrong-token")).await;
        assert_eq!(status, 400);
        assert!(body.contains("<Code>InvalidIdentityToken</Code>"), "{body}");
        assert!(!body.contains("wrong-token") && !body.contains("right-token"));
        let (status, body) = post(mock.addr(), "/", "", "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleSessionName=s&WebIdentityToken=x").await;
        assert_eq!(status, 400);
        assert!(
            body.contains("<Code>ValidationError</Code>") && body.contains("'roleArn'"),
            "{body}"
        );
        let (status, body) = post(
            mock.addr(),
            "/",
            "",
            "Action=GetCallerIdentity&Version=2011-06-15",
        )
        .await;
        assert_eq!(status, 400);
        assert!(body.contains("<Code>InvalidAction</Code>"), "{body}");
        assert!(mock.sts_credentials().is_empty());

        let (status, body) = post(mock.addr(), "/", "", &form("right-token")).await;
        assert_eq!(status, 200, "{body}");
        let issued = mock.sts_credentials();
        assert_eq!(issued.len(), 1);
        let c = &issued[0];
        assert_eq!(c.access_key_id, "ASIAMOCK000000000001");
        for part in [
            format!("<AccessKeyId>{}</AccessKeyId>", c.access_key_id),
            format!("<SecretAccessKey>{}</SecretAccessKey>", c.secret_access_key),
            format!(
                "<SessionToken>{}</SessionToken>",
                c.session_token.as_deref().unwrap()
            ),
            "<Arn>arn:aws:sts::123456789012:assumed-role/r/s</Arn>".to_owned(),
        ] {
            assert!(body.contains(&part), "{part} in {body}");
        }
        assert!(body.starts_with("<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"));
        assert_eq!(mock.sts_requests(), 4);

        // Accepted for SigV4 until they expire, then refused as expired.
        let auth = format!(
            "authorization: AWS4-HMAC-SHA256 Credential={}/20250101/us-east-1/bedrock/aws4_request, SignedHeaders=host, Signature=00\r\n",
            c.access_key_id
        );
        let path = "/model/m/converse";
        let (status, body) = post(mock.addr(), path, &auth, "{}").await;
        assert_eq!(status, 403);
        assert!(
            !body.contains("expired"),
            "a bad signature, not an expired set: {body}"
        );
        mock.set_clock(Some(
            std::time::SystemTime::now() + std::time::Duration::from_secs(61),
        ));
        let (status, body) = post(mock.addr(), path, &auth, "{}").await;
        assert_eq!(status, 403);
        assert!(
            body.contains("The security token included in the request is expired"),
            "{body}"
        );
        assert_eq!(mock.sigv4_rejected(), 2);
    }

    #[test]
    fn xml_text_is_escaped() {
        assert_eq!(xml_escape("a<b>&\"'"), "a&lt;b&gt;&amp;\"'");
    }
}
