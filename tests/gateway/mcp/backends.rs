//! MCP backends that fail, and backends of the other transport: a killed stdio backend is
//! restarted (calls meanwhile get a clear error, open sessions hear its tools changed), a hung
//! call times out, backends that never start or speak garbage get errors — never a hang — while
//! the healthy ones answer, and a streamable HTTP backend is proxied like a stdio one and
//! reconnected when it restarts.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::common::{ScriptedUpstream, TestGateway, free_loopback_port};

use super::{
    call, config_with_own_ops_policy, connect, kill_backend, servers_dir, start_config,
    start_standard, temp_dir, text_of, tool_names, tool_names_of, wait_until_ready,
};

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
    let Some((_files, _upstream, gateway)) = start_standard("restart").await else {
        return;
    };
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
    let pid = kill_backend(&health, "memory");

    // Until it is back, calls get a clear error, never a hang; then it answers again.
    let mut restarted = None;
    for _ in 0..300 {
        let health = gateway.admin_json("/health").await;
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
    let config = config_with_own_ops_policy(&servers, &files, extra)
        + "\n[mcp.default_policy]\nallow_unknown_tools = true\n";
    let (_upstream, gateway) = start_config(&config, &["everything"]).await;
    let ops = connect(&gateway, "sk-ops", None).await;
    for server in ["silent", "garbage"] {
        let error = call(&ops, &format!("{server}__anything"), json!({}))
            .await
            .expect_err("not available");
        assert_eq!(error.code.0, -32002, "{server}: {error:?}");
    }
    let mut health = Value::Null;
    for _ in 0..100 {
        health = gateway.admin_json("/health").await;
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
    // What the garbage server printed is said, not only that it did not start.
    let garbage = health["mcp_servers"]["garbage"]["last_error"]
        .as_str()
        .unwrap_or_default();
    assert!(
        garbage.contains("not JSON-RPC") && garbage.contains("'this is not JSON-RPC'"),
        "{garbage}"
    );
    assert!(garbage.contains("2 line(s)"), "{garbage}");
    let silent = health["mcp_servers"]["silent"]["last_error"]
        .as_str()
        .unwrap_or_default();
    assert!(
        silent.contains("did not start") && !silent.contains("JSON-RPC"),
        "{silent}"
    );
    // The good backend is untouched.
    call(&ops, "everything__echo", json!({"message": "fine"}))
        .await
        .expect("the healthy backend answers");
}

/// server-everything serving Streamable HTTP on `port`.
fn http_everything(servers: &std::path::Path, port: u16) -> tokio::process::Child {
    tokio::process::Command::new("node")
        .arg(servers.join("server-everything/dist/index.js"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node starts")
}

fn http_backend_config(port: u16) -> String {
    format!(
        r#"
[tenants.ops]
api_keys = ["sk-ops"]

[mcp_servers.remote]
url = "http://127.0.0.1:{port}/mcp"
headers = {{ x-test = "yes" }}
exposed_tools = ["echo", "get-sum"]
call_timeout_ms = 20000

[mcp.agent_policies.ops]
allowed_servers = ["remote"]

[[routes]]
path = "/mcp"
kind = "mcp"
"#
    )
}

#[tokio::test]
async fn a_streamable_http_backend_is_proxied_like_a_stdio_one() {
    let Some(servers) = servers_dir() else { return };
    let port = free_loopback_port();
    let mut backend = http_everything(&servers, port);
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &http_backend_config(port)).await;
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

/// A Streamable HTTP backend that restarts loses every session: toolgate notices (its probe or
/// a failed call), answers -32002 at once while the server is away — far sooner than the 20 s
/// call timeout — says so in `/health`, and opens a new session when the server is back.
#[tokio::test]
async fn a_restarted_http_backend_is_reconnected_and_health_says_what_happened() {
    let Some(servers) = servers_dir() else { return };
    let port = free_loopback_port();
    let mut backend = http_everything(&servers, port);
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &http_backend_config(port)).await;
    wait_until_ready(&gateway, &["remote"]).await;
    let ops = connect(&gateway, "sk-ops", None).await;
    call(&ops, "remote__echo", json!({"message": "before"}))
        .await
        .expect("answers before the restart");

    let _ = backend.kill().await;
    let _ = backend.wait().await;
    // Away: within the probe's period the session is found lost and calls are refused as
    // unavailable, each at once (the call timeout is 20 s; the test would hang past it).
    let mut refused = None;
    for _ in 0..100 {
        match tokio::time::timeout(
            Duration::from_secs(10),
            call(&ops, "remote__echo", json!({"message": "away"})),
        )
        .await
        {
            Ok(Err(error)) if error.code.0 == -32002 => {
                refused = Some(error);
                break;
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(_) => panic!("a call to a backend that is away hung"),
        }
    }
    let refused = refused.expect("calls were refused as unavailable while the server was away");
    assert!(refused.message.contains("remote"), "{refused:?}");
    let health = gateway.admin_json("/health").await;
    let remote = &health["mcp_servers"]["remote"];
    assert_ne!(remote["state"], "ready", "{health}");
    assert!(remote["last_error"].is_string(), "{health}");

    let mut backend = http_everything(&servers, port);
    let health = wait_until_ready(&gateway, &["remote"]).await;
    assert!(
        health["mcp_servers"]["remote"]["restarts"].as_u64() >= Some(1),
        "{health}"
    );
    let echo = call(&ops, "remote__echo", json!({"message": "after"}))
        .await
        .expect("answers after the restart, in the same client session");
    assert!(text_of(&echo).contains("after"), "{echo:?}");
    let _ = backend.kill().await;
}

/// A TCP front for a backend whose target can be switched: new connections go to the current
/// target, open ones stay where they were. Switched to a second server process, it is a backend
/// that "restarted" without ever refusing a connection: only its sessions are gone.
struct SwitchingFront {
    port: u16,
    target: Arc<std::sync::atomic::AtomicU16>,
    task: tokio::task::JoinHandle<()>,
}

impl SwitchingFront {
    async fn start(target: u16) -> SwitchingFront {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let port = listener.local_addr().expect("an address").port();
        let target = Arc::new(std::sync::atomic::AtomicU16::new(target));
        let current = target.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let port = current.load(Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", port)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        SwitchingFront { port, target, task }
    }

    fn switch_to(&self, port: u16) {
        self.target.store(port, Ordering::SeqCst);
    }
}

impl Drop for SwitchingFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Waits until a backend listens on `port`.
async fn listening(port: u16) {
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no backend listens on {port}");
}

/// A Streamable HTTP backend that restarts without refusing a connection (only its sessions
/// are gone) is seen all the same: the lost session is counted as a restart, the tool list
/// read again, and each caller's session told with `notifications/tools/list_changed`.
#[tokio::test]
async fn a_silently_restarted_http_backend_is_counted_relisted_and_announced() {
    let Some(servers) = servers_dir() else { return };
    let (first_port, second_port) = (free_loopback_port(), free_loopback_port());
    let mut first = http_everything(&servers, first_port);
    let mut second = http_everything(&servers, second_port);
    listening(first_port).await;
    listening(second_port).await;
    let front = SwitchingFront::start(first_port).await;
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &http_backend_config(front.port)).await;
    let health = wait_until_ready(&gateway, &["remote"]).await;
    let restarts_before = health["mcp_servers"]["remote"]["restarts"]
        .as_u64()
        .unwrap_or(0);
    let changes = ListWatcher::default();
    let ops = super::connect_with(&gateway, "sk-ops", changes.clone()).await;
    let mut listed = tool_names_of(&ops).await;
    listed.sort();
    assert_eq!(listed, ["remote__echo", "remote__get-sum"]);
    let told_before = changes.0.load(Ordering::SeqCst);

    // The "restart": every new connection reaches a server that never saw toolgate's session.
    front.switch_to(second_port);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let health = gateway.admin_json("/health").await;
        let remote = &health["mcp_servers"]["remote"];
        if remote["restarts"].as_u64() > Some(restarts_before) && remote["state"] == "ready" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the lost session was never seen: {health}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let told = async {
        while changes.0.load(Ordering::SeqCst) == told_before {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), told)
        .await
        .expect("the caller was told the tool list changed");
    let echo = call(&ops, "remote__echo", json!({"message": "after"}))
        .await
        .expect("answers on the new session");
    assert!(text_of(&echo).contains("after"), "{echo:?}");
    let _ = first.kill().await;
    let _ = second.kill().await;
}
