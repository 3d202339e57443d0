//! Anthropic Messages under progressive disclosure: the declared client tools with their
//! descriptions (server tools such as `web_search_…` are Anthropic's, never disclosed), a
//! discovery tool with an `input_schema`, and the tool index after the request's `system`.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::disclosure::{
    DiscoveryTool, ToolDefinition, appended_text, flat_definitions, text_field, with_field,
};
use crate::format::ParseError;
use crate::raw_object::RawObject;

pub(crate) fn definitions(body: &[u8]) -> Result<Vec<ToolDefinition>, ParseError> {
    flat_definitions(body, |kind| matches!(kind, None | Some("custom")))
}

pub(crate) fn discovery_tool(tool: &DiscoveryTool) -> Value {
    json!({"name": tool.name, "description": tool.description, "input_schema": tool.parameters})
}

/// `system` with `text` after it: appended to a string, a text block added to a list of
/// blocks, or `text` alone.
pub(crate) fn add_instructions(body: &[u8], text: &str) -> Result<Bytes, ParseError> {
    let object: RawObject = crate::format::read_json(body)?;
    let existing = object
        .0
        .iter()
        .find(|(key, _)| key == "system")
        .map(|(_, raw)| serde_json::from_str::<Value>(raw.get()))
        .transpose()
        .map_err(|_| ParseError::new("the request's `system` is not JSON"))?;
    let system = match existing {
        Some(Value::Array(mut blocks)) => {
            blocks.push(json!({"type": "text", "text": text}));
            Value::Array(blocks)
        }
        Some(Value::String(existing)) => Value::String(appended_text(&existing, text)),
        Some(Value::Null) | None => Value::String(text.to_owned()),
        Some(_) => {
            return Err(ParseError::new(
                "the request's `system` is neither text nor blocks",
            ));
        }
    }
    .to_string();
    Ok(with_field(&object, "system", system))
}

/// The tool a `tool_choice` of type `tool` forces (`{"type":"tool","name"}`); `auto`, `any`
/// and `none` force none.
pub(crate) fn forced_tools(choice: &Value) -> Vec<String> {
    match choice.get("type").and_then(Value::as_str) {
        Some("tool") => text_field(choice, "name").into_iter().collect(),
        _ => Vec::new(),
    }
}
