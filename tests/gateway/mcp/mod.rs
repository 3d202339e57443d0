//! The MCP proxy end to end: toolgate on loopback in front of the reference MCP servers from
//! the npm registry (`server-everything`, `server-memory`, `server-filesystem` on a temp dir,
//! started over stdio with node; `.ci/mcp-servers.sh` installs them), reached with the rmcp
//! client. This module is the harness the files below share: the servers, the standard config
//! (three tenants and their policies), a client per caller, and calls read as JSON-RPC answers.

mod access;
mod backends;
mod checks;
mod config;
mod confirmation;
mod effects;
mod protocol;
mod relay;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::{ScriptedUpstream, TestGateway};
use http::{HeaderName, HeaderValue};
use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorData, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceError, ServiceExt};
use serde_json::Value;

/// What an MCP client accepts on a POST: a JSON answer or an SSE stream of them.
const ACCEPT_MCP: &str = "application/json, text/event-stream";

/// Where `.ci/mcp-servers.sh` installs the reference servers.
fn servers_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".ci/mcp-servers/node_modules/@modelcontextprotocol");
    if dir.join("server-memory/dist/index.js").exists() {
        return Some(dir);
    }
    crate::common::skip_for_missing(
        &format!("the reference MCP servers ({})", dir.display()),
        "run .ci/mcp-servers.sh",
    );
    None
}

/// A fresh, empty directory for one test, removed when the test ends.
struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(name: &str) -> TempDir {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "toolgate-mcp-{name}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temp dir");
    TempDir(dir)
}

/// Three tenants: `dev` (who may also assert the agent `reader`), `ops`, and the servers.
fn standard_config(servers: &Path, files: &Path, extra: &str) -> String {
    let servers = servers.display();
    let files = files.display();
    format!(
        r#"
[tenants.dev]
api_keys = ["sk-dev"]
agents = ["reader"]
[tenants.ops]
api_keys = ["sk-ops"]

[mcp_servers.everything]
command = "node"
args = ["{servers}/server-everything/dist/index.js", "stdio"]
exposed_tools = ["echo", "get-sum", "get-structured-content", "trigger-long-running-operation"]
call_timeout_ms = 1500

[mcp_servers.memory]
command = "node"
args = ["{servers}/server-memory/dist/index.js"]
env = {{ MEMORY_FILE_PATH = "{files}/memory.jsonl" }}

[mcp_servers.files]
command = "node"
args = ["{servers}/server-filesystem/dist/index.js", "{files}"]
exposed_tools = ["read_text_file", "write_file", "list_directory"]

[mcp.agent_policies.dev]
allowed_servers = ["everything", "memory", "files"]
tool_overrides = {{ memory = ["read_graph", "create_entities"] }}

[mcp.agent_policies.reader]
allowed_servers = ["files"]
tool_overrides = {{ files = ["read_text_file", "list_directory"] }}

[mcp.agent_policies.ops]
allowed_servers = ["everything"]

[[routes]]
path = "/mcp"
kind = "mcp"
{extra}
"#
    )
}

/// [`standard_config`] where `extra` gives `ops` a policy of its own: the standard one is taken
/// out, since a second `[mcp.agent_policies.ops]` would not load.
fn config_with_own_ops_policy(servers: &Path, files: &Path, extra: &str) -> String {
    standard_config(servers, files, extra).replace(
        "[mcp.agent_policies.ops]\nallowed_servers = [\"everything\"]\n",
        "",
    )
}

type Client = RunningService<RoleClient, ()>;

/// An rmcp client on the gateway's MCP route, with a tenant key and optional agent.
async fn connect(gateway: &TestGateway, key: &str, agent: Option<&str>) -> Client {
    try_connect(gateway, key, agent)
        .await
        .unwrap_or_else(|error| panic!("MCP initialize through toolgate failed: {error}"))
}

/// [`connect`] with a handler of the test's own (to hear notifications), without an agent.
async fn connect_with<H: rmcp::ClientHandler>(
    gateway: &TestGateway,
    key: &str,
    handler: H,
) -> RunningService<RoleClient, H> {
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", gateway.url()))
        .auth_header(key);
    handler
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap_or_else(|error| panic!("MCP initialize through toolgate failed: {error}"))
}

async fn try_connect(
    gateway: &TestGateway,
    key: &str,
    agent: Option<&str>,
) -> Result<Client, String> {
    let mut headers = HashMap::new();
    if let Some(agent) = agent {
        headers.insert(
            HeaderName::from_static("x-toolgate-agent"),
            HeaderValue::from_str(agent).expect("a header value"),
        );
    }
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", gateway.url()))
        .auth_header(key)
        .custom_headers(headers);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .map_err(|error| error.to_string())
}

