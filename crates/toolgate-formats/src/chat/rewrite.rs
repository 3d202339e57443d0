//! Chat completions, edited: a call's new arguments written into a complete answer's
//! `message` and into the `delta` fragments of a stream.

use serde_json::Value;

use crate::format::ParseError;
use crate::response_edits::Replacement;
use crate::stream::StreamRewriter;
use crate::stream::usage::UsageSlot;

/// Replaces the arguments of the edited calls among `items`, the answer's calls field.
pub(super) fn replace_arguments(
    items: &mut [Value],
    wanted: &[Replacement<'_>],
) -> Result<bool, ParseError> {
    let mut changed = false;
    for (index, message) in choice_parts(items, "message") {
        for edit in wanted.iter().filter(|edit| edit.choice == index) {
            changed |= set_chat_call(message, edit.call_id, edit.arguments);
        }
    }
    Ok(changed)
}

/// The `part` (`message`, or a chunk's `delta`) of each choice that has one, with the choice's
/// index: its `index` field, else its position.
fn choice_parts<'v>(
    choices: &'v mut [Value],
    part: &'static str,
) -> impl Iterator<Item = (u32, &'v mut Value)> + 'v {
    (choices.iter_mut().enumerate()).filter_map(move |(position, choice)| {
        let index = choice
            .get("index")
            .and_then(Value::as_u64)
            .map_or(position as u32, |index| index as u32);
        Some((index, choice.get_mut(part)?))
    })
}

/// A chat message's call: `tool_calls[]` by id (function `arguments` or custom `input`), or the
/// legacy `function_call` when the edit names no id.
fn set_chat_call(message: &mut Value, call_id: Option<&str>, arguments: &str) -> bool {
    match call_id {
        None => match message.get_mut("function_call") {
            Some(function) if function.is_object() => {
                function["arguments"] = Value::String(arguments.to_owned());
                true
            }
            _ => false,
        },
        Some(id) => {
            let Some(calls) = message.get_mut("tool_calls").and_then(Value::as_array_mut) else {
                return false;
            };
            let mut changed = false;
            for call in calls
                .iter_mut()
                .filter(|call| call.get("id").and_then(Value::as_str) == Some(id))
            {
                if let Some(custom) = call.get_mut("custom").filter(|custom| custom.is_object()) {
                    custom["input"] = Value::String(arguments.to_owned());
                    changed = true;
                } else if let Some(function) = call
                    .get_mut("function")
                    .filter(|function| function.is_object())
                {
                    function["arguments"] = Value::String(arguments.to_owned());
                    changed = true;
                }
            }
            changed
        }
    }
}

/// A chunk's `usage` (the last chunk's, with `stream_options.include_usage`), a whole report.
pub(super) fn event_usage(event: &mut Value) -> Option<UsageSlot<'_>> {
    event
        .get_mut("usage")
        .filter(|usage| usage.is_object())
        .map(UsageSlot::Whole)
}

impl StreamRewriter {
    /// Rewrites one of this format's events for the edits made so far; true when it changed.
    pub(crate) fn chat(&mut self, value: &mut Value) -> bool {
        let Some(choices) = value.get_mut("choices").and_then(Value::as_array_mut) else {
            return false;
        };
        let mut changed = false;
        for (index, delta) in choice_parts(choices, "delta") {
            if let Some(calls) = delta.get_mut("tool_calls").and_then(Value::as_array_mut) {
                for (slot_position, call) in calls.iter_mut().enumerate() {
                    let slot = call
                        .get("index")
                        .and_then(Value::as_u64)
                        .unwrap_or(slot_position as u64);
                    if let Some(id) = call.get("id").and_then(Value::as_str) {
                        self.slots.insert((index, slot), id.to_owned());
                    }
                    let Some(id) = self.slots.get(&(index, slot)).cloned() else {
                        continue;
                    };
                    let (object, field) = if call.get("custom").is_some() {
                        ("custom", "input")
                    } else if call.get("function").is_some() {
                        ("function", "arguments")
                    } else {
                        continue;
                    };
                    let Some(edit) = self.edit_for(index, Some(&id)) else {
                        continue;
                    };
                    call[object][field] = Value::String(Self::fragment(edit));
                    changed = true;
                }
            }
            if delta.get("function_call").is_some_and(Value::is_object)
                && let Some(edit) = self.edit_for(index, None)
            {
                delta["function_call"]["arguments"] = Value::String(Self::fragment(edit));
                changed = true;
            }
        }
        changed
    }
}
