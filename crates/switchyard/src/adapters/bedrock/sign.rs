//! SigV4 for Bedrock with the maintained signer (`aws-sigv4`): signing name
//! `bedrock` (not the host's `bedrock-runtime`), the path as sent encoded
//! once more (a model id's `%3A` is signed as `%253A`), the SHA-256 of the
//! exact body bytes, and `x-amz-security-token` signed with temporary
//! credentials (MAPPING §16.8). Signing is the last step: it covers the
//! final URL, headers and body.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use bytes::Bytes;
use http::Request;

use super::credentials::Keys;

/// The signing name in Bedrock Runtime's service model.
pub const SIGNING_NAME: &str = "bedrock";

/// Signs `req` in place (adds `x-amz-date`, `authorization` and, with a
/// session token, `x-amz-security-token`).
pub fn sign_request(
    req: &mut Request<Bytes>,
    keys: &Keys,
    region: &str,
    at: SystemTime,
) -> Result<(), String> {
    let identity = Credentials::new(
        keys.access_key_id.clone(),
        keys.secret_access_key.expose().clone(),
        keys.session_token.as_ref().map(|t| t.expose().clone()),
        keys.expiry,
        "switchyard",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SIGNING_NAME)
        .time(at)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| format!("SigV4 parameters: {e}"))?
        .into();
    let mut headers = Vec::with_capacity(req.headers().len());
    for (name, value) in req.headers() {
        let value = value
            .to_str()
            .map_err(|_| format!("header {name} cannot be signed (not ASCII)"))?;
        headers.push((name.as_str(), value));
    }
    let uri = req.uri().to_string();
    let signable = SignableRequest::new(
        req.method().as_str(),
        &uri,
        headers.into_iter(),
        SignableBody::Bytes(req.body()),
    )
    .map_err(|e| format!("SigV4: {e}"))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| format!("SigV4: {e}"))?
        .into_parts();
    instructions.apply_to_request_http1x(req);
    for name in [http::header::AUTHORIZATION.as_str(), "x-amz-security-token"] {
        if let Some(v) = req.headers_mut().get_mut(name) {
            v.set_sensitive(true);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Secret;
    use serde_json::Value;

    const VECTORS: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/providers/bedrock/sigv4/bedrock_vectors.json"
    );

    fn at(stamp: &str) -> SystemTime {
        let f = time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
        let t = time::PrimitiveDateTime::parse(stamp, &f)
            .unwrap()
            .assume_utc();
        SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(t.unix_timestamp() as u64)
    }

    /// Every Bedrock vector (Converse with `%3A` and with a literal `:`,
    /// ConverseStream with a session token, InvokeModel on an ARN,
    /// CountTokens) signs to its signature, with its signed headers.
    #[test]
    fn bedrock_vectors_sign_to_their_signatures() {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(VECTORS).unwrap()).unwrap();
        let cases = v["vectors"].as_array().expect("vectors");
        assert_eq!(cases.len(), 5);
        let stamp = v["x_amz_date"].as_str().expect("x_amz_date");
        for case in cases {
            let name = case["name"].as_str().unwrap_or("?");
            let mut req = request(case);
            let want = &case["signed_request_headers"];
            let with_token = want.get("X-Amz-Security-Token").is_some();
            let keys = keys(&v["credentials"], with_token);
            let region = case["region"].as_str().expect("region");
            sign_request(&mut req, &keys, region, at(stamp)).unwrap();
            let h = req.headers();
            assert_eq!(
                h["authorization"].to_str().unwrap(),
                want["Authorization"].as_str().unwrap(),
                "{name}"
            );
            assert_eq!(h["x-amz-date"].to_str().unwrap(), stamp, "{name}");
            assert_eq!(
                h.get("x-amz-security-token").map(|t| t.to_str().unwrap()),
                want["X-Amz-Security-Token"].as_str(),
                "{name}"
            );
            assert!(h["authorization"].is_sensitive(), "never logged");
        }
    }

    /// A body changed by one byte after signing no longer matches: the
    /// signature covers the exact bytes sent.
    #[test]
    fn the_signature_covers_the_body() {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(VECTORS).unwrap()).unwrap();
        let case = &v["vectors"][0];
        let stamp = v["x_amz_date"].as_str().unwrap();
        let signed = |body: &str| {
            let mut req = request(case);
            *req.body_mut() = Bytes::from(body.to_owned());
            sign_request(
                &mut req,
                &keys(&v["credentials"], false),
                "us-east-1",
                at(stamp),
            )
            .unwrap();
            req.headers()["authorization"].clone()
        };
        let body = case["body"].as_str().unwrap();
        assert_ne!(signed(body), signed(&body.replacen('H', "h", 1)));
    }

    /// The vector's request: method, URL, headers before signing, body.
    fn request(case: &Value) -> Request<Bytes> {
        let body = case["body"].as_str().unwrap_or_default().to_owned();
        let mut req = Request::new(Bytes::from(body));
        *req.method_mut() = case["method"].as_str().unwrap().parse().unwrap();
        *req.uri_mut() = case["url"].as_str().unwrap().parse().unwrap();
        for (k, v) in case["request_headers_before_signing"].as_object().unwrap() {
            req.headers_mut().insert(
                http::HeaderName::from_bytes(k.to_ascii_lowercase().as_bytes()).unwrap(),
                v.as_str().unwrap().parse().unwrap(),
            );
        }
        req
    }

    fn keys(creds: &Value, with_token: bool) -> Keys {
        Keys {
            access_key_id: creds["access_key_id"].as_str().unwrap().into(),
            secret_access_key: Secret::new(creds["secret_access_key"].as_str().unwrap().into()),
            session_token: with_token
                .then(|| Secret::new(creds["session_token_when_used"].as_str().unwrap().into())),
            expiry: None,
        }
    }
}
