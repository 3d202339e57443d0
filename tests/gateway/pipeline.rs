//! The plugin pipeline with plugins a user could write: a pre_request block answered without
//! contacting the upstream, a modify that rewrites the declared tools in the client's format,
//! priority order, observe mode for request-stage verdicts, and post_response accounting.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::answers::json_with_status;
use crate::common::{Reply, ScriptedUpstream, TestGateway};
use http::{HeaderName, HeaderValue, StatusCode};
use serde_json::{Value, json};
use toolgate::{PluginRegistry, Runtime};

use toolgate_plugin::{
    BodyNeeds, BuildContext, Check, CompletedExchange, Plugin, PluginFactory, Rejection,
    RequestEdit, RequestExchange, SettingsError, StageWork, Verdict, Violation, async_trait,
    parse_settings,
};

/// Removes one named tool before the request goes upstream, and records what it saw.
struct ToolRemover {
    tool: String,
    seen_tools: Arc<Mutex<Vec<Vec<String>>>>,
    completed: Arc<AtomicUsize>,
    /// While set, `post_response` waits for a permit of `release` before it counts.
    hold: Arc<std::sync::atomic::AtomicBool>,
    release: Arc<tokio::sync::Semaphore>,
}

#[async_trait]
impl Plugin for ToolRemover {
    fn body_needs(&self) -> BodyNeeds {
        BodyNeeds::REQUEST
    }
    async fn pre_request(&self, exchange: &RequestExchange<'_>) -> Verdict<RequestEdit> {
        let names: Vec<String> = exchange
            .request
            .as_parsed()
            .map(|request| {
                request
                    .declared_tools
                    .iter()
                    .map(|tool| tool.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        self.seen_tools
            .lock()
            .expect("not poisoned")
            .push(names.clone());
        if names.iter().any(|name| name == "forbidden_everywhere") {
            let violation = Violation::new(
                Check::Permission,
                "tool_not_permitted",
                "'forbidden_everywhere' may not be declared",
            );
            return Verdict::Block(Rejection::forbidden(vec![violation]));
        }
        Verdict::Modify(vec![
            RequestEdit::RemoveDeclaredTools(vec![self.tool.clone()]),
            RequestEdit::SetRequestHeader(
                HeaderName::from_static("x-removed"),
                HeaderValue::from_static("yes"),
            ),
            RequestEdit::SetResponseHeader(
                HeaderName::from_static("x-toolgate-note"),
                HeaderValue::from_static("edited"),
            ),
        ])
    }
    async fn post_response(&self, exchange: &CompletedExchange<'_>) -> StageWork {
        if self.hold.load(Ordering::SeqCst) {
            // Bounded: a test that forgot to release must not hang the gateway's task.
            let _ =
                tokio::time::timeout(std::time::Duration::from_secs(10), self.release.acquire())
                    .await;
        }
        if exchange.status == StatusCode::OK {
            self.completed.fetch_add(1, Ordering::SeqCst);
        }
        StageWork::Done
    }
}

struct ToolRemoverFactory {
    seen_tools: Arc<Mutex<Vec<Vec<String>>>>,
    completed: Arc<AtomicUsize>,
    /// While set, `post_response` waits for a permit of `release` before it counts.
    hold: Arc<std::sync::atomic::AtomicBool>,
    release: Arc<tokio::sync::Semaphore>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoverSettings {
    tool: String,
}

impl PluginFactory for ToolRemoverFactory {
    fn name(&self) -> &'static str {
        "tool_remover"
    }
    fn build(
        &self,
        settings: &Value,
        _context: &BuildContext,
    ) -> Result<Arc<dyn Plugin>, SettingsError> {
        let settings: RemoverSettings = parse_settings(settings)?;
        Ok(Arc::new(ToolRemover {
            tool: settings.tool,
            seen_tools: self.seen_tools.clone(),
            completed: self.completed.clone(),
            hold: self.hold.clone(),
            release: self.release.clone(),
        }))
    }
}

fn request(tools: &[&str]) -> Value {
    let tools: Vec<Value> = tools
        .iter()
        .map(|name| json!({"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}))
        .collect();
    json!({"model": "m", "messages": [{"role": "user", "content": "go"}], "tools": tools, "temperature": 0.25})
}

async fn start(mode: &str) -> (ScriptedUpstream, TestGateway, ToolRemoverFactory) {
    let factory = ToolRemoverFactory {
        seen_tools: Arc::default(),
        completed: Arc::default(),
        hold: Arc::default(),
        release: Arc::new(tokio::sync::Semaphore::new(0)),
    };
    let shared = ToolRemoverFactory {
        seen_tools: factory.seen_tools.clone(),
        completed: factory.completed.clone(),
        hold: factory.hold.clone(),
        release: factory.release.clone(),
    };
    let runtime = Runtime::with_plugins(move |registry| {
        PluginRegistry::builtin(registry).with(Arc::new(shared))
    });
    let upstream = ScriptedUpstream::start().await;
    let routes = format!(
        "[[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_selection\"\npriority = 100\n\
         [[routes.plugins]]\nname = \"tool_remover\"\npriority = 10\nmode = \"{mode}\"\n\
         [routes.plugins.settings]\ntool = \"delete_user\"\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_remover\"\n[routes.plugins.settings]\ntool = \"delete_user\"\n"
    );
    let gateway = TestGateway::start_with(&upstream, &routes, runtime).await;
    (upstream, gateway, factory)
}

#[tokio::test]
async fn a_modify_verdict_rewrites_the_request_in_its_own_format_and_later_checks_see_it() {
    let (upstream, gateway, factory) = start("enforce").await;
    // The model calls the removed tool anyway: tool_selection (later in the chain) sees the
    // edited request, so the call is undeclared.
    upstream.push(Reply::chat_calls(&[("call_1", "delete_user", "{}")]));
    let response = gateway
        .post_chat(&request(&["get_weather", "delete_user"]))
        .await;
    assert_eq!(response.status(), 403);
    let forwarded = upstream.last_request().expect("forwarded");
    let body = forwarded.json();
    assert_eq!(body["tools"].as_array().map(Vec::len), Some(1));
    assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(body["temperature"], 0.25, "other fields are kept");
    assert_eq!(forwarded.header("x-removed"), Some("yes"));
    assert_eq!(
        factory.seen_tools.lock().expect("lock")[0],
        ["get_weather", "delete_user"]
    );

    upstream.push(Reply::chat_calls(&[("call_2", "get_weather", "{}")]));
    let response = gateway
        .post_chat(&request(&["get_weather", "delete_user"]))
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-toolgate-note"], "edited");
}

#[tokio::test]
async fn a_pre_request_block_is_answered_without_contacting_the_upstream() {
    let (upstream, gateway, _) = start("enforce").await;
    let response = gateway.post_chat(&request(&["forbidden_everywhere"])).await;
    let body = json_with_status(response, 403).await;
    assert_eq!(body["error"]["violations"][0]["check"], "permission");
    assert_eq!(upstream.request_count(), 0);
}

#[tokio::test]
async fn observe_mode_neither_blocks_nor_modifies() {
    let (upstream, gateway, _) = start("observe").await;
    upstream.set_default(Reply::chat_text("ok"));
    let sent = request(&["forbidden_everywhere", "delete_user"]);
    let response = gateway.post_chat(&sent).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        upstream.last_request().expect("forwarded").body,
        serde_json::to_vec(&sent).expect("json")
    );
}

#[tokio::test]
async fn post_response_runs_after_the_client_is_answered() {
    let (upstream, gateway, factory) = start("enforce").await;
    upstream.set_default(Reply::chat_text("ok"));
    // Held in post_response, the exchange still answers its client: the stage runs after.
    factory.hold.store(true, Ordering::SeqCst);
    assert_eq!(
        gateway
            .post_status("/v1/chat/completions", &request(&["get_weather"]))
            .await,
        200
    );
    assert_eq!(
        factory.completed.load(Ordering::SeqCst),
        0,
        "the client was answered before post_response finished"
    );
    factory.hold.store(false, Ordering::SeqCst);
    factory.release.add_permits(1);
    for _ in 0..200 {
        if factory.completed.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(factory.completed.load(Ordering::SeqCst), 1);
    factory.completed.store(0, Ordering::SeqCst);
    for _ in 0..3 {
        assert_eq!(
            gateway
                .post_status("/v1/chat/completions", &request(&["get_weather"]))
                .await,
            200
        );
    }
    for _ in 0..200 {
        if factory.completed.load(Ordering::SeqCst) == 3 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!(
        "post_response ran {} times",
        factory.completed.load(Ordering::SeqCst)
    );
}

#[tokio::test]
async fn removing_a_tool_rewrites_each_format_in_its_own_shape() {
    let (upstream, gateway, _) = start("enforce").await;
    upstream.set_default(Reply::json(200, json!({})));
    let responses = json!({"model": "gpt-4.1", "input": "go", "tools": [
        {"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
        {"type": "function", "name": "delete_user", "parameters": {"type": "object"}},
        {"type": "web_search_preview"}]});
    gateway.post("/v1/responses", &responses).await;
    let sent = upstream.forwarded_json();
    assert_eq!(
        sent["tools"],
        json!([responses["tools"][0], responses["tools"][2]])
    );

    let anthropic = json!({"model": "claude", "max_tokens": 100, "messages": [{"role": "user", "content": "go"}],
        "tools": [{"name": "delete_user", "input_schema": {"type": "object"}},
                  {"name": "get_weather", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "tool", "name": "delete_user"}});
    gateway.post("/v1/messages", &anthropic).await;
    let sent = upstream.forwarded_json();
    assert_eq!(sent["tools"], json!([anthropic["tools"][1]]));
    assert!(
        sent.get("tool_choice").is_none(),
        "a choice forcing the removed tool goes too"
    );
}
