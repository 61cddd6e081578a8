//! OAuth2 access tokens for Vertex AI (MAPPING §17.3, contract §9).
//!
//! A service account's key signs a short-lived RS256 JWT (the assertion),
//! which the key file's `token_uri` trades for an access token; on Google
//! Cloud without a key file, the metadata server hands one out directly.
//! Either way the token lives about an hour.
//!
//! Minting happens off the request path: [`TokenSource::start`] spawns one
//! refresher task that mints the first token at once, then again before
//! each one expires, and retries with backoff on failure (the old token
//! serves while still valid). Requests read the current token with
//! [`TokenSource::current`]: one atomic load, no lock, no await. The task
//! holds only a `Weak`, so it ends with the last `Arc<TokenSource>`.
//!
//! Secrets (the private key, the assertion, the access token) are kept in
//! [`Secret`] or a sensitive `HeaderValue`, so no `Debug`, log line or error
//! shows them.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, Method, Request, StatusCode, Uri};
use jsonwebtoken::crypto::CryptoProvider;
use jsonwebtoken::{Algorithm, EncodingKey};
use serde::Deserialize;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::adapters::errors::raw_message;
use crate::error::{ErrorCode, GatewayError};
use crate::observe::redact::redact;
use crate::secret::Secret;

/// The assertion's `aud`: Google's token endpoint, even when a key file
/// names the legacy `accounts.google.com` one (google-auth does the same;
/// `jwt_bearer_vector.json` follows it).
pub const TOKEN_AUDIENCE: &str = "https://oauth2.googleapis.com/token";
/// Where a key file without `token_uri` mints its tokens.
pub const DEFAULT_TOKEN_URI: &str = TOKEN_AUDIENCE;
/// The one scope Vertex AI needs.
pub const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// The form body's grant type, already form-encoded.
const GRANT_PREFIX: &str =
    "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=";
/// Google refuses assertions that live longer than an hour.
const ASSERTION_LIFETIME: u64 = 3600;

/// The metadata server's host, unless `GCE_METADATA_HOST` (honoured by
/// Google's own libraries) names another, as tests and emulators do.
const METADATA_HOST: &str = "metadata.google.internal";
const METADATA_PATH: &str = "/computeMetadata/v1/instance/service-accounts/default/token";

/// Refresh this long before expiry (google-auth refreshes a few minutes
/// early), or at half the lifetime when that is shorter.
const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);
/// Never refresh more often than this, whatever the endpoint says.
const MIN_REFRESH: Duration = Duration::from_secs(1);
/// Failed mints are retried after 1 s, 2 s, 4 s, … up to this.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A [`TokenSource::refresh_now`] hint is honoured no sooner than this
/// after the last mint began: a burst of 401s costs one mint, not one each.
const MIN_HINT_GAP: Duration = Duration::from_secs(10);
/// A token without `expires_in` is taken to live Google's usual hour.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(3600);
/// A longer `expires_in` is not believed (and cannot overflow an `Instant`).
const MAX_LIFETIME: Duration = Duration::from_secs(24 * 3600);

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The whole exchange with the token endpoint or metadata server.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);
/// Token answers are a few hundred bytes.
const MAX_ANSWER: usize = 64 * 1024;

/// Why no token could be had. `Display` never shows a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The credentials are missing, unreadable, or not a usable
    /// service-account key.
    #[error("Vertex credentials: {0}")]
    Credentials(String),
    /// The token endpoint said no (RFC 6749 `{"error","error_description"}`):
    /// a bad or revoked key, or a clock too far off. Retrying with the same
    /// key will not help.
    #[error("Vertex token endpoint refused the grant ({status} {error}): {description}")]
    Refused {
        status: u16,
        error: String,
        description: String,
    },
    /// No usable answer: unreachable, timed out, 5xx, or not a token.
    #[error("Vertex token endpoint: {0}")]
    Unavailable(String),
}

impl TokenError {
    /// How a request that found no token fails: bad credentials are the
    /// upstream key's problem (`auth_failed`, logged loudly, fall back); an
    /// unreachable endpoint is a connection error (fall back too).
    pub fn to_gateway(&self) -> GatewayError {
        let code = match self {
            TokenError::Credentials(_) | TokenError::Refused { .. } => ErrorCode::AuthFailed,
            TokenError::Unavailable(_) => ErrorCode::ConnectionError,
        };
        GatewayError::upstream(code, self.to_string())
    }
}

/// Where tokens come from (contract §9 `credentials`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Credentials {
    /// `GOOGLE_APPLICATION_CREDENTIALS` (a service-account key file), else
    /// the GCE metadata server.
    Default,
    /// `{ file: /path/sa.json }`: a service-account key file.
    File(PathBuf),
}

/// How one mint is done, once the credentials are resolved.
#[derive(Debug)]
enum Minter {
    Key(ServiceAccount),
    /// The metadata server's token URL.
    Metadata(Uri),
}

