//! Argument edits on complete answers: the edits a check made, and the rewrite of the one
//! top-level field that holds an answer's calls (its adapter names it and writes the new
//! arguments in its own shape, in its folder's `rewrite`); every other top-level field keeps its
//! bytes.

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
    format.adapter().replace_arguments(items, wanted)
}

/// Offers every edit to every item of an answer's calls field; `set` writes one into an item
/// it is for. True when any was written. The formats whose items are the calls themselves
/// (Responses, Anthropic) share this walk.
pub(crate) fn offer_to_each_item(
    items: &mut [Value],
    wanted: &[Replacement<'_>],
    set: impl Fn(&mut Value, &Replacement<'_>) -> Result<bool, ParseError>,
) -> Result<bool, ParseError> {
    let mut changed = false;
    for item in items.iter_mut() {
        for edit in wanted {
            changed |= set(item, edit)?;
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::replace_arguments as replace;

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
