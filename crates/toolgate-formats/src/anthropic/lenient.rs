//! Anthropic Messages as a forgiving client reads them (`crate::lenient` is the driver): the
//! call blocks of a message's `content` and of the stream's events, a stream's blocks joined by
//! `index`, their input pieces replacing the input a block's start carried.

use serde_json::Value;

use crate::lenient::{FormatCallKey, LenientCall, Update, items, number, text};

/// Keys whose presence in text that is not JSON may hide one of this format's calls.
pub(crate) const MARKERS: &[&str] = &["tool_use", "input_json_delta"];

pub(crate) fn calls(value: &Value, calls: &mut Vec<LenientCall>) {
    for block in items(value.get("content")) {
        calls.extend(block_call(block));
    }
    match text(value.get("type")).as_str() {
        "message_start" => {
            let content = value
                .get("message")
                .and_then(|message| message.get("content"));
            for block in items(content) {
                calls.extend(block_call(block));
            }
        }
        "content_block_start" => {
            calls.extend(value.get("content_block").and_then(block_call));
        }
        "content_block_delta" => {
            let delta = value.get("delta");
            let delta_kind = text(delta.and_then(|delta| delta.get("type")));
            if delta_kind == "input_json_delta" {
                calls.push(LenientCall {
                    name: String::new(),
                    arguments: text(delta.and_then(|delta| delta.get("partial_json"))),
                });
            }
        }
        _ => {}
    }
}

fn block_call(block: &Value) -> Option<LenientCall> {
    let kind = text(block.get("type"));
    // SDKs tell a block by its exact type: one whose type merely ends so (`{tool_use`,
    // `xtool_use`) is an unknown block to every client, not a call.
    let call = matches!(
        kind.as_str(),
        "tool_use" | "server_tool_use" | "mcp_tool_use"
    );
    call.then(|| LenientCall {
        name: text(block.get("name")),
        arguments: block
            .get("input")
            .map_or_else(String::new, |input| text(Some(input))),
    })
}

pub(crate) fn stream_updates(value: &Value, updates: &mut Vec<(FormatCallKey, Update)>) {
    let block_index = number(value.get("index")).unwrap_or(0);
    match text(value.get("type")).as_str() {
        "message_start" => {
            let content = value
                .get("message")
                .and_then(|message| message.get("content"));
            for (index, block) in items(content).enumerate() {
                if let Some(call) = block_call(block) {
                    updates.push(((3, String::new(), index as u64), Update::Whole(call)));
                }
            }
        }
        "content_block_start" => {
            if let Some(call) = value.get("content_block").and_then(block_call) {
                updates.push(((3, String::new(), block_index), Update::Whole(call)));
            }
        }
        "content_block_delta" => {
            let delta = value.get("delta");
            if text(delta.and_then(|delta| delta.get("type"))) == "input_json_delta" {
                let piece = text(delta.and_then(|delta| delta.get("partial_json")));
                updates.push(((3, String::new(), block_index), Update::InputPiece(piece)));
            }
        }
        _ => {}
    }
}
