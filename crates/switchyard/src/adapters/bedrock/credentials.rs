//! A Bedrock provider's AWS credentials: fixed keys from the config
//! (`credentials: { env_prefix: … }`), or the AWS default chain
//! (`credentials: default`: environment, shared config and credentials
//! files with profiles, web identity, SSO, `credential_process`, container
//! and instance roles) resolved by `aws-config` in a background task and
//! re-resolved before they expire. The request path reads the current set
//! with one atomic load and never fetches.

use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwapOption;
use aws_config::default_provider::credentials::DefaultCredentialsChain;
use aws_credential_types::provider::ProvideCredentials;
use tokio::sync::Notify;

use crate::secret::Secret;

/// One set of AWS credentials.
#[derive(Debug, Clone)]
pub struct Keys {
    pub access_key_id: String,
    pub secret_access_key: Secret<String>,
    pub session_token: Option<Secret<String>>,
    /// When temporary credentials stop working.
    pub expiry: Option<SystemTime>,
}

/// How long before expiry temporary credentials are replaced.
const MARGIN: Duration = Duration::from_secs(5 * 60);
/// How often credentials without an expiry are read again (a rotated
/// profile file is picked up).
const REREAD: Duration = Duration::from_secs(60 * 60);
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(60);

pub struct AwsCredentials {
    current: ArcSwapOption<Keys>,
    /// Why the chain found nothing, while it finds nothing.
    failure: ArcSwapOption<String>,
    /// The first resolution has ended (with credentials or not).
    settled: std::sync::atomic::AtomicBool,
    changed: Notify,
    /// Ends the background task when the provider is dropped (a reload).
    stop: Arc<Notify>,
}

impl Drop for AwsCredentials {
    fn drop(&mut self) {
        self.stop.notify_one();
    }
}

impl AwsCredentials {
    fn empty() -> AwsCredentials {
        AwsCredentials {
            current: ArcSwapOption::empty(),
            failure: ArcSwapOption::empty(),
            settled: std::sync::atomic::AtomicBool::new(false),
            changed: Notify::new(),
            stop: Arc::new(Notify::new()),
        }
    }

    /// Fixed keys: there from the start, never refreshed.
    pub fn fixed(keys: Keys) -> Arc<AwsCredentials> {
        let c = AwsCredentials::empty();
        c.current.store(Some(Arc::new(keys)));
        c.settled.store(true, std::sync::atomic::Ordering::Release);
        Arc::new(c)
    }

    /// The default chain for `region`, resolved in the background (outside a
    /// runtime, as in `switchyard check`, nothing is resolved).
    pub fn chain(region: &str) -> Arc<AwsCredentials> {
        let region = aws_config::Region::new(region.to_owned());
        AwsCredentials::resolved_by(async move {
            DefaultCredentialsChain::builder()
                .region(region)
                .build()
                .await
        })
    }

    /// Credentials from the source `make` builds, resolved and refreshed in
    /// a background task that ends with the returned value.
    pub fn resolved_by<P, F>(make: F) -> Arc<AwsCredentials>
    where
        P: ProvideCredentials + 'static,
        F: std::future::Future<Output = P> + Send + 'static,
    {
        let c = Arc::new(AwsCredentials::empty());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (weak, stop) = (Arc::downgrade(&c), c.stop.clone());
            rt.spawn(async move {
                let source = make.await;
                tokio::select! {
                    () = refresh(&source, weak) => {}
                    () = stop.notified() => {}
                }
            });
        }
        c
    }

    /// The credentials to sign with now, if there are any.
    pub fn current(&self) -> Option<Arc<Keys>> {
        self.current.load_full()
    }

    /// Why there are none (the chain's own words; never a secret).
    pub fn failure(&self) -> Option<Arc<String>> {
        self.failure.load_full()
    }

    /// Whether the first resolution has ended.
    pub fn settled(&self) -> bool {
        self.settled.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Until the first resolution has ended.
    pub async fn wait_settled(&self) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.settled() {
                return;
            }
            changed.await;
        }
    }

    fn store(&self, got: Result<Keys, String>) {
        match got {
            Ok(keys) => {
                self.current.store(Some(Arc::new(keys)));
                self.failure.store(None);
            }
            Err(why) => {
                // Expired credentials are no use; unexpired ones are kept
                // while the chain is retried.
                let expired = self
                    .current()
                    .and_then(|k| k.expiry)
                    .is_some_and(|e| e <= SystemTime::now());
                if expired {
                    self.current.store(None);
                }
                self.failure.store(Some(Arc::new(why)));
            }
        }
        self.settled
            .store(true, std::sync::atomic::Ordering::Release);
        self.changed.notify_waiters();
    }
}

