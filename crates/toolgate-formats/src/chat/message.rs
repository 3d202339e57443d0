//! The OpenAI Chat Completions adapter: `tools[]` (function and custom), legacy `functions[]`,
//! and calls from every choice's `message.tool_calls[]` and legacy `message.function_call`.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::answer::Reading;
use crate::format::{Claim, ParseError, ToolResponse, WireFormat, read_json, text_or_json_text};
use crate::raw_object::RawObject;
use crate::request_reader::RequestReader;
use crate::tool::{CallOutcome, HistoryCall, ToolCall, ToolKind};
use crate::tool_entry::without_tools;

use super::answer_wire::{FunctionCallWire, ResponseWire, ToolCallWire};

impl RequestReader for super::Chat {
    const FORMAT: WireFormat = WireFormat::ChatCompletions;
    const HAS_FUNCTIONS: bool = true;
}

impl FunctionCallWire<'_> {
    /// The arguments as the call's text: a JSON string's content, any other JSON as written.
    fn arguments_text(&self) -> String {
        self.arguments.map(text_or_json_text).unwrap_or_default()
    }
}

/// The answer's calls and reasoning: the usual answer read by the scan (`scanned.rs`), any
/// other by serde_json, which says why it is refused.
pub(crate) fn read_response(body: &[u8]) -> Result<Reading, ParseError> {
    match super::scanned::read(body) {
        Some(wire) => reading(wire),
        None => read_response_by_serde(body),
    }
}

/// Where the scan's reading of a Chat Completions answer and serde_json's differ, when the
/// scan reads it: for the `response_adapters` fuzz target, which holds them equal.
pub fn disagreement(body: &[u8]) -> Option<String> {
    let by_scan = reading(super::scanned::read(body)?);
    let by_serde = read_response_by_serde(body);
    let seen = |reading: Result<Reading, ParseError>| {
        reading
            .map(|reading| (reading.response, reading.other_calls_field))
            .map_err(|error| error.to_string())
    };
    let (by_scan, by_serde) = (seen(by_scan), seen(by_serde));
    (by_scan != by_serde).then(|| format!("the scan read {by_scan:?}, serde_json {by_serde:?}"))
}

/// The answer read by serde_json alone: what [`read_response`] is held to.
pub(crate) fn read_response_by_serde(body: &[u8]) -> Result<Reading, ParseError> {
    reading(read_json(body)?)
}

fn reading(wire: ResponseWire<'_>) -> Result<Reading, ParseError> {
    let other_calls_field = wire.output.0 || wire.content.0 || wire.candidates.0;
    let mut response = ToolResponse::default();
    for (position, choice) in wire.choices.into_iter().enumerate() {
        let index = choice.index.unwrap_or(position as u32);
        let Some(message) = choice.message else {
            continue;
        };
        if response.reasoning.is_none() {
            response.reasoning = message.reasoning_content.or(message.reasoning);
        }
        for (call_index, call) in message.tool_calls.into_iter().flatten().enumerate() {
            response.calls.push(tool_call(index, call_index, call)?);
        }
        if let Some(function) = message.function_call {
            response.calls.push(ToolCall {
                choice: index,
                id: None,
                arguments: function.arguments_text(),
                name: function.name,
                kind: ToolKind::LegacyFunction,
            });
        }
    }
    Ok(Reading {
        response,
        other_calls_field,
    })
}

fn tool_call(choice: u32, position: usize, call: ToolCallWire<'_>) -> Result<ToolCall, ParseError> {
    match (call.kind.as_deref(), call.function, call.custom) {
        (Some("custom"), _, Some(custom)) | (None, None, Some(custom)) => Ok(ToolCall {
            choice,
            id: call.id,
            name: custom.name,
            kind: ToolKind::Custom,
            arguments: custom.input.unwrap_or_default(),
        }),
        (Some("function") | None, Some(function), _) => Ok(ToolCall {
            choice,
            id: call.id,
            arguments: function.arguments_text(),
            name: function.name,
            kind: ToolKind::Function,
        }),
        (kind, _, _) => Err(ParseError::new(format!(
            "choices[{choice}].message.tool_calls[{position}]: a call of type '{}' without its object",
            kind.unwrap_or("function")
        ))),
    }
}

#[derive(Deserialize)]
struct ConversationWire<'a> {
    #[serde(borrow, default)]
    messages: Vec<ChatMessageWire<'a>>,
}

