//! The MCP proxy end to end: toolgate on loopback in front of the reference MCP servers from
//! the npm registry (`server-everything`, `server-memory`, `server-filesystem` on a temp dir,
//! started over stdio with node; `.ci/mcp-servers.sh` installs them), reached with the rmcp
//! client. Filtered lists per caller, allowed and refused calls in every name form, schema
//! checks both ways, ambiguous names, plugins on MCP tools, a killed backend restarted, a hung
//! call timed out, broken backends and malformed messages answered — never a hang.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::{ScriptedUpstream, TestGateway};
use http::{HeaderName, HeaderValue};
use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorData, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceError, ServiceExt};
use serde_json::{Value, json};
use toolgate::{PluginRegistry, Runtime};
use toolgate_plugin::{
    BuildContext, Check, Plugin, PluginFactory, Rejection, RequestEdit, RequestExchange,
    ResponseEdit, ResponseExchange, SettingsError, Verdict, Violation, async_trait,
};

/// Where `.ci/mcp-servers.sh` installs the reference servers.
fn servers_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".ci/mcp-servers/node_modules/@modelcontextprotocol");
    if dir.join("server-memory/dist/index.js").exists() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("TOOLGATE_REQUIRE_MCP_SERVERS").is_none(),
        "the reference MCP servers are missing from {}: run .ci/mcp-servers.sh",
        dir.display()
    );
    eprintln!(
        "\n!!!!! SKIPPED: the reference MCP servers are not installed ({}). Run .ci/mcp-servers.sh !!!!!\n",
        dir.display()
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

type Client = RunningService<RoleClient, ()>;

/// An rmcp client on the gateway's MCP route, with a tenant key and optional agent.
async fn connect(gateway: &TestGateway, key: &str, agent: Option<&str>) -> Client {
    try_connect(gateway, key, agent)
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
        health = gateway
            .admin_get("/health")
            .await
            .json()
            .await
            .expect("JSON");
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

async fn tool_names(client: &Client) -> Vec<String> {
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools/list answers")
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    names.sort();
    names
}

fn arguments(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        other => panic!("arguments must be an object, not {other}"),
    }
}

async fn call(client: &Client, name: &str, args: Value) -> Result<CallToolResult, ErrorData> {
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

async fn start(servers: &Path, files: &Path, extra: &str) -> (ScriptedUpstream, TestGateway) {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &standard_config(servers, files, extra)).await;
    wait_until_ready(&gateway, &["everything", "memory", "files"]).await;
    (upstream, gateway)
}

#[tokio::test]
async fn each_caller_lists_only_the_tools_its_policy_allows() {
    let Some(servers) = servers_dir() else { return };
    let files = temp_dir("lists");
    let (_upstream, gateway) = start(&servers, &files, "").await;

    let dev = connect(&gateway, "sk-dev", None).await;
    assert_eq!(
        tool_names(&dev).await,
        [
            "everything__echo",
            "everything__get-structured-content",
            "everything__get-sum",
            "everything__trigger-long-running-operation",
            "files__list_directory",
            "files__read_text_file",
            "files__write_file",
            "memory__create_entities",
            "memory__read_graph",
        ]
    );
    let reader = connect(&gateway, "sk-dev", Some("reader")).await;
    assert_eq!(
        tool_names(&reader).await,
        ["files__list_directory", "files__read_text_file"]
    );
    let ops = connect(&gateway, "sk-ops", None).await;
    let names = tool_names(&ops).await;
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(names.iter().all(|name| name.starts_with("everything__")));

    // Listed tools keep their backend's schema and description.
    let tools = dev.list_all_tools().await.expect("tools/list");
    let sum = tools
        .iter()
        .find(|tool| tool.name == "everything__get-sum")
        .expect("listed");
    assert!(sum.input_schema.contains_key("properties"), "{sum:?}");
}

#[tokio::test]
async fn allowed_calls_reach_the_backends_in_every_name_form() {
    let Some(servers) = servers_dir() else { return };
    let files = temp_dir("calls");
    std::fs::write(files.join("note.txt"), "hello from the temp dir").expect("write");
    let (_upstream, gateway) = start(&servers, &files, "").await;

    let dev = connect(&gateway, "sk-dev", None).await;
    let echoed = call(&dev, "everything__echo", json!({"message": "ping"}))
        .await
        .expect("allowed");
    assert!(text_of(&echoed).contains("ping"), "{echoed:?}");
    let sum = call(&dev, "everything:get-sum", json!({"a": 2, "b": 3}))
        .await
        .expect("the seed's server:tool form");
    assert!(text_of(&sum).contains('5'), "{sum:?}");

    // A bare name that exactly one permitted server has.
    let reader = connect(&gateway, "sk-dev", Some("reader")).await;
    let path = files.join("note.txt").display().to_string();
    let read = call(&reader, "read_text_file", json!({"path": path}))
        .await
        .expect("a bare name");
    assert!(
        text_of(&read).contains("hello from the temp dir"),
        "{read:?}"
    );

    // Memory keeps what one call wrote for the next.
    call(
        &dev,
        "memory__create_entities",
        json!({"entities": [{"name": "toolgate", "entityType": "proxy", "observations": ["filters MCP"]}]}),
    )
    .await
    .expect("allowed");
    let graph = call(&dev, "memory__read_graph", json!({}))
        .await
        .expect("allowed");
    assert!(text_of(&graph).contains("filters MCP"), "{graph:?}");

    // A result with structuredContent that satisfies its outputSchema passes.
    let weather = call(
        &dev,
        "everything__get-structured-content",
        json!({"location": "Chicago"}),
    )
    .await
    .expect("valid structured content");
    assert!(weather.structured_content.is_some(), "{weather:?}");
}

/// The `data` of a refusal: the 403 envelope's `error` object.
fn refusal_data(error: &ErrorData) -> &Value {
    error.data.as_ref().expect("a refusal carries data")
}

#[tokio::test]
async fn refused_calls_are_json_rpc_errors_with_the_violations() {
    let Some(servers) = servers_dir() else { return };
    let files = temp_dir("refused");
    let (_upstream, gateway) = start(&servers, &files, "").await;

    let reader = connect(&gateway, "sk-dev", Some("reader")).await;
    let path = files.join("x.txt").display().to_string();
    let error = call(
        &reader,
        "files__write_file",
        json!({"path": path, "content": "no"}),
    )
    .await
    .expect_err("write_file is not the reader's");
    assert_eq!(error.code.0, -32001);
    let data = refusal_data(&error);
    assert_eq!(data["type"], "tool_call_blocked");
    assert_eq!(data["code"], "tool_not_permitted");
    assert_eq!(data["violations"][0]["check"], "permission");
    assert!(data["request_id"].is_string(), "{data}");
    assert!(!files.join("x.txt").exists(), "nothing reached the backend");

    // Defence in depth: a server the caller cannot see at all, and a tool no one has.
    let ops = connect(&gateway, "sk-ops", None).await;
    let error = call(&ops, "memory__read_graph", json!({}))
        .await
        .expect_err("ops may not reach memory");
    assert_eq!(refusal_data(&error)["code"], "tool_not_permitted");
    let error = call(&ops, "no_such_tool", json!({}))
        .await
        .expect_err("unknown");
    assert_eq!(error.code.0, -32001);
    assert_eq!(refusal_data(&error)["code"], "unknown_tool");
    // Exposed tools are a ceiling: get-env exists on the backend but is not exposed.
    let error = call(&ops, "everything__get-env", json!({}))
        .await
        .expect_err("not exposed");
    assert_eq!(refusal_data(&error)["code"], "tool_not_permitted");

    // An agent the tenant does not hold is refused before MCP starts.
    let refused = try_connect(&gateway, "sk-ops", Some("reader")).await;
    assert!(refused.is_err(), "ops does not hold the agent 'reader'");
    let raw = reqwest::Client::new()
        .post(format!("{}/mcp", gateway.url()))
        .header("authorization", "Bearer sk-ops")
        .header("x-toolgate-agent", "reader")
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .expect("answers");
    assert_eq!(raw.status(), 403);
    let body: Value = raw.json().await.expect("JSON-RPC");
    assert_eq!(body["error"]["code"], -32005);
    assert_eq!(body["error"]["data"]["code"], "agent_not_held");
    let request_id = body["error"]["data"]["request_id"]
        .as_str()
        .expect("a request id")
        .to_owned();
    let line = gateway.audit_line(&request_id).await;
    assert_eq!(line["status"], 403);
    assert_eq!(line["tenant"], "ops");
    assert_eq!(line["refusal"], "agent_not_held");
    // No key at all.
    assert!(try_connect(&gateway, "sk-nobody", None).await.is_err());
}

#[tokio::test]
async fn arguments_are_checked_against_the_input_schema_before_forwarding() {
    let Some(servers) = servers_dir() else { return };
    let files = temp_dir("schema");
    let (_upstream, gateway) = start(&servers, &files, "").await;
    let dev = connect(&gateway, "sk-dev", None).await;

    let error = call(&dev, "everything__get-sum", json!({"a": "two"}))
        .await
        .expect_err("a is a number and b is required");
    assert_eq!(error.code.0, -32001);
    let violations = refusal_data(&error)["violations"]
        .as_array()
        .expect("violations")
        .clone();
    let paths: Vec<&str> = violations
        .iter()
        .map(|violation| violation["instance_path"].as_str().unwrap_or_default())
        .collect();
    assert!(
        paths.contains(&"/a") && paths.contains(&"/b"),
        "{violations:?}"
    );
    assert!(
        violations
            .iter()
            .all(|violation| violation["check"] == "schema")
    );
    assert_eq!(violations[0]["tool"], "everything__get-sum");

    let error = call(
        &dev,
        "everything__get-structured-content",
        json!({"location": "Atlantis"}),
    )
    .await
    .expect_err("not one of the enum");
    assert_eq!(refusal_data(&error)["violations"][0]["keyword"], "enum");
}

#[tokio::test]
async fn a_bare_name_two_servers_have_is_an_error_naming_both() {
    let Some(servers) = servers_dir() else { return };
    let files = temp_dir("ambiguous");
    let extra = format!(
        r#"
[mcp_servers.notes]
command = "node"
args = ["{}/server-memory/dist/index.js"]
env = {{ MEMORY_FILE_PATH = "{}/notes.jsonl" }}

[mcp.agent_policies.ops]
allowed_servers = ["memory", "notes"]

[mcp.default_policy]
allow_unknown_tools = true
"#,
        servers.display(),
        files.display()
    );
    // ops gets its own policy here: replace the standard one.
    let config = standard_config(&servers, &files, &extra).replace(
        "[mcp.agent_policies.ops]\nallowed_servers = [\"everything\"]\n",
        "",
    );
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &config).await;
    wait_until_ready(&gateway, &["memory", "notes"]).await;
    let ops = connect(&gateway, "sk-ops", None).await;
    let error = call(&ops, "read_graph", json!({}))
        .await
        .expect_err("two servers have read_graph");
    assert_eq!(error.code.0, -32602);
    assert!(
        error.message.contains("memory__read_graph") && error.message.contains("notes__read_graph"),
        "{}",
        error.message
    );
    assert_eq!(
        error.data.as_ref().expect("data")["candidates"],
        json!(["memory__read_graph", "notes__read_graph"])
    );
    // Qualified, each is fine.
    call(&ops, "notes__read_graph", json!({}))
        .await
        .expect("qualified");
}

