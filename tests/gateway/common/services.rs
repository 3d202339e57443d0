//! Helpers for the validator service tests: the reference validator from `examples/` served
//! in-process, a chat request with three tools, and builders for `[services.NAME]` descriptors,
//! routes and `service` chain entries.

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::answers::status_and_json;
use super::{Reply, ScriptedUpstream, TestGateway};

/// The reference validator from `examples/`, served in-process on a free loopback port.
pub struct Validator {
    pub url: String,
    _stop: oneshot::Sender<()>,
}

impl Validator {
    pub async fn start() -> Validator {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let addr = listener.local_addr().expect("bound");
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(toolgate_example_validator::serve(listener, async {
            let _ = stopped.await;
        }));
        Validator {
            url: format!("http://{addr}/validate"),
            _stop: stop,
        }
    }
}

/// A fresh upstream and reference validator, and a gateway whose `/v1` routes run one instance
/// of that validator (`argcheck`) with `settings`: the set-up of the tests of one instance. The
/// validator is returned because dropping it stops it.
pub async fn start_with_argcheck(settings: &str) -> (ScriptedUpstream, Validator, TestGateway) {
    let upstream = ScriptedUpstream::start().await;
    let validator = Validator::start().await;
    let config = format!(
        "{}{}",
        service("argcheck", &validator.url, ARGCHECK_PARAMS),
        route("/v1", &instance("", settings)),
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    (upstream, validator, gateway)
}

/// One exchange on `path`: the client posts `body` (mostly [`request`]) and the upstream
/// answers with a completion making `calls`; returns the status and JSON body the client gets.
pub async fn exchange(
    upstream: &ScriptedUpstream,
    gateway: &TestGateway,
    path: &str,
    body: &Value,
    calls: &[(&str, &str, &str)],
) -> (u16, Value) {
    upstream.push(Reply::chat_calls(calls));
    status_and_json(gateway.post(path, body).await).await
}

/// A chat request declaring `run_sql`, `run_shell` and `drop_db`.
pub fn request() -> Value {
    let tool = |name: &str| {
        json!({"type": "function", "function": {"name": name,
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}})
    };
    json!({
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Tidy the staging database."}],
        "tools": [tool("run_sql"), tool("run_shell"), tool("drop_db")],
    })
}

/// One route on `path` whose chain is `plugins` (TOML `[[routes.plugins]]` blocks).
pub fn route(path: &str, plugins: &str) -> String {
    format!(
        "[[routes]]\npath = \"{path}\"\nupstream = \"llm\"\n{}\n",
        plugins.replace("[[plugins]]", "[[routes.plugins]]")
    )
}

/// A `service` chain entry.
pub fn instance(extra: &str, settings: &str) -> String {
    format!("[[plugins]]\nname = \"service\"\n{extra}\n[routes.plugins.settings]\n{settings}\n")
}

pub fn service(name: &str, url: &str, extra: &str) -> String {
    format!("[services.{name}]\nurl = \"{url}\"\n{extra}\n")
}

pub const ARGCHECK_PARAMS: &str = "config-params = [{ name = \"deny_substrings\", required = true }, { name = \"remove_tools\" }]";
