//! tool_selection end to end: a real OpenAI client, the gateway, and a scripted upstream.
//! This module holds the requests the files below send; each file is one side of the guard.

mod checks;
mod kinds;
mod modes;
mod passing;

use crate::common::{Reply, ScriptedUpstream, TestGateway, start_guarded};
use serde_json::{Value, json};

/// A guarded chat route ([`start_guarded`] with the defaults) whose upstream answers the first
/// request with a completion making `calls`.
async fn guarded_answering(calls: &[(&str, &str, &str)]) -> (ScriptedUpstream, TestGateway) {
    let (upstream, gateway) = start_guarded("").await;
    upstream.push(Reply::chat_calls(calls));
    (upstream, gateway)
}

/// A realistic request declaring a weather lookup and an e-mail sender.
fn request_with_tools() -> Value {
    json!({
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What's the weather in Paris? Then mail it to ops@example.com."}
        ],
        "tools": [
            {"type": "function", "function": {
                "name": "get_weather",
                "description": "Current weather for a city",
                "parameters": {"type": "object",
                    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
                    "required": ["city"], "additionalProperties": false}}},
            {"type": "function", "function": {
                "name": "send_email",
                "description": "Send an e-mail",
                "parameters": {"type": "object",
                    "properties": {"to": {"type": "string"}, "subject": {"type": "string"}, "body": {"type": "string"}},
                    "required": ["to", "subject", "body"]}}}
        ]
    })
}

/// A request declaring the custom tool `sql` and the function `get_weather`, so each name is
/// declared under one kind only.
fn request_with_both_kinds(stream: bool) -> Value {
    json!({
        "model": "gpt-5",
        "stream": stream,
        "messages": [{"role": "user", "content": "count users, then the weather in Oslo"}],
        "tools": [
            // `format` is optional in the API, but async-openai's type requires it.
            {"type": "custom", "custom": {"name": "sql", "description": "read-only SQL",
                                          "format": {"type": "text"}}},
            {"type": "function", "function": {"name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
        ]
    })
}