/// A plugin a user could write: hides `everything__echo` from every list, and blocks a sum
/// whose first term is over 100 — knowing nothing about MCP.
struct LimitSums;

#[async_trait]
impl Plugin for LimitSums {
    fn name(&self) -> &str {
        "limit_sums"
    }
    async fn pre_request(&self, _exchange: &RequestExchange<'_>) -> Verdict<RequestEdit> {
        Verdict::Modify(vec![RequestEdit::RemoveDeclaredTools(vec![
            "everything__echo".into(),
        ])])
    }
    async fn pre_response(&self, exchange: &ResponseExchange<'_>) -> Verdict<ResponseEdit> {
        let Some(response) = exchange.response.as_parsed() else {
            return Verdict::Continue;
        };
        let violations: Vec<Violation> = response
            .calls
            .iter()
            .filter(|call| call.name == "everything__get-sum")
            .filter(|call| {
                serde_json::from_str::<Value>(&call.arguments)
                    .ok()
                    .and_then(|arguments| arguments["a"].as_f64())
                    .is_some_and(|a| a > 100.0)
            })
            .map(|call| {
                Violation::on_call(Check::Rule, "sum_too_large", call, "a must be at most 100")
            })
            .collect();
        if violations.is_empty() {
            Verdict::Continue
        } else {
            Verdict::Block(Rejection::forbidden(violations))
        }
    }
}

