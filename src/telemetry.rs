//! What toolgate tells its operators: Prometheus metrics, and one JSON audit line per decided
//! exchange. Audit lines are written by one task from a bounded channel; a full channel makes
//! requests wait rather than drop a line, because an audit trail with holes is worth little.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::exponential_buckets;
use prometheus_client::registry::Registry;
use serde::Serialize;
use tokio::sync::mpsc;
use toolgate_plugin::{DeclaredToolsCache, ToolCall, Violation, prometheus_client, registered};

mod shards;

use shards::{ShardedCounter, ShardedHistogram};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: Arc<str>,
    status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: Arc<str>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BlockLabels {
    route: String,
    check: String,
    mode: String,
}

/// A route's handles on its request metrics, each taken from its family the first time it is
/// needed: an exchange then records without hashing the route's label set under the family's
/// lock. Only the usual status has one; the others take the family's way. A handle shares its
/// series with the family, so a reloaded route, which starts with none, counts on. The metrics
/// every exchange records are sharded per thread ([`shards`]): the workers share nothing there.
#[derive(Default)]
pub struct RouteMetrics {
    ok: OnceLock<ShardedCounter>,
    duration: OnceLock<ShardedHistogram>,
    added: OnceLock<ShardedHistogram>,
    checked: OnceLock<ShardedCounter>,
}