/// Resolves, stores, sleeps until shortly before expiry, again, for as long
/// as the credentials' owner lives.
async fn refresh<P: ProvideCredentials>(chain: &P, owner: Weak<AwsCredentials>) {
    let mut retry = RETRY_FIRST;
    loop {
        let got = chain
            .provide_credentials()
            .await
            .map(|c| Keys {
                access_key_id: c.access_key_id().to_owned(),
                secret_access_key: Secret::new(c.secret_access_key().to_owned()),
                session_token: c.session_token().map(|t| Secret::new(t.to_owned())),
                expiry: c.expiry(),
            })
            .map_err(|e| format!("no AWS credentials: {}", with_sources(&e)));
        let wait = match &got {
            Ok(k) => {
                retry = RETRY_FIRST;
                next_refresh(k.expiry, SystemTime::now())
            }
            Err(why) => {
                tracing::warn!(error = %why, "bedrock credentials");
                let w = retry;
                retry = (retry * 2).min(RETRY_MAX);
                w
            }
        };
        match owner.upgrade() {
            Some(c) => c.store(got),
            None => return,
        }
        tokio::time::sleep(wait).await;
    }
}

/// An error and its causes, in one line (the chain's top-level message
/// alone says only "the credential provider was not enabled").
fn with_sources(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        out.push_str(": ");
        out.push_str(&s.to_string());
        src = s.source();
    }
    out
}

/// When to resolve again: `MARGIN` before expiry (half the time left when
/// that is shorter), or `REREAD` for credentials that do not expire.
pub fn next_refresh(expiry: Option<SystemTime>, now: SystemTime) -> Duration {
    let Some(expiry) = expiry else { return REREAD };
    let left = expiry.duration_since(now).unwrap_or_default();
    let wait = if left > MARGIN * 2 {
        left - MARGIN
    } else {
        left / 2
    };
    wait.max(Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_credentials_are_replaced_before_they_expire() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let hour = Duration::from_secs(3600);
        assert_eq!(next_refresh(None, now), REREAD);
        assert_eq!(next_refresh(Some(now + hour), now), hour - MARGIN);
        // Shorter than twice the margin: half the time left.
        let six = Duration::from_secs(360);
        assert_eq!(next_refresh(Some(now + six), now), six / 2);
        // Already expired: soon, but not in a busy loop.
        assert_eq!(next_refresh(Some(now - hour), now), Duration::from_secs(1));
    }

    #[tokio::test]
    async fn fixed_keys_are_there_at_once_and_never_printed() {
        let c = AwsCredentials::fixed(Keys {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: Secret::new("very-secret".into()),
            session_token: Some(Secret::new("token-secret".into())),
            expiry: None,
        });
        assert!(c.settled());
        c.wait_settled().await;
        let k = c.current().unwrap();
        assert_eq!(k.access_key_id, "AKIDEXAMPLE");
        let shown = format!("{k:?}");
        assert!(!shown.contains("very-secret") && !shown.contains("token-secret"));
    }

    /// A source that hands out credentials living `life`, counting calls.
    #[derive(Debug)]
    struct Counting {
        calls: Arc<std::sync::atomic::AtomicU32>,
        life: Duration,
    }

    impl ProvideCredentials for Counting {
        fn provide_credentials<'a>(
            &'a self,
        ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            let n = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let expiry = SystemTime::now() + self.life;
            aws_credential_types::provider::future::ProvideCredentials::ready(Ok(
                aws_credential_types::Credentials::new(
                    format!("AKID{n}"),
                    "secret",
                    Some("token".into()),
                    Some(expiry),
                    "test",
                ),
            ))
        }
    }

    /// One fetch per lifetime, off the request path, ending with its owner.
    #[tokio::test(start_paused = true)]
    async fn the_chain_is_asked_once_per_lifetime_and_stops_with_its_owner() {
        let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let life = Duration::from_secs(3600);
        let source = Counting {
            calls: calls.clone(),
            life,
        };
        let c = AwsCredentials::resolved_by(async move { source });
        c.wait_settled().await;
        assert_eq!(c.current().unwrap().access_key_id, "AKID0");
        let n = || calls.load(std::sync::atomic::Ordering::SeqCst);
        // Reading them costs nothing.
        for _ in 0..1000 {
            assert!(c.current().is_some());
        }
        assert_eq!(n(), 1);
        // SystemTime does not move with paused tokio time: each set lives
        // an hour from when it was made, so the refresher waits 55 minutes.
        tokio::time::sleep(life - MARGIN - Duration::from_secs(1)).await;
        assert_eq!(n(), 1, "not before the margin");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(n(), 2, "once at the margin");
        assert_eq!(c.current().unwrap().access_key_id, "AKID1");
        drop(c);
        tokio::time::sleep(life * 3).await;
        assert_eq!(n(), 2, "stopped with its owner");
    }

    #[tokio::test]
    async fn an_expired_set_is_dropped_when_the_chain_fails_and_a_live_one_kept() {
        let keys = |expiry| Keys {
            access_key_id: "A".into(),
            secret_access_key: Secret::new("s".into()),
            session_token: None,
            expiry,
        };
        let c = AwsCredentials::fixed(keys(Some(SystemTime::now() + Duration::from_secs(600))));
        c.store(Err("sts down".into()));
        assert!(c.current().is_some(), "still valid: kept");
        assert_eq!(c.failure().as_deref().map(String::as_str), Some("sts down"));
        c.store(Ok(keys(Some(SystemTime::now() - Duration::from_secs(1)))));
        c.store(Err("sts down".into()));
        assert!(c.current().is_none(), "expired: dropped");
    }
}