struct LimitSumsFactory;

impl PluginFactory for LimitSumsFactory {
    fn name(&self) -> &'static str {
        "limit_sums"
    }
    fn build(
        &self,
        _settings: &Value,
        _context: &BuildContext,
    ) -> Result<Arc<dyn Plugin>, SettingsError> {
        Ok(Arc::new(LimitSums))
    }
}

#[tokio::test]
async fn the_route_plugins_govern_mcp_tools_by_qualified_name() {
    let Some(servers) = servers_dir() else { return };
    let files = temp_dir("plugins");
    let extra = "[[routes.plugins]]\nname = \"limit_sums\"\n[[routes.plugins]]\nname = \"tool_selection\"\n";
    let upstream = ScriptedUpstream::start().await;
    let runtime = Runtime::with_plugins(|registry| {
        PluginRegistry::builtin(registry).with(Arc::new(LimitSumsFactory))
    });
    let gateway = TestGateway::start_with(
        &upstream,
        &standard_config(&servers, &files, extra),
        runtime,
    )
    .await;
    wait_until_ready(&gateway, &["everything", "memory", "files"]).await;
    let dev = connect(&gateway, "sk-dev", None).await;

    let names = tool_names(&dev).await;
    assert!(!names.contains(&"everything__echo".to_owned()), "{names:?}");
    assert!(
        names.contains(&"everything__get-sum".to_owned()),
        "{names:?}"
    );

    let error = call(&dev, "everything__echo", json!({"message": "hi"}))
        .await
        .expect_err("hidden by a plugin, so not callable");
    assert_eq!(refusal_data(&error)["code"], "tool_not_permitted");

    call(&dev, "everything__get-sum", json!({"a": 1, "b": 2}))
        .await
        .expect("a small sum");
    let error = call(&dev, "everything__get-sum", json!({"a": 1000, "b": 2}))
        .await
        .expect_err("the plugin's rule");
    assert_eq!(error.code.0, -32001);
    let data = refusal_data(&error);
    assert_eq!(data["violations"][0]["check"], "rule");
    assert_eq!(data["violations"][0]["code"], "sum_too_large");

    // The audit line of the refused call names the tool, the server and the verdict.
    let request_id = data["request_id"].as_str().expect("request id").to_owned();
    let line = gateway.audit_line(&request_id).await;
    let line = if line["mcp"]["method"] == "tools/call" {
        line
    } else {
        gateway
            .audit_lines()
            .into_iter()
            .find(|line| line["request_id"] == request_id && line["mcp"]["method"] == "tools/call")
            .expect("a tools/call line")
    };
    assert_eq!(line["verdict"], "blocked");
    assert_eq!(line["tenant"], "dev");
    assert_eq!(line["mcp"]["server"], "everything");
    assert_eq!(line["calls"][0]["name"], "everything__get-sum");
    assert_eq!(line["violations"][0]["code"], "sum_too_large");
    let metrics = gateway.metrics_text().await;
    assert!(
        metrics.contains(
            r#"toolgate_mcp_calls_total{route="/mcp",server="everything",outcome="blocked"} 2"#
        ),
        "{metrics}"
    );
}

