//! The forgiving reader: the tool calls a lenient client would act on in an answer, in any of
//! the three formats, as a JSON body or as stream events. It reads the way `JSON.parse`,
//! Python's `json` and the SDKs built on them do: a repeated key counts as its last occurrence,
//! invalid UTF-8 is replaced, an index written as a string is a number, a name that is a number
//! is its text, and an event is dispatched by its own shape (`choices`, or its `type`), whatever
//! format the request was in.
//!
//! The gateway asks it only when its strict readers refuse an answer or an event, to learn
//! whether a client could still read a call from it (then the answer is blocked, never passed).
//! The property tests use it as the oracle: no answer may carry a call it finds that toolgate
//! neither checked nor blocked.
//!
//! This file is the driver; each format folder's `lenient.rs` reads its own shapes, and every
//! format's reading is asked of every document.

use serde_json::Value;

use crate::format::WireFormat;

/// A call as a forgiving client reads it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LenientCall {
    /// The tool the client would dispatch to; empty when the answer names none (a fragment of a
    /// call whose name is elsewhere, or a call item without a name).
    pub name: String,
    /// The arguments as text (a string's content, other JSON as written).
    pub arguments: String,
}

/// Whether a client could read a tool call (or part of one) from this body or event data.
/// Text that is not JSON counts when it holds a call's markers.
pub fn may_carry_calls(data: &[u8]) -> bool {
    match read_value(data) {
        Some(value) => !calls_in_value(&value).is_empty(),
        None => {
            // UTF-16 and UTF-32 text holds its ASCII with NUL bytes between: a client that
            // decodes it reads the markers those bytes interleave.
            let text = String::from_utf8_lossy(data);
            let text = match text.contains('\0') {
                true => std::borrow::Cow::Owned(text.replace('\0', "")),
                false => text,
            };
            // Keys whose presence in text that is not even JSON means a call may be hidden in
            // it: a client with a partial or repairing JSON parser could still find one.
            (WireFormat::ALL.iter())
                .flat_map(|format| format.adapter().call_markers())
                .any(|marker| text.contains(marker))
        }
    }
}

/// The calls in one JSON document: a whole answer, or one stream event's data, in any format.
/// `None` when it is not JSON even to a forgiving reader.
pub fn calls_in_json(data: &[u8]) -> Option<Vec<LenientCall>> {
    read_value(data).map(|value| calls_in_value(&value))
}

/// Reads JSON as a forgiving client does: invalid UTF-8 replaced, the last of repeated keys.
fn read_value(data: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(data);
    let value: Value = serde_json::from_str(text.trim()).ok()?;
    value.is_object().then_some(value)
}

fn calls_in_value(value: &Value) -> Vec<LenientCall> {
    let mut calls = Vec::new();
    for format in WireFormat::ALL {
        format.adapter().lenient_calls(value, &mut calls);
    }
    calls
}

/// A list as a forgiving client iterates it: an array's elements, a lone object as one.
pub(crate) fn items(value: Option<&Value>) -> impl Iterator<Item = &Value> {
    let list: &[Value] = match value {
        Some(Value::Array(list)) => list,
        Some(object @ Value::Object(_)) => std::slice::from_ref(object),
        _ => &[],
    };
    list.iter()
}

/// A value as text: a string's content, null or missing as empty, anything else as JSON.
pub(crate) fn text(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    }
}

/// A number, or a number written as a string.
pub(crate) fn number(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::Number(number) => number.as_u64(),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// The calls of a whole stream (each event's `data`), reassembled as a forgiving client does:
/// chat fragments joined by choice and `index`, Responses items by their id or position,
/// Anthropic blocks by `index`. Calls are in the order they opened; a call whose name never
/// came has an empty one.
pub fn calls_in_stream<'a>(events: impl IntoIterator<Item = &'a [u8]>) -> Vec<LenientCall> {
    // Streams are short lists of calls: a list keeps their order and is searched in place.
    let mut calls: Vec<(CallKey, LenientCall)> = Vec::new();
    // The Anthropic blocks whose input has come in pieces: the first replaces the start's.
    let mut pieced: Vec<CallKey> = Vec::new();
    let mut updates = Vec::new();
    for data in events {
        let Some(value) = read_value(data) else {
            continue;
        };
        stream_updates(&value, &mut updates);
        for (key, update) in updates.drain(..) {
            let first_piece = matches!(update, Update::InputPiece(_)) && !pieced.contains(&key);
            if first_piece {
                pieced.push(key.clone());
            }
            if let Update::Own(call) = update {
                calls.push((key, call));
                continue;
            }
            let position = match calls.iter().position(|(known, _)| *known == key) {
                Some(position) => position,
                None => {
                    let empty = LenientCall {
                        name: String::new(),
                        arguments: String::new(),
                    };
                    calls.push((key, empty));
                    calls.len() - 1
                }
            };
            if let Some((_, call)) = calls.get_mut(position) {
                if first_piece {
                    call.arguments.clear();
                }
                update.apply(call);
            }
        }
    }
    calls.into_iter().map(|(_, call)| call).collect()
}

/// Which call of a stream an event speaks of: the format, the family of the shape within it,
/// then its place.
type CallKey = (usize, u8, String, u64);

/// A format's key of a call in a stream: the family of the shape, then its place.
pub(crate) type FormatCallKey = (u8, String, u64);

