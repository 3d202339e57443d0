//! The end-to-end harness: a real toolgate on 127.0.0.1:0 in front of a scripted upstream,
//! reached with a real OpenAI client (async-openai) or plain HTTP (reqwest) when a test needs
//! the raw status, headers or bytes.

pub mod redis;
pub mod services;
pub mod upstream;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use serde_json::Value;
use tokio::sync::oneshot;
use toolgate::{Config, Gateway, Runtime};

pub use upstream::{Reply, ScriptedUpstream};

/// A running gateway; dropping it stops it.
pub struct TestGateway {
    pub addr: SocketAddr,
    pub admin_addr: Option<SocketAddr>,
    pub audit_path: PathBuf,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

/// A fresh file path for one gateway's audit lines.
pub fn temp_audit_path() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    std::env::temp_dir().join(format!(
        "toolgate-audit-{}-{}.jsonl",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A config with one upstream `llm`, the audit log in a temp file, and `body` appended (routes,
/// plugins). `{upstream}` and `{audit}` in `body` are filled in.
pub fn config_text(upstream_url: &str, audit_path: &std::path::Path, body: &str) -> String {
    config_text_with(upstream_url, audit_path, "", body)
}

/// [`config_text`] with extra `[server]` settings (limits, timeouts), one per line.
pub fn config_text_with(
    upstream_url: &str,
    audit_path: &std::path::Path,
    server: &str,
    body: &str,
) -> String {
    let head = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nshutdown_grace_ms = 2000\n{server}\n\n\
         [upstreams.llm]\nurl = \"{upstream_url}\"\nresponse_timeout_ms = 3000\nread_timeout_ms = 3000\n\n\
         [audit]\noutput = \"{}\"\n\n",
        audit_path.display()
    );
    head + &body.replace("{upstream}", upstream_url)
}

/// The most common set-up: chat completions guarded by tool_selection with `settings`.
pub fn guarded_chat(settings: &str) -> String {
    format!(
        "[[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_selection\"\n[routes.plugins.settings]\n{settings}\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n"
    )
}

impl TestGateway {
    /// Starts a gateway with the built-in plugins in front of `upstream`.
    pub async fn start(upstream: &ScriptedUpstream, body: &str) -> TestGateway {
        TestGateway::start_with(upstream, body, Runtime::new()).await
    }

    pub async fn start_with(
        upstream: &ScriptedUpstream,
        body: &str,
        runtime: Runtime,
    ) -> TestGateway {
        TestGateway::start_from(upstream, "", body, runtime).await
    }

    /// A gateway with extra `[server]` settings (limits, timeouts).
    pub async fn start_tuned(upstream: &ScriptedUpstream, server: &str, body: &str) -> TestGateway {
        TestGateway::start_from(upstream, server, body, Runtime::new()).await
    }

    async fn start_from(
        upstream: &ScriptedUpstream,
        server: &str,
        body: &str,
        runtime: Runtime,
    ) -> TestGateway {
        let audit_path = temp_audit_path();
        let text = config_text_with(&upstream.url(), &audit_path, server, body);
        TestGateway::start_text(&text, audit_path, runtime).await
    }

    /// A gateway from a whole configuration text (a shipped file with its addresses, audit
    /// output and upstream URL replaced); `audit_path` is where that text sends audit lines.
    pub async fn start_text(text: &str, audit_path: PathBuf, runtime: Runtime) -> TestGateway {
        let config = match Config::from_toml(text, "test.toml", &runtime.plugins) {
            Ok(config) => config,
            Err(errors) => panic!("test config does not load:\n{errors}\n---\n{text}"),
        };
        let gateway = Gateway::bind(config, runtime)
            .await
            .expect("binds loopback ports");
        let addr = gateway.local_addr().expect("bound");
        let admin_addr = gateway.admin_addr();
        let (shutdown, signal) = oneshot::channel::<()>();
        let task = tokio::spawn(gateway.run(async {
            let _ = signal.await;
        }));
        TestGateway {
            addr,
            admin_addr,
            audit_path,
            shutdown: Some(shutdown),
            task: Some(task),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A real OpenAI SDK client whose base URL is the gateway.
    pub fn openai(&self) -> Client<OpenAIConfig> {
        Client::with_config(
            OpenAIConfig::new()
                .with_api_base(format!("{}/v1", self.url()))
                .with_api_key("sk-client-key"),
        )
    }

    /// A real OpenAI SDK client that authenticates to the gateway with `key` (a tenant's).
    pub fn openai_with_key(&self, key: &str) -> Client<OpenAIConfig> {
        Client::with_config(
            OpenAIConfig::new()
                .with_api_base(format!("{}/v1", self.url()))
                .with_api_key(key),
        )
    }

    /// POSTs a JSON body to `path` and returns the raw response.
    pub async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        reqwest::Client::new()
            .post(format!("{}{path}", self.url()))
            .header("authorization", "Bearer sk-client-key")
            .json(body)
            .send()
            .await
            .expect("the gateway answers")
    }

    pub async fn admin_get(&self, path: &str) -> reqwest::Response {
        let admin = self.admin_addr.expect("admin listener configured");
        reqwest::get(format!("http://{admin}{path}"))
            .await
            .expect("the admin endpoint answers")
    }

    /// The admin listener's `/metrics` page, as text.
    pub async fn metrics_text(&self) -> String {
        self.admin_get("/metrics")
            .await
            .text()
            .await
            .expect("metrics text")
    }

    /// Waits (bounded) until the audit log holds a line for `request_id`, and returns it.
    pub async fn audit_line(&self, request_id: &str) -> Value {
        for _ in 0..200 {
            if let Some(line) = self
                .audit_lines()
                .into_iter()
                .find(|line| line["request_id"] == request_id)
            {
                return line;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!(
            "no audit line for {request_id}; lines: {:?}",
            self.audit_lines()
        );
    }

    pub fn audit_lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.audit_path)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// Stops accepting and waits for in-flight requests to drain.
    pub async fn stop(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for TestGateway {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        let _ = std::fs::remove_file(&self.audit_path);
    }
}

/// A fixture file's text, from `fixtures/`.
pub fn fixture(path: &str) -> String {
    let full = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(path);
    std::fs::read_to_string(&full)
        .unwrap_or_else(|error| panic!("fixture {}: {error}", full.display()))
}

pub fn fixture_json(path: &str) -> Value {
    serde_json::from_str(&fixture(path))
        .unwrap_or_else(|error| panic!("fixture {path} is not JSON: {error}"))
}
