//! `App`: what every handler of both listeners shares — the live config
//! snapshot, the sinks, the stores — and the request's scope it starts
//! (`request_ctx`). Which handler serves which path is `routes`.

use std::sync::Arc;

use crate::live::Live;
use crate::live::SharedLive;
use crate::observe::metrics::Metrics;
use crate::observe::record::Record;
use crate::reliability::ctx::RequestCtx;

#[derive(Clone)]
pub struct App {
    pub live: SharedLive,
    /// Where every finished request goes (decision log, metrics).
    pub sinks: crate::sinks::Sinks,
    /// Where the config comes from (a file, an etcd key): what
    /// `POST /admin/reload` and SIGHUP read, and what is watched. `None`
    /// for the built-in demo.
    pub config_source: Option<crate::config::source::Source>,
    pub metrics: Arc<Metrics>,
    /// Stored Responses-API answers (`previous_response_id`, `GET /v1/responses/{id}`).
    pub responses: Arc<dyn crate::state::responses::ResponseStore>,
    /// The usage store (`usage.store`), when there is one.
    pub usage: Option<Arc<crate::usage::UsageStore>>,
    /// The version (text hash) of the config a reload last tried, good or
    /// bad: a file-change event for the same text is not a second reload.
    pub last_reload: Arc<std::sync::Mutex<Option<String>>>,
    /// The last finished requests (`GET /admin/decisions`, the dashboard).
    pub recent: Arc<crate::sinks::recent::Recent>,
    /// The OTLP trace export (`observability.otlp_endpoint`), when on.
    pub traces: Option<Arc<crate::sinks::trace::TraceSink>>,
    /// A canary config serving beside `live`, when one runs (also one of
    /// `sinks`: it tallies each version's outcomes).
    pub canary: Arc<crate::live::canary::Canary>,
    /// Shadow traffic: the queue the request path draws into, its workers'
    /// figures (`GET /admin/shadow`).
    pub shadows: crate::shadow::Shadows,
}

impl App {
    /// The config snapshot a client request is served by: the canary's for
    /// its share of requests while one runs, else the one in force.
    pub fn serving(&self) -> Arc<Live> {
        self.canary.serving(&self.live)
    }

    /// A fresh per-request context.
    pub fn request_ctx(
        &self,
        request_id: &str,
        headers: &http::HeaderMap,
        live: &Live,
    ) -> RequestCtx {
        // Sampled in: the decision log names the trace in force (the
        // caller's, or the one begun here); else the caller's, if any, and
        // the trace waits for the end, where the tail rule may keep it.
        let obs = &live.config.observability;
        let trace = self.traces.as_ref().map(|_| {
            let parent = crate::observe::trace::caller(headers);
            crate::observe::trace::begin(parent, obs.trace_sample)
        });
        let trace_id = match &trace {
            Some((t, true)) => Some(t.trace_id_hex()),
            _ => crate::observe::trace::trace_id(headers),
        };
        let mut rec = Record::new(request_id.to_owned(), trace_id, live.version.clone());
        match trace {
            Some((t, true)) => rec.trace = Some(t),
            Some((t, false)) => {
                rec.tail = Some(crate::observe::record::Tail {
                    trace: t,
                    slow: obs.trace_slow,
                })
            }
            None => {}
        }
        RequestCtx::new(rec, self.sinks.clone())
    }
}
