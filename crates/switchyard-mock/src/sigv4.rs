//! SigV4 verification of the Bedrock routes: the signature is recomputed with the AWS SDK's
//! own signer (`aws-sigv4`) for the request exactly as received and compared with the one
//! in the `Authorization` header.

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PercentEncodingMode, SessionTokenMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use http::HeaderMap;
use std::time::SystemTime;

/// The AWS credentials the mock Bedrock accepts (see [`MockServer::set_aws_credentials`]).
///
/// [`MockServer::set_aws_credentials`]: crate::MockServer::set_aws_credentials
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    /// When set, requests must carry (and sign) `X-Amz-Security-Token` with this value;
    /// when not, a request carrying one is refused.
    pub session_token: Option<String>,
    /// The region the credential scope must name.
    pub region: String,
}

/// The AWS documentation's example key pair (also in `bedrock/sigv4/bedrock_vectors.json`).
pub const DEFAULT_ACCESS_KEY_ID: &str = "AKIDEXAMPLE";
/// Secret of [`DEFAULT_ACCESS_KEY_ID`].
pub const DEFAULT_SECRET_ACCESS_KEY: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
/// Default region.
pub const DEFAULT_REGION: &str = "us-east-1";

impl Default for AwsCredentials {
    fn default() -> Self {
        AwsCredentials::new(DEFAULT_ACCESS_KEY_ID, DEFAULT_SECRET_ACCESS_KEY)
    }
}

impl AwsCredentials {
    /// Long-term credentials for region `us-east-1`.
    pub fn new(access_key_id: impl Into<String>, secret_access_key: impl Into<String>) -> Self {
        AwsCredentials {
            access_key_id: access_key_id.into(),
            secret_access_key: secret_access_key.into(),
            session_token: None,
            region: DEFAULT_REGION.to_string(),
        }
    }

    /// Builder: temporary credentials with this session token.
    pub fn with_session_token(mut self, token: impl Into<String>) -> Self {
        self.session_token = Some(token.into());
        self
    }

    /// Builder: the region.
    pub fn with_region(mut self, region: impl Into<String>) -> Self {
        self.region = region.into();
        self
    }
}

/// Why a request was refused (HTTP 403 either way).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// `InvalidSignatureException`: missing or malformed signature, mismatch, skew, token.
    InvalidSignature(String),
    /// `UnrecognizedClientException`: an access key id the mock does not know.
    UnrecognizedClient(String),
    /// `ExpiredTokenException`: temporary credentials (issued by the mock's STS) past their
    /// expiry.
    ExpiredToken(String),
}

/// Allowed distance between the request's `X-Amz-Date` and the mock's clock.
pub const MAX_SKEW_SECS: i64 = 300;

const SIGNING_NAME: &str = "bedrock";

const MISMATCH: &str = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.";
const BAD_TOKEN: &str = "The security token included in the request is invalid.";

struct AuthHeader<'a> {
    access_key_id: &'a str,
    date: &'a str,
    region: &'a str,
    service: &'a str,
    terminator: &'a str,
    signed_headers: Vec<&'a str>,
    signature: &'a str,
}

fn invalid(m: impl Into<String>) -> Rejection {
    Rejection::InvalidSignature(m.into())
}