/// What a route does, as far as the series primed for it go ([`Metrics::prime_route`]): the
/// routes are the configuration's, which tells telemetry rather than being read by it.
pub enum RouteSeries<'a> {
    /// A route whose answers are not read: requests and latency only.
    Unread,
    /// An MCP route: its calls to each backend server.
    Mcp { servers: Vec<&'a str> },
    /// A route whose plugins read answers: each plugin's mode label, and whether it retries.
    Checked { plugins: Vec<(&'static str, bool)> },
}

/// The gateway's own metrics (plugins register theirs through their factories).
pub struct Metrics {
    requests: Family<RequestLabels, ShardedCounter>,
    tool_calls_checked: Family<RouteLabels, ShardedCounter>,
    tool_calls_blocked: Family<BlockLabels, Counter>,
    request_duration: Family<RouteLabels, ShardedHistogram>,
    added: Family<RouteLabels, ShardedHistogram>,
    reloads: Family<ReloadLabels, Counter>,
    mcp_calls: Family<McpCallLabels, Counter>,
    block_retries: Family<RetryLabels, Counter>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RetryLabels {
    route: String,
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct McpCallLabels {
    route: String,
    server: String,
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    result: String,
}

/// Makes the declared-tools cache's hits and misses part of `/metrics`, read at each scrape from
/// the cache's own counts (the formats crate knows nothing of Prometheus).
pub fn register_declared_tools_cache(registry: &mut Registry, cache: Arc<DeclaredToolsCache>) {
    registry.register_collector(Box::new(DeclaredToolsCacheCounts(cache)));
}

#[derive(Debug)]
struct DeclaredToolsCacheCounts(Arc<DeclaredToolsCache>);

impl Collector for DeclaredToolsCacheCounts {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for (name, help, count) in [
            (
                "toolgate_declared_tools_cache_hits",
                "Requests whose declared tools came from the cache (the same tools array as before)",
                self.0.hits(),
            ),
            (
                "toolgate_declared_tools_cache_misses",
                "Requests whose tools array was read (new, changed, or evicted)",
                self.0.misses(),
            ),
        ] {
            let counter = ConstCounter::new(count);
            counter.encode(encoder.encode_descriptor(
                name,
                help,
                None,
                counter.metric_type(),
            )?)?;
        }
        Ok(())
    }
}

/// A latency histogram's 20 buckets, each twice the one before, from `first` seconds: wide
/// enough for a local hop and a slow upstream alike.
fn doubling_buckets(first: f64) -> impl Iterator<Item = f64> {
    exponential_buckets(first, 2.0, 20)
}

impl Metrics {
    pub fn new(registry: &mut Registry) -> Self {
        Metrics {
            requests: registered(
                registry,
                "toolgate_requests",
                "Requests answered, by route and status",
                Family::default(),
            ),
            tool_calls_checked: registered(
                registry,
                "toolgate_tool_calls_checked",
                "Tool calls inspected by the route's plugins",
                Family::default(),
            ),
            tool_calls_blocked: registered(
                registry,
                "toolgate_tool_calls_blocked",
                "Violations found, by check and mode (observe: recorded, not blocked)",
                Family::default(),
            ),
            request_duration: registered(
                registry,
                "toolgate_request_duration_seconds",
                "Time from request to response head, by route",
                Family::new_with_constructor(|| ShardedHistogram::new(doubling_buckets(0.0005))),
            ),
            added: registered(
                registry,
                "toolgate_added_seconds",
                "Time toolgate added to an exchange: its whole time less the upstream's, by route",
                Family::new_with_constructor(|| ShardedHistogram::new(doubling_buckets(0.00005))),
            ),
            reloads: registered(
                registry,
                "toolgate_config_reloads",
                "Configuration reloads, by result (ok: applied; error: refused, old one kept)",
                Family::default(),
            ),
            mcp_calls: registered(
                registry,
                "toolgate_mcp_calls",
                "MCP tools/call requests, by route, backend server and outcome (ok, tool_error, blocked, invalid_result, unavailable, timeout, cancelled, failed)",
                Family::default(),
            ),
            block_retries: registered(
                registry,
                "toolgate_block_retries",
                "Blocked answers sent back to the model (on_block = retry), by route and outcome (passed, blocked, failed)",
                Family::default(),
            ),
        }
    }

    pub fn record_block_retry(&self, route: &str, outcome: &str) {
        self.block_retries
            .get_or_create(&RetryLabels {
                route: route.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    pub fn record_mcp_call(&self, route: &str, server: &str, outcome: &str) {
        self.mcp_calls
            .get_or_create(&McpCallLabels {
                route: route.to_owned(),
                server: server.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    pub fn record_reload(&self, applied: bool) {
        let result = if applied { "ok" } else { "error" };
        self.reloads
            .get_or_create(&ReloadLabels {
                result: result.to_owned(),
            })
            .inc();
    }

    /// A request no route took (`route` is empty): the families' way, as no route holds handles.
    pub fn record_request(&self, route: &Arc<str>, status: u16, elapsed: Duration) {
        let handles = RouteMetrics::default();
        self.record_route_request(route, &handles, status, elapsed, Duration::ZERO);
    }

    /// A route's exchange, recorded through the route's own handles where it has them;
    /// `upstream` is the part of `elapsed` spent waiting on the upstream.
    pub fn record_route_request(
        &self,
        route: &Arc<str>,
        handles: &RouteMetrics,
        status: u16,
        elapsed: Duration,
        upstream: Duration,
    ) {
        let counter = match status {
            200 => handles
                .ok
                .get_or_init(|| self.request_counter(route, status)),
            _ => &self.request_counter(route, status),
        };
        counter.inc();
        handles
            .duration
            .get_or_init(|| {
                self.request_duration
                    .get_or_create(&RouteLabels {
                        route: route.clone(),
                    })
                    .clone()
            })
            .observe(elapsed.as_secs_f64());
        handles
            .added
            .get_or_init(|| {
                self.added
                    .get_or_create(&RouteLabels {
                        route: route.clone(),
                    })
                    .clone()
            })
            .observe(elapsed.saturating_sub(upstream).as_secs_f64());
    }

    fn request_counter(&self, route: &Arc<str>, status: u16) -> ShardedCounter {
        self.requests
            .get_or_create(&RequestLabels {
                route: route.clone(),
                status,
            })
            .clone()
    }

    pub fn record_checked(&self, route: &Arc<str>, handles: &RouteMetrics, calls: usize) {
        if calls > 0 {
            handles
                .checked
                .get_or_init(|| {
                    self.tool_calls_checked
                        .get_or_create(&RouteLabels {
                            route: route.clone(),
                        })
                        .clone()
                })
                .inc_by(calls as u64);
        }
    }

    /// Makes the gateway-wide series a dashboard reads exist at zero before anything happens: a
    /// panel shows 0, and an alert's expression has a series to compare, rather than "no data".
    /// Series already counting are left as they are (here and in [`Metrics::prime_route`]).
    pub fn prime_gateway(&self) {
        for result in ["ok", "error"] {
            self.reloads.get_or_create_owned(&ReloadLabels {
                result: result.to_owned(),
            });
        }
    }

    /// Makes one route's series exist at zero: its requests and latency, and what `series` says
    /// the route does. Called for each route at start and after each reload.
    pub fn prime_route(&self, route: &Arc<str>, series: RouteSeries<'_>) {
        self.requests.get_or_create_owned(&RequestLabels {
            route: route.clone(),
            status: 200,
        });
        self.request_duration.get_or_create_owned(&RouteLabels {
            route: route.clone(),
        });
        self.added.get_or_create_owned(&RouteLabels {
            route: route.clone(),
        });
        match series {
            RouteSeries::Unread => {}
            RouteSeries::Mcp { servers } => {
                for server in servers {
                    self.mcp_calls.get_or_create_owned(&McpCallLabels {
                        route: route.to_string(),
                        server: server.to_owned(),
                        outcome: "ok".to_owned(),
                    });
                }
            }
            RouteSeries::Checked { plugins } => {
                self.tool_calls_checked.get_or_create_owned(&RouteLabels {
                    route: route.clone(),
                });
                for (mode, retries) in plugins {
                    for check in BUILT_IN_CHECKS {
                        self.tool_calls_blocked.get_or_create_owned(&BlockLabels {
                            route: route.to_string(),
                            check: check.as_str().to_owned(),
                            mode: mode.to_owned(),
                        });
                    }
                    if retries {
                        for outcome in ["passed", "blocked", "failed"] {
                            self.block_retries.get_or_create_owned(&RetryLabels {
                                route: route.to_string(),
                                outcome: outcome.to_owned(),
                            });
                        }
                    }
                }
            }
        }
    }

    pub fn record_violations<'a>(
        &self,
        route: &str,
        mode: &str,
        violations: impl IntoIterator<Item = &'a Violation>,
    ) {
        for violation in violations {
            self.tool_calls_blocked
                .get_or_create(&BlockLabels {
                    route: route.to_owned(),
                    check: violation.check.as_str().to_owned(),
                    mode: mode.to_owned(),
                })
                .inc();
        }
    }
}

/// The checks toolgate's own plugins report, each primed at zero on every guarded route.
const BUILT_IN_CHECKS: [toolgate_plugin::Check; 11] = [
    toolgate_plugin::Check::Membership,
    toolgate_plugin::Check::Schema,
    toolgate_plugin::Check::Arguments,
    toolgate_plugin::Check::Semantic,
    toolgate_plugin::Check::Permission,
    toolgate_plugin::Check::Group,
    toolgate_plugin::Check::State,
    toolgate_plugin::Check::Budget,
    toolgate_plugin::Check::Rule,
    toolgate_plugin::Check::Parse,
    toolgate_plugin::Check::Service,
];

/// Where audit lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditOutput {
    Stdout,
    Stderr,
    Off,
    /// Appended to; created if missing.
    File(PathBuf),
}

/// How long the audit writer lets lines gather after it wakes for one.
const AUDIT_GATHER: Duration = Duration::from_millis(2);

/// The handle requests use to write audit lines.
#[derive(Clone)]
pub struct AuditLog {
    sender: Option<mpsc::Sender<String>>,
}

impl AuditLog {
    /// Opens the output and starts the writer task.
    pub fn start(output: &AuditOutput) -> std::io::Result<AuditLog> {
        let mut writer: Box<dyn Write + Send> = match output {
            AuditOutput::Off => return Ok(AuditLog { sender: None }),
            AuditOutput::Stdout => Box::new(std::io::stdout()),
            AuditOutput::Stderr => Box::new(std::io::stderr()),
            AuditOutput::File(path) => Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            ),
        };
        let (sender, mut receiver) = mpsc::channel::<String>(4096);
        // Blocking writes belong on a blocking thread, not on the runtime's workers.
        tokio::task::spawn_blocking(move || {
            while let Some(line) = receiver.blocking_recv() {
                let mut batch = line;
                batch.push('\n');
                while let Ok(more) = receiver.try_recv() {
                    batch.push_str(&more);
                    batch.push('\n');
                }
                if let Err(error) = writer
                    .write_all(batch.as_bytes())
                    .and_then(|()| writer.flush())
                {
                    tracing::error!(%error, "cannot write the audit log");
                }
                // Waking this thread costs the worker that sends a line a futex call and a
                // context switch: lines gather for a moment after each write, so under load one
                // wake writes many. A lone line is written at once; the next waits this long
                // at most.
                std::thread::sleep(AUDIT_GATHER);
            }
        });
        Ok(AuditLog {
            sender: Some(sender),
        })
    }

    /// False when audit is off, so callers can skip building records nobody reads.
    pub fn is_enabled(&self) -> bool {
        self.sender.is_some()
    }

    pub async fn write(&self, record: &AuditRecord) {
        match serde_json::to_string(record) {
            Ok(line) => self.write_line(line, &record.request_id).await,
            Err(error) => tracing::error!(%error, "cannot serialize an audit record"),
        }
    }

    /// Writes a record already serialized (the console's ring keeps the same text).
    pub async fn write_line(&self, line: String, request_id: &str) {
        let Some(sender) = &self.sender else { return };
        if sender.send(line).await.is_err() {
            tracing::error!(%request_id, "the audit writer has stopped; a line was lost");
        }
    }
}

/// The verdict an audit line reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditVerdict {
    Allowed,
    Blocked,
    /// A plugin in observe mode would have blocked; the exchange went through.
    Observed,
    /// The exchange failed before a verdict (upstream error, bad request).
    Error,
}

impl AuditVerdict {
    /// As the audit line spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditVerdict::Allowed => "allowed",
            AuditVerdict::Blocked => "blocked",
            AuditVerdict::Observed => "observed",
            AuditVerdict::Error => "error",
        }
    }
}

impl Serialize for AuditVerdict {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One audit line. Carries names, ids and findings — never headers, keys or message bodies.
#[derive(Debug, Clone, Serialize)]
pub struct AuditRecord {
    pub timestamp: String,
    pub request_id: String,
    pub route: String,
    pub method: String,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub status: u16,
    pub verdict: AuditVerdict,
    pub streamed: bool,
    pub plugins: Vec<String>,
    pub declared_tools: Vec<String>,
    pub calls: Vec<AuditCall>,
    pub violations: Vec<Violation>,
    /// Violations that observe-mode plugins recorded without blocking.
    pub observed: Vec<Violation>,
    pub timings_ms: Timings,
    /// Fields plugins added (`requested_groups`, `initial_state`, …), at the top level.
    #[serde(flatten)]
    pub annotations: serde_json::Map<String, serde_json::Value>,
    /// On MCP routes: the JSON-RPC method and what became of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpAudit>,
    /// With `on_block = "retry"`: every attempt and what blocked it, the last one included
    /// (empty violations: it passed). Absent when the first answer was final.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<crate::on_block::AttemptRecord>,
}

/// What an audit line of an MCP exchange adds.
#[derive(Debug, Clone, Serialize)]
pub struct McpAudit {
    /// `tools/list` or `tools/call`.
    pub method: &'static str,
    /// The backend server a call went (or would have gone) to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The JSON-RPC error code the caller got, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<i32>,
    /// The backend's result flagged `isError` (passed through as it is).
    pub tool_error: bool,
    /// How a `tools/call` ended, for `toolgate_mcp_calls_total{outcome}`.
    #[serde(skip)]
    pub outcome: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct AuditCall {
    pub choice: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
}

impl From<&ToolCall> for AuditCall {
    fn from(call: &ToolCall) -> Self {
        AuditCall {
            choice: call.choice,
            id: call.id.clone(),
            name: call.name.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Timings {
    pub total: f64,
    pub upstream: f64,
    pub checks: f64,
}

pub fn millis(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e6).round() / 1e3
}

pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// A registry's text as a scrape reads it, for the tests of the metrics.
#[cfg(test)]
fn exposition(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).expect("encodes");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_routes_handles_count_in_the_familys_series_and_a_reloaded_route_counts_on() {
        let mut registry = Registry::default();
        let metrics = Metrics::new(&mut registry);
        let route: Arc<str> = Arc::from("/v1");
        let before_reload = RouteMetrics::default();
        let after_reload = RouteMetrics::default();
        let elapsed = Duration::from_millis(3);
        metrics.record_route_request(&route, &before_reload, 200, elapsed, Duration::ZERO);
        metrics.record_route_request(&route, &before_reload, 502, elapsed, Duration::ZERO);
        metrics.record_route_request(&route, &after_reload, 200, elapsed, Duration::ZERO);
        metrics.record_request(&route, 200, elapsed);
        let text = exposition(&registry);
        assert!(
            text.contains(r#"toolgate_requests_total{route="/v1",status="200"} 3"#),
            "{text}"
        );
        assert!(
            text.contains(r#"toolgate_requests_total{route="/v1",status="502"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"toolgate_request_duration_seconds_count{route="/v1"} 4"#),
            "{text}"
        );
    }
}
