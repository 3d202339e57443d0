//! `on_block` (issue 23): what a block becomes when the route says so — `retry` sends the
//! conversation back to the model with each blocked call answered by its violations, `message`
//! answers a 200 whose assistant text says what was blocked. A scripted upstream answers a bad
//! call first and a good one after; the assertions are on what the client got and on the
//! upstream's recorded second request (the feedback, in the format's own shape).

mod agents;
mod chat;
mod config;
mod formats;
mod held_text;
pub(crate) mod streams;
mod usage;

use serde_json::{Value, json};

/// Every route under `/v1` guarded by a gateway-wide tool_selection whose entry has these
/// `on_block` lines.
fn guarded_with(on_block: &str) -> String {
    format!(
        "[[plugins]]\nname = \"tool_selection\"\n{on_block}\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n"
    )
}

/// The `get_weather(city)` schema every request here declares.
fn weather_schema() -> Value {
    json!({"type": "object", "properties": {"city": {"type": "string"}},
           "required": ["city"], "additionalProperties": false})
}

/// A chat request declaring `get_weather(city)`.
fn chat_request() -> Value {
    json!({
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Weather in Paris, please."}],
        "tools": [{"type": "function",
                   "function": {"name": "get_weather", "parameters": weather_schema()}}]
    })
}

/// The bad call: a tool the request did not declare.
const BAD: (&str, &str, &str) = ("call_bad", "delete_user", r#"{"id":7}"#);
/// The good call, once the model read why the bad one did not run.
const GOOD: (&str, &str, &str) = ("call_good", "get_weather", r#"{"city":"Paris"}"#);

/// The last `n` items of a request's conversation array.
fn last_items(request: &Value, field: &str, n: usize) -> Vec<Value> {
    let items = request[field].as_array().cloned().unwrap_or_default();
    items[items.len().saturating_sub(n)..].to_vec()
}
