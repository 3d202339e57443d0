//! The end-to-end harness: a real toolgate on 127.0.0.1:0 in front of a scripted upstream,
//! reached with a real OpenAI client (async-openai) or plain HTTP (reqwest) when a test needs
//! the raw status, headers or bytes.

pub mod answers;
pub mod faulty;
pub mod redis;
pub mod services;
pub mod upstream;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::chat::{ChatCompletionResponseStream, CreateChatCompletionResponse};
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

/// An HTTP client for a test's own requests. reqwest is built without a TLS provider of its
/// own (ring is the process's, src/crypto.rs) and `Client::new` panics before one is installed:
/// `Runtime::new` installs it, but a test of a spawned `toolgate` or of the scripted upstream
/// alone may build its client first.
pub fn http() -> reqwest::Client {
    http_builder().build().expect("an HTTP client")
}

/// [`http`] with settings of the test's own.
pub fn http_builder() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
}

/// What a test whose dependency is missing does: it fails, naming what to install, unless the
/// run opted out with `TOOLGATE_SKIP_MISSING=1` (or, for the SDK tests, the older
/// `TOOLGATE_SKIP_SDK_TESTS=1`). A skip is never silent: it is said on stderr and written to
/// the file `TOOLGATE_SKIP_LOG` names, whose lines the run's closing line counts (`.ci/test`).
/// Returns true when the test is to be skipped.
pub fn skip_for_missing(what: &str, install: &str) -> bool {
    let opted_out = ["TOOLGATE_SKIP_MISSING", "TOOLGATE_SKIP_SDK_TESTS"]
        .iter()
        .any(|variable| std::env::var(variable).as_deref() == Ok("1"));
    assert!(
        opted_out,
        "{what} is missing: {install} (or set TOOLGATE_SKIP_MISSING=1 to skip, counted)"
    );
    eprintln!("\n!!!!! SKIPPED: {what} is missing ({install}) !!!!!\n");
    if let Some(log) = std::env::var_os("TOOLGATE_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = writeln!(file, "{what}");
        }
    }
    true
}

/// Whether python3 imports `modules` (comma-separated); when not, the test fails or, opted
/// out, is skipped ([`skip_for_missing`]) and this says false.
pub fn python_imports(modules: &str) -> bool {
    let imports = std::process::Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|output| output.status.success());
    imports
        || !skip_for_missing(
            &format!("python3's `import {modules}`"),
            "run .ci/test, which pip installs what the tests import",
        )
}

/// Runs a Python script with `env`, asserts it succeeded, and returns what it printed.
pub async fn run_python(script: &str, env: &[(&str, String)]) -> String {
    let mut command = tokio::process::Command::new("python3");
    command.args(["-c", script]);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().await.expect("python3 runs");
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "the script failed:\n{printed}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    printed
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

/// A loopback port free when asked, for a server a test starts itself; another process taking
/// it in between makes that server fail to bind, loudly.
pub fn free_loopback_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
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
    // A test that sets its own grace (to see what the grace's end does) replaces the default.
    let grace = if server.contains("shutdown_grace_ms") {
        ""
    } else {
        "shutdown_grace_ms = 2000\n"
    };
    let head = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\n{grace}{server}\n\n\
         [upstreams.llm]\nurl = \"{upstream_url}\"\nresponse_timeout_ms = 3000\nread_timeout_ms = 3000\n\n\
         [audit]\noutput = \"{}\"\n\n",
        audit_path.display()
    );
    head + &body.replace("{upstream}", upstream_url)
}

/// Every route under `/v1` forwarded to `llm` with no plugin: the plain reverse proxy.
pub const PASS_THROUGH: &str = "[[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n";

/// Every route under `/v1` guarded by a gateway-wide tool_selection with its defaults (so
/// `unreadable_answers = "block"`), whatever the format of the endpoint.
pub const GUARDED_V1: &str = "[[plugins]]\nname = \"tool_selection\"\n\n\
                              [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n";

/// The most common set-up: chat completions guarded by tool_selection with `settings`.
pub fn guarded_chat(settings: &str) -> String {
    format!(
        "[[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_selection\"\n[routes.plugins.settings]\n{settings}\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n"
    )
}

