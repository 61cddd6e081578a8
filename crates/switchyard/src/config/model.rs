//! Validated runtime configuration: what the rest of the gateway reads.
//!
//! Built from the raw YAML mirror (`raw.rs`) by `validate.rs`; nothing here is
//! "filled in later": defaults are applied, env vars expanded, units parsed and
//! cross-references checked before a `Config` exists.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use crate::secret::Secret;

/// The whole validated config. Immutable once built; reloads build a new one.
#[derive(Debug, Clone)]
pub struct Config {
    /// Hex sha256 of the config source text (before env expansion): `config_version`.
    pub version: String,
    pub server: Server,
    /// `None` = no `clients:` section: the gateway is open (and logs that it is).
    pub clients: Option<Vec<Client>>,
    pub providers: BTreeMap<String, Provider>,
    /// Deployments keyed by id (`provider/model`), in file order in `deployment_order`.
    pub deployments: BTreeMap<String, Deployment>,
    pub deployment_order: Vec<String>,
    pub routes: BTreeMap<String, Route>,
    /// Scene-routing rules: request text → task name (first match wins).
    pub task_rules: Vec<TaskRule>,
    pub cache: Cache,
    pub state: State,
    pub usage: Usage,
    pub observability: Observability,
    pub degraded: Degraded,
    /// Canary reloads (`POST /admin/reload?canary=N&for=D`, contract §11).
    pub reload: Reload,
    /// How shadow traffic is sent (`shadow: { queue, workers }`; read at
    /// start-up).
    pub shadow: ShadowTraffic,
    /// What `check` shows and `serve` logs without refusing the config.
    pub warnings: Vec<super::Diagnostic>,
}

#[derive(Debug, Clone)]
pub struct Server {
    pub listen: SocketAddr,
    pub admin_listen: SocketAddr,
    /// Bytes.
    pub max_body: usize,
    pub sse_keepalive: Duration,
    /// The whole request body (and its headers) must arrive within this,
    /// else 408 and the connection is closed: a dribbling client cannot
    /// hold a connection open.
    pub body_timeout: Duration,
    /// Open client connections at most; past it a new one gets 503 at once.
    pub max_connections: usize,
    /// The admin API's bearer key (the value of `admin_key_env`'s variable).
    pub admin_key: Option<Secret<String>>,
    /// This instance's region (`server.region`): routing prefers deployments
    /// whose `region` is the same.
    pub region: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Client {
    pub id: String,
    /// sha256 of the virtual key (from `key_sha256`, or hashed from `key_env`'s value).
    pub key_sha256: [u8; 32],
    /// `None` = every route and deployment.
    pub routes: Option<Vec<String>>,
    pub rpm: Option<u32>,
    pub tpm: Option<u64>,
    pub budget: Option<Budget>,
    /// `cache: shared`: the client reads and writes the cache every shared
    /// client sees (default: its own).
    pub cache_shared: bool,
    /// `debug: true`: a request that sends `x-switchyard-debug: 1` has its
    /// bodies in the decision log (with `observability.debug_bodies: header`).
    pub debug: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    pub usd: f64,
    pub per: BudgetPeriod,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetPeriod {
    Hour,
    Day,
    Month,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    OpenAi,
    Anthropic,
    Gemini,
    Azure,
    /// Amazon Bedrock Runtime (SigV4, Converse or InvokeModel).
    Bedrock,
    /// Google Vertex AI (OAuth2 from a service account): Gemini and Claude.
    Vertex,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::OpenAi => "openai",
            Protocol::Anthropic => "anthropic",
            Protocol::Gemini => "gemini",
            Protocol::Azure => "azure",
            Protocol::Bedrock => "bedrock",
            Protocol::Vertex => "vertex",
        }
    }
}

/// An OpenAI-compatible provider's own rules (contract §9, MAPPING §18):
/// reasoning fields, replay, thinking switches, errors beyond the status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Flavor {
    #[default]
    Generic,
    DeepSeek,
    Qwen,
    Zhipu,
    Moonshot,
    /// Volcengine Ark (Doubao).
    Ark,
    MiniMax,
    Vllm,
}

