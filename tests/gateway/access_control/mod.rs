//! Access control end to end (issue: tool catalog, groups and workflow states, permissions,
//! tenants): what the model is shown, what calls are let through, with a real OpenAI client,
//! the gateway, and a scripted upstream that records what it was sent. This module holds the
//! seed's catalog and the requests and clients the files below share.

mod config;
mod directives;
mod groups;
mod kept_state;
mod permissions;
mod states;
mod tenants;

use crate::common::answers::{function_names, sdk_chat_request};
use crate::common::{Reply, ScriptedUpstream, TestGateway};
use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::chat::CreateChatCompletionResponse;
use serde_json::{Value, json};

/// The tools of seed 000 §5.1, plus an untagged one, with permission metadata.
const CATALOG: &str = r#"
[tools.knowledge-query]
groups = ["read-only", "knowledge", "basic"]
state = "analysis"
available_in_states = ["undefined", "research"]
category = "database"
action = "db:query"

[tools.graph-update]
groups = ["write", "knowledge", "admin"]
applicable-states = ["analysis", "modification"]
category = "database"
action = "db:mutate"

[tools.text-completion]
groups = ["read-only", "text", "basic"]
state = "undefined"
category = "analytics"

[tools.complex-analysis]
groups = ["advanced", "compute", "expensive"]
state = "results"
available_in_states = ["analysis"]
category = "code_execution"

[tools.reset-workflow]
groups = ["admin"]
state = "undefined"
available_in_states = ["analysis", "results"]
category = "deployment"
action = "deploy:staging"

[tools.weather]
category = "web"
"#;

const SEED_TOOLS: [&str; 6] = [
    "knowledge-query",
    "graph-update",
    "text-completion",
    "complex-analysis",
    "reset-workflow",
    "weather",
];

fn groups_route(settings: &str) -> String {
    format!(
        "{CATALOG}\n[[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_groups\"\n[routes.plugins.settings]\n{settings}\n"
    )
}

/// A chat request declaring `tools` (each with an object schema), after `history` messages.
fn request(tools: &[&str], history: Vec<Value>) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "Work through the analysis."})];
    messages.extend(history);
    json!({
        "model": "gpt-4o-mini",
        "messages": messages,
        "tools": tools.iter().map(|name| json!({"type": "function", "function": {
            "name": name, "parameters": {"type": "object", "properties": {}}}})).collect::<Vec<_>>(),
    })
}

/// The assistant turn that called `tool` and the tool's result, for a history.
fn executed(call_id: &str, tool: &str) -> Vec<Value> {
    vec![
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": call_id, "type": "function",
               "function": {"name": tool, "arguments": "{}"}}]}),
        json!({"role": "tool", "tool_call_id": call_id, "content": "done"}),
    ]
}

/// A real OpenAI client sending `headers` with every request (and `key`, a tenant's).
fn client(gateway: &TestGateway, key: &str, headers: &[(&str, &str)]) -> Client<OpenAIConfig> {
    let mut config = OpenAIConfig::new()
        .with_api_base(format!("{}/v1", gateway.url()))
        .with_api_key(key);
    for (name, value) in headers {
        config = config
            .with_header(
                http::HeaderName::try_from(*name).expect("a valid header name"),
                value.to_string(),
            )
            .expect("a valid test header");
    }
    Client::build(crate::common::http(), config)
}

/// Sends `body` through the SDK as `key` with `headers`: what an SDK user gets back.
async fn sdk_chat_as(
    gateway: &TestGateway,
    key: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> Result<CreateChatCompletionResponse, OpenAIError> {
    client(gateway, key, headers)
        .chat()
        .create(sdk_chat_request(body))
        .await
}

/// What the SDK raises for a request as `key` declaring `tools`, in the groups `groups` (the
/// `x-toolgate-group` header): a refusal the test expects, for the reason `why`.
async fn refused_in_groups(
    gateway: &TestGateway,
    key: &str,
    groups: &str,
    tools: &[&str],
    why: &str,
) -> OpenAIError {
    sdk_chat_as(
        gateway,
        key,
        &[("x-toolgate-group", groups)],
        request(tools, vec![]),
    )
    .await
    .expect_err(why)
}

/// The names of the tools the upstream was sent, in order; `None` without a `tools` field.
fn forwarded_tools(upstream: &ScriptedUpstream) -> Option<Vec<String>> {
    upstream.forwarded_json().get("tools").map(function_names)
}

/// Sends `body` through the SDK with `headers`; returns the tools the upstream saw.
async fn offered(
    upstream: &ScriptedUpstream,
    gateway: &TestGateway,
    headers: &[(&str, &str)],
    body: Value,
) -> Option<Vec<String>> {
    upstream.push(Reply::chat_text("ok"));
    sdk_chat_as(gateway, "sk-client", headers, body)
        .await
        .expect("the request is allowed");
    forwarded_tools(upstream)
}