/// A fresh scripted upstream with a gateway in front of it whose chat completions are guarded
/// by tool_selection with `settings` ([`guarded_chat`]): where most checks of one answer start.
pub async fn start_guarded(settings: &str) -> (ScriptedUpstream, TestGateway) {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_chat(settings)).await;
    (upstream, gateway)
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
        Client::build(
            http(),
            OpenAIConfig::new()
                .with_api_base(format!("{}/v1", self.url()))
                .with_api_key("sk-client-key"),
        )
    }

    /// A real OpenAI SDK client that authenticates to the gateway with `key` (a tenant's).
    pub fn openai_with_key(&self, key: &str) -> Client<OpenAIConfig> {
        Client::build(
            http(),
            OpenAIConfig::new()
                .with_api_base(format!("{}/v1", self.url()))
                .with_api_key(key),
        )
    }

    /// Sends a chat request through the real OpenAI SDK with the client key: what an SDK user
    /// gets back, the completion or the error the SDK raised.
    pub async fn sdk_chat(&self, body: Value) -> Result<CreateChatCompletionResponse, OpenAIError> {
        self.openai()
            .chat()
            .create(answers::sdk_chat_request(body))
            .await
    }

    /// [`TestGateway::sdk_chat`] streamed: the SDK's stream of chunks, as an SDK user reads it.
    pub async fn sdk_chat_stream(
        &self,
        body: Value,
    ) -> Result<ChatCompletionResponseStream, OpenAIError> {
        self.openai()
            .chat()
            .create_stream(answers::sdk_chat_request(body))
            .await
    }

    /// POSTs `text` to `path` as a JSON body, byte for byte and with no client key: for tests
    /// that follow the exact bytes upstream.
    pub async fn post_json_text(&self, path: &str, text: &'static str) -> reqwest::Response {
        self.post_bytes(path, &[("content-type", "application/json")], text)
            .await
    }

    /// POSTs a JSON body to `path` and returns the raw response.
    pub async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        http()
            .post(format!("{}{path}", self.url()))
            .header("authorization", "Bearer sk-client-key")
            .json(body)
            .send()
            .await
            .expect("the gateway answers")
    }

    /// GETs `path` from the gateway: the status and the body as text.
    pub async fn get_text(&self, path: &str) -> (u16, String) {
        let response = http()
            .get(format!("{}{path}", self.url()))
            .send()
            .await
            .expect("the gateway answers");
        let status = response.status().as_u16();
        (status, response.text().await.unwrap_or_default())
    }

    /// POSTs `body` to `/v1/chat/completions`, the endpoint most tests guard, with the client key.
    pub async fn post_chat(&self, body: &Value) -> reqwest::Response {
        self.post("/v1/chat/completions", body).await
    }

    /// The status of [`TestGateway::post`], for checks that need nothing else of the answer.
    pub async fn post_status(&self, path: &str, body: &Value) -> u16 {
        self.post(path, body).await.status().as_u16()
    }

    /// POSTs `body` as JSON to `path` with exactly `headers`: no client key, unlike
    /// [`TestGateway::post`], so a test of keys, groups or states sends only what it names.
    pub async fn post_json_with(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: &Value,
    ) -> reqwest::Response {
        self.post_request(path, headers)
            .json(body)
            .send()
            .await
            .expect("the gateway answers")
    }

    /// POSTs `body` byte for byte with exactly `headers` (no content type unless named): for
    /// bodies that are not JSON, or whose exact bytes the test follows upstream.
    pub async fn post_bytes(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<reqwest::Body>,
    ) -> reqwest::Response {
        self.post_request(path, headers)
            .body(body)
            .send()
            .await
            .expect("the gateway answers")
    }

    fn post_request(&self, path: &str, headers: &[(&str, &str)]) -> reqwest::RequestBuilder {
        headers.iter().fold(
            http().post(format!("{}{path}", self.url())),
            |request, (name, value)| request.header(*name, *value),
        )
    }

    pub async fn admin_get(&self, path: &str) -> reqwest::Response {
        let admin = self.admin_addr.expect("admin listener configured");
        http()
            .get(format!("http://{admin}{path}"))
            .send()
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

    /// An admin endpoint's answer as JSON (`/health`, `/ready`, `/tools?…`).
    pub async fn admin_json(&self, path: &str) -> Value {
        self.admin_get(path)
            .await
            .json()
            .await
            .expect("the admin endpoint answers JSON")
    }

    /// Asserts that `/metrics` shows each of `expected`: a series with its labels and value
    /// (`name{label="x"} 2`), or only a name where the value is not the point.
    pub async fn assert_metrics_contain<S: AsRef<str>>(&self, expected: &[S]) {
        answers::assert_contains_all(&self.metrics_text().await, expected);
    }

    /// The audit line of the exchange `response` answered, found by its `x-request-id`.
    pub async fn audit_line_of(&self, response: &reqwest::Response) -> Value {
        self.audit_line(&answers::request_id(response)).await
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

    /// The audit lines once `enough` holds of them: the audit task writes each line after its
    /// answer is released, so a test that counts lines waits for them (bounded); past the
    /// bound, the lines as they are, for the test's own assertion to report.
    pub async fn audit_lines_until(&self, enough: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        audit_lines_of_all(&[self], enough).await
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

/// The audit lines of several gateways (replicas) together, once `enough` holds of them; see
/// [`TestGateway::audit_lines_until`].
pub async fn audit_lines_of_all(
    gateways: &[&TestGateway],
    enough: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let read = || -> Vec<Value> {
        gateways
            .iter()
            .flat_map(|gateway| gateway.audit_lines())
            .collect()
    };
    for _ in 0..200 {
        let lines = read();
        if enough(&lines) {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    read()
}

/// The workflow transitions the audit `lines` record, all told.
pub fn transitions_recorded(lines: &[Value]) -> usize {
    lines
        .iter()
        .filter_map(|line| line["state_transitions"].as_array())
        .map(Vec::len)
        .sum()
}
