//! The Responses API under progressive disclosure: the declared function and custom tools with
//! their descriptions (built-in tools are the provider's, never disclosed), a discovery tool as
//! a function tool, and the tool index after the request's `instructions`.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::disclosure::{
    DiscoveryTool, ToolDefinition, appended_text, flat_definitions, text_field, with_field,
};
use crate::format::ParseError;
use crate::raw_object::RawObject;

pub(crate) fn definitions(body: &[u8]) -> Result<Vec<ToolDefinition>, ParseError> {
    flat_definitions(body, |kind| matches!(kind, Some("function" | "custom")))
}

pub(crate) fn discovery_tool(tool: &DiscoveryTool) -> Value {
    json!({"type": "function", "name": tool.name, "description": tool.description,
        "parameters": tool.parameters, "strict": false})
}

/// `instructions` with `text` after them (a request without any gets `text` alone).
pub(crate) fn add_instructions(body: &[u8], text: &str) -> Result<Bytes, ParseError> {
    let object: RawObject = crate::format::read_json(body)?;
    let existing = object
        .0
        .iter()
        .find(|(key, _)| key == "instructions")
        .and_then(|(_, raw)| serde_json::from_str::<Option<String>>(raw.get()).ok())
        .flatten()
        .unwrap_or_default();
    let instructions = Value::String(appended_text(&existing, text)).to_string();
    Ok(with_field(&object, "instructions", instructions))
}

/// The tools a `tool_choice` forces: a function or custom tool by `name`, or each tool an
/// `allowed_tools` choice allows; `"auto"` and friends force none.
pub(crate) fn forced_tools(choice: &Value) -> Vec<String> {
    if let Some(allowed) = choice.get("tools").and_then(Value::as_array) {
        return allowed
            .iter()
            .filter_map(|tool| text_field(tool, "name"))
            .collect();
    }
    text_field(choice, "name").into_iter().collect()
}