/// What one event does to one call being reassembled.
pub(crate) enum Update {
    /// Fragments: appended.
    Append { name: String, arguments: String },
    /// A complete version (an item, a block's start): its name replaces an empty one.
    Whole(LenientCall),
    /// A call of its own, complete in its event (a Gemini chunk's): never joined to another.
    Own(LenientCall),
    /// A piece of an Anthropic block's input: the pieces, joined, are its input, in place of
    /// the `input` its start carried (an SDK accumulates `partial_json` and parses it at the
    /// block's end; a block with no piece keeps its start's `input`).
    InputPiece(String),
}

impl Update {
    fn apply(self, call: &mut LenientCall) {
        match self {
            Update::Append { name, arguments } => {
                call.name.push_str(&name);
                call.arguments.push_str(&arguments);
            }
            Update::Whole(whole) => {
                if call.name.is_empty() {
                    call.name = whole.name;
                }
                if call.arguments.is_empty() {
                    call.arguments = whole.arguments;
                }
            }
            Update::InputPiece(piece) => call.arguments.push_str(&piece),
            Update::Own(own) => *call = own,
        }
    }
}

fn stream_updates(value: &Value, updates: &mut Vec<(CallKey, Update)>) {
    let mut found = Vec::new();
    for (position, format) in WireFormat::ALL.into_iter().enumerate() {
        format.adapter().lenient_stream_updates(value, &mut found);
        updates.extend(
            found
                .drain(..)
                .map(|((family, id, index), update)| ((position, family, id, index), update)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(calls: &[LenientCall]) -> Vec<&str> {
        calls.iter().map(|call| call.name.as_str()).collect()
    }

    #[test]
    fn every_format_is_read_whatever_the_request_was() {
        let chat = br#"{"choices":[{"index":"0","message":{"tool_calls":[
            {"id":7,"type":"function","function":{"name":"safe","name":"evil","arguments":"{}"}}],
            "function_call":{"name":"legacy"}}}]}"#;
        assert_eq!(
            names(&calls_in_json(chat).expect("json")),
            ["evil", "legacy"]
        );
        let responses = br#"{"output":[{"type":"message"},{"type":"function_call","name":"f"},
            {"type":"web_search_call","id":"ws"}]}"#;
        assert_eq!(
            names(&calls_in_json(responses).expect("json")),
            ["f", "web_search"]
        );
        let anthropic = br#"{"type":"message","content":[{"type":"text","text":"hi"},
            {"type":"tool_use","name":"g","input":{"a":1}}]}"#;
        let calls = calls_in_json(anthropic).expect("json");
        assert_eq!(names(&calls), ["g"]);
        assert_eq!(calls[0].arguments, r#"{"a":1}"#);
        assert_eq!(calls_in_json(b"{\"data\":[]}"), Some(Vec::new()));
        assert_eq!(calls_in_json(b"not json"), None);
    }

    #[test]
    fn events_are_dispatched_by_their_own_shape() {
        let carrying: [&[u8]; 6] = [
            br#"{"choices":[{"delta":{"tool_calls":[{"index":"0","function":{"arguments":"{"}}]}}]}"#,
            br#"{"type":"response.output_item.added","item":{"type":"function_call","name":"f"}}"#,
            br#"{"type":"response.function_call_arguments.delta","item_id":"fc","delta":"{"}"#,
            br#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","name":"g"}}"#,
            br#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{"}}"#,
            b"{\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"name\":\"s\xFFf\"}}]}}]}",
        ];
        for data in carrying {
            assert!(may_carry_calls(data), "{}", String::from_utf8_lossy(data));
        }
        let plain: [&[u8]; 5] = [
            br#"{"choices":[{"delta":{"content":"tool_calls"}}]}"#,
            br#"{"type":"response.output_text.delta","delta":"function_call"}"#,
            br#"{"type":"response.output_text.delta","content_block":{"type":"tool_use"}}"#,
            br#"{"error":{"message":"overloaded"}}"#,
            b"[DONE]",
        ];
        for data in plain {
            assert!(!may_carry_calls(data), "{}", String::from_utf8_lossy(data));
        }
        assert!(may_carry_calls(br#"{"choices":[{"delta":{"tool_calls":[{"#));
    }

    #[test]
    fn a_stream_is_reassembled_by_call() {
        let events: [&[u8]; 5] = [
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"get_","arguments":"{\"a\""}}]}}]}"#,
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":"0","function":{"name":"weather","arguments":":1}"}}]}}]}"#,
            br#"{"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","name":"lookup"}}"#,
            br#"{"type":"response.output_item.done","output_index":0,"item":{"id":"fc_1","type":"function_call","name":"lookup","arguments":"{}"}}"#,
            br#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","name":"h","input":{}}}"#,
        ];
        let calls = calls_in_stream(events);
        assert_eq!(names(&calls), ["get_weather", "lookup", "h"]);
        assert_eq!(calls[0].arguments, r#"{"a":1}"#);
    }

    #[test]
    fn an_anthropic_blocks_input_pieces_replace_the_input_its_start_carried() {
        let events: [&[u8]; 4] = [
            br#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","name":"g","input":{}}}"#,
            br#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
            br#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"1}"}}"#,
            br#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","name":"h","input":{"b":2}}}"#,
        ];
        let calls = calls_in_stream(events);
        let read: Vec<(&str, &str)> = calls
            .iter()
            .map(|call| (call.name.as_str(), call.arguments.as_str()))
            .collect();
        assert_eq!(read, [("g", r#"{"a":1}"#), ("h", r#"{"b":2}"#)]);
    }
}
