//! `gateway.toml`: the file format (with `${VAR}` expansion and unknown keys refused), and its
//! loading into the runtime [`Config`] the gateway serves from. Every error names the file, the
//! line and column, and the offending key.

mod build;
mod env;
mod jwt;
pub(crate) mod mcp;
mod recover;
mod services;
mod source;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

pub use build::PluginRegistry;
pub use source::{ConfigError, ConfigErrors};

use toolgate_plugin::ToolCatalog;

use crate::pipeline::Mode;
use crate::router::Router;
use crate::telemetry::{AuditOutput, Metrics, RouteSeries};
use crate::tenants::TenantDirectory;

/// The gateway's configuration, validated and with every plugin built.
pub struct Config {
    pub server: ServerConfig,
    pub router: Router,
    pub audit: AuditOutput,
    /// `[audit] capture…`: which exchanges' bodies are kept, and where.
    pub capture: crate::capture::CaptureSettings,
    /// `[tools.NAME]`, shared with every plugin built from this configuration.
    pub catalog: Arc<ToolCatalog>,
    pub tenants: TenantDirectory,
    /// `[mcp_servers]` and `[mcp]`: the backends of MCP routes and who may use them.
    pub mcp: mcp::McpConfig,
    /// `[store]`: the state store the plugins count in, and what they do when it is down
    /// (`/ready` and `/health` report it; start-up checks it).
    pub store: Arc<dyn toolgate_plugin::StateStore>,
    pub store_fail_mode: toolgate_plugin::StoreFailMode,
    /// Where the configuration came from, for logs.
    pub origin: String,
}

impl Config {
    /// Makes the series a dashboard reads exist at zero for every route of this configuration
    /// (telemetry knows no routes: it is told what each does). Called at start and after each
    /// reload.
    pub fn prime_metrics(&self, metrics: &Metrics) {
        metrics.prime_gateway();
        for route in self.router.routes() {
            let series = if let crate::router::RouteKind::Mcp = route.kind {
                RouteSeries::Mcp {
                    servers: self.mcp.servers.keys().map(String::as_str).collect(),
                }
            } else if route.chain.body_needs().response {
                RouteSeries::Checked {
                    plugins: (route.chain.entries().iter())
                        .map(|entry| {
                            let retries =
                                matches!(entry.on_block, crate::on_block::OnBlock::Retry(_));
                            (entry.mode.as_str(), retries)
                        })
                        .collect(),
                }
            } else {
                RouteSeries::Unread
            };
            metrics.prime_route(&route.path, series);
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub admin_listen: Option<SocketAddr>,
    /// `admin_token`: what the console, its APIs and `/captures` ask for (and `/metrics` with
    /// `protect_metrics`); without it they answer only on a loopback admin listener.
    pub admin_token: Option<String>,
    pub protect_metrics: bool,
    pub max_request_body_bytes: usize,
    pub max_response_body_bytes: usize,
    /// How long in-flight requests may take to finish after a shutdown signal.
    pub shutdown_grace: Duration,
    /// How long a client may take to send its request head.
    pub header_read_timeout: Duration,
    /// The longest silence while reading a client's request body.
    pub request_body_timeout: Duration,
    /// The longest a client may take to send its whole request body; `None`: no bound.
    pub request_body_deadline: Option<Duration>,
    /// Connections served at once. At the cap, the connection idle the longest is closed for a
    /// new one; when none is idle, new clients wait in the listen backlog.
    pub max_connections: usize,
    /// How long a new connection may stay silent before its first byte.
    pub first_byte_timeout: Duration,
    /// How long a new connection may take to deliver its first request head: protocol
    /// detection, the HTTP/2 preface and settings, the first request's headers.
    pub handshake_timeout: Duration,
    /// How long a connection may stay open with no exchange in flight and nothing to write.
    pub idle_timeout: Duration,
    /// The longest a client may accept no bytes of an answer being written: then its
    /// connection is closed and the exchange behind it dropped, its upstream call with it.
    pub write_timeout: Duration,
    /// How often an HTTP/2 client is pinged, and how long its acknowledgement may take.
    pub http2_keep_alive_interval: Duration,
    pub http2_keep_alive_timeout: Duration,
}

impl Config {
    /// Reads and loads a configuration file.
    pub fn from_file(path: &Path, plugins: &PluginRegistry) -> Result<Config, ConfigErrors> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| {
            ConfigErrors(vec![ConfigError {
                origin: origin.clone(),
                line_column: None,
                key: None,
                message: format!("cannot read the file: {error}"),
            }])
        })?;
        Config::from_toml(&text, &origin, plugins)
    }

