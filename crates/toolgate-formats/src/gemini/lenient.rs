//! Gemini as a forgiving client reads it (`crate::lenient` is the driver): the
//! `functionCall` and `executableCode` parts of every candidate, in either spelling (the Python
//! SDK takes both), in a whole answer and in each chunk of a stream, where every call is whole.

use serde_json::Value;

use super::{CODE_EXECUTION, camel_case};
use crate::lenient::{FormatCallKey, LenientCall, Update, items, text};

/// Keys whose presence in text that is not JSON may hide one of this format's calls.
pub(crate) const MARKERS: &[&str] = &[
    "functionCall",
    "function_call",
    "executableCode",
    "executable_code",
];

/// The values of an object's field under either spelling, as a forgiving reader finds them.
fn fields<'v>(object: &'v Value, name: &'v str) -> impl Iterator<Item = &'v Value> {
    object
        .as_object()
        .into_iter()
        .flatten()
        .filter(move |(key, _)| camel_case(key) == name)
        .map(|(_, value)| value)
}

/// The calls of every candidate of one answer or chunk, each with its candidate's place.
fn candidate_calls(value: &Value) -> Vec<(u64, LenientCall)> {
    let mut calls = Vec::new();
    for list in fields(value, "candidates") {
        for (position, candidate) in items(Some(list)).enumerate() {
            let choice = crate::lenient::number(candidate.get("index")).unwrap_or(position as u64);
            for content in fields(candidate, "content") {
                for parts in fields(content, "parts") {
                    for part in items(Some(parts)) {
                        for call in fields(part, "functionCall") {
                            calls.push((
                                choice,
                                LenientCall {
                                    name: text(call.get("name")),
                                    arguments: fields(call, "args")
                                        .next()
                                        .map_or_else(String::new, |args| text(Some(args))),
                                },
                            ));
                        }
                        for code in fields(part, "executableCode") {
                            calls.push((
                                choice,
                                LenientCall {
                                    name: CODE_EXECUTION.to_owned(),
                                    arguments: code.to_string(),
                                },
                            ));
                        }
                    }
                }
            }
        }
    }
    calls
}

pub(crate) fn calls(value: &Value, calls: &mut Vec<LenientCall>) {
    calls.extend(candidate_calls(value).into_iter().map(|(_, call)| call));
}

/// Every call of a chunk is whole and its own: clients run each chunk's calls as they come.
pub(crate) fn stream_updates(value: &Value, updates: &mut Vec<(FormatCallKey, Update)>) {
    for (choice, call) in candidate_calls(value) {
        updates.push(((4, String::new(), choice), Update::Own(call)));
    }
}