/// A client that counts `notifications/tools/list_changed`.
#[derive(Clone, Default)]
struct ListWatcher(Arc<AtomicUsize>);

impl rmcp::ClientHandler for ListWatcher {
    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_killed_backend_is_restarted_and_a_hung_call_times_out() {
    let Some(servers) = servers_dir() else { return };
    let files = temp_dir("restart");
    let (_upstream, gateway) = start(&servers, &files, "").await;
    let dev = connect(&gateway, "sk-dev", None).await;
    let watcher = ListWatcher::default();
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", gateway.url()))
        .auth_header("sk-dev");
    let watching = watcher
        .clone()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("a second session");
    assert!(!tool_names_of(&watching).await.is_empty());

    let error = call(
        &dev,
        "everything__trigger-long-running-operation",
        json!({"duration": 30, "steps": 3}),
    )
    .await
    .expect_err("slower than call_timeout_ms");
    assert_eq!(error.code.0, -32003, "{error:?}");
    // The proxy and the backend still answer.
    call(&dev, "everything__echo", json!({"message": "still here"}))
        .await
        .expect("alive");

    let health = wait_until_ready(&gateway, &["memory"]).await;
    let pid = health["mcp_servers"]["memory"]["pid"]
        .as_u64()
        .expect("a stdio backend has a pid");
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());