impl Flavor {
    pub const ALL: [Flavor; 8] = [
        Flavor::DeepSeek,
        Flavor::Qwen,
        Flavor::Zhipu,
        Flavor::Moonshot,
        Flavor::Ark,
        Flavor::MiniMax,
        Flavor::Vllm,
        Flavor::Generic,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Flavor::Generic => "generic",
            Flavor::DeepSeek => "deepseek",
            Flavor::Qwen => "qwen",
            Flavor::Zhipu => "zhipu",
            Flavor::Moonshot => "moonshot",
            Flavor::Ark => "ark",
            Flavor::MiniMax => "minimax",
            Flavor::Vllm => "vllm",
        }
    }

    /// The flavor a `base_url`'s host implies (contract §9: `flavor`
    /// absent), else generic.
    pub fn from_host(host: &str) -> Flavor {
        let host = host.to_ascii_lowercase();
        let under = |d: &str| host == d || host.ends_with(&format!(".{d}"));
        if under("deepseek.com") {
            Flavor::DeepSeek
        } else if under("dashscope.aliyuncs.com") || host.starts_with("dashscope") {
            Flavor::Qwen
        } else if under("bigmodel.cn") || under("z.ai") {
            Flavor::Zhipu
        } else if under("moonshot.ai") || under("moonshot.cn") {
            Flavor::Moonshot
        } else if under("volces.com") || under("volcengineapi.com") {
            Flavor::Ark
        } else if under("minimax.io") || under("minimaxi.com") || under("minimax.chat") {
            Flavor::MiniMax
        } else {
            Flavor::Generic
        }
    }
}

/// Whether a reasoning text from an earlier turn is sent back (contract
/// §9: `auto` is the flavor's rule for the model).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReasoningReplay {
    #[default]
    Auto,
    Always,
    Never,
}

#[derive(Debug, Clone)]
pub struct Provider {
    pub id: String,
    pub protocol: Protocol,
    /// OpenAI protocol: whose rules its answers follow.
    pub flavor: Flavor,
    /// Without a trailing slash.
    pub base_url: String,
    /// May be empty (local vLLM, Ollama, the mocks): then no auth header is sent.
    pub keys: Vec<ProviderKey>,
    pub timeouts: Timeouts,
    /// The account's pool (contract §10): every deployment of the provider
    /// together (`models[].limits` bound one deployment).
    pub limits: Limits,
    pub circuit: Circuit,
    /// Extra static headers sent upstream.
    pub headers: Vec<(String, String)>,
    /// Provider-specific body fields merged into every request body.
    pub options: serde_json::Map<String, serde_json::Value>,
    /// Azure only: the `api-version` query parameter.
    pub api_version: Option<String>,
    /// Bedrock: the AWS region (the config's, else `AWS_REGION`).
    pub region: Option<String>,
    /// Vertex: the Google Cloud project and location (`global` or a region).
    pub project: Option<String>,
    pub location: Option<String>,
    /// Bedrock: where its credentials come from (`keys` are refused there).
    pub credentials: Option<CloudCredentials>,
    /// Background probes of what carries no traffic (contract §10).
    pub probe: Option<Probe>,
    /// Where the used share of a deployment's rpm/tpm starts to move its
    /// traffic away, and where it stops taking any (contract §10).
    pub quota: Quota,
}

/// `providers.<p>.quota` (contract §10): fractions of rpm/tpm used. Past
/// `shift` a deployment's routing weight falls linearly, to 0 at `stop`;
/// past `stop` it serves only when nothing else can.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quota {
    pub shift: f64,
    pub stop: f64,
}

impl Default for Quota {
    fn default() -> Self {
        Quota {
            shift: 0.85,
            stop: 0.97,
        }
    }
}

/// `providers.<p>.probe` (contract §10): how the provider's deployments
/// and keys that carry no traffic are checked in the background.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// How often an idle deployment or key is probed (jittered ±10%).
    pub every: Duration,
    pub kind: ProbeKind,
    /// At most this fraction of a deployment's rpm goes to probes.
    pub max_share: f64,
    /// `kind: completion`: the upstream model a key is checked with (a
    /// deployment is always checked with its own); `None`: the provider's
    /// cheapest deployment.
    pub model: Option<String>,
}

impl Probe {
    pub const DEFAULT_EVERY: Duration = Duration::from_secs(30);
    pub const DEFAULT_MAX_SHARE: f64 = 0.02;
}

/// What a probe asks the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProbeKind {
    /// An authenticated call that costs nothing (listing models).
    #[default]
    Auth,
    /// A one-token completion.
    Completion,
}

