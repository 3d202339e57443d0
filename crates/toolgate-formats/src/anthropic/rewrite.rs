//! Anthropic messages, edited: a call's new `input` written into a complete answer's
//! `tool_use` blocks and into the `content_block_*` events of a stream.

use serde_json::Value;

use crate::format::ParseError;
use crate::response_edits::{self, Replacement};
use crate::stream::StreamRewriter;
use crate::stream::usage::UsageSlot;

/// Replaces the arguments of the edited calls among `items`, the answer's calls field.
pub(super) fn replace_arguments(
    items: &mut [Value],
    wanted: &[Replacement<'_>],
) -> Result<bool, ParseError> {
    response_edits::offer_to_each_item(items, wanted, set_anthropic_block)
}

/// An Anthropic `tool_use` / `server_tool_use` block: `input` is an object, so the new
/// arguments must be JSON.
fn set_anthropic_block(block: &mut Value, edit: &Replacement<'_>) -> Result<bool, ParseError> {
    let is_call = matches!(
        block.get("type").and_then(Value::as_str),
        Some("tool_use" | "server_tool_use")
    );
    if !is_call || edit.call_id.is_none() || block.get("id").and_then(Value::as_str) != edit.call_id
    {
        return Ok(false);
    }
    block["input"] = anthropic_input(edit.arguments)?;
    Ok(true)
}

/// Arguments as the JSON value an Anthropic `input` holds.
fn anthropic_input(arguments: &str) -> Result<Value, ParseError> {
    serde_json::from_str(arguments).map_err(|error| {
        ParseError::new(format!(
            "replacement arguments for an Anthropic tool_use are not JSON: {error}"
        ))
    })
}

/// `message_start`'s usage opens the report; `message_delta`'s counts replace the ones it
/// names.
pub(super) fn event_usage(event: &mut Value) -> Option<UsageSlot<'_>> {
    let kind = event.get("type").and_then(Value::as_str)?;
    let (usage, whole) = match kind {
        "message_start" => (event.get_mut("message")?.get_mut("usage")?, true),
        "message_delta" => (event.get_mut("usage")?, false),
        _ => return None,
    };
    if !usage.is_object() {
        return None;
    }
    Some(if whole {
        UsageSlot::Whole(usage)
    } else {
        UsageSlot::Update(usage)
    })
}

impl StreamRewriter {
    /// Rewrites one of this format's events for the edits made so far; true when it changed.
    pub(crate) fn anthropic(&mut self, value: &mut Value) -> bool {
        let index = value.get("index").and_then(Value::as_u64).unwrap_or(0);
        match value.get("type").and_then(Value::as_str) {
            Some("content_block_start") => {
                let Some(block) = value.get_mut("content_block") else {
                    return false;
                };
                let Some(id) = block.get("id").and_then(Value::as_str).map(str::to_owned) else {
                    return false;
                };
                self.slots.insert((0, index), id.clone());
                let Some(edit) = self.edit_for(0, Some(&id)) else {
                    return false;
                };
                let Ok(input) = anthropic_input(&edit.arguments) else {
                    return false;
                };
                block["input"] = input;
                true
            }
            Some("content_block_delta") => {
                let is_json = value
                    .get("delta")
                    .and_then(|delta| delta.get("type"))
                    .and_then(Value::as_str)
                    == Some("input_json_delta");
                let Some(id) = self.slots.get(&(0, index)).cloned() else {
                    return false;
                };
                if !is_json {
                    return false;
                }
                let Some(edit) = self.edit_for(0, Some(&id)) else {
                    return false;
                };
                value["delta"]["partial_json"] = Value::String(Self::fragment(edit));
                true
            }
            _ => false,
        }
    }
}