    // Until it is back, calls get a clear error, never a hang; then it answers again.
    let mut restarted = None;
    for _ in 0..300 {
        let health: Value = gateway
            .admin_get("/health")
            .await
            .json()
            .await
            .expect("JSON");
        let memory = &health["mcp_servers"]["memory"];
        if memory["state"] == "ready" && memory["pid"].as_u64() != Some(pid) {
            restarted = Some(memory.clone());
            break;
        }
        if let Err(error) = call(&dev, "memory__read_graph", json!({})).await {
            assert!([-32002, -32001].contains(&error.code.0), "{error:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let restarted = restarted.expect("memory came back with a new process");
    assert!(restarted["restarts"].as_u64() >= Some(1), "{restarted}");
    call(&dev, "memory__read_graph", json!({}))
        .await
        .expect("answers after its restart");
    // Open sessions were told their tools changed (memory's went away, then came back).
    for _ in 0..100 {
        if watcher.0.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        watcher.0.load(Ordering::SeqCst) > 0,
        "no tools/list_changed arrived"
    );
}

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

#[tokio::test]
async fn broken_backends_get_errors_never_a_hang() {
    let Some(servers) = servers_dir() else { return };
    let files = temp_dir("broken");
    let extra = r#"
[mcp_servers.silent]
command = "sh"
args = ["-c", "cat > /dev/null"]
startup_timeout_ms = 300

[mcp_servers.garbage]
command = "sh"
args = ["-c", "read line; echo 'this is not JSON-RPC'; echo '{\"jsonrpc\": 7}'; sleep 30"]
startup_timeout_ms = 300

[mcp.agent_policies.ops]
allowed_servers = ["silent", "garbage", "everything"]
"#;
    let config = standard_config(&servers, &files, extra).replace(
        "[mcp.agent_policies.ops]\nallowed_servers = [\"everything\"]\n",
        "",
    ) + "\n[mcp.default_policy]\nallow_unknown_tools = true\n";
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &config).await;
    wait_until_ready(&gateway, &["everything"]).await;
    let ops = connect(&gateway, "sk-ops", None).await;
    for server in ["silent", "garbage"] {
        let error = call(&ops, &format!("{server}__anything"), json!({}))
            .await
            .expect_err("not available");
        assert_eq!(error.code.0, -32002, "{server}: {error:?}");
    }
    let mut health = Value::Null;
    for _ in 0..100 {
        health = gateway
            .admin_get("/health")
            .await
            .json()
            .await
            .expect("JSON");
        if ["silent", "garbage"]
            .iter()
            .all(|server| health["mcp_servers"][server]["last_error"].is_string())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for server in ["silent", "garbage"] {
        assert_ne!(health["mcp_servers"][server]["state"], "ready", "{health}");
        assert!(
            health["mcp_servers"][server]["last_error"].is_string(),
            "{health}"
        );
    }
    // The good backend is untouched.
    call(&ops, "everything__echo", json!({"message": "fine"}))
        .await
        .expect("the healthy backend answers");
}

#[tokio::test]
async fn results_that_break_their_output_schema_or_are_garbage_are_errors() {
    let Some(servers) = servers_dir() else { return };
    let files = temp_dir("liar");
    let liar = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/mcp/liar.js");
    let extra = format!(
        r#"
[mcp_servers.liar]
command = "node"
args = ["{}"]
call_timeout_ms = 1500

[mcp.agent_policies.ops]
allowed_servers = ["liar"]

[mcp.default_policy]
allow_unknown_tools = true
"#,
        liar.display()
    );
    let config = standard_config(&servers, &files, &extra).replace(
        "[mcp.agent_policies.ops]\nallowed_servers = [\"everything\"]\n",
        "",
    );
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &config).await;
    wait_until_ready(&gateway, &["liar", "everything"]).await;
    let ops = connect(&gateway, "sk-ops", None).await;

    let error = call(&ops, "liar__lie", json!({}))
        .await
        .expect_err("the result breaks the outputSchema");
    assert_eq!(error.code.0, -32004, "{error:?}");
    let data = refusal_data(&error);
    assert_eq!(data["violations"][0]["code"], "output_schema_violation");
    assert_eq!(data["violations"][0]["instance_path"], "/n");
    assert!(
        error.message.starts_with("the tool's result was withheld"),
        "{}",
        error.message
    );

    let error = call(&ops, "liar__babble", json!({}))
        .await
        .expect_err("garbage is no answer");
    // rmcp skips a line that is not JSON-RPC, so the call runs into its timeout.
    assert_eq!(error.code.0, -32003, "{error:?}");
    // The proxy is still there for everyone else.
    let dev = connect(&gateway, "sk-dev", None).await;
    call(&dev, "everything__echo", json!({"message": "fine"}))
        .await
        .expect("unaffected");
}

/// Sends raw bytes to the MCP route and returns the status and the JSON-RPC answer.
async fn raw_post(
    gateway: &TestGateway,
    body: impl Into<reqwest::Body>,
    session: Option<&str>,
) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{}/mcp", gateway.url()))
        .header("authorization", "Bearer sk-dev")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let response = request.body(body).send().await.expect("answers");
    let status = response.status().as_u16();
    let text = response.text().await.expect("a body");
    // An SSE answer carries the JSON-RPC message in its data line.
    let json_text = text
        .lines()
        .find_map(|line| {
            line.strip_prefix("data:")
                .map(str::trim)
                .filter(|data| data.starts_with('{'))
        })
        .unwrap_or(text.as_str())
        .to_owned();
    let value = serde_json::from_str(&json_text)
        .unwrap_or_else(|_| panic!("not JSON-RPC ({status}): {text}"));
    (status, value)
}

#[tokio::test]
async fn malformed_messages_unknown_methods_and_oversized_ones_get_json_rpc_errors() {
    let Some(servers) = servers_dir() else { return };
    let files = temp_dir("malformed");
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start_tuned(
        &upstream,
        "max_request_body_bytes = 4096",
        &standard_config(&servers, &files, ""),
    )
    .await;
    wait_until_ready(&gateway, &["everything"]).await;

    let (status, answer) = raw_post(&gateway, "{not json", None).await;
    assert_eq!(status, 400);
    assert_eq!(answer["error"]["code"], -32700);

    let (status, answer) = raw_post(
        &gateway,
        format!("{{\"pad\":\"{}\"}}", "x".repeat(5000)),
        None,
    )
    .await;
    assert_eq!(status, 413);
    assert_eq!(answer["error"]["code"], -32600);
    assert_eq!(answer["error"]["data"]["code"], "message_too_large");

    // A session, then an unknown method and a message that is not JSON-RPC at all.
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let response = reqwest::Client::new()
        .post(format!("{}/mcp", gateway.url()))
        .header("authorization", "Bearer sk-dev")
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), 200);
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .expect("a session id")
        .to_owned();
    let _ = response.text().await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let _ = raw_post_status(&gateway, &initialized, &session).await;

    let (_, answer) = raw_post(
        &gateway,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/frobnicate"}).to_string(),
        Some(&session),
    )
    .await;
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    assert_eq!(answer["id"], 2);

    let (status, answer) = raw_post(
        &gateway,
        json!({"hello": "world"}).to_string(),
        Some(&session),
    )
    .await;
    assert!(status >= 400, "{status} {answer}");
    assert!(answer["error"]["code"].is_i64(), "{answer}");

    // tools/call without a name: rmcp reads a request whose params fit no known method as an
    // unknown method (-32601), not invalid params; either way an error for that id.
    let (_, answer) = raw_post(
        &gateway,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {}}).to_string(),
        Some(&session),
    )
    .await;
    assert_eq!(answer["id"], 3, "{answer}");
    assert!(
        [-32601, -32602].contains(&answer["error"]["code"].as_i64().unwrap_or_default()),
        "{answer}"
    );

    // A session toolgate never issued.
    let (status, answer) = raw_post(
        &gateway,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}).to_string(),
        Some("no-such-session"),
    )
    .await;
    assert!(status >= 400, "{status} {answer}");
    assert!(answer["error"]["code"].is_i64(), "{answer}");
}

