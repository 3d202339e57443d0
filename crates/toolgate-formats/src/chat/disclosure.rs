//! Chat Completions under progressive disclosure: the declared function and custom tools (and
//! legacy `functions`) with their descriptions, a discovery tool as a function tool, and the
//! tool index as a system message after the client's own.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::disclosure::{DiscoveryTool, ToolDefinition, definitions_of, field_items, text_field};
use crate::format::ParseError;
use crate::on_block::array_items;
use crate::raw_object::RawObject;

pub(crate) fn definitions(body: &[u8]) -> Result<Vec<ToolDefinition>, ParseError> {
    let mut found = definitions_of(field_items(body, "tools")?.unwrap_or_default(), |item| {
        let inner = match item.get("type").and_then(Value::as_str) {
            Some("custom") => item.get("custom")?,
            _ => item.get("function")?,
        };
        Some((text_field(inner, "name")?, text_field(inner, "description")))
    });
    found.extend(definitions_of(
        field_items(body, "functions")?.unwrap_or_default(),
        |item| Some((text_field(item, "name")?, text_field(item, "description"))),
    ));
    Ok(found)
}

pub(crate) fn discovery_tool(tool: &DiscoveryTool) -> Value {
    json!({"type": "function", "function": {
        "name": tool.name, "description": tool.description, "parameters": tool.parameters}})
}

/// A system message with `text`, after the system and developer messages the conversation
/// opens with, so the client's own instructions still come first.
pub(crate) fn add_instructions(body: &[u8], text: &str) -> Result<Bytes, ParseError> {
    let object: RawObject = crate::format::read_json(body)?;
    let Some((_, messages)) = object.0.iter().find(|(key, _)| key == "messages") else {
        return Err(ParseError::new("the request has no `messages`"));
    };
    let mut items = array_items(messages)?;
    let opening = items
        .iter()
        .take_while(|item| {
            let role = serde_json::from_str::<Value>(item)
                .ok()
                .and_then(|message| text_field(&message, "role"));
            matches!(role.as_deref(), Some("system" | "developer"))
        })
        .count();
    items.insert(
        opening,
        json!({"role": "system", "content": text}).to_string(),
    );
    let array = format!("[{}]", items.join(","));
    Ok(Bytes::from(object.write(&[("messages", Some(array))])))
}

/// The tools a `tool_choice` (`{"type":"function","function":{"name"}}`, a custom tool's) or a
/// legacy `function_call` (`{"name"}`) forces; `"auto"` and friends force none.
pub(crate) fn forced_tools(choice: &Value) -> Vec<String> {
    let named = |part: &str| choice.get(part).and_then(|inner| text_field(inner, "name"));
    named("function")
        .or_else(|| named("custom"))
        .or_else(|| text_field(choice, "name"))
        .into_iter()
        .collect()
}
