//! Gemini answers, edited: a call's new `args` written into a complete answer's `functionCall`
//! parts and into the stream's chunks (each carries its calls whole), and where usage is
//! reported (`usageMetadata`, the total so far in every chunk that has it).

use serde_json::Value;

use super::camel_case;
use crate::format::ParseError;
use crate::response_edits::Replacement;
use crate::stream::StreamRewriter;
use crate::stream::usage::UsageSlot;

/// A field of an answer's object under either spelling.
fn field_mut<'v>(object: &'v mut Value, name: &str) -> Option<&'v mut Value> {
    object
        .as_object_mut()?
        .iter_mut()
        .find(|(key, _)| camel_case(key) == name)
        .map(|(_, value)| value)
}

/// The `functionCall` objects of one candidate, in order.
fn candidate_calls(candidate: &mut Value) -> Vec<&mut Value> {
    let Some(parts) = field_mut(candidate, "content")
        .and_then(|content| field_mut(content, "parts"))
        .and_then(Value::as_array_mut)
    else {
        return Vec::new();
    };
    parts
        .iter_mut()
        .filter_map(|part| field_mut(part, "functionCall"))
        .collect()
}

fn candidate_choice(candidate: &Value, position: usize) -> u32 {
    candidate
        .get("index")
        .and_then(Value::as_u64)
        .and_then(|index| u32::try_from(index).ok())
        .unwrap_or(u32::try_from(position).unwrap_or(u32::MAX))
}

/// Arguments as the JSON object `args` holds.
fn args_value(arguments: &str) -> Result<Value, ParseError> {
    serde_json::from_str(arguments).map_err(|error| {
        ParseError::new(format!(
            "replacement arguments for a Gemini functionCall are not JSON: {error}"
        ))
    })
}

/// Writes `arguments` into the call among `calls` that `call_id` names; a call without an id
/// is named only by being the one such call of its candidate. `Err` when several calls could
/// be the one meant.
fn write_args(
    calls: &mut [&mut Value],
    call_id: Option<&str>,
    arguments: &str,
) -> Result<bool, ParseError> {
    let id_of = |call: &Value| call.get("id").and_then(Value::as_str).map(str::to_owned);
    let matching: Vec<usize> = (0..calls.len())
        .filter(|at| id_of(calls[*at]).as_deref() == call_id)
        .collect();
    match matching.as_slice() {
        [] => Ok(false),
        [one] => {
            let args = args_value(arguments)?;
            match field_mut(calls[*one], "args") {
                Some(slot) => *slot = args,
                None => {
                    if let Some(call) = calls[*one].as_object_mut() {
                        call.insert("args".to_owned(), args);
                    }
                }
            }
            Ok(true)
        }
        _ => Err(ParseError::new(
            "several functionCalls of one candidate have no id: an edit cannot say which it is for",
        )),
    }
}

/// Replaces the arguments of the edited calls among `candidates`, the answer's calls field.
pub(super) fn replace_arguments(
    candidates: &mut [Value],
    wanted: &[Replacement<'_>],
) -> Result<bool, ParseError> {
    let mut changed = false;
    for (position, candidate) in candidates.iter_mut().enumerate() {
        let choice = candidate_choice(candidate, position);
        let mut calls = candidate_calls(candidate);
        for edit in wanted.iter().filter(|edit| edit.choice == choice) {
            changed |= write_args(&mut calls, edit.call_id, edit.arguments)?;
        }
    }
    Ok(changed)
}

/// Every chunk that reports usage reports the total so far.
pub(super) fn event_usage(event: &mut Value) -> Option<UsageSlot<'_>> {
    let usage = field_mut(event, "usageMetadata")?;
    usage.is_object().then_some(UsageSlot::Whole(usage))
}

impl StreamRewriter {
    /// Rewrites one of this format's chunks for the edits made so far; true when it changed.
    /// A chunk carries its calls whole, so an edited call's `args` are replaced where they are.
    pub(crate) fn gemini(&mut self, value: &mut Value) -> bool {
        let Some(candidates) = field_mut(value, "candidates").and_then(Value::as_array_mut) else {
            return false;
        };
        let mut changed = false;
        for (position, candidate) in candidates.iter_mut().enumerate() {
            let choice = candidate_choice(candidate, position);
            let mut calls = candidate_calls(candidate);
            for edit in self.edits.iter_mut().filter(|edit| edit.choice == choice) {
                // An edit that cannot be placed leaves the chunk as it is; the whole answer's
                // reading refuses the same case.
                if let Ok(true) = write_args(&mut calls, edit.call_id.as_deref(), &edit.arguments) {
                    edit.written = true;
                    changed = true;
                }
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use crate::format::WireFormat;
    use crate::testing::replace_arguments as replace;

    #[test]
    fn args_are_replaced_by_id_or_as_the_one_call_without_one() {
        let body = br#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"a","args":{"k":"secret"},"id":"c1"}},{"function_call":{"name":"b","args":{}}}]}}],"usageMetadata":{"totalTokenCount" : 3}}"#;
        let edited = WireFormat::Gemini
            .apply_response_edits(body, &replace(Some("c1"), r#"{"k":"[REDACTED]"}"#))
            .expect("edits")
            .expect("changed");
        let text = std::str::from_utf8(&edited).expect("utf-8");
        assert!(
            !text.contains("secret")
                && text.ends_with(r#""usageMetadata":{"totalTokenCount" : 3}}"#),
            "{text}"
        );
        let edited = WireFormat::Gemini
            .apply_response_edits(body, &replace(None, r#"{"n":1}"#))
            .expect("edits")
            .expect("changed");
        let calls = WireFormat::Gemini
            .parse_response(&edited)
            .expect("reads")
            .calls;
        assert_eq!(calls[1].arguments, r#"{"n":1}"#);
        let two = br#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"a"}},{"functionCall":{"name":"b"}}]}}]}"#;
        assert!(
            WireFormat::Gemini
                .apply_response_edits(two, &replace(None, "{}"))
                .is_err()
        );
    }
}