async fn raw_post_status(gateway: &TestGateway, body: &Value, session: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{}/mcp", gateway.url()))
        .header("authorization", "Bearer sk-dev")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .json(body)
        .send()
        .await
        .expect("answers")
        .status()
        .as_u16()
}

#[tokio::test]
async fn a_streamable_http_backend_is_proxied_like_a_stdio_one() {
    let Some(servers) = servers_dir() else { return };
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.local_addr().expect("bound").port()
    };
    let mut backend = tokio::process::Command::new("node")
        .arg(servers.join("server-everything/dist/index.js"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node starts");
    let config = format!(
        r#"
[tenants.ops]
api_keys = ["sk-ops"]

[mcp_servers.remote]
url = "http://127.0.0.1:{port}/mcp"
headers = {{ x-test = "yes" }}
exposed_tools = ["echo", "get-sum"]

[mcp.agent_policies.ops]
allowed_servers = ["remote"]

[[routes]]
path = "/mcp"
kind = "mcp"
"#
    );
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &config).await;
    let health = wait_until_ready(&gateway, &["remote"]).await;
    assert_eq!(health["mcp_servers"]["remote"]["transport"], "http");
    let ops = connect(&gateway, "sk-ops", None).await;
    assert_eq!(tool_names(&ops).await, ["remote__echo", "remote__get-sum"]);
    let sum = call(&ops, "remote__get-sum", json!({"a": 20, "b": 22}))
        .await
        .expect("through HTTP");
    assert!(text_of(&sum).contains("42"), "{sum:?}");
    let _ = backend.kill().await;
}

