//! A config kept in etcd (`--config etcd://HOST:PORT/KEY`, contract §11):
//! its text is the value of one key of etcd's v3 API. [`read`] gets it once
//! (start-up, `check`, `POST /admin/reload`); [`watch`] follows the key and
//! hands every new value to `reload::on_text` — validated whole and applied
//! as a file's new version is, a canary included (`reload.canary`).
//!
//! etcd going away never touches the config in force: the watcher says so
//! once, reconnects with backoff, and on each reconnection reads the key
//! afresh before watching it again (a version written while it was away is
//! applied then). A deleted key leaves the config in force serving, with a
//! warning. The text is never logged (it can hold secrets): only its
//! version (`config::text_version`).

use std::convert::Infallible;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions, EventType, GetResponse, WatchOptions};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::config::source::EtcdKey;

/// How long one read (connect and get) may take before etcd counts as
/// unreachable.
const READ_WITHIN: Duration = Duration::from_secs(5);
/// The watcher's first wait before reconnecting, doubled after each failure
/// up to [`BACKOFF_MAX`].
const BACKOFF_MIN: Duration = Duration::from_millis(200);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// HTTP/2 pings on the watch's connection: an etcd that vanished without
/// closing it (a host gone, a partition) is noticed within about this.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// The key's text now: an error when etcd does not answer within
/// [`READ_WITHIN`], when the key does not exist, or when it is not UTF-8.
pub async fn read(at: &EtcdKey) -> Result<String, String> {
    let (value, _) = get(at).await?;
    match value {
        Some(bytes) => text(at, bytes),
        None => Err(format!("{at}: the key does not exist in etcd")),
    }
}

/// Follows `at` for `app` until `stop`: every new value is offered to
/// `reload::on_text`.
pub fn watch(app: App, at: EtcdKey, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tracing::info!(config = %at, "watching the config's etcd key: it reloads when the key changes");
    tokio::spawn(async move {
        let mut link = Link::default();
        loop {
            let ended = tokio::select! {
                _ = stop.cancelled() => return,
                ended = session(&app, &at, &mut link) => ended,
            };
            let Err(why) = ended;
            let wait = link.lost(&at, &why);
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    })
}

/// One connection: read the key (what changed while there was none is
/// applied), then follow it from the revision read. Ends only with what
/// failed.
async fn session(app: &App, at: &EtcdKey, link: &mut Link) -> Result<Infallible, String> {
    let (mut client, got) = connect_and_get(at).await?;
    link.up(at);
    let (value, revision) = value_of(got);
    apply(app, at, value).await;
    let from = WatchOptions::new().with_start_revision(revision + 1);
    // The whole stream is kept: dropping its request half would end the
    // watch on etcd's side.
    let mut stream = client
        .watch(at.key.as_bytes(), Some(from))
        .await
        .map_err(|e| format!("cannot watch the key: {}", said(e)))?;
    loop {
        let Some(resp) = stream.message().await.map_err(said)? else {
            return Err("etcd ended the watch".into());
        };
        if resp.canceled() {
            // Compacted past our revision, or etcd shutting down: read anew.
            return Err(format!(
                "etcd cancelled the watch ({})",
                resp.cancel_reason()
            ));
        }
        // Several writes in one response: only the newest is applied (the
        // ones before it are superseded already; applying each in turn
        // would start a canary for a version nobody wants any more).
        if let Some(event) = resp.events().last() {
            let value = match event.event_type() {
                EventType::Put => event.kv().map(|kv| kv.value().to_vec()),
                EventType::Delete => None,
            };
            apply(app, at, value).await;
        }
    }
}

/// The key's value (`None`: deleted) goes to the reload, which applies it
/// unless it is in force or was tried already.
async fn apply(app: &App, at: &EtcdKey, value: Option<Vec<u8>>) {
    let Some(bytes) = value else {
        tracing::warn!(
            config = %at,
            config_version = %app.live.load().version,
            "the config's etcd key does not exist (deleted?): the config in force keeps serving"
        );
        return;
    };
    match text(at, bytes) {
        Ok(src) => super::reload::on_text(app, &at.to_string(), &src).await,
        Err(e) => {
            super::reload::rejected(app, vec![e]);
        }
    }
}

fn text(at: &EtcdKey, bytes: Vec<u8>) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|_| format!("{at}: the key's value is not UTF-8 text"))
}