    /// Asks the state store whether it answers, once, before serving. A store that refuses
    /// us (a wrong password or ACL user, a certificate not trusted) is an error, so a bad
    /// credential stops the start instead of failing the first request. A store that is only
    /// unreachable is logged: it may come up later, and `/ready` says whether traffic can be
    /// served meanwhile.
    pub async fn check_store(&self) -> Result<(), String> {
        let store = self.store.describe();
        match self.store.check().await {
            Ok(()) => {
                tracing::info!(%store, "the state store answers");
                Ok(())
            }
            Err(error) if error.is_refused() => Err(format!(
                "the state store refused the connection ({}); check [store] url (user, password) and ca_file",
                error.message()
            )),
            Err(error) => {
                tracing::warn!(%store, error = %error.message(), fail_mode = ?self.store_fail_mode, "the state store does not answer yet");
                Ok(())
            }
        }
    }

    /// Loads a configuration from its text; `origin` names it in errors.
    pub fn from_toml(
        text: &str,
        origin: &str,
        plugins: &PluginRegistry,
    ) -> Result<Config, ConfigErrors> {
        let source = source::Source { origin, text };
        let mut reading = recover::read(&source);
        let Some(raw) = reading.raw.take() else {
            return Err(ConfigErrors(reading.errors));
        };
        match build::build(raw, &source, plugins) {
            Ok(config) if reading.errors.is_empty() => Ok(config),
            Ok(_) => Err(ConfigErrors(reading.errors)),
            Err(ConfigErrors(more)) => {
                // What the taken-out values' absence caused is their echo, not news.
                let news: Vec<ConfigError> = more
                    .into_iter()
                    .filter(|error| !reading.concerns_removed(error))
                    .collect();
                Err(ConfigErrors(
                    reading.errors.into_iter().chain(news).collect(),
                ))
            }
        }
    }
}

// The file format. Strings that may carry `${VAR}` are `EnvString`, expanded as they are read
// so an unset variable is reported at its own line and column.