/// `AWS4-HMAC-SHA256 Credential=AKID/20250101/us-east-1/bedrock/aws4_request,
/// SignedHeaders=a;b, Signature=hex`.
fn parse_auth(value: &str) -> Result<AuthHeader<'_>, Rejection> {
    let rest = value
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .ok_or_else(|| invalid(format!("Authorization header requires 'Credential' parameter. Authorization header requires 'Signature' parameter. Authorization header requires 'SignedHeaders' parameter. Authorization={value}")))?;
    let (mut credential, mut signed, mut signature) = (None, None, None);
    for part in rest.split(',') {
        let part = part.trim();
        if let Some(v) = part.strip_prefix("Credential=") {
            credential = Some(v);
        } else if let Some(v) = part.strip_prefix("SignedHeaders=") {
            signed = Some(v);
        } else if let Some(v) = part.strip_prefix("Signature=") {
            signature = Some(v);
        }
    }
    let missing: Vec<&str> = [
        ("Credential", credential.is_none()),
        ("Signature", signature.is_none()),
        ("SignedHeaders", signed.is_none()),
    ]
    .into_iter()
    .filter(|(_, m)| *m)
    .map(|(n, _)| n)
    .collect();
    let (Some(credential), Some(signed), Some(signature)) = (credential, signed, signature) else {
        let msg: Vec<String> = missing
            .iter()
            .map(|n| format!("Authorization header requires '{n}' parameter."))
            .collect();
        return Err(invalid(format!("{} Authorization={value}", msg.join(" "))));
    };
    let parts: Vec<&str> = credential.split('/').collect();
    let [access_key_id, date, region, service, terminator] = parts[..] else {
        return Err(invalid(format!(
            "Credential should be scoped to a valid region. Credential={credential}"
        )));
    };
    Ok(AuthHeader {
        access_key_id,
        date,
        region,
        service,
        terminator,
        signed_headers: signed.split(';').collect(),
        signature,
    })
}

