//! Chat completions as a forgiving client reads them (`crate::lenient` is the driver): the
//! calls of a completion's `message` and a chunk's `delta`, and a stream's call fragments
//! joined by choice and `index`.

use serde_json::Value;

use crate::lenient::{FormatCallKey, LenientCall, Update, items, number, text};

/// Keys whose presence in text that is not JSON may hide one of this format's calls.
pub(crate) const MARKERS: &[&str] = &["tool_calls", "function_call", "\"function\""];

pub(crate) fn calls(value: &Value, calls: &mut Vec<LenientCall>) {
    for choice in items(value.get("choices")) {
        for part in ["message", "delta"] {
            if let Some(message) = choice.get(part) {
                message_calls(message, calls);
            }
        }
    }
}

fn message_calls(message: &Value, calls: &mut Vec<LenientCall>) {
    for call in items(message.get("tool_calls")) {
        let custom = text(call.get("type")) == "custom";
        let (first, second) = match custom {
            true => ("custom", "function"),
            false => ("function", "custom"),
        };
        let part = call
            .get(first)
            .filter(|part| part.is_object())
            .or(call.get(second));
        calls.push(LenientCall {
            name: text(part.and_then(|part| part.get("name"))),
            arguments: text(part.and_then(|part| part.get("arguments").or(part.get("input")))),
        });
    }
    if let Some(function) = message.get("function_call").filter(|call| !call.is_null()) {
        calls.push(LenientCall {
            name: text(function.get("name")),
            arguments: text(function.get("arguments")),
        });
    }
}

pub(crate) fn stream_updates(value: &Value, updates: &mut Vec<(FormatCallKey, Update)>) {
    for (position, choice) in items(value.get("choices")).enumerate() {
        let choice_index = number(choice.get("index")).unwrap_or(position as u64);
        let Some(delta) = choice.get("delta") else {
            continue;
        };
        for (position, call) in items(delta.get("tool_calls")).enumerate() {
            let index = number(call.get("index")).unwrap_or(position as u64);
            let mut found = Vec::new();
            message_calls(&serde_json::json!({ "tool_calls": [call] }), &mut found);
            for fragment in found {
                updates.push((
                    (0, choice_index.to_string(), index),
                    Update::Append {
                        name: fragment.name,
                        arguments: fragment.arguments,
                    },
                ));
            }
        }
        if let Some(function) = delta.get("function_call").filter(|call| !call.is_null()) {
            updates.push((
                (1, choice_index.to_string(), 0),
                Update::Append {
                    name: text(function.get("name")),
                    arguments: text(function.get("arguments")),
                },
            ));
        }
    }
}
