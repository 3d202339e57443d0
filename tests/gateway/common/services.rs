//! Helpers for the validator service tests: the reference validator from `examples/` served
//! in-process, a chat request with three tools, and builders for `[services.NAME]` descriptors,
//! routes and `service` chain entries.

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::Reply;
use super::upstream::chat_completion;

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

pub fn calling(calls: &[(&str, &str, &str)]) -> Reply {
    Reply::json(200, chat_completion(calls, None))
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

pub async fn answer_of(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body)
}

pub const ARGCHECK_PARAMS: &str = "config-params = [{ name = \"deny_substrings\", required = true }, { name = \"remove_tools\" }]";