impl ProbeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeKind::Auth => "auth",
            ProbeKind::Completion => "completion",
        }
    }
}

/// A cloud provider's credentials (contract §9).
#[derive(Debug, Clone, PartialEq)]
pub enum CloudCredentials {
    /// The platform's own chain (AWS: environment, shared files and
    /// profiles, web identity, SSO, `credential_process`; Google:
    /// `GOOGLE_APPLICATION_CREDENTIALS`, else the metadata server), resolved
    /// and refreshed by the provider at run time.
    Default,
    /// A Google service-account key file.
    GoogleFile(std::path::PathBuf),
    /// Fixed AWS keys read at load from `{PREFIX}_ACCESS_KEY_ID`,
    /// `{PREFIX}_SECRET_ACCESS_KEY` and optionally `{PREFIX}_SESSION_TOKEN`.
    AwsKeys {
        prefix: String,
        access_key_id: String,
        secret_access_key: Secret<String>,
        session_token: Option<Secret<String>>,
    },
}

/// Which Bedrock API a deployment's requests go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BedrockApi {
    /// Converse / ConverseStream: one body for every model.
    #[default]
    Converse,
    /// InvokeModel / InvokeModelWithResponseStream with the Anthropic body.
    Invoke,
}

#[derive(Debug, Clone)]
pub struct ProviderKey {
    /// Where the key came from, for logs and `/admin/state` (`env:OPENAI_API_KEY` or `inline#0`).
    pub label: String,
    pub secret: Secret<String>,
    pub weight: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Duration,
    pub first_byte: Duration,
    pub total: Duration,
    pub stream_idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(5),
            first_byte: Duration::from_secs(30),
            total: Duration::from_secs(120),
            stream_idle: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    pub rpm: Option<u32>,
    pub tpm: Option<u64>,
    pub concurrency: Option<u32>,
    /// Waiting room when `concurrency` is reached; 0 = reject at once.
    pub queue: u32,
    pub queue_timeout: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Circuit {
    pub window: Duration,
    pub min_requests: u32,
    pub failure_rate: f64,
    pub consecutive_failures: u32,
    pub latency_p95: Option<Duration>,
    pub cooldown: Duration,
}

impl Default for Circuit {
    fn default() -> Self {
        Circuit {
            window: Duration::from_secs(60),
            min_requests: 20,
            failure_rate: 0.25,
            consecutive_failures: 5,
            latency_p95: None,
            cooldown: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    Tools,
    Vision,
    JsonSchema,
    Streaming,
    Embeddings,
    Prefill,
    Reasoning,
    /// The upstream serves the OpenAI Responses API (`/responses`) itself.
    Responses,
    /// A Gemini model that takes Google Search beside function
    /// declarations in one request (contract §9).
    SearchWithTools,
}

impl Capability {
    pub const ALL: [Capability; 9] = [
        Capability::Tools,
        Capability::Vision,
        Capability::JsonSchema,
        Capability::Streaming,
        Capability::Embeddings,
        Capability::Prefill,
        Capability::Reasoning,
        Capability::Responses,
        Capability::SearchWithTools,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Tools => "tools",
            Capability::Vision => "vision",
            Capability::JsonSchema => "json_schema",
            Capability::Streaming => "streaming",
            Capability::Embeddings => "embeddings",
            Capability::Prefill => "prefill",
            Capability::Reasoning => "reasoning",
            Capability::Responses => "responses",
            Capability::SearchWithTools => "search_with_tools",
        }
    }

    pub fn parse(s: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// A small set of capabilities (bit set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities(u16);

impl Capabilities {
    pub fn insert(&mut self, c: Capability) {
        self.0 |= 1 << c as u16;
    }
    pub fn contains(self, c: Capability) -> bool {
        self.0 & (1 << c as u16) != 0
    }
    pub fn contains_all(self, other: Capabilities) -> bool {
        self.0 & other.0 == other.0
    }
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::ALL
            .into_iter()
            .filter(move |c| self.contains(*c))
    }
}

impl FromIterator<Capability> for Capabilities {
    fn from_iter<I: IntoIterator<Item = Capability>>(iter: I) -> Self {
        let mut set = Capabilities::default();
        for c in iter {
            set.insert(c);
        }
        set
    }
}

/// A deployment: one upstream model on one provider.
#[derive(Debug, Clone)]
pub struct Deployment {
    /// `provider/model` as written in the config.
    pub id: String,
    pub provider: String,
    /// The model name the upstream knows.
    pub model: String,
    pub context_window: Option<u32>,
    pub max_output_tokens: Option<u32>,
    pub capabilities: Capabilities,
    pub pricing: Option<Pricing>,
    /// Where it runs (`models[].region`): preferred by instances whose
    /// `server.region` is the same.
    pub region: Option<String>,
    /// Bedrock only: Converse (default) or InvokeModel.
    pub api: BedrockApi,
    /// OpenAI-compatible flavors: whether earlier reasoning goes back.
    pub reasoning_replay: ReasoningReplay,
    /// `models[].limits`: this deployment's own bounds (its provider's
    /// `limits` bound all of its deployments together).
    pub limits: Limits,
}

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pricing {
    pub input: f64,
    pub output: f64,
    /// Defaults to `input` when absent.
    pub cached_input: Option<f64>,
    /// Prompt tokens written to the provider's cache (Anthropic's
    /// `cache_creation_input_tokens`); defaults to `input` when absent.
    pub cache_write: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Priority,
    Weighted,
    Latency,
    Cost,
    Balanced,
}

#[derive(Debug, Clone)]
pub struct Route {
    pub name: String,
    pub strategy: Strategy,
    /// Deployment ids in config order, each with its `weighted` weight (default 1).
    pub targets: Vec<Target>,
    pub weights: BalancedWeights,
    pub fallbacks: Vec<String>,
    pub require: Capabilities,
    pub max_cost_per_mtok: Option<f64>,
    pub retry: Retry,
    pub deadline: Option<Duration>,
    pub sticky: bool,
    /// `classify: true`: a request with no task from its header or a task
    /// rule gets the scene classifier's label (contract §11).
    pub classify: bool,
    pub on_context_overflow: ContextOverflow,
    pub on_stream_interrupt: StreamInterrupt,
    /// `contract:` — structured answers are checked against the schema the
    /// request gave (contract §11); `None`: they are not checked.
    pub contract: Option<Contract>,
    /// Scene routing: task name → preferred deployment ids (a score bonus, not a rule).
    pub tasks: BTreeMap<String, Vec<String>>,
    /// `shadow: { target, share }`: a share of the route's requests is also
    /// sent to another deployment, after the answer (contract §11).
    pub shadow: Option<RouteShadow>,
}

/// A route's shadow traffic: `share` (in (0, 1]) of its requests, drawn per
/// request, also go to deployment `target`.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteShadow {
    pub target: String,
    pub share: f64,
}

/// `shadow: { queue, workers }`: the bounded queue shadow requests wait in
/// (a full queue drops the newest) and the tasks that send them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShadowTraffic {
    pub queue: usize,
    pub workers: usize,
}

impl Default for ShadowTraffic {
    fn default() -> Self {
        ShadowTraffic {
            queue: 1024,
            workers: 4,
        }
    }
}

/// A route's response contract (contract §11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Contract {
    pub on_violation: OnViolation,
    /// Repairs asked of one deployment before the next is tried (`repair` only).
    pub repair_attempts: u32,
    pub stream: ContractStream,
}

