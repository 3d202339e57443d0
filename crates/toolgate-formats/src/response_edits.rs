//! Argument edits on responses: where each format keeps a call's arguments, and how a
//! replacement is written there. Complete bodies rewrite only the top-level field that holds
//! the calls (`choices`, `output`, `content`); every other top-level field keeps its bytes.
//! Stream events reuse the per-item functions below through the stream rewriter.

use bytes::Bytes;
use serde_json::Value;

use crate::edits::Edit;
use crate::format::{ParseError, WireFormat, read_json};
use crate::raw_object::RawObject;

/// One `Edit::ReplaceArguments`, borrowed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Replacement<'a> {
    pub choice: u32,
    pub call_id: Option<&'a str>,
    pub arguments: &'a str,
}

pub(crate) fn replacements(edits: &[Edit]) -> Vec<Replacement<'_>> {
    edits
        .iter()
        .filter_map(|edit| match edit {
            Edit::ReplaceArguments {
                choice,
                call_id,
                arguments,
            } => Some(Replacement {
                choice: *choice,
                call_id: call_id.as_deref(),
                arguments,
            }),
            _ => None,
        })
        .collect()
}

/// Applies argument edits to a complete response body; `None` when nothing changed.
pub(crate) fn apply(
    format: WireFormat,
    body: &[u8],
    edits: &[Edit],
) -> Result<Option<Bytes>, ParseError> {
    let wanted = replacements(edits);
    if wanted.is_empty() {
        return Ok(None);
    }
    let object: RawObject = read_json(body)?;
    let field = format.calls_field();
    let Some((_, raw)) = object.0.iter().find(|(key, _)| key == field) else {
        return Ok(None);
    };
    let mut calls: Value = serde_json::from_str(raw.get())?;
    let changed = apply_to_calls(format, &mut calls, &wanted)?;
    if !changed {
        return Ok(None);
    }
    let text = serde_json::to_string(&calls)?;
    Ok(Some(Bytes::from(object.write(&[(field, Some(text))]))))
}

/// Applies edits to the value of a response's calls field (also a streamed Responses
/// `response.completed` event's `response.output`). True when something changed.
pub(crate) fn apply_to_calls(
    format: WireFormat,
    calls: &mut Value,
    wanted: &[Replacement<'_>],
) -> Result<bool, ParseError> {
    let Some(items) = calls.as_array_mut() else {
        return Ok(false);
    };
    let mut changed = false;
    match format {
        WireFormat::ChatCompletions => {
            for (position, choice) in items.iter_mut().enumerate() {
                let index = choice
                    .get("index")
                    .and_then(Value::as_u64)
                    .map_or(position as u32, |index| index as u32);
                let Some(message) = choice.get_mut("message") else {
                    continue;
                };
                for edit in wanted.iter().filter(|edit| edit.choice == index) {
                    changed |= set_chat_call(message, edit.call_id, edit.arguments);
                }
            }
        }
        WireFormat::Responses => {
            for item in items.iter_mut() {
                for edit in wanted {
                    changed |= set_responses_item(item, edit);
                }
            }
        }
        WireFormat::AnthropicMessages => {
            for block in items.iter_mut() {
                for edit in wanted {
                    changed |= set_anthropic_block(block, edit)?;
                }
            }
        }
    }
    Ok(changed)
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

/// The id a Responses item's call is known by: its `call_id`, else its `id` (as the adapter).
pub(crate) fn responses_call_key(item: &Value) -> Option<&str> {
    item.get("call_id")
        .and_then(Value::as_str)
        .or_else(|| item.get("id").and_then(Value::as_str))
}

/// A Responses output item: `function_call` `arguments`, `custom_tool_call` `input`.
pub(crate) fn set_responses_item(item: &mut Value, edit: &Replacement<'_>) -> bool {
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

/// An Anthropic `tool_use` / `server_tool_use` block: `input` is an object, so the new
/// arguments must be JSON.
pub(crate) fn set_anthropic_block(
    block: &mut Value,
    edit: &Replacement<'_>,
) -> Result<bool, ParseError> {
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
pub(crate) fn anthropic_input(arguments: &str) -> Result<Value, ParseError> {
    serde_json::from_str(arguments).map_err(|error| {
        ParseError::new(format!(
            "replacement arguments for an Anthropic tool_use are not JSON: {error}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replace(call_id: Option<&str>, arguments: &str) -> Vec<Edit> {
        vec![Edit::ReplaceArguments {
            choice: 0,
            call_id: call_id.map(str::to_owned),
            arguments: arguments.to_owned(),
        }]
    }

    #[test]
    fn chat_arguments_are_replaced_and_other_fields_keep_their_bytes() {
        let body = br#"{"id":"x","choices":[{"index":0,"message":{"tool_calls":[{"id":"c1","type":"function","function":{"name":"a","arguments":"{\"k\":\"secret\"}"}},{"id":"c2","type":"function","function":{"name":"b","arguments":"{}"}}]}}],"usage":{"total_tokens" : 3}}"#;
        let edited = WireFormat::ChatCompletions
            .apply_response_edits(body, &replace(Some("c1"), r#"{"k":"[REDACTED]"}"#))
            .unwrap()
            .expect("changed");
        let text = std::str::from_utf8(&edited).unwrap();
        assert!(text.ends_with(r#""usage":{"total_tokens" : 3}}"#), "{text}");
        let parsed = WireFormat::ChatCompletions.parse_response(&edited).unwrap();
        assert_eq!(parsed.calls[0].arguments, r#"{"k":"[REDACTED]"}"#);
        assert_eq!(parsed.calls[1].arguments, "{}");
        assert!(
            WireFormat::ChatCompletions
                .apply_response_edits(body, &replace(Some("nope"), "{}"))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn responses_and_anthropic_arguments_are_replaced_in_their_own_shape() {
        let body = br#"{"object":"response","output":[{"type":"function_call","id":"fc_1","call_id":"call_1","name":"a","arguments":"{\"k\":1}"}]}"#;
        let edited = WireFormat::Responses
            .apply_response_edits(body, &replace(Some("call_1"), r#"{"k":2}"#))
            .unwrap()
            .expect("changed");
        let parsed = WireFormat::Responses.parse_response(&edited).unwrap();
        assert_eq!(parsed.calls[0].arguments, r#"{"k":2}"#);

        let body = br#"{"type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"a","input":{"k":"secret"}}]}"#;
        let edited = WireFormat::AnthropicMessages
            .apply_response_edits(body, &replace(Some("toolu_1"), r#"{"k":"[REDACTED]"}"#))
            .unwrap()
            .expect("changed");
        let value: Value = serde_json::from_slice(&edited).unwrap();
        assert_eq!(value["content"][0]["input"]["k"], "[REDACTED]");
        assert!(
            WireFormat::AnthropicMessages
                .apply_response_edits(body, &replace(Some("toolu_1"), "not json"))
                .is_err()
        );
    }
}