#[derive(Deserialize)]
struct ChatMessageWire<'a> {
    #[serde(borrow, default)]
    role: Option<&'a str>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCallWire<'a>>>,
    #[serde(borrow, default)]
    function_call: Option<FunctionCallWire<'a>>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

/// The calls of the conversation so far, each with whether its result was sent back. Chat has
/// no error flag on a tool result, so a returned result counts as completed.
pub(crate) fn history(body: &[u8]) -> Vec<HistoryCall> {
    let Ok(conversation) = read_json::<ConversationWire>(body) else {
        return Vec::new();
    };
    let mut calls: Vec<HistoryCall> = Vec::new();
    let mut turns: usize = 0;
    for message in conversation.messages {
        match message.role {
            Some("assistant") => {
                let turn = turns;
                turns += 1;
                for (position, call) in message.tool_calls.into_iter().flatten().enumerate() {
                    if let Ok(call) = tool_call(0, position, call) {
                        calls.push(HistoryCall::pending(call, turn));
                    }
                }
                if let Some(function) = message.function_call {
                    calls.push(HistoryCall {
                        id: None,
                        arguments: function.arguments_text(),
                        name: function.name,
                        outcome: CallOutcome::Pending,
                        turn,
                        latest_turn: false,
                    });
                }
            }
            Some("tool") => {
                if let Some(call) = calls
                    .iter_mut()
                    // The latest call with the id: a client may reuse ids across turns.
                    .rev()
                    .find(|call| call.id.is_some() && call.id == message.tool_call_id)
                {
                    call.outcome = CallOutcome::Completed;
                }
            }
            // The legacy result names its function: it answers the latest pending call of it.
            Some("function") => {
                if let Some(call) = calls.iter_mut().rev().find(|call| {
                    call.id.is_none()
                        && Some(&call.name) == message.name.as_ref()
                        && call.outcome == CallOutcome::Pending
                }) {
                    call.outcome = CallOutcome::Completed;
                }
            }
            _ => {}
        }
    }
    crate::tool::mark_latest_turn(&mut calls, turns.checked_sub(1));
    calls
}

#[derive(Deserialize)]
struct ContentPartWire {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
}