/// Waits (bounded) until every backend reports ready on `/health`.
async fn wait_until_ready(gateway: &TestGateway, servers: &[&str]) -> Value {
    let mut health = Value::Null;
    for _ in 0..300 {
        health = gateway.admin_json("/health").await;
        if servers
            .iter()
            .all(|server| health["mcp_servers"][server]["state"] == "ready")
        {
            return health;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("backends not ready: {health}");
}

/// Kills `server`'s stdio process (its pid as `health` reports it) with SIGKILL; returns the pid.
fn kill_backend(health: &Value, server: &str) -> u64 {
    let pid = health["mcp_servers"][server]["pid"]
        .as_u64()
        .expect("a stdio backend has a pid");
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    pid
}

/// The tools a client is listed, in the order listed.
async fn tool_names_of<S: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
) -> Vec<String> {
    client
        .list_all_tools()
        .await
        .expect("tools/list answers")
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect()
}

/// The tools a client is listed, sorted.
async fn tool_names(client: &Client) -> Vec<String> {
    let mut names = tool_names_of(client).await;
    names.sort();
    names
}

fn arguments(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        other => panic!("arguments must be an object, not {other}"),
    }
}

/// Calls a tool; any client, whatever its handler, derefs to the peer this takes.
async fn call(
    client: &rmcp::Peer<RoleClient>,
    name: &str,
    args: Value,
) -> Result<CallToolResult, ErrorData> {
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments(args));
    match client.call_tool(params).await {
        Ok(result) => Ok(result),
        Err(ServiceError::McpError(error)) => Err(error),
        Err(other) => panic!("{name}: not a JSON-RPC answer: {other}"),
    }
}

fn text_of(result: &CallToolResult) -> String {
    serde_json::to_value(&result.content)
        .expect("content serializes")
        .to_string()
}

/// The `data` of a refusal: the 403 envelope's `error` object.
fn refusal_data(error: &ErrorData) -> &Value {
    error.data.as_ref().expect("a refusal carries data")
}

/// Asserts a refused call: JSON-RPC error `-32001` whose data has the refusal `code`; returns
/// the data for the test's further checks.
fn assert_refused<'e>(error: &'e ErrorData, code: &str) -> &'e Value {
    assert_eq!(error.code.0, -32001);
    let data = refusal_data(error);
    assert_eq!(data["code"], code);
    data
}

/// A gateway from `config`, once the backends `ready` report ready.
async fn start_config(config: &str, ready: &[&str]) -> (ScriptedUpstream, TestGateway) {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, config).await;
    wait_until_ready(&gateway, ready).await;
    (upstream, gateway)
}

/// The reference servers behind a gateway on [`standard_config`], with a fresh files directory
/// named after the test, once the backends are ready; `None` (the test skips) when the servers
/// are not installed. The directory is returned because dropping it removes it.
async fn start_standard(name: &str) -> Option<(TempDir, ScriptedUpstream, TestGateway)> {
    let servers = servers_dir()?;
    let files = temp_dir(name);
    let (upstream, gateway) = start(&servers, &files, "").await;
    Some((files, upstream, gateway))
}

/// [`start_standard`] with `extra` in the route and one more plugin, built by `factory`, for
/// the tests of plugins a user could write.
async fn start_standard_with_plugin(
    name: &str,
    extra: &str,
    factory: std::sync::Arc<dyn toolgate_plugin::PluginFactory>,
) -> Option<(TempDir, ScriptedUpstream, TestGateway)> {
    let servers = servers_dir()?;
    let files = temp_dir(name);
    let upstream = ScriptedUpstream::start().await;
    let runtime = toolgate::Runtime::with_plugins(move |registry| {
        toolgate::PluginRegistry::builtin(registry).with(factory)
    });
    let config = standard_config(&servers, &files, extra);
    let gateway = TestGateway::start_with(&upstream, &config, runtime).await;
    wait_until_ready(&gateway, &["everything", "memory", "files"]).await;
    Some((files, upstream, gateway))
}

/// A gateway on [`standard_config`] with `extra`, once its three backends are ready.
async fn start(servers: &Path, files: &Path, extra: &str) -> (ScriptedUpstream, TestGateway) {
    start_config(
        &standard_config(servers, files, extra),
        &["everything", "memory", "files"],
    )
    .await
}
