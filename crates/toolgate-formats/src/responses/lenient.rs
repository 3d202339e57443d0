//! The Responses API as a forgiving client reads it (`crate::lenient` is the driver): the call
//! items of a response's `output` and of the `response.*` events, a stream's items joined by
//! their id or position.

use serde_json::Value;

use crate::lenient::{FormatCallKey, LenientCall, Update, items, number, text};

/// Keys whose presence in text that is not JSON may hide one of this format's calls.
pub(crate) const MARKERS: &[&str] = &["custom_tool_call", "_call\"", "output_item"];

pub(crate) fn calls(value: &Value, calls: &mut Vec<LenientCall>) {
    for item in items(value.get("output")) {
        calls.extend(item_call(item));
    }
    let kind = text(value.get("type"));
    if kind.starts_with("response.") {
        calls.extend(value.get("item").and_then(item_call));
        if let Some(response) = value.get("response") {
            for item in items(response.get("output")) {
                calls.extend(item_call(item));
            }
        }
        if kind.contains("function_call_arguments") || kind.contains("custom_tool_call_input") {
            calls.push(LenientCall {
                name: text(value.get("name")),
                arguments: text(value.get("delta").or(value.get("arguments"))),
            });
        }
    }
}

fn item_call(item: &Value) -> Option<LenientCall> {
    let kind = text(item.get("type"));
    let named = matches!(
        kind.as_str(),
        "function_call" | "custom_tool_call" | "mcp_call" | "mcp_approval_request"
    );
    if !named && !kind.ends_with("_call") {
        return None;
    }
    let name = match named {
        true => text(item.get("name")),
        false => crate::tool::builtin_tool_name(&kind).to_owned(),
    };
    Some(LenientCall {
        name,
        arguments: text(item.get("arguments").or(item.get("input"))),
    })
}

pub(crate) fn stream_updates(value: &Value, updates: &mut Vec<(FormatCallKey, Update)>) {
    let kind = text(value.get("type"));
    if !kind.starts_with("response.") {
        return;
    }
    let item_key = |item: &Value, fallback: Option<u64>| {
        let id = text(item.get("id"));
        let id = if id.is_empty() {
            fallback.map(|index| index.to_string()).unwrap_or_default()
        } else {
            id
        };
        (2, id, 0)
    };
    let output_index = number(value.get("output_index"));
    if let Some(item) = value.get("item")
        && let Some(call) = item_call(item)
    {
        updates.push((item_key(item, output_index), Update::Whole(call)));
    }
    if let Some(response) = value.get("response") {
        for (index, item) in items(response.get("output")).enumerate() {
            if let Some(call) = item_call(item) {
                updates.push((item_key(item, Some(index as u64)), Update::Whole(call)));
            }
        }
    }
    if kind.contains("function_call_arguments") || kind.contains("custom_tool_call_input") {
        let id = text(value.get("item_id"));
        let id = if id.is_empty() {
            output_index
                .map(|index| index.to_string())
                .unwrap_or_default()
        } else {
            id
        };
        updates.push((
            (2, id, 0),
            Update::Whole(LenientCall {
                name: text(value.get("name")),
                arguments: String::new(),
            }),
        ));
    }
}
