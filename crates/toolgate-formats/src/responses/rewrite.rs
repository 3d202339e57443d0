//! Responses, edited: a call's new arguments written into a complete answer's `output` items
//! and into the `response.*` events of a stream.

use serde_json::Value;

use crate::format::ParseError;
use crate::format::WireFormat;
use crate::response_edits::{self, Replacement};
use crate::stream::StreamRewriter;
use crate::stream::rewrite::StreamEdit;
use crate::stream::usage::UsageSlot;

/// Replaces the arguments of the edited calls among `items`, the answer's calls field.
pub(super) fn replace_arguments(
    items: &mut [Value],
    wanted: &[Replacement<'_>],
) -> Result<bool, ParseError> {
    response_edits::offer_to_each_item(items, wanted, |item, edit| {
        Ok(set_responses_item(item, edit))
    })
}

/// The id a Responses item's call is known by: its `call_id`, else its `id` (as the adapter).
fn responses_call_key(item: &Value) -> Option<&str> {
    item.get("call_id")
        .and_then(Value::as_str)
        .or_else(|| item.get("id").and_then(Value::as_str))
}

/// A Responses output item: `function_call` `arguments`, `custom_tool_call` `input`.
fn set_responses_item(item: &mut Value, edit: &Replacement<'_>) -> bool {
    if edit.call_id.is_none() || responses_call_key(item) != edit.call_id {
        return false;
    }
    let field = match item.get("type").and_then(Value::as_str) {
        Some("function_call") => "arguments",
        Some("custom_tool_call") => "input",
        _ => return false,
    };
    item[field] = Value::String(edit.arguments.to_owned());
    true
}

/// The usage of the response an event carries (`response.completed` and the other final
/// events), a whole report; the opening events' is `null`.
pub(super) fn event_usage(event: &mut Value) -> Option<UsageSlot<'_>> {
    event
        .get_mut("response")?
        .get_mut("usage")
        .filter(|usage| usage.is_object())
        .map(UsageSlot::Whole)
}

impl StreamRewriter {
    /// Rewrites one of this format's events for the edits made so far; true when it changed.
    pub(crate) fn responses(&mut self, value: &mut Value) -> bool {
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match kind.as_str() {
            "response.output_item.added" | "response.output_item.done" => {
                let Some(item) = value.get_mut("item") else {
                    return false;
                };
                let Some(key) = responses_call_key(item).map(str::to_owned) else {
                    return false;
                };
                if let Some(id) = item.get("id").and_then(Value::as_str) {
                    self.items.insert(id.to_owned(), key.clone());
                }
                let Some(edit) = self.edit_for(0, Some(&key)) else {
                    return false;
                };
                let arguments = if kind.ends_with(".added") {
                    String::new()
                } else {
                    edit.arguments.clone()
                };
                set_responses_item(
                    item,
                    &Replacement {
                        choice: 0,
                        call_id: Some(&key),
                        arguments: &arguments,
                    },
                )
            }
            "response.function_call_arguments.delta" | "response.custom_tool_call_input.delta" => {
                let Some(edit) = self.item_edit(value) else {
                    return false;
                };
                value["delta"] = Value::String(Self::fragment(edit));
                true
            }
            "response.function_call_arguments.done" | "response.custom_tool_call_input.done" => {
                let field = if kind.starts_with("response.function_call") {
                    "arguments"
                } else {
                    "input"
                };
                let Some(edit) = self.item_edit(value) else {
                    return false;
                };
                value[field] = Value::String(edit.arguments.clone());
                true
            }
            _ => {
                // `response.completed` and its kin repeat the whole output.
                let Some(output) = value
                    .get_mut("response")
                    .and_then(|response| response.get_mut("output"))
                else {
                    return false;
                };
                let wanted: Vec<Replacement<'_>> = self
                    .edits
                    .iter()
                    .map(|edit| Replacement {
                        choice: edit.choice,
                        call_id: edit.call_id.as_deref(),
                        arguments: &edit.arguments,
                    })
                    .collect();
                response_edits::apply_to_calls(WireFormat::Responses, output, &wanted)
                    .unwrap_or(false)
            }
        }
    }

    /// The edit of the call a Responses fragment event names by `item_id`.
    fn item_edit(&mut self, value: &Value) -> Option<&mut StreamEdit> {
        let item_id = value.get("item_id").and_then(Value::as_str)?;
        let key = self
            .items
            .get(item_id)
            .cloned()
            .unwrap_or_else(|| item_id.to_owned());
        self.edit_for(0, Some(&key))
    }
}