/// Check the SigV4 signature of a request as received: `path_and_query` exactly as sent,
/// the headers the `Authorization` header lists, the SHA-256 of `body`, the request's own
/// `X-Amz-Date` (within [`MAX_SKEW_SECS`] of `now`), signing name `bedrock`.
pub fn verify(
    creds: &AwsCredentials,
    method: &str,
    path_and_query: &str,
    headers: &HeaderMap,
    body: &[u8],
    now: SystemTime,
) -> Result<(), Rejection> {
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    let Some(auth) = header("authorization") else {
        return Err(invalid("Missing Authentication Token"));
    };
    let auth = parse_auth(auth)?;
    if auth.access_key_id != creds.access_key_id {
        return Err(Rejection::UnrecognizedClient(BAD_TOKEN.into()));
    }
    if auth.terminator != "aws4_request" {
        return Err(invalid(
            "Credential should be scoped with a valid terminator: 'aws4_request'.",
        ));
    }
    if auth.service != SIGNING_NAME {
        return Err(invalid(format!(
            "Credential should be scoped to correct service: '{SIGNING_NAME}'."
        )));
    }
    if auth.region != creds.region {
        return Err(invalid(format!(
            "Credential should be scoped to a valid region, not '{}'.",
            auth.region
        )));
    }
    let Some(amz_date) = header("x-amz-date") else {
        return Err(invalid(
            "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.",
        ));
    };
    let Some(secs) = crate::time::parse_amz_date(amz_date) else {
        return Err(invalid(format!("Invalid X-Amz-Date: {amz_date}")));
    };
    if amz_date.get(..8) != Some(auth.date) {
        return Err(invalid(format!(
            "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '{}' != '{}', from '{amz_date}'.",
            auth.date,
            amz_date.get(..8).unwrap_or_default()
        )));
    }
    let now_secs = crate::time::unix_secs(now);
    let fmt = |s: i64| {
        crate::time::from_unix_secs(s)
            .map(crate::time::amz_date)
            .unwrap_or_default()
    };
    if secs < now_secs.saturating_sub(MAX_SKEW_SECS) {
        return Err(invalid(format!(
            "Signature expired: {amz_date} is now earlier than {} ({} - 5 min.)",
            fmt(now_secs.saturating_sub(MAX_SKEW_SECS)),
            fmt(now_secs)
        )));
    }
    if secs > now_secs.saturating_add(MAX_SKEW_SECS) {
        return Err(invalid(format!(
            "Signature not yet current: {amz_date} is still later than {} ({} + 5 min.)",
            fmt(now_secs.saturating_add(MAX_SKEW_SECS)),
            fmt(now_secs)
        )));
    }
    if header("x-amz-security-token") != creds.session_token.as_deref() {
        return Err(invalid(BAD_TOKEN));
    }
    let Some(time) = crate::time::from_unix_secs(secs) else {
        return Err(invalid(MISMATCH));
    };
    // The signer adds `host` from the headers (it would need the URI's authority
    // otherwise), `x-amz-date` from the time and `x-amz-security-token` from the
    // credentials; every other header it signs comes from this list.
    if !auth.signed_headers.contains(&"host") || header("host").is_none() {
        return Err(invalid(MISMATCH));
    }
    let mut signed: Vec<(&str, &str)> = Vec::new();
    for name in &auth.signed_headers {
        if matches!(*name, "x-amz-date" | "x-amz-security-token") {
            continue;
        }
        let values = headers.get_all(*name);
        if values.iter().next().is_none() {
            return Err(invalid(MISMATCH));
        }
        for v in values {
            let Ok(v) = v.to_str() else {
                return Err(invalid(MISMATCH));
            };
            signed.push((name, v));
        }
    }
    let identity: Identity = Credentials::new(
        creds.access_key_id.clone(),
        creds.secret_access_key.clone(),
        creds.session_token.clone(),
        None,
        "switchyard-mock",
    )
    .into();
    let mut settings = SigningSettings::default();
    settings.percent_encoding_mode = PercentEncodingMode::Double;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Enabled;
    settings.session_token_mode = SessionTokenMode::Include;
    // Sign exactly what the client says it signed.
    settings.excluded_headers = None;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(auth.region)
        .name(SIGNING_NAME)
        .time(time)
        .settings(settings)
        .build()
        .map_err(|_| invalid(MISMATCH))?
        .into();
    let request = SignableRequest::new(
        method,
        path_and_query,
        signed.into_iter(),
        SignableBody::Bytes(body),
    )
    .map_err(|_| invalid(MISMATCH))?;
    let out = sign(request, &params).map_err(|_| invalid(MISMATCH))?;
    if constant_time_eq(out.signature().as_bytes(), auth.signature.as_bytes()) {
        Ok(())
    } else {
        Err(invalid(MISMATCH))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const VECTORS: &str = fixture!("bedrock/sigv4/bedrock_vectors.json");

    /// (credentials, path, headers, body) of each vector, as sent.
    fn vectors() -> Vec<(String, AwsCredentials, String, HeaderMap, Vec<u8>)> {
        let v: Value = serde_json::from_str(VECTORS).unwrap();
        let c = &v["credentials"];
        v["vectors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let mut headers = HeaderMap::new();
                let signed = t["signed_request_headers"].as_object().unwrap();
                for (k, v) in t["request_headers_before_signing"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .chain(signed)
                {
                    headers.insert(
                        http::HeaderName::from_bytes(k.to_ascii_lowercase().as_bytes()).unwrap(),
                        v.as_str().unwrap().parse().unwrap(),
                    );
                }
                let mut creds = AwsCredentials::new(
                    c["access_key_id"].as_str().unwrap(),
                    c["secret_access_key"].as_str().unwrap(),
                )
                .with_region(t["region"].as_str().unwrap());
                if signed.contains_key("X-Amz-Security-Token") {
                    creds =
                        creds.with_session_token(c["session_token_when_used"].as_str().unwrap());
                }
                let url = t["url"].as_str().unwrap();
                let path = url[url.find(".com").unwrap() + 4..].to_string();
                let body = t["body"].as_str().unwrap().as_bytes().to_vec();
                (
                    t["name"].as_str().unwrap().to_string(),
                    creds,
                    path,
                    headers,
                    body,
                )
            })
            .collect()
    }

    fn clock(offset: i64) -> SystemTime {
        crate::time::from_unix_secs(1_735_689_600 + offset).unwrap()
    }

    #[test]
    fn every_vector_verifies_and_a_flipped_byte_does_not() {
        let all = vectors();
        assert_eq!(all.len(), 5);
        for (name, creds, path, headers, body) in all {
            assert_eq!(
                verify(&creds, "POST", &path, &headers, &body, clock(0)),
                Ok(()),
                "{name}"
            );
            // within the allowed skew either way
            assert_eq!(
                verify(&creds, "POST", &path, &headers, &body, clock(299)),
                Ok(())
            );
            assert_eq!(
                verify(&creds, "POST", &path, &headers, &body, clock(-299)),
                Ok(())
            );
            let mut flipped = body.clone();
            flipped[body.len() / 2] ^= 1;
            assert_eq!(
                verify(&creds, "POST", &path, &headers, &flipped, clock(0)),
                Err(Rejection::InvalidSignature(MISMATCH.into())),
                "{name}"
            );
            // the path as sent is signed: the other spelling of the model id fails
            let other = if path.contains("%3A") {
                path.replace("%3A", ":")
            } else {
                path.replace(':', "%3A")
            };
            assert!(verify(&creds, "POST", &other, &headers, &body, clock(0)).is_err());
            let skewed = verify(&creds, "POST", &path, &headers, &body, clock(301));
            assert!(
                matches!(&skewed, Err(Rejection::InvalidSignature(m)) if m.starts_with("Signature expired: 20250101T000000Z is now earlier than 20250101T000001Z")),
                "{skewed:?}"
            );
            let early = verify(&creds, "POST", &path, &headers, &body, clock(-301));
            assert!(
                matches!(&early, Err(Rejection::InvalidSignature(m)) if m.starts_with("Signature not yet current")),
                "{early:?}"
            );
        }
    }

    #[test]
    fn credentials_checks() {
        let (_, creds, path, headers, body) = vectors().remove(0);
        let now = clock(0);
        let unknown = AwsCredentials::new("AKIDOTHER", DEFAULT_SECRET_ACCESS_KEY);
        assert_eq!(
            verify(&unknown, "POST", &path, &headers, &body, now),
            Err(Rejection::UnrecognizedClient(BAD_TOKEN.into()))
        );
        let other_secret = AwsCredentials::new(DEFAULT_ACCESS_KEY_ID, "secret");
        assert_eq!(
            verify(&other_secret, "POST", &path, &headers, &body, now),
            Err(Rejection::InvalidSignature(MISMATCH.into()))
        );
        let west = creds.clone().with_region("us-west-2");
        assert!(verify(&west, "POST", &path, &headers, &body, now).is_err());
        // a session token is expected but not sent
        let temp = creds.clone().with_session_token("tok");
        assert_eq!(
            verify(&temp, "POST", &path, &headers, &body, now),
            Err(Rejection::InvalidSignature(BAD_TOKEN.into()))
        );
        let mut h = headers.clone();
        h.remove("authorization");
        assert_eq!(
            verify(&creds, "POST", &path, &h, &body, now),
            Err(Rejection::InvalidSignature(
                "Missing Authentication Token".into()
            ))
        );
        let mut h = headers.clone();
        h.insert("authorization", "Bearer abc".parse().unwrap());
        assert!(verify(&creds, "POST", &path, &h, &body, now).is_err());
        let mut h = headers.clone();
        h.insert(
            "authorization",
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/x".parse().unwrap(),
        );
        assert!(verify(&creds, "POST", &path, &h, &body, now).is_err());
        let mut h = headers.clone();
        h.remove("host");
        assert!(verify(&creds, "POST", &path, &h, &body, now).is_err());
        let mut h = headers.clone();
        h.insert("x-amz-date", "20250101T000001Z".parse().unwrap());
        assert!(verify(&creds, "POST", &path, &h, &body, now).is_err());
        let mut h = headers;
        h.insert("x-amz-date", "garbage".parse().unwrap());
        assert!(verify(&creds, "POST", &path, &h, &body, now).is_err());
    }
}