/// Every table may be left out: serde takes it from `Default`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawConfig {
    pub server: RawServer,
    pub upstreams: BTreeMap<String, RawUpstream>,
    pub plugins: Vec<RawPluginEntry>,
    pub routes: Vec<RawRoute>,
    pub audit: RawAudit,
    /// `[tools.NAME]`: the tool catalog.
    pub tools: BTreeMap<String, RawTool>,
    /// `[tenants.NAME]`: the clients that authenticate to toolgate.
    pub tenants: BTreeMap<String, RawTenant>,
    /// `[access_levels.NAME]`: redefines a built-in access level or adds one.
    pub access_levels: BTreeMap<String, RawAccessLevel>,
    /// `[store]`: where shared state (budget counters) lives.
    pub store: RawStore,
    /// `[services.NAME]`: validator services that `service` plugin instances call.
    pub services: BTreeMap<String, RawService>,
    /// `[mcp_servers.NAME]`: the MCP servers behind `kind = "mcp"` routes.
    pub mcp_servers: BTreeMap<String, RawMcpServer>,
    /// `[mcp]`: who may see and call which MCP server's tools.
    pub mcp: RawMcp,
    /// `[auth]`: ways besides API keys to identify a tenant.
    pub auth: RawAuth,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAuth {
    /// `[auth.jwt]`: tenants identified by JWTs signed by a JWKS's keys.
    #[serde(default)]
    pub jwt: Option<RawJwt>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawJwt {
    /// The JWKS document, relative to the configuration file's folder.
    #[serde(default)]
    pub jwks_file: Option<EnvString>,
    /// Or a URL the JWKS is fetched from (https; http only on loopback).
    #[serde(default)]
    pub jwks_url: Option<EnvString>,
    /// How often the JWKS URL is fetched again.
    #[serde(default = "default_jwks_refresh_secs")]
    pub jwks_refresh_secs: u64,
    /// Every token must carry this `aud`.
    pub audience: EnvString,
    /// When set, every token must carry this `iss`.
    #[serde(default)]
    pub issuer: Option<EnvString>,
    /// Clock skew allowed on `exp` and `nbf`.
    #[serde(default = "default_jwt_leeway_secs")]
    pub leeway_secs: u64,
    #[serde(default = "default_tenant_claim")]
    pub tenant_claim: String,
    #[serde(default)]
    pub groups_claim: Option<String>,
    #[serde(default)]
    pub access_level_claim: Option<String>,
}

fn default_jwt_leeway_secs() -> u64 {
    30
}
fn default_jwks_refresh_secs() -> u64 {
    300
}
fn default_tenant_claim() -> String {
    "tenant".to_owned()
}

/// `[services.NAME]`: where a validator service lives and what its instances must configure.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawService {
    pub url: EnvString,
    #[serde(default = "default_service_timeout_ms")]
    pub timeout_ms: u64,
    /// Seed 002's name; `config_params` is accepted too.
    #[serde(default, rename = "config-params", alias = "config_params")]
    pub config_params: Vec<RawConfigParam>,
    /// Sent with every call; values expand `${VAR}`.
    #[serde(default)]
    pub headers: BTreeMap<String, EnvString>,
    /// Sent as `Authorization: Bearer …`.
    #[serde(default)]
    pub bearer_token: Option<EnvString>,
    /// Consecutive failures that open the circuit breaker.
    #[serde(default = "default_breaker_failures")]
    pub breaker_failures: u32,
    /// How long the breaker stays open before a probe call.
    #[serde(default = "default_breaker_cool_down_ms")]
    pub breaker_cool_down_ms: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAccessLevel {
    pub categories: Vec<String>,
    /// For people reading the file; toolgate does not use it.
    #[serde(default)]
    #[allow(dead_code)]
    pub description: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMcpServer {
    /// A program started by toolgate, spoken to over stdio.
    #[serde(default)]
    pub command: Option<EnvString>,
    #[serde(default)]
    pub args: Vec<EnvString>,
    #[serde(default)]
    pub env: BTreeMap<String, EnvString>,
    /// The program's working directory.
    #[serde(default)]
    pub cwd: Option<EnvString>,
    /// A Streamable HTTP server.
    #[serde(default)]
    pub url: Option<EnvString>,
    #[serde(default)]
    pub headers: BTreeMap<String, EnvString>,
    /// The tools of this server anyone may see (a ceiling for every agent policy).
    #[serde(default)]
    pub exposed_tools: Option<Vec<String>>,
    /// Tools of this server a person must confirm, call by call, before it is forwarded.
    #[serde(default)]
    pub require_confirmation: Vec<String>,
    #[serde(default = "default_mcp_call_timeout_ms")]
    pub call_timeout_ms: u64,
    #[serde(default = "default_mcp_startup_timeout_ms")]
    pub startup_timeout_ms: u64,
}

fn default_mcp_call_timeout_ms() -> u64 {
    60_000
}
fn default_mcp_startup_timeout_ms() -> u64 {
    30_000
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawMcp {
    pub default_policy: RawMcpDefaultPolicy,
    /// Keyed by a tenant's name or an agent a tenant may assert.
    pub agent_policies: BTreeMap<String, RawAgentPolicy>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawMcpDefaultPolicy {
    pub allow_unknown_tools: bool,
    pub allow_unknown_servers: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawAgentPolicy {
    pub allowed_servers: Option<Vec<String>>,
    pub tool_overrides: BTreeMap<String, Vec<String>>,
    /// Tools, by server, this caller's calls to which a person must confirm.
    pub require_confirmation: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawStore {
    /// `redis://[[user]:password@]host:port[/db]`, `rediss://…` for TLS; absent = in memory,
    /// per process.
    pub url: Option<EnvString>,
    /// A PEM CA certificate that a `rediss://` server's certificate must chain to, instead of
    /// the system's roots (relative to the configuration file's folder).
    pub ca_file: Option<EnvString>,
    /// `block` (default: 503 `state_store_unavailable`) or `allow`.
    pub fail_mode: Option<String>,
    /// The longest wait for one answer of the store (default 500 ms).
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfigParam {
    pub name: String,
    #[serde(default)]
    pub required: bool,
}

fn default_service_timeout_ms() -> u64 {
    1_000
}
fn default_breaker_failures() -> u32 {
    toolgate_plugin::BreakerSettings::default().failure_threshold
}
fn default_breaker_cool_down_ms() -> u64 {
    toolgate_plugin::BreakerSettings::default()
        .cool_down
        .as_millis()
        .try_into()
        .unwrap_or(u64::MAX)
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawTool {
    /// `group` is seed 000's own spelling.
    #[serde(alias = "group")]
    pub groups: Option<Vec<String>>,
    /// The state a successful call moves the conversation to.
    pub state: Option<String>,
    #[serde(alias = "applicable-states")]
    pub available_in_states: Option<Vec<String>>,
    pub category: Option<String>,
    /// `category:action`.
    pub action: Option<String>,
    pub description: Option<String>,
    /// Progressive disclosure's index line for the tool (docs/disclosure.md).
    pub short_description: Option<String>,
    pub cost_tier: Option<toolgate_plugin::CostTier>,
    /// Shown with the tool's full body when the model loads it.
    pub examples: Vec<toml::Value>,
    pub failure_modes: Vec<String>,
    /// Documents the model may fetch by id, each read from a file.
    pub resources: Vec<RawToolResource>,
}

/// `[[tools.NAME.resources]]`: one document about a tool.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawToolResource {
    pub id: String,
    /// Relative to the configuration file's folder.
    pub file: String,
    /// Guessed from the file's extension when not given.
    #[serde(default)]
    pub content_type: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawTenant {
    /// Keys in the clear, normally `${VAR}` so they stay out of the file.
    pub api_keys: Vec<EnvString>,
    /// Keys as lowercase hex SHA-256 digests (`printf %s "$KEY" | sha256sum`).
    pub api_key_sha256: Vec<String>,
    pub groups: Vec<String>,
    pub access_level: Option<String>,
    pub allowed_tools: Vec<String>,
    pub denied_tools: Vec<String>,
    /// Agent identities the tenant may assert with `x-toolgate-agent`.
    pub agents: Vec<String>,
    /// The tenant's own key for an upstream, by upstream name: sent instead of the upstream's
    /// `api_key` on the tenant's requests.
    pub upstream_keys: BTreeMap<String, EnvString>,
}

#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawServer {
    pub listen: EnvString,
    pub admin_listen: Option<EnvString>,
    pub admin_token: Option<EnvString>,
    pub protect_metrics: bool,
    pub max_request_body_bytes: usize,
    pub max_response_body_bytes: usize,
    pub shutdown_grace_ms: u64,
    pub header_read_timeout_ms: u64,
    pub request_body_timeout_ms: u64,
    /// 0: no total deadline for a request body (the silence timeout still applies).
    pub request_body_deadline_ms: u64,
    pub max_connections: usize,
    pub first_byte_timeout_ms: u64,
    pub handshake_timeout_ms: u64,
    pub idle_timeout_ms: u64,
    pub write_timeout_ms: u64,
    pub http2_keep_alive_interval_ms: u64,
    pub http2_keep_alive_timeout_ms: u64,
}

impl Default for RawServer {
    /// Every `[server]` default in one place: serde takes a key the config leaves out from here.
    fn default() -> Self {
        RawServer {
            listen: EnvString("127.0.0.1:8080".into()),
            admin_listen: Some(EnvString("127.0.0.1:9090".into())),
            admin_token: None,
            protect_metrics: false,
            max_request_body_bytes: 16 * 1024 * 1024,
            max_response_body_bytes: 64 * 1024 * 1024,
            shutdown_grace_ms: 30_000,
            header_read_timeout_ms: 30_000,
            request_body_timeout_ms: 60_000,
            request_body_deadline_ms: 300_000,
            max_connections: 10_000,
            first_byte_timeout_ms: 10_000,
            handshake_timeout_ms: 30_000,
            idle_timeout_ms: 120_000,
            write_timeout_ms: 60_000,
            http2_keep_alive_interval_ms: 30_000,
            http2_keep_alive_timeout_ms: 10_000,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawUpstream {
    pub url: EnvString,
    #[serde(default)]
    pub api_key: Option<EnvString>,
    /// `bearer`, `x-api-key`, `api-key` or a header name; default: what the route's format's
    /// API expects (Anthropic: `x-api-key`, others: bearer).
    #[serde(default)]
    pub auth: Option<String>,
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// Until the response head arrives.
    #[serde(default = "default_response_timeout_ms")]
    pub response_timeout_ms: u64,
    /// Longest silence between two pieces of a response body.
    #[serde(default = "default_read_timeout_ms")]
    pub read_timeout_ms: u64,
}

fn default_connect_timeout_ms() -> u64 {
    10_000
}
fn default_response_timeout_ms() -> u64 {
    300_000
}
fn default_read_timeout_ms() -> u64 {
    300_000
}

/// What a block of this entry does to the exchange (`on_block`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnBlockMode {
    /// The 403 with the violations.
    Error,
    /// The violations go back to the model as the blocked calls' results; it is asked again.
    Retry,
    /// A 200 whose assistant text says what was blocked.
    Message,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPluginEntry {
    pub name: String,
    /// Names this entry within a chain when one plugin appears more than once (several `service`
    /// instances); a route's entry overrides the gateway-wide entry with the same id. Default:
    /// the plugin's name.
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub enabled: Option<bool>,
    #[serde(default)]
    pub mode: Option<Mode>,
    #[serde(default)]
    pub priority: Option<i32>,
    /// `error` (default), `retry` or `message`: what a 403 block of this entry does.
    #[serde(default)]
    pub on_block: Option<OnBlockMode>,
    /// With `on_block = "retry"`: how many times the model is asked again (default 2).
    #[serde(default)]
    pub max_retries: Option<u32>,
    /// With `on_block = "retry"`: no new attempt starts this long after the request came.
    #[serde(default)]
    pub retry_deadline_ms: Option<u64>,
    /// With `on_block = "retry"` or `"message"`: a streamed answer's text is held until its
    /// calls are checked, so a block can still be retried or answered with a message.
    #[serde(default)]
    pub hold_text: Option<bool>,
    #[serde(default)]
    pub settings: Option<toml::Table>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRoute {
    pub path: String,
    /// `llm` (default): a reverse proxy to `upstream`; `mcp`: toolgate's MCP endpoint in front
    /// of `[mcp_servers]`.
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub upstream: Option<String>,
    /// `auto` (default), `chat_completions`, `responses` or `anthropic_messages`.
    #[serde(default)]
    pub format: Option<String>,
    #[serde(default)]
    pub plugins: Vec<RawPluginEntry>,
    /// `tenant` (a tenant's key is required) or `none`; default `tenant` when tenants exist.
    #[serde(default)]
    pub auth: Option<String>,
    /// `block` (default) or `pass`: what a guarded answer toolgate cannot read unambiguously gets.
    #[serde(default)]
    pub unreadable_answers: Option<String>,
    /// `refuse` (default), `log` or `pass`: what an answer carrying tool calls gets on a route
    /// that runs no plugin.
    #[serde(default)]
    pub unguarded_calls: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawAudit {
    /// `stdout` (default), `stderr`, `off`, or a file path to append to.
    pub output: Option<EnvString>,
    /// `off` (default), `blocked` or `all`.
    pub capture: Option<String>,
    pub capture_ring_mib: Option<u64>,
    pub capture_dir: Option<EnvString>,
    pub capture_dir_mib: Option<u64>,
}

/// A string expanded from the environment as it is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EnvString(pub String);

impl<'de> Deserialize<'de> for EnvString {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        env::expand(&text)
            .map(EnvString)
            .map_err(serde::de::Error::custom)
    }
}

/// Converts a settings table to JSON, expanding `${VAR}` in every string. Errors carry the
/// dotted path of the offending string inside the table.
/// The settings of the first `tool_selection` entry (gateway-wide first, then each route's)
/// that turns the judge on, `${VAR}` expanded, for `toolgate judge-eval`. The file is assumed
/// to have loaded (`Config::from_file`); `Err` says why it cannot be read again.
pub fn judge_settings(path: &Path) -> Result<Option<serde_json::Value>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let origin = path.display().to_string();
    let source = source::Source {
        origin: &origin,
        text: &text,
    };
    let Some(raw) = recover::read(&source).raw else {
        return Err(format!("{origin} does not load"));
    };
    let entries = raw
        .plugins
        .iter()
        .chain(raw.routes.iter().flat_map(|route| route.plugins.iter()));
    for entry in entries {
        if entry.name != "tool_selection" || entry.enabled == Some(false) {
            continue;
        }
        let Some(settings) = &entry.settings else {
            continue;
        };
        if !settings.contains_key("openai_api_key") {
            continue;
        }
        let json =
            settings_to_json(settings).map_err(|(key, message)| format!("{key}: {message}"))?;
        return Ok(Some(json));
    }
    Ok(None)
}

pub(crate) fn settings_to_json(table: &toml::Table) -> Result<serde_json::Value, (String, String)> {
    fn convert(value: &toml::Value, path: &str) -> Result<serde_json::Value, (String, String)> {
        Ok(match value {
            toml::Value::String(text) => serde_json::Value::String(
                env::expand(text).map_err(|message| (path.to_owned(), message))?,
            ),
            toml::Value::Integer(number) => serde_json::Value::from(*number),
            toml::Value::Float(number) => serde_json::Number::from_f64(*number)
                .map(serde_json::Value::Number)
                .ok_or_else(|| (path.to_owned(), "a number that is not finite".to_owned()))?,
            toml::Value::Boolean(flag) => serde_json::Value::Bool(*flag),
            toml::Value::Datetime(datetime) => serde_json::Value::String(datetime.to_string()),
            toml::Value::Array(items) => serde_json::Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| convert(item, &format!("{path}[{index}]")))
                    .collect::<Result<_, _>>()?,
            ),
            toml::Value::Table(table) => serde_json::Value::Object(
                table
                    .iter()
                    .map(|(key, item)| {
                        let nested = if path.is_empty() {
                            key.clone()
                        } else {
                            format!("{path}.{key}")
                        };
                        Ok::<_, (String, String)>((key.clone(), convert(item, &nested)?))
                    })
                    .collect::<Result<_, _>>()?,
            ),
        })
    }
    convert(&toml::Value::Table(table.clone()), "")
}