#[test]
fn mcp_config_mistakes_are_located_and_all_reported() {
    let plugins = PluginRegistry::empty();
    let text = "[tenants.dev]\napi_keys = [\"k\"]\n\n\
                [mcp_servers.both]\ncommand = \"node\"\nurl = \"http://127.0.0.1:1/mcp\"\n\n\
                [mcp_servers.neither]\nexposed_tools = [\"\"]\n\n\
                [mcp_servers.\"bad__name\"]\ncommand = \"x\"\nheaders = { a = \"b\" }\n\n\
                [mcp_servers.web]\nurl = \"ftp://example.com\"\n\n\
                [mcp_servers.ok]\ncommand = \"x\"\ncall_timeout_ms = 0\ncolour = \"red\"\n";
    let errors = match toolgate::Config::from_toml(text, "m.toml", &plugins) {
        Ok(_) => panic!("an unknown key is refused"),
        Err(errors) => errors.to_string(),
    };
    assert!(
        errors.contains("m.toml:21:1: mcp_servers.ok.colour"),
        "{errors}"
    );

    let text = "[tenants.dev]\napi_keys = [\"k\"]\nagents = [\"reader\"]\n\n\
                [mcp_servers.both]\ncommand = \"node\"\nurl = \"http://127.0.0.1:1/mcp\"\n\n\
                [mcp_servers.neither]\nexposed_tools = [\"\"]\n\n\
                [mcp_servers.\"bad__name\"]\ncommand = \"x\"\nheaders = { a = \"b\" }\n\n\
                [mcp_servers.web]\nurl = \"ftp://example.com\"\n\n\
                [mcp_servers.ok]\ncommand = \"x\"\ncall_timeout_ms = 0\n\n\
                [mcp.agent_policies.stranger]\nallowed_servers = [\"ok\", \"nowhere\"]\n\n\
                [mcp.agent_policies.reader]\nallowed_servers = [\"ok\"]\ntool_overrides = { web = [\"x\"] }\n\n\
                [[routes]]\npath = \"/mcp\"\nkind = \"mcp\"\nupstream = \"llm\"\n\n\
                [[routes]]\npath = \"/other\"\nkind = \"tools\"\n";
    let errors = match toolgate::Config::from_toml(text, "m.toml", &plugins) {
        Ok(_) => panic!("the config is wrong in many places"),
        Err(errors) => errors.to_string(),
    };
    for expected in [
        "m.toml:7:1: mcp_servers.both.url: set either command",
        "mcp_servers.neither: an MCP server needs command",
        "mcp_servers.neither.exposed_tools[0]: a tool name must not be empty",
        "mcp_servers.bad__name: a server name must not contain '__'",
        "mcp_servers.bad__name.headers: headers are for url servers",
        "mcp_servers.web.url: 'ftp://example.com' is not an http(s) URL",
        "mcp_servers.ok.call_timeout_ms: must be greater than 0",
        "mcp.agent_policies.stranger: 'stranger' is neither a tenant nor an agent",
        "mcp.agent_policies.stranger.allowed_servers[1]: unknown MCP server 'nowhere'",
        "mcp.agent_policies.reader.tool_overrides.web: 'web' is not in this policy's allowed_servers",
        "routes[0].upstream: an MCP route has no upstream",
        "routes[1].kind: unknown kind 'tools' (one of: llm, mcp)",
    ] {
        assert!(
            errors.contains(expected),
            "missing «{expected}» in:\n{errors}"
        );
    }
}