impl Credentials {
    /// Resolve against an environment (`std::env::var` in production): the
    /// key file is read here, so every mint sees a rotated file.
    fn minter(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Minter, TokenError> {
        let path = match self {
            Credentials::File(path) => Some(path.clone()),
            Credentials::Default => env("GOOGLE_APPLICATION_CREDENTIALS")
                .filter(|p| !p.is_empty())
                .map(PathBuf::from),
        };
        if let Some(path) = path {
            return ServiceAccount::from_file(&path).map(Minter::Key);
        }
        let host = env("GCE_METADATA_HOST").filter(|h| !h.is_empty());
        let host = host.as_deref().unwrap_or(METADATA_HOST);
        let url = format!("http://{host}{METADATA_PATH}");
        let uri = url
            .parse()
            .map_err(|_| TokenError::Credentials(format!("bad metadata server host {host:?}")))?;
        Ok(Minter::Metadata(uri))
    }
}

/// The parts of a service-account JSON key file the JWT flow uses.
#[derive(Debug, Clone)]
pub struct ServiceAccount {
    pub client_email: String,
    /// PEM (PKCS#1 or PKCS#8 RSA).
    pub private_key: Secret<String>,
    /// The JWT header's `kid`.
    pub private_key_id: Option<String>,
    /// Where the assertion is traded for a token.
    pub token_uri: String,
}

impl ServiceAccount {
    /// Parse a key file's bytes; the private key is checked here, so a
    /// broken key fails when the config loads, not at the first mint.
    pub fn parse(json: &[u8]) -> Result<ServiceAccount, TokenError> {
        #[derive(Deserialize)]
        struct KeyFile {
            #[serde(rename = "type")]
            kind: Option<String>,
            client_email: Option<String>,
            private_key: Option<String>,
            private_key_id: Option<String>,
            token_uri: Option<String>,
        }
        let bad = |what: &str| TokenError::Credentials(what.to_owned());
        // serde's message is left out: it could quote the file.
        let f: KeyFile = serde_json::from_slice(json).map_err(|e| {
            TokenError::Credentials(format!(
                "not a JSON key file (line {}, column {})",
                e.line(),
                e.column()
            ))
        })?;
        if let Some(kind) = f.kind.as_deref().filter(|k| *k != "service_account") {
            return Err(TokenError::Credentials(format!(
                "credentials of type {kind:?} are not supported: use a service-account key"
            )));
        }
        let sa = ServiceAccount {
            client_email: f.client_email.ok_or_else(|| bad("no client_email"))?,
            private_key: Secret::new(f.private_key.ok_or_else(|| bad("no private_key"))?),
            private_key_id: f.private_key_id.filter(|k| !k.is_empty()),
            token_uri: f
                .token_uri
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| DEFAULT_TOKEN_URI.to_owned()),
        };
        // A PEM can decode and still not be a key: sign once to know.
        sa.sign(b"")?;
        Ok(sa)
    }

    pub fn from_file(path: &Path) -> Result<ServiceAccount, TokenError> {
        let bytes = std::fs::read(path)
            .map_err(|e| TokenError::Credentials(format!("{}: {e}", path.display())))?;
        ServiceAccount::parse(&bytes).map_err(|e| match e {
            TokenError::Credentials(m) => {
                TokenError::Credentials(format!("{}: {m}", path.display()))
            }
            other => other,
        })
    }

    /// The base64url RS256 signature of `message`.
    fn sign(&self, message: &[u8]) -> Result<String, TokenError> {
        // `jsonwebtoken` panics when no crypto backend is chosen; say so.
        if CryptoProvider::try_get_default().is_none() {
            return Err(TokenError::Credentials("no RS256 crypto provider".into()));
        }
        let not_a_key = || TokenError::Credentials("private_key is not an RSA PEM key".into());
        let key = EncodingKey::from_rsa_pem(self.private_key.expose().as_bytes())
            .map_err(|_| not_a_key())?;
        jsonwebtoken::crypto::sign(message, &key, Algorithm::RS256).map_err(|_| not_a_key())
    }
}

/// The signed JWT-bearer assertion for `iat` (seconds since the epoch).
///
/// Built by hand rather than with `jsonwebtoken::encode`: the header and
/// claims keep google-auth's key order and `json.dumps` separators, so the
/// result is byte-exact with `jwt_bearer_vector.json` (RS256 is
/// deterministic); Google itself accepts any valid JSON.
pub fn assertion(sa: &ServiceAccount, iat: u64) -> Result<String, TokenError> {
    let mut jwt = URL_SAFE_NO_PAD.encode(header_json(sa));
    jwt.push('.');
    jwt.push_str(&URL_SAFE_NO_PAD.encode(claims_json(sa, iat)));
    let signature = sa.sign(jwt.as_bytes())?;
    jwt.push('.');
    jwt.push_str(&signature);
    Ok(jwt)
}

/// `{"typ": "JWT", "alg": "RS256", "kid": …}` (no `kid` without a key id).
fn header_json(sa: &ServiceAccount) -> String {
    match &sa.private_key_id {
        Some(kid) => format!(
            r#"{{"typ": "JWT", "alg": "RS256", "kid": {}}}"#,
            json_str(kid)
        ),
        None => r#"{"typ": "JWT", "alg": "RS256"}"#.to_owned(),
    }
}

/// `{"iat", "exp", "iss", "aud", "scope"}`, in that order.
fn claims_json(sa: &ServiceAccount, iat: u64) -> String {
    format!(
        r#"{{"iat": {iat}, "exp": {}, "iss": {}, "aud": {}, "scope": {}}}"#,
        iat + ASSERTION_LIFETIME,
        json_str(&sa.client_email),
        json_str(TOKEN_AUDIENCE),
        json_str(SCOPE),
    )
}

