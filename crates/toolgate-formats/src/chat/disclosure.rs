//! Chat Completions under progressive disclosure: the declared function and custom tools with
//! their descriptions, a discovery tool as a function tool, and the tool index as a system
//! message after the client's own.

use std::borrow::Cow;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::disclosure::{
    DiscoveryTool, NamedWire, ToolDefinition, definitions_of, field_items, text_field,
};
use crate::format::ParseError;
use crate::on_block::array_items;
use crate::raw_object::RawObject;

/// The function and custom tools of `tools`. Legacy `functions` are not disclosed: an entry of
/// that list cannot be declared again in `tools`, so they go as declared.
pub(crate) fn definitions(body: &[u8]) -> Result<Vec<ToolDefinition>, ParseError> {
    #[derive(Deserialize)]
    struct ChatToolWire<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        function: Option<NamedWire<'a>>,
        #[serde(borrow, default)]
        custom: Option<NamedWire<'a>>,
    }
    let object: RawObject = crate::format::read_json(body)?;
    let items = field_items(&object, "tools")?;
    Ok(definitions_of(items, |text| {
        let tool: ChatToolWire = serde_json::from_str(text).ok()?;
        match tool.kind.as_deref() {
            Some("custom") => tool.custom,
            _ => tool.function,
        }
    }))
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
