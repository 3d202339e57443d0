//! Progressive tool disclosure (`tool_disclosure`, issue 43): the client declares many tools,
//! the model is shown an index, the discovery tools and the definitions it loaded, and the
//! gateway answers the model's discovery calls itself; the client sees only its own tools'
//! calls. A scripted upstream plays the model; the assertions are on what the client got and
//! on the requests the upstream was sent.

mod bad_input;
mod chat;
mod clients;
mod conversation;
mod formats;

use serde_json::{Value, json};

/// How many tools a request here declares: past the default `min_tools` (30).
const DECLARED: usize = 40;

/// A route with `tool_selection` and `tool_disclosure`, with extra lines for disclosure's
/// entry (its `on_block`, its settings table).
fn disclosed_route(disclosure_lines: &str) -> String {
    format!(
        "[[plugins]]\nname = \"tool_selection\"\n\n\
         [[plugins]]\nname = \"tool_disclosure\"\n{disclosure_lines}\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n"
    )
}

/// The `get_weather(city)` schema.
fn weather_schema() -> Value {
    json!({"type": "object", "properties": {"city": {"type": "string"}},
           "required": ["city"], "additionalProperties": false})
}

/// The name of the `n`th filler tool.
fn filler(n: usize) -> String {
    format!("tool_{n:03}")
}

/// `get_weather` and `DECLARED - 1` filler tools as chat tools.
fn chat_tools() -> Vec<Value> {
    let mut tools = vec![json!({"type": "function", "function": {
        "name": "get_weather",
        "description": "Reports the weather of a city. Uses the national service.",
        "parameters": weather_schema()}})];
    tools.extend((1..DECLARED).map(|n| {
        json!({"type": "function", "function": {"name": filler(n),
            "description": format!("Does task number {n}. Rarely needed."),
            "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}})
    }));
    tools
}

/// A chat request declaring the chat tools.
fn chat_request() -> Value {
    json!({
        "model": "gpt-4o-mini",
        "messages": [{"role": "system", "content": "You are helpful."},
                     {"role": "user", "content": "Weather in Paris, please."}],
        "tools": chat_tools(),
    })
}

/// The names of the tools a request sent upstream declares (chat, Responses or Anthropic).
fn sent_tool_names(request: &Value) -> Vec<String> {
    let tools = request["tools"].as_array().cloned().unwrap_or_default();
    tools
        .iter()
        .filter_map(|tool| {
            tool["function"]["name"]
                .as_str()
                .or_else(|| tool["name"].as_str())
                .map(str::to_owned)
        })
        .collect()
}

/// The discovery tools, as every disclosed request declares them.
const DISCOVERY: [&str; 3] = ["list_tools", "load_tool", "load_tool_resource"];

/// The model loads `get_weather`.
const LOAD_WEATHER: (&str, &str, &str) =
    ("call_load", "load_tool", r#"{"tool_name":"get_weather"}"#);
/// The model calls `get_weather`.
const WEATHER: (&str, &str, &str) = ("call_weather", "get_weather", r#"{"city":"Paris"}"#);

/// The last `n` items of a request's conversation array.
fn last_items(request: &Value, field: &str, n: usize) -> Vec<Value> {
    let items = request[field].as_array().cloned().unwrap_or_default();
    items[items.len().saturating_sub(n)..].to_vec()
}