/// A JSON string literal (quoted, escaped).
fn json_str(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// The token request's form body. An assertion is base64url and dots,
/// which form encoding leaves alone.
pub fn grant_body(assertion: &str) -> String {
    format!("{GRANT_PREFIX}{assertion}")
}

/// A freshly minted token and how long it lives.
struct Minted {
    access: Secret<String>,
    header: HeaderValue,
    lifetime: Duration,
}

impl Minted {
    /// Checked here, off the request path: the token must fit a header.
    fn new(access: String, lifetime: Duration) -> Result<Minted, TokenError> {
        let mut header = HeaderValue::try_from(format!("Bearer {access}")).map_err(|_| {
            TokenError::Unavailable("the access token is not a header value".into())
        })?;
        header.set_sensitive(true);
        Ok(Minted {
            access: Secret::new(access),
            header,
            lifetime,
        })
    }
}

/// One mint with these credentials, resolved against `env`.
async fn mint(
    creds: &Credentials,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<Minted, TokenError> {
    match creds.minter(env)? {
        Minter::Key(sa) => {
            let jwt = Secret::new(assertion(&sa, unix_now())?);
            let uri = sa.token_uri.parse().map_err(|_| {
                TokenError::Credentials(format!("token_uri {:?} is not a URL", sa.token_uri))
            })?;
            let req = form_post(uri, grant_body(jwt.expose()));
            let (status, body) = exchange(req).await?;
            read_answer(status, &body, &[jwt.expose()])
        }
        Minter::Metadata(uri) => {
            let (status, body) = exchange(metadata_get(uri)).await?;
            read_answer(status, &body, &[])
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn form_post(uri: Uri, body: String) -> Request<Bytes> {
    let mut req = Request::new(Bytes::from(body));
    *req.method_mut() = Method::POST;
    *req.uri_mut() = uri;
    let h = req.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/x-www-form-urlencoded"),
    );
    h.insert(ACCEPT, HeaderValue::from_static("application/json"));
    req
}

fn metadata_get(uri: Uri) -> Request<Bytes> {
    let mut req = Request::new(Bytes::new());
    *req.uri_mut() = uri;
    req.headers_mut().insert(
        HeaderName::from_static("metadata-flavor"),
        HeaderValue::from_static("Google"),
    );
    req
}

/// Send on the crate's upstream client; the status and the whole body.
async fn exchange(req: Request<Bytes>) -> Result<(StatusCode, Bytes), TokenError> {
    let by = Instant::now() + EXCHANGE_TIMEOUT;
    let where_to = format!("{}", req.uri());
    let unavailable = |why: String| TokenError::Unavailable(format!("{where_to}: {why}"));
    let resp = tokio::time::timeout_at(by, crate::upstream::client::request(CONNECT_TIMEOUT, req))
        .await
        .map_err(|_| unavailable("no answer in time".into()))?
        .map_err(|e| unavailable(e.to_string()))?;
    let status = resp.status();
    let body = crate::adapters::read_body(resp.into_body(), MAX_ANSWER, by, by)
        .await
        .map_err(|e| unavailable(e.message))?;
    Ok((status, body))
}

/// `expires_in` as a number or, from some servers, a string.
#[derive(Deserialize)]
#[serde(untagged)]
enum Seconds {
    Number(u64),
    Text(String),
}

/// A token endpoint's (or the metadata server's) answer.
fn read_answer(status: StatusCode, body: &[u8], secrets: &[&str]) -> Result<Minted, TokenError> {
    if !status.is_success() {
        return Err(refusal(status, body, secrets));
    }
    #[derive(Deserialize)]
    struct Answer {
        access_token: Option<String>,
        expires_in: Option<Seconds>,
    }
    let not_a_token = || TokenError::Unavailable(format!("{status} answer is not a token"));
    let a: Answer = serde_json::from_slice(body).map_err(|_| not_a_token())?;
    let access = a
        .access_token
        .filter(|t| !t.is_empty())
        .ok_or_else(not_a_token)?;
    let lifetime = match a.expires_in {
        None => DEFAULT_LIFETIME,
        Some(Seconds::Number(n)) => Duration::from_secs(n),
        Some(Seconds::Text(s)) => Duration::from_secs(s.trim().parse().map_err(|_| {
            TokenError::Unavailable(format!("expires_in {s:?} is not a number of seconds"))
        })?),
    };
    Minted::new(access, lifetime.min(MAX_LIFETIME))
}

/// A failed answer: RFC 6749 `{"error","error_description"}` (or any 4xx)
/// is a refusal; a 5xx or anything else is the endpoint's trouble.
fn refusal(status: StatusCode, body: &[u8], secrets: &[&str]) -> TokenError {
    #[derive(Deserialize)]
    struct OAuthError {
        error: String,
        #[serde(default)]
        error_description: String,
    }
    match serde_json::from_slice::<OAuthError>(body) {
        Ok(e) if status.is_client_error() => TokenError::Refused {
            status: status.as_u16(),
            error: redact(&e.error, secrets),
            description: redact(&e.error_description, secrets),
        },
        _ if status.is_client_error() => TokenError::Refused {
            status: status.as_u16(),
            error: String::new(),
            description: redact(&raw_message(body), secrets),
        },
        _ => TokenError::Unavailable(format!(
            "answered {status}: {}",
            redact(&raw_message(body), secrets)
        )),
    }
}

/// An access token as requests use it.
pub struct Token {
    access: Secret<String>,
    /// `Bearer …`, marked sensitive.
    header: HeaderValue,
    expires_at: Instant,
}

impl Token {
    /// The `Authorization` header value.
    pub fn authorization(&self) -> &HeaderValue {
        &self.header
    }

    /// The bare token, to redact from upstream error messages.
    pub fn expose(&self) -> &str {
        self.access.expose()
    }

    pub fn expires_at(&self) -> Instant {
        self.expires_at
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("access", &self.access)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// The current access token of one set of credentials, kept fresh by a
/// background task. Share it as `Arc<TokenSource>`; the task stops when
/// the last one is dropped.
pub struct TokenSource {
    token: ArcSwapOption<Token>,
    last_error: ArcSwapOption<TokenError>,
    /// Bumped after every mint attempt (for [`TokenSource::ready`]).
    settled: watch::Sender<u64>,
    /// Wakes the task: a refresh hint, or the source's end.
    wake: Arc<Notify>,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSource")
            .field("token", &self.token.load_full())
            .field("last_error", &self.last_error.load_full())
            .finish()
    }
}

impl TokenSource {
    /// Spawn the refresher on the current tokio runtime (panics outside
    /// one, like `tokio::spawn`); its first mint starts at once.
    pub fn start(creds: Credentials) -> Arc<TokenSource> {
        spawn(creds).0
    }

    /// A source that never fetches (a config checked outside a runtime).
    pub fn idle() -> Arc<TokenSource> {
        Arc::new(TokenSource {
            token: ArcSwapOption::empty(),
            last_error: ArcSwapOption::empty(),
            settled: watch::Sender::new(0),
            wake: Arc::new(Notify::new()),
        })
    }

    /// The token to send now, if there is an unexpired one: no lock, no
    /// await.
    pub fn current(&self) -> Option<Arc<Token>> {
        let t = self.token.load_full()?;
        (Instant::now() < t.expires_at).then_some(t)
    }

    /// Why the last mint failed, while no later one has succeeded.
    pub fn last_error(&self) -> Option<Arc<TokenError>> {
        self.last_error.load_full()
    }

    /// Wait for a token (startup, tests): the current one, else the
    /// outcome of the next mint attempt, within `timeout`.
    pub async fn ready(&self, timeout: Duration) -> Result<Arc<Token>, TokenError> {
        let deadline = Instant::now() + timeout;
        let mut settled = self.settled.subscribe();
        loop {
            if let Some(t) = self.current() {
                return Ok(t);
            }
            match tokio::time::timeout_at(deadline, settled.changed()).await {
                Ok(Ok(())) => {
                    if let Some(t) = self.current() {
                        return Ok(t);
                    }
                    if let Some(e) = self.last_error() {
                        return Err((*e).clone());
                    }
                }
                // A closed channel cannot happen while `self` holds the sender.
                Ok(Err(_)) | Err(_) => return Err(self.timed_out(timeout)),
            }
        }
    }

    fn timed_out(&self, timeout: Duration) -> TokenError {
        self.last_error().map_or_else(
            || TokenError::Unavailable(format!("no access token within {timeout:?}")),
            |e| (*e).clone(),
        )
    }

    /// A hint after a 401: mint a new token soon. Only wakes the refresher
    /// (never mints on the caller's task); honoured at most once per
    /// `MIN_HINT_GAP`.
    pub fn refresh_now(&self) {
        self.wake.notify_one();
    }

    fn settle(&self, result: Result<Minted, TokenError>, started: Instant) {
        match result {
            Ok(m) => {
                self.token.store(Some(Arc::new(Token {
                    access: m.access,
                    header: m.header,
                    expires_at: started + m.lifetime,
                })));
                self.last_error.store(None);
            }
            Err(e) => self.last_error.store(Some(Arc::new(e))),
        }
        self.settled.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl Drop for TokenSource {
    /// Wake the refresher so it sees it is no longer wanted.
    fn drop(&mut self) {
        self.wake.notify_one();
    }
}

/// [`TokenSource::start`], with the task's handle (tests wait for its end).
fn spawn(creds: Credentials) -> (Arc<TokenSource>, JoinHandle<()>) {
    let creds = Arc::new(creds);
    launch(move || {
        let creds = creds.clone();
        async move { mint(&creds, &|k| std::env::var(k).ok()).await }
    })
}

/// A source whose refresher mints with `fetch`.
fn launch<F, Fut>(fetch: F) -> (Arc<TokenSource>, JoinHandle<()>)
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Result<Minted, TokenError>> + Send + 'static,
{
    let wake = Arc::new(Notify::new());
    let source = Arc::new(TokenSource {
        token: ArcSwapOption::empty(),
        last_error: ArcSwapOption::empty(),
        settled: watch::Sender::new(0),
        wake: wake.clone(),
    });
    let task = tokio::spawn(refresher(Arc::downgrade(&source), wake, fetch));
    (source, task)
}

/// Mint, keep, sleep until the next refresh (or a hint), while anyone
/// holds the source.
async fn refresher<F, Fut>(source: Weak<TokenSource>, wake: Arc<Notify>, mut fetch: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Minted, TokenError>>,
{
    let mut failures = 0u32;
    loop {
        let started = Instant::now();
        let result = fetch().await;
        let next = match &result {
            Ok(m) => {
                failures = 0;
                tracing::debug!(lifetime = ?m.lifetime, "vertex access token minted");
                started + refresh_after(m.lifetime)
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                let wait = backoff(failures);
                log_failure(e, wait);
                Instant::now() + wait
            }
        };
        let Some(src) = source.upgrade() else {
            return;
        };
        src.settle(result, started);
        drop(src);
        if !sleep(next, started + MIN_HINT_GAP, &wake, &source).await {
            return;
        }
    }
}

/// Bad credentials are logged loudly (contract §4); an unreachable
/// endpoint is a warning.
fn log_failure(e: &TokenError, retry_in: Duration) {
    match e {
        TokenError::Unavailable(_) => {
            tracing::warn!(error = %e, ?retry_in, "vertex access token: mint failed");
        }
        _ => tracing::error!(error = %e, ?retry_in, "vertex access token: mint refused"),
    }
}

/// Sleep until `next`; a hint brings it forward, but not before `floor`.
/// False once nobody holds the source.
async fn sleep(
    mut next: Instant,
    floor: Instant,
    wake: &Notify,
    source: &Weak<TokenSource>,
) -> bool {
    loop {
        if source.strong_count() == 0 {
            return false;
        }
        tokio::select! {
            () = tokio::time::sleep_until(next) => return source.strong_count() > 0,
            () = wake.notified() => next = next.min(floor.max(Instant::now())),
        }
    }
}

/// When to mint again after a token that lives `lifetime`.
fn refresh_after(lifetime: Duration) -> Duration {
    let margin = REFRESH_MARGIN.min(lifetime / 2);
    lifetime.saturating_sub(margin).max(MIN_REFRESH)
}

/// The wait after the `failures`-th failure in a row: 1 s, 2 s, 4 s, … 60 s.
fn backoff(failures: u32) -> Duration {
    let doubled = Duration::from_secs(1 << failures.saturating_sub(1).min(6));
    doubled.min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    use http_body_util::{BodyExt, Full};
    use hyper::body::Incoming;
    use hyper_util::rt::TokioIo;
    use serde_json::{json, Value};

    use super::*;

    const VECTOR_IAT: u64 = 1_735_689_600;

    fn fixture(name: &str) -> String {
        let path = format!(
            "{}/../../fixtures/providers/vertex/oauth/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(path).unwrap()
    }

    fn test_account() -> ServiceAccount {
        ServiceAccount::parse(fixture("service_account.test.json").as_bytes()).unwrap()
    }

    fn b64_json(part: &str) -> Value {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
    }

    #[test]
    fn the_assertion_is_byte_exact_with_the_vector() {
        let vector: Value = serde_json::from_str(&fixture("jwt_bearer_vector.json")).unwrap();
        let sa = test_account();
        let jwt = assertion(&sa, VECTOR_IAT).unwrap();
        assert_eq!(jwt, vector["assertion"].as_str().unwrap());
        assert_eq!(header_json(&sa), vector["header_json"].as_str().unwrap());
        assert_eq!(
            claims_json(&sa, VECTOR_IAT),
            vector["claims_json"].as_str().unwrap()
        );
        assert_eq!(
            grant_body(&jwt),
            vector["token_request"]["body"].as_str().unwrap()
        );
        // The file names the legacy endpoint; the audience is the new one.
        assert_eq!(sa.token_uri, "https://accounts.google.com/o/oauth2/token");
        let claims = b64_json(jwt.split('.').nth(1).unwrap());
        assert_eq!(claims["aud"], TOKEN_AUDIENCE);
    }

    /// The same key in PKCS#8 (`BEGIN PRIVATE KEY`, as Google issues
    /// keys): the PKCS#1 DER wrapped with the rsaEncryption identifier.
    fn pkcs8(pkcs1_pem: &str) -> String {
        use base64::engine::general_purpose::STANDARD;
        fn der(tag: u8, body: &[u8]) -> Vec<u8> {
            let n = body.len();
            let mut out = vec![tag];
            match n {
                0..=127 => out.push(n as u8),
                128..=255 => out.extend([0x81, n as u8]),
                _ => out.extend([0x82, (n >> 8) as u8, n as u8]),
            }
            out.extend_from_slice(body);
            out
        }
        let b64: String = pkcs1_pem
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect();
        let pkcs1 = STANDARD.decode(b64).unwrap();
        let rsa_encryption = [
            0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05,
            0x00,
        ];
        let mut inner = vec![0x02, 0x01, 0x00];
        inner.extend(rsa_encryption);
        inner.extend(der(0x04, &pkcs1));
        let b64 = STANDARD.encode(der(0x30, &inner));
        let lines: Vec<&str> = b64
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            lines.join("\n")
        )
    }

    #[test]
    fn a_pkcs8_key_signs_the_same() {
        let vector: Value = serde_json::from_str(&fixture("jwt_bearer_vector.json")).unwrap();
        let mut sa = test_account();
        sa.private_key = Secret::new(pkcs8(sa.private_key.expose()));
        assert!(sa
            .private_key
            .expose()
            .starts_with("-----BEGIN PRIVATE KEY-----"));
        let jwt = assertion(&sa, VECTOR_IAT).unwrap();
        assert_eq!(jwt, vector["assertion"].as_str().unwrap());
    }

    #[test]
    fn a_key_file_parses_and_never_shows_its_key() {
        let sa = test_account();
        assert_eq!(sa.client_email, "service-account@example.com");
        assert_eq!(sa.private_key_id.as_deref(), Some("1"));
        assert!(sa
            .private_key
            .expose()
            .starts_with("-----BEGIN RSA PRIVATE KEY-----"));
        let shown = format!("{sa:?}");
        assert!(
            !shown.contains("PRIVATE KEY") && !shown.contains("MIIE"),
            "{shown}"
        );

        let mut file: Value = serde_json::from_str(&fixture("service_account.test.json")).unwrap();
        file.as_object_mut().unwrap().remove("token_uri");
        file.as_object_mut().unwrap().remove("private_key_id");
        let sa = ServiceAccount::parse(file.to_string().as_bytes()).unwrap();
        assert_eq!(sa.token_uri, DEFAULT_TOKEN_URI);
        assert!(header_json(&sa).ends_with(r#""alg": "RS256"}"#));

        let key = "-----BEGIN RSA PRIVATE KEY-----\nnot a key\n-----END RSA PRIVATE KEY-----\n";
        for (bad, says) in [
            (b"{nope".to_vec(), "not a JSON key file"),
            (br#"{"type":"authorized_user"}"#.to_vec(), "not supported"),
            (br#"{"private_key":"k"}"#.to_vec(), "no client_email"),
            (
                json!({"client_email": "a@b", "private_key": key})
                    .to_string()
                    .into_bytes(),
                "not an RSA PEM key",
            ),
        ] {
            let e = ServiceAccount::parse(&bad).unwrap_err();
            assert!(
                matches!(&e, TokenError::Credentials(m) if m.contains(says)),
                "{e}"
            );
            assert!(!e.to_string().contains("not a key"), "{e}");
            assert_eq!(e.to_gateway().code, ErrorCode::AuthFailed);
        }
        let e = ServiceAccount::from_file(Path::new("/nonexistent/sa.json")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/sa.json"), "{e}");
    }

    #[test]
    fn token_answers_parse_with_numeric_or_string_lifetimes() {
        let body = fixture("token_response.json");
        let m = read_answer(StatusCode::OK, body.as_bytes(), &[]).unwrap();
        assert_eq!(m.lifetime, Duration::from_secs(3599));
        assert_eq!(m.access.expose(), "ya29.c.b0AXv0zTOtestaccesstoken");
        assert_eq!(m.header, "Bearer ya29.c.b0AXv0zTOtestaccesstoken");
        assert!(m.header.is_sensitive());

        let text = body.replace("3599", "\"3599\"");
        assert!(text.contains("\"3599\""));
        let m = read_answer(StatusCode::OK, text.as_bytes(), &[]).unwrap();
        assert_eq!(m.lifetime, Duration::from_secs(3599));

        let m = read_answer(StatusCode::OK, br#"{"access_token":"t"}"#, &[]).unwrap();
        assert_eq!(m.lifetime, DEFAULT_LIFETIME);
        let huge = format!(r#"{{"access_token":"t","expires_in":{}}}"#, u64::MAX);
        let m = read_answer(StatusCode::OK, huge.as_bytes(), &[]).unwrap();
        assert_eq!(m.lifetime, MAX_LIFETIME);
        for bad in [
            &br#"{"expires_in":1}"#[..],
            b"<html>",
            br#"{"access_token":"t","expires_in":"soon"}"#,
        ] {
            let e = read_answer(StatusCode::OK, bad, &[]).err().unwrap();
            assert!(matches!(e, TokenError::Unavailable(_)), "{e}");
        }
        let e = read_answer(StatusCode::OK, br#"{"access_token":"a\nb"}"#, &[])
            .err()
            .unwrap();
        assert!(!e.to_string().contains("a\nb"), "{e}");
    }

    #[test]
    fn token_endpoint_errors_are_refusals_or_unavailability() {
        let env: Value =
            serde_json::from_str(&fixture("error_400_invalid_grant.http.json")).unwrap();
        let body = env["body_raw"].as_str().unwrap();
        let e = read_answer(StatusCode::BAD_REQUEST, body.as_bytes(), &[])
            .err()
            .unwrap();
        assert_eq!(
            e,
            TokenError::Refused {
                status: 400,
                error: "invalid_grant".into(),
                description: "Invalid JWT Signature.".into(),
            }
        );
        let g = e.to_gateway();
        assert_eq!(
            (g.code, g.source),
            (ErrorCode::AuthFailed, crate::error::Source::Upstream)
        );
        assert!(
            g.message.contains("invalid_grant") && g.message.contains("Invalid JWT Signature.")
        );

        // An assertion echoed back is masked.
        let e = read_answer(
            StatusCode::UNAUTHORIZED,
            b"bad assertion eyJhbGc.x.y",
            &["eyJhbGc.x.y"],
        )
        .err()
        .unwrap();
        assert!(
            matches!(&e, TokenError::Refused { description, .. } if description == "bad assertion *****"),
            "{e}"
        );

        let e = read_answer(StatusCode::SERVICE_UNAVAILABLE, b"busy", &[])
            .err()
            .unwrap();
        assert!(matches!(e, TokenError::Unavailable(_)), "{e}");
        assert_eq!(e.to_gateway().code, ErrorCode::ConnectionError);
    }

    #[test]
    fn default_credentials_are_the_key_file_env_var_else_the_metadata_server() {
        let path = format!(
            "{}/../../fixtures/providers/vertex/oauth/service_account.test.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let env = |k: &str| (k == "GOOGLE_APPLICATION_CREDENTIALS").then(|| path.clone());
        let m = Credentials::Default.minter(&env).unwrap();
        assert!(matches!(&m, Minter::Key(sa) if sa.client_email == "service-account@example.com"));
        let m = Credentials::File(path.clone().into())
            .minter(&|_| None)
            .unwrap();
        assert!(matches!(m, Minter::Key(_)));

        let m = Credentials::Default.minter(&|_| None).unwrap();
        let Minter::Metadata(uri) = m else {
            panic!("{m:?}")
        };
        assert_eq!(
            uri,
            "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token"
        );
        let env = |k: &str| (k == "GCE_METADATA_HOST").then(|| "127.0.0.1:8089".to_owned());
        let Minter::Metadata(uri) = Credentials::Default.minter(&env).unwrap() else {
            panic!()
        };
        assert_eq!(uri.authority().unwrap(), "127.0.0.1:8089");

        let env = |_: &str| Some("/nonexistent/sa.json".to_owned());
        assert!(matches!(
            Credentials::Default.minter(&env),
            Err(TokenError::Credentials(_))
        ));
    }

    #[test]
    fn schedule() {
        assert_eq!(
            refresh_after(Duration::from_secs(3599)),
            Duration::from_secs(3299)
        );
        assert_eq!(
            refresh_after(Duration::from_secs(600)),
            Duration::from_secs(300)
        );
        assert_eq!(
            refresh_after(Duration::from_secs(4)),
            Duration::from_secs(2)
        );
        assert_eq!(refresh_after(Duration::ZERO), MIN_REFRESH);
        let waits: Vec<u64> = (1..=9).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }

    // The refresher, with a scripted mint under paused time.

    fn minted(n: usize, secs: u64) -> Minted {
        Minted::new(format!("tok-{n}"), Duration::from_secs(secs)).unwrap()
    }

    /// Mints that follow a plan (lifetimes in seconds, or failures), then
    /// `then` for ever; counts calls.
    #[derive(Clone)]
    struct Script {
        calls: Arc<AtomicUsize>,
        plan: Arc<Mutex<VecDeque<Result<u64, TokenError>>>>,
        then: Result<u64, TokenError>,
    }

    impl Script {
        fn new(plan: Vec<Result<u64, TokenError>>, then: Result<u64, TokenError>) -> Script {
            Script {
                calls: Arc::default(),
                plan: Arc::new(Mutex::new(plan.into())),
                then,
            }
        }

        fn calls(&self) -> usize {
            self.calls.load(Ordering::SeqCst)
        }

        fn launch(&self) -> (Arc<TokenSource>, JoinHandle<()>) {
            let s = self.clone();
            launch(move || {
                let n = s.calls.fetch_add(1, Ordering::SeqCst) + 1;
                let step = s.plan.lock().unwrap().pop_front();
                let step = step.unwrap_or_else(|| s.then.clone());
                std::future::ready(step.map(|secs| minted(n, secs)))
            })
        }
    }

    fn down() -> TokenError {
        TokenError::Unavailable("down".into())
    }

    fn current(src: &TokenSource) -> Option<String> {
        src.current().map(|t| t.expose().to_owned())
    }

    #[tokio::test(start_paused = true)]
    async fn minted_at_start_then_once_per_lifetime_before_expiry() {
        let script = Script::new(vec![], Ok(600));
        let t0 = Instant::now();
        let (src, _task) = script.launch();
        let first = src.ready(Duration::from_secs(1)).await.unwrap();
        assert_eq!((first.expose(), script.calls()), ("tok-1", 1));
        assert_eq!(first.expires_at(), t0 + Duration::from_secs(600));
        assert!(first.authorization().is_sensitive());
        assert!(!format!("{first:?} {src:?}").contains("tok-1"));

        tokio::time::sleep_until(t0 + Duration::from_secs(299)).await;
        assert_eq!(
            (current(&src).as_deref(), script.calls()),
            (Some("tok-1"), 1)
        );
        tokio::time::sleep_until(t0 + Duration::from_secs(301)).await;
        assert_eq!(
            (current(&src).as_deref(), script.calls()),
            (Some("tok-2"), 2)
        );
        // Every 300 s over an hour: 12 refreshes, never without a token.
        for s in (305..3600).step_by(10) {
            tokio::time::sleep_until(t0 + Duration::from_secs(s)).await;
            assert!(src.current().is_some(), "no token at {s} s");
        }
        tokio::time::sleep_until(t0 + Duration::from_secs(3601)).await;
        assert_eq!(script.calls(), 13);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_and_keep_the_old_token_while_it_is_valid() {
        let script = Script::new(vec![Ok(600), Err(down()), Err(down()), Ok(600)], Ok(600));
        let t0 = Instant::now();
        let (src, _task) = script.launch();
        src.ready(Duration::from_secs(1)).await.unwrap();
        let at = |ms: u64| tokio::time::sleep_until(t0 + Duration::from_millis(ms));
        at(300_500).await;
        assert_eq!(
            (current(&src).as_deref(), script.calls()),
            (Some("tok-1"), 2)
        );
        assert_eq!(src.last_error().as_deref(), Some(&down()));
        at(301_500).await; // retried after 1 s
        assert_eq!(script.calls(), 3);
        at(303_500).await; // then after 2 s
        assert_eq!(
            (current(&src).as_deref(), script.calls()),
            (Some("tok-4"), 4)
        );
        assert!(src.last_error().is_none());

        // A token that expires while minting keeps failing is gone.
        let script = Script::new(vec![Ok(10)], Err(down()));
        let t0 = Instant::now();
        let (src, _task) = script.launch();
        src.ready(Duration::from_secs(1)).await.unwrap();
        tokio::time::sleep_until(t0 + Duration::from_millis(9_900)).await;
        assert_eq!(current(&src).as_deref(), Some("tok-1"));
        tokio::time::sleep_until(t0 + Duration::from_secs(10)).await;
        assert_eq!(current(&src), None);
        // Refreshed at 5 s, retried at 6, 8, 12 s.
        tokio::time::sleep_until(t0 + Duration::from_secs(13)).await;
        assert_eq!(script.calls(), 5);
        assert_eq!(
            src.ready(Duration::from_secs(30)).await.unwrap_err(),
            down()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_hint_refreshes_soon_but_a_burst_costs_one_mint() {
        let script = Script::new(vec![], Ok(600));
        let t0 = Instant::now();
        let (src, _task) = script.launch();
        src.ready(Duration::from_secs(1)).await.unwrap();
        let at = |ms: u64| tokio::time::sleep_until(t0 + Duration::from_millis(ms));
        at(20_000).await;
        src.refresh_now();
        at(20_001).await;
        assert_eq!(
            (current(&src).as_deref(), script.calls()),
            (Some("tok-2"), 2)
        );
        for _ in 0..5 {
            src.refresh_now();
        }
        at(29_999).await;
        assert_eq!(script.calls(), 2, "not before the gap");
        at(30_001).await;
        assert_eq!(script.calls(), 3, "once for the burst");
        at(100_000).await;
        assert_eq!(script.calls(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_last_source_stops_the_task() {
        let script = Script::new(vec![], Ok(600));
        let (src, task) = script.launch();
        let other = src.clone();
        src.ready(Duration::from_secs(1)).await.unwrap();
        drop(src);
        tokio::task::yield_now().await;
        assert!(!task.is_finished(), "another holder remains");
        drop(other);
        tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .expect("the task ends at once")
            .unwrap();
        assert_eq!(script.calls(), 1);

        // Also while it backs off after a failure.
        let script = Script::new(vec![], Err(down()));
        let (src, task) = script.launch();
        assert_eq!(src.ready(Duration::from_secs(1)).await.unwrap_err(), down());
        drop(src);
        tokio::time::timeout(Duration::from_millis(100), task)
            .await
            .expect("the task ends at once")
            .unwrap();
        assert_eq!(script.calls(), 1);
    }

    // Against a token endpoint on a real socket (real time).

    /// A loopback endpoint that answers `status` and `body` to requests
    /// `check` accepts (else a 400 naming the fault); it notes when each
    /// request came.
    struct Endpoint {
        base: String,
        hits: Arc<Mutex<Vec<std::time::Instant>>>,
    }

    impl Endpoint {
        fn hits(&self) -> Vec<std::time::Instant> {
            self.hits.lock().unwrap().clone()
        }
    }

    type Check = fn(&http::request::Parts, &str) -> Result<(), String>;

    async fn endpoint(status: u16, body: String, check: Check) -> Endpoint {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = listener.local_addr().unwrap().to_string();
        let hits: Arc<Mutex<Vec<std::time::Instant>>> = Arc::default();
        let noted = hits.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let (noted, body) = (noted.clone(), body.clone());
                let answer = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (noted, body) = (noted.clone(), body.clone());
                    async move {
                        noted.lock().unwrap().push(std::time::Instant::now());
                        let (parts, sent) = req.into_parts();
                        let sent = sent.collect().await.unwrap().to_bytes();
                        let sent = String::from_utf8_lossy(&sent).into_owned();
                        let (status, body) = match check(&parts, &sent) {
                            Ok(()) => (status, body),
                            Err(fault) => (
                                400,
                                json!({"error": "test", "error_description": fault}).to_string(),
                            ),
                        };
                        let mut resp = http::Response::new(Full::new(Bytes::from(body)));
                        *resp.status_mut() = StatusCode::from_u16(status).unwrap();
                        Ok::<_, std::convert::Infallible>(resp)
                    }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(sock), answer),
                );
            }
        });
        Endpoint { base, hits }
    }

    /// A JWT-bearer grant for the test key, as Google expects it.
    fn check_grant(parts: &http::request::Parts, body: &str) -> Result<(), String> {
        let form = parts
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        if (&parts.method, parts.uri.path(), form)
            != (
                &Method::POST,
                "/token",
                Some("application/x-www-form-urlencoded"),
            )
        {
            return Err(format!("{} {} {form:?}", parts.method, parts.uri));
        }
        let jwt = body.strip_prefix(GRANT_PREFIX).ok_or("grant_type")?;
        let [header, claims, signature] = jwt.split('.').collect::<Vec<_>>()[..] else {
            return Err("not three parts".into());
        };
        if b64_json(header) != json!({"typ": "JWT", "alg": "RS256", "kid": "1"}) {
            return Err("header".into());
        }
        let c = b64_json(claims);
        let (iat, exp) = (
            c["iat"].as_u64().unwrap_or(0),
            c["exp"].as_u64().unwrap_or(0),
        );
        let fresh = unix_now().abs_diff(iat) < 60 && exp == iat + 3600;
        let who = (c["iss"].as_str(), c["aud"].as_str(), c["scope"].as_str())
            == (
                Some("service-account@example.com"),
                Some(TOKEN_AUDIENCE),
                Some(SCOPE),
            );
        let signed = URL_SAFE_NO_PAD.decode(signature).map(|s| s.len()) == Ok(256);
        if fresh && who && signed {
            Ok(())
        } else {
            Err(format!("claims {c}"))
        }
    }

    /// The test key, minting at `token_uri`.
    fn key_file(token_uri: &str) -> tempfile::NamedTempFile {
        let mut sa: Value = serde_json::from_str(&fixture("service_account.test.json")).unwrap();
        sa["token_uri"] = token_uri.into();
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), sa.to_string()).unwrap();
        file
    }

    #[tokio::test]
    async fn minted_at_the_key_files_token_uri_and_refreshed_before_expiry() {
        let answer =
            json!({"access_token": "ya29.short", "expires_in": "4", "token_type": "Bearer"});
        let ep = endpoint(200, answer.to_string(), check_grant).await;
        let file = key_file(&format!("http://{}/token", ep.base));
        let (src, task) = spawn(Credentials::File(file.path().into()));
        let token = src.ready(Duration::from_secs(10)).await.unwrap();
        assert_eq!(token.authorization(), "Bearer ya29.short");
        assert_eq!(ep.hits().len(), 1, "one mint at start");

        // Refreshed at half its 4 s life, while the first is still valid.
        let deadline = Instant::now() + Duration::from_secs(10);
        while ep.hits().len() < 2 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let hits = ep.hits();
        assert!(hits.len() >= 2, "refreshed");
        // The lifetime counts from before the first mint began, so the
        // refresh starts exactly 2 s before that token's expiry.
        let expiry = token.expires_at().into_std();
        let refresh_at = expiry - Duration::from_secs(2);
        assert!(hits[1] >= refresh_at, "not before half its life");
        assert!(hits[1] < expiry, "{:?} late", hits[1] - refresh_at);
        assert!(src.current().is_some());

        drop(src);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the task ends with its source")
            .unwrap();
    }

    #[tokio::test]
    async fn invalid_grant_is_an_auth_error_and_no_token() {
        let env: Value =
            serde_json::from_str(&fixture("error_400_invalid_grant.http.json")).unwrap();
        let body = env["body_raw"].as_str().unwrap().to_owned();
        let ep = endpoint(400, body, check_grant).await;
        let file = key_file(&format!("http://{}/token", ep.base));
        let (src, task) = spawn(Credentials::File(file.path().into()));
        let e = src.ready(Duration::from_secs(10)).await.unwrap_err();
        assert!(
            matches!(&e, TokenError::Refused { error, .. } if error == "invalid_grant"),
            "{e}"
        );
        assert_eq!(e.to_gateway().code, ErrorCode::AuthFailed);
        assert!(src.current().is_none());
        assert_eq!(ep.hits().len(), 1);
        drop(src);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the task ends with its source")
            .unwrap();
    }

    #[tokio::test]
    async fn the_metadata_server_is_asked_with_its_flavor_header() {
        fn check(parts: &http::request::Parts, _: &str) -> Result<(), String> {
            let flavor = parts
                .headers
                .get("metadata-flavor")
                .and_then(|v| v.to_str().ok());
            if (&parts.method, parts.uri.path(), flavor)
                == (&Method::GET, METADATA_PATH, Some("Google"))
            {
                Ok(())
            } else {
                Err(format!("{} {} {flavor:?}", parts.method, parts.uri))
            }
        }
        let ep = endpoint(200, fixture("token_response.json"), check).await;
        let env = |k: &str| (k == "GCE_METADATA_HOST").then(|| ep.base.clone());
        let m = mint(&Credentials::Default, &env).await.unwrap();
        assert_eq!(m.access.expose(), "ya29.c.b0AXv0zTOtestaccesstoken");
        assert_eq!(m.lifetime, Duration::from_secs(3599));
        assert_eq!(ep.hits().len(), 1);
    }
}