#[test]
fn the_commented_mcp_example_in_gateway_toml_loads_once_uncommented() {
    let shipped = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/gateway.toml"))
        .expect("gateway.toml");
    let (head, example) = shipped
        .split_once("# MCP proxy (README \"MCP proxy\")")
        .expect("the MCP example is in gateway.toml");
    let uncommented: Vec<&str> = example
        .lines()
        .skip_while(|line| !line.starts_with("# [[routes]]"))
        .take_while(|line| line.starts_with('#'))
        .map(|line| line.strip_prefix("# ").unwrap_or(""))
        .collect();
    let text = format!("{head}\n{}\n", uncommented.join("\n"))
        // Secrets stay `${VAR}` without a default in the example, so a missing one is an error.
        .replace("${CLAUDE_DEV_KEY}", "sk-example")
        .replace("${GITHUB_TOKEN}", "ghp-example");
    assert!(text.contains("\nkind = \"mcp\""), "{text}");
    let config = match toolgate::Config::from_toml(&text, "gateway.toml", &Runtime::new().plugins) {
        Ok(config) => config,
        Err(errors) => panic!("the uncommented MCP example does not load:\n{errors}"),
    };
    assert_eq!(config.mcp.servers.len(), 2);
    assert_eq!(config.mcp.policy.agents.len(), 2);
}