/// What an answer that does not satisfy its schema gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnViolation {
    /// The same deployment is asked again with the validator's message,
    /// then the next candidate, then the error.
    Repair,
    /// The next candidate, then the error.
    Fallback,
    /// 502 `response_contract_violation` at once.
    Error,
    /// Counted and logged; the answer goes out as it is.
    Pass,
}

/// How a streaming request under a contract is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContractStream {
    /// The whole answer is fetched and checked before the client's stream
    /// begins (so it can still be repaired or fall back).
    Hold,
    /// The stream goes out as it comes and is checked at its end; a
    /// violation ends it with an error event.
    End,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub deployment: String,
    pub weight: u32,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BalancedWeights {
    pub health: f64,
    pub latency: f64,
    pub cost: f64,
}

impl Default for BalancedWeights {
    fn default() -> Self {
        BalancedWeights {
            health: 0.5,
            latency: 0.3,
            cost: 0.2,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Attempts on one deployment in all (1..=6).
    pub attempts: u32,
    pub base: Duration,
    pub max: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: 3,
            base: Duration::from_millis(500),
            max: Duration::from_secs(8),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextOverflow {
    Escalate,
    Reject,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamInterrupt {
    Resume,
    Error,
}

/// `task_rules:` entry: when a request's text matches, it gets `task`.
#[derive(Debug, Clone)]
pub struct TaskRule {
    pub task: String,
    /// Lower-cased keywords; any one matching is enough.
    pub keywords: Vec<String>,
    pub regex: Option<regex::Regex>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheBackend {
    Memory,
    Redis,
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheWhen {
    Deterministic,
    Always,
    Header,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cache {
    pub backend: CacheBackend,
    pub ttl: Duration,
    pub max_entries: u64,
    pub max_bytes: u64,
    pub when: CacheWhen,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateBackend {
    Memory,
    Redis,
}

/// `redis+sentinel://host:port[,host:port…]/service`: the Sentinels to ask
/// and the name of the master they watch.
pub fn sentinel_parts(url: &str) -> Option<(Vec<String>, String)> {
    let rest = url.strip_prefix("redis+sentinel://")?;
    let (hosts, service) = rest.split_once('/')?;
    let service = service.trim_end_matches('/');
    let hosts: Vec<String> = hosts
        .split(',')
        .filter(|h| !h.is_empty())
        .map(|h| format!("redis://{h}/"))
        .collect();
    (!hosts.is_empty() && !service.is_empty() && !service.contains('/'))
        .then(|| (hosts, service.to_owned()))
}

/// What a fleet member does while Redis is away (contract §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnUnavailable {
    /// Serve on this instance's own state, shared limits divided by the
    /// instances last seen.
    #[default]
    Local,
    /// 503 for requests that need the shared state.
    Reject,
}

#[derive(Debug, Clone, PartialEq)]
pub struct State {
    pub backend: StateBackend,
    pub redis_url: Option<String>,
    /// A Redis Cluster's nodes (instead of `redis_url`).
    pub cluster_urls: Option<Vec<String>>,
    pub key_prefix: String,
    pub on_unavailable: OnUnavailable,
}

#[derive(Debug, Clone)]
pub struct Usage {
    pub store: UsageBackend,
    /// Request rows older than this are deleted (daily rollups are kept).
    pub retention: Duration,
    /// How long stored Responses-API answers live.
    pub store_responses: Duration,
}

#[derive(Debug, Clone)]
pub enum UsageBackend {
    Off,
    Sqlite { path: String },
    Postgres { url: Secret<String> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Pretty,
}

/// `reload`: how the next config is rolled out and judged against the one
/// in force.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reload {
    /// `canary` (a percentage, kept as a share in (0, 1)): every new
    /// version of the config source (file change, SIGHUP, a reload with no
    /// `canary` of its own) serves this share of requests first. `None`:
    /// applied at once.
    pub canary: Option<f64>,
    /// `for`: how long a canary serves before it is promoted (default 10m).
    pub lasts: std::time::Duration,
    pub rollback_on: RollbackOn,
}

impl Default for Reload {
    fn default() -> Self {
        Reload {
            canary: None,
            lasts: std::time::Duration::from_secs(600),
            rollback_on: RollbackOn::default(),
        }
    }
}

/// A canary is rolled back at once when its error rate is over the old
/// config's by more than `error_rate` (a share of requests), or its p95
/// latency over the old one's times `p95`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RollbackOn {
    pub error_rate: f64,
    pub p95: f64,
}

impl Default for RollbackOn {
    fn default() -> Self {
        RollbackOn {
            error_rate: 0.05,
            p95: 1.5,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DebugBodies {
    Off,
    Header,
}

#[derive(Debug, Clone)]
pub struct Observability {
    pub log_format: LogFormat,
    pub log_requests: bool,
    /// OTLP trace export, off when `None`.
    pub otlp_endpoint: Option<String>,
    pub otlp_protocol: OtlpProtocol,
    /// Head sampling ratio, in [0, 1].
    pub trace_sample: f64,
    /// Tail rule: a request that took longer than this (a stream: until it
    /// ended) is exported whatever `trace_sample` said; off when `None`.
    /// Errors are exported whatever it says too (`observe::record`).
    pub trace_slow: Option<std::time::Duration>,
    pub debug_bodies: DebugBodies,
}

/// How spans go to the collector: OTLP over gRPC, or HTTP/protobuf on
/// `{otlp_endpoint}/v1/traces`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    Grpc,
    Http,
}

#[derive(Debug, Clone)]
pub struct Degraded {
    pub enabled: bool,
    pub message: String,
}