pub(crate) fn latest_user_text(body: &[u8]) -> Option<String> {
    let conversation: ConversationWire = read_json(body).ok()?;
    let content = conversation
        .messages
        .iter()
        .rev()
        .find(|message| message.role == Some("user"))?
        .content?;
    if let Ok(text) = serde_json::from_str::<String>(content.get()) {
        return Some(text);
    }
    let parts: Vec<ContentPartWire> = serde_json::from_str(content.get()).ok()?;
    let texts: Vec<String> = parts
        .into_iter()
        .filter(|part| part.kind.as_deref() == Some("text"))
        .filter_map(|part| part.text)
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

pub(crate) fn remove_tools(body: &[u8], removed: &[&str]) -> Result<Option<Bytes>, ParseError> {
    let object: RawObject = read_json(body)?;
    let mut replacements: Vec<(&str, Option<String>)> = Vec::new();
    for field in ["tools", "functions"] {
        let Some((_, raw)) = object.0.iter().find(|(key, _)| key == field) else {
            continue;
        };
        if raw.get() == "null" {
            continue;
        }
        if let Some(kept) = without_tools(raw, removed)? {
            replacements.push((field, Some(kept)));
        }
    }
    if replacements.is_empty() {
        return Ok(None);
    }
    let none_left = replacements
        .iter()
        .all(|(_, kept)| kept.as_deref() == Some("[]"));
    let forced_removed = |field: &str| {
        object
            .0
            .iter()
            .find(|(key, _)| key == field)
            .and_then(|(_, raw)| serde_json::from_str::<ForcedChoiceWire>(raw.get()).ok())
            .and_then(|choice| {
                choice
                    .function
                    .map(|function| function.name)
                    .or(choice.name)
            })
            .is_some_and(|name| removed.contains(&name.as_str()))
    };
    // The upstream refuses a choice of a tool that is not there, or any choice without tools.
    for field in ["tool_choice", "function_call"] {
        if object.0.iter().any(|(key, _)| key == field) && (none_left || forced_removed(field)) {
            replacements.push((field, None));
        }
    }
    if none_left && object.0.iter().any(|(key, _)| key == "parallel_tool_calls") {
        replacements.push(("parallel_tool_calls", None));
    }
    Ok(Some(Bytes::from(object.write(&replacements))))
}

/// A `tool_choice` (`{"type":"function","function":{"name"}}`) or legacy `function_call`
/// (`{"name"}`) that forces one tool; `"auto"` and friends do not parse as this.
#[derive(Deserialize)]
struct ForcedChoiceWire {
    #[serde(default)]
    function: Option<FunctionNameWire>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct FunctionNameWire {
    name: String,
}

/// A body with `messages` is likely a chat completion (Anthropic's is told apart by its own
/// marks); one without is not.
pub(crate) fn claims(body: &[u8]) -> Claim {
    #[derive(Deserialize)]
    struct Shape<'a> {
        #[serde(borrow, default)]
        messages: Option<&'a RawValue>,
    }
    match read_json::<Shape>(body) {
        Ok(Shape {
            messages: Some(_), ..
        }) => Claim::Likely,
        _ => Claim::No,
    }
}

#[cfg(test)]
mod tests {
    /// The body after one edit, which must change it.
    fn edit_once(body: &[u8], edit: Edit) -> bytes::Bytes {
        WireFormat::ChatCompletions
            .apply_request_edits(body, &[edit])
            .expect("edits")
            .expect("changed")
    }

    #[test]
    fn removing_every_tool_drops_the_choices_that_need_one() {
        let body = br#"{"model":"m","tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":"required","parallel_tool_calls":false}"#;
        let edited = edit_once(body, Edit::RemoveDeclaredTools(vec!["a".into()]));
        assert_eq!(edited.as_ref(), br#"{"model":"m","tools":[]}"#);
    }

    #[test]
    fn a_choice_forcing_a_removed_tool_is_dropped_and_others_are_kept() {
        let body = br#"{"tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"}}],"tool_choice":{"type":"function","function":{"name":"b"}}}"#;
        let edited = edit_once(body, Edit::RemoveDeclaredTools(vec!["b".into()]));
        assert_eq!(
            edited.as_ref(),
            br#"{"tools":[{"type":"function","function":{"name":"a"}}]}"#
        );
        let body = br#"{"tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"}}],"tool_choice":{"type":"function","function":{"name":"a"}}}"#;
        let edited = edit_once(body, Edit::RemoveDeclaredTools(vec!["b".into()]));
        assert!(
            std::str::from_utf8(&edited)
                .unwrap()
                .contains("tool_choice")
        );
    }

    #[test]
    fn stripping_tool_fields_removes_all_of_them() {
        let body = br#"{"model":"m","tools":[],"functions":[],"tool_choice":"auto","function_call":"auto","parallel_tool_calls":true,"n":1}"#;
        let edited = edit_once(body, Edit::StripToolFields);
        assert_eq!(edited.as_ref(), br#"{"model":"m","n":1}"#);
    }

    use super::*;
    use crate::edits::Edit;
    use crate::testing::{request, request_error};

    #[test]
    fn declared_tools_come_from_tools_custom_and_legacy_functions() {
        let parsed = request(
            WireFormat::ChatCompletions,
            r#"{"model":"m","messages":[],"stream":true,
                "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}},
                         {"type":"custom","custom":{"name":"sql","description":"free text"}}],
                "functions":[{"name":"legacy_fn"}]}"#,
        );
        let names: Vec<(&str, ToolKind)> = parsed
            .declared_tools
            .iter()
            .map(|t| (t.name.as_str(), t.kind))
            .collect();
        assert_eq!(
            names,
            [
                ("get_weather", ToolKind::Function),
                ("sql", ToolKind::Custom),
                ("legacy_fn", ToolKind::LegacyFunction)
            ]
        );
        assert_eq!(
            parsed.declared_tools[0].schema_text(),
            Some(r#"{"type":"object"}"#)
        );
        assert!(parsed.declared_tools[1].schema_text().is_none());
        assert!(parsed.stream);
    }

    #[test]
    fn a_request_without_tools_declares_none() {
        let parsed = request(
            WireFormat::ChatCompletions,
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":null}"#,
        );
        assert!(!parsed.declares_tools());
        assert!(!parsed.stream);
    }

    #[test]
    fn calls_come_from_every_choice_and_the_legacy_field() {
        let response = WireFormat::ChatCompletions.parse_response(
            br#"{"choices":[
                {"index":0,"message":{"role":"assistant","content":null,"reasoning_content":"think",
                  "tool_calls":[{"id":"call_1","type":"function","function":{"name":"a","arguments":"{\"x\":1}"}},
                                {"id":"call_2","type":"custom","custom":{"name":"sql","input":"select 1"}}]}},
                {"index":1,"message":{"role":"assistant","function_call":{"name":"legacy","arguments":"{}"}}}]}"#,
        )
        .expect("response parses");
        assert_eq!(response.reasoning.as_deref(), Some("think"));
        let calls: Vec<(u32, Option<&str>, &str, &str)> = response
            .calls
            .iter()
            .map(|c| {
                (
                    c.choice,
                    c.id.as_deref(),
                    c.name.as_str(),
                    c.arguments.as_str(),
                )
            })
            .collect();
        assert_eq!(
            calls,
            [
                (0, Some("call_1"), "a", r#"{"x":1}"#),
                (0, Some("call_2"), "sql", "select 1"),
                (1, None, "legacy", "{}")
            ]
        );
    }

    #[test]
    fn object_arguments_from_lenient_servers_are_kept_as_json_text() {
        let response = WireFormat::ChatCompletions.parse_response(
            br#"{"choices":[{"message":{"tool_calls":[{"id":"c","type":"function","function":{"name":"a","arguments":{"x":1}}}]}}]}"#,
        )
        .unwrap();
        assert_eq!(response.calls[0].arguments, r#"{"x":1}"#);
    }

    #[test]
    fn not_a_chat_completion_is_a_parse_error() {
        assert!(
            WireFormat::ChatCompletions
                .parse_response(b"{\"data\":[]}")
                .is_err()
        );
        assert!(
            WireFormat::ChatCompletions
                .parse_response(b"not json")
                .is_err()
        );
        request_error(WireFormat::ChatCompletions, "[1,2]");
    }

    #[test]
    fn the_latest_user_text_is_found_in_strings_and_parts() {
        let plain = request(
            WireFormat::ChatCompletions,
            r#"{"messages":[{"role":"user","content":"first"},{"role":"assistant","content":"x"},{"role":"user","content":"second"}]}"#,
        );
        assert_eq!(plain.user_request().as_deref(), Some("second"));
        let parts = request(
            WireFormat::ChatCompletions,
            r#"{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{}},{"type":"text","text":"b"}]}]}"#,
        );
        assert_eq!(parts.user_request().as_deref(), Some("a\nb"));
    }

    #[test]
    fn the_history_pairs_calls_with_their_results() {
        let body = br#"{"messages":[
            {"role":"user","content":"go"},
            {"role":"assistant","content":null,"tool_calls":[
                {"id":"c1","type":"function","function":{"name":"lookup","arguments":"{}"}},
                {"id":"c2","type":"function","function":{"name":"send","arguments":"{\"to\":1}"}}]},
            {"role":"tool","tool_call_id":"c1","content":"found"},
            {"role":"assistant","content":null,"function_call":{"name":"legacy","arguments":"{}"}},
            {"role":"function","name":"legacy","content":"ok"}]}"#;
        let outcomes: Vec<(Option<&str>, &str, CallOutcome)> = Vec::new();
        let calls = history(body);
        let mut seen = outcomes;
        for call in &calls {
            seen.push((call.id.as_deref(), call.name.as_str(), call.outcome));
        }
        assert_eq!(
            seen,
            [
                (Some("c1"), "lookup", CallOutcome::Completed),
                (Some("c2"), "send", CallOutcome::Pending),
                (None, "legacy", CallOutcome::Completed)
            ]
        );
        assert_eq!(calls[1].arguments, r#"{"to":1}"#);
    }

    #[test]
    fn removing_tools_rewrites_only_the_tools_field() {
        let body = br#"{"model":"m",  "tools":[{"type":"function","function":{"name":"keep"}},{"type":"function","function":{"name":"drop"}}],"temperature":0.50}"#;
        let edited = WireFormat::ChatCompletions
            .apply_request_edits(body, &[Edit::RemoveDeclaredTools(vec!["drop".into()])])
            .unwrap()
            .expect("a tool was removed");
        assert_eq!(
            std::str::from_utf8(&edited).unwrap(),
            r#"{"model":"m","tools":[{"type":"function","function":{"name":"keep"}}],"temperature":0.50}"#
        );
        let untouched = WireFormat::ChatCompletions
            .apply_request_edits(body, &[Edit::RemoveDeclaredTools(vec!["absent".into()])])
            .unwrap();
        assert!(
            untouched.is_none(),
            "nothing removed means the original bytes are kept"
        );
    }
}