async fn get(at: &EtcdKey) -> Result<(Option<Vec<u8>>, i64), String> {
    let (_, got) = connect_and_get(at).await?;
    Ok(value_of(got))
}

/// A client on `at`'s members and the key read with it, within
/// [`READ_WITHIN`] (the client's own timeouts do not cover a channel with
/// no member up: its calls would wait for one).
async fn connect_and_get(at: &EtcdKey) -> Result<(Client, GetResponse), String> {
    let unreachable = |e: String| format!("{at}: etcd did not answer: {e}");
    let options = ConnectOptions::new()
        .with_connect_timeout(READ_WITHIN)
        .with_timeout(READ_WITHIN)
        .with_keep_alive(KEEP_ALIVE, KEEP_ALIVE)
        .with_keep_alive_while_idle(true);
    let attempt = async {
        let mut client = Client::connect(&at.endpoints, Some(options))
            .await
            .map_err(said)?;
        let got = client.get(at.key.as_bytes(), None).await.map_err(said)?;
        Ok((client, got))
    };
    match tokio::time::timeout(READ_WITHIN, attempt).await {
        Ok(r) => r.map_err(unreachable),
        Err(_) => Err(unreachable(format!(
            "no answer within {}s",
            READ_WITHIN.as_secs()
        ))),
    }
}

/// What went wrong, in a line: a gRPC status's message and its root cause
/// ("tcp connect error: Connection refused"), not the transport's dump.
fn said(e: etcd_client::Error) -> String {
    let etcd_client::Error::GRpcStatus(status) = e else {
        return e.to_string();
    };
    let mut cause: Option<&dyn std::error::Error> = std::error::Error::source(&status);
    while let Some(deeper) = cause.and_then(|c| c.source()) {
        cause = Some(deeper);
    }
    match cause {
        Some(c) => format!("{}: {c}", status.message()),
        None => status.message().to_owned(),
    }
}

/// The value (if the key exists) and the revision it was read at.
fn value_of(mut got: GetResponse) -> (Option<Vec<u8>>, i64) {
    let revision = got.header().map_or(0, |h| h.revision());
    let value = got
        .take_kvs()
        .into_iter()
        .next()
        .map(|kv| kv.value().to_vec());
    (value, revision)
}

/// The watcher's view of its link to etcd: whether it is down, since when,
/// and how long to wait before the next try. A failure is logged when the
/// link goes down, not on every try after (an etcd down for an hour is one
/// error line, and one line when it is back).
#[derive(Default)]
struct Link {
    down_since: Option<Instant>,
    backoff: Duration,
}

impl Link {
    /// A session ended with `why`: how long to wait before the next.
    fn lost(&mut self, at: &EtcdKey, why: &str) -> Duration {
        if self.down_since.is_none() {
            self.down_since = Some(Instant::now());
            tracing::error!(
                config = %at,
                "lost etcd ({why}): the config in force keeps serving; reconnecting"
            );
        } else {
            tracing::debug!(config = %at, "etcd still unreachable: {why}");
        }
        self.backoff = (self.backoff * 2).clamp(BACKOFF_MIN, BACKOFF_MAX);
        self.backoff
    }

    /// A session read the key.
    fn up(&mut self, at: &EtcdKey) {
        self.backoff = Duration::ZERO;
        if let Some(since) = self.down_since.take() {
            tracing::info!(
                config = %at,
                down_s = since.elapsed().as_secs_f64(),
                "etcd is reachable again: the key was read anew and is watched"
            );
        }
    }
}
