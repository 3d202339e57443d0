//! The Responses API when a guarded answer is blocked: the retry request (the blocked
//! `function_call` / `custom_tool_call` items appended to `input`, each answered by its
//! `*_output` item carrying why it did not run) and the `message` answer, a completed response
//! whose one output is a message, whole and as its `response.*` events.

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::format::{ErrorFacts, ParseError};
use crate::on_block::{
    BlockNotice, CallFeedback, append_to_field, array_items, call_id, named_events, provider_runs,
    replayed_arguments_text,
};
use crate::tool::ToolKind;

/// The request continued with the blocked calls and their results.
pub(crate) fn retry_request(
    body: &[u8],
    feedback: &[CallFeedback<'_>],
) -> Result<Bytes, ParseError> {
    let mut items = Vec::new();
    for (position, item) in feedback.iter().enumerate() {
        let call = item.call;
        let id = call_id(call, position);
        // A custom tool's call carries its text as `input`, a function's as `arguments`.
        let (call_type, arguments_field) = match call.kind {
            ToolKind::Function | ToolKind::LegacyFunction => ("function_call", "arguments"),
            ToolKind::Custom => ("custom_tool_call", "input"),
            ToolKind::Builtin => return Err(provider_runs(call)),
        };
        // A custom tool's input is free text, kept as written; a function's must be an object.
        let arguments = match call.kind {
            ToolKind::Custom => call.arguments.clone(),
            _ => replayed_arguments_text(call),
        };
        items.push(json!({"type": call_type, "call_id": id, "name": call.name,
                          arguments_field: arguments}));
        items.push(json!({"type": format!("{call_type}_output"), "call_id": id,
                          "output": item.result}));
    }
    append_to_field(body, "input", input_items, &items)
}

/// `input` as items: a plain string is one user message.
fn input_items(input: &RawValue) -> Result<Vec<String>, ParseError> {
    match serde_json::from_str::<String>(input.get()) {
        Ok(text) => Ok(vec![json!({"role": "user", "content": text}).to_string()]),
        Err(_) => array_items(input),
    }
}

fn zero_usage() -> Value {
    json!({"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0},
           "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0},
           "total_tokens": 0})
}

fn output_text(notice: &BlockNotice<'_>) -> Value {
    json!({"type": "output_text", "text": notice.text, "annotations": []})
}

fn message_item(notice: &BlockNotice<'_>, status: &str, content: Value) -> Value {
    json!({"id": notice.id("msg_"), "type": "message", "status": status, "role": "assistant",
           "content": content})
}

fn response(notice: &BlockNotice<'_>, status: &str, output: Value, usage: Value) -> Value {
    json!({
        "id": notice.id("resp_"),
        "object": "response",
        "created_at": notice.created,
        "status": status,
        "error": null,
        "incomplete_details": null,
        "instructions": null,
        "model": notice.model,
        "output": output,
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage,
    })
}

fn completed(notice: &BlockNotice<'_>) -> Value {
    let item = message_item(notice, "completed", json!([output_text(notice)]));
    let mut whole = response(
        notice,
        "completed",
        json!([item]),
        notice.usage_or(zero_usage()),
    );
    whole["toolgate"] = notice.toolgate.clone();
    whole
}

/// A completed response whose only output is a message saying what was blocked.
pub(crate) fn block_message(notice: &BlockNotice<'_>) -> Bytes {
    Bytes::from(completed(notice).to_string())
}

/// The same response as its events, from `response.created` to `response.completed`.
pub(crate) fn block_message_stream(notice: &BlockNotice<'_>) -> Bytes {
    let item_id = notice.id("msg_");
    let part = output_text(notice);
    let empty_part = json!({"type": "output_text", "text": "", "annotations": []});
    let at = |mut event: Value| {
        event["item_id"] = json!(item_id);
        event["output_index"] = json!(0);
        event
    };
    let events = [
        (
            "response.created",
            json!({"response": response(notice, "in_progress", json!([]), Value::Null)}),
        ),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": message_item(notice, "in_progress", json!([]))}),
        ),
        (
            "response.content_part.added",
            at(json!({"content_index": 0, "part": empty_part})),
        ),
        (
            "response.output_text.delta",
            at(json!({"content_index": 0, "delta": notice.text, "logprobs": []})),
        ),
        (
            "response.output_text.done",
            at(json!({"content_index": 0, "text": notice.text, "logprobs": []})),
        ),
        (
            "response.content_part.done",
            at(json!({"content_index": 0, "part": part})),
        ),
        (
            "response.output_item.done",
            json!({"output_index": 0,
                "item": message_item(notice, "completed", json!([output_text(notice)]))}),
        ),
        ("response.completed", json!({"response": completed(notice)})),
    ];
    named_events(events, Some("sequence_number"))
}

/// toolgate's own error as OpenAI's API shapes one (the chat body).
pub(crate) fn error_body(facts: &ErrorFacts<'_>) -> Value {
    crate::chat::on_block::error_body(facts)
}

/// The Responses API's `error` event, numbered after the `sequence_number` events relayed
/// before it: the fields flat, as the API documents them, and nested in `error` with the
/// violations, where the SDKs that raise a typed error from it read them.
pub(crate) fn error_event(facts: &ErrorFacts<'_>, sequence_number: u64) -> Bytes {
    let mut error = json!({
        "type": facts.error_type,
        "code": facts.code,
        "message": facts.message,
        "request_id": facts.request_id,
    });
    facts.add_violations(&mut error);
    let event = json!({
        "type": "error",
        "sequence_number": sequence_number,
        "code": facts.code,
        "message": facts.message,
        "param": null,
        "error": error,
    });
    Bytes::from(format!("event: error\ndata: {event}\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WireFormat;
    use crate::testing::retried;
    use crate::tool::ToolCall;

    #[test]
    fn a_string_input_becomes_a_user_message_before_the_feedback() {
        let call = ToolCall::function(Some("call_1".into()), "delete_user", "{}".into());
        let body = br#"{"model":"m","input":"hi","stream":true}"#;
        let retried = retried(WireFormat::Responses, body, &call, "not declared");
        assert_eq!(
            retried["input"][0],
            json!({"role": "user", "content": "hi"})
        );
        assert_eq!(retried["input"][1]["type"], "function_call");
        assert_eq!(
            retried["input"][2],
            json!({"type": "function_call_output", "call_id": "call_1", "output": "not declared"})
        );
        assert_eq!(retried["stream"], true);
    }

    #[test]
    fn a_custom_call_is_replayed_with_its_input_and_answered_by_its_own_output_item() {
        let call = ToolCall {
            kind: ToolKind::Custom,
            ..ToolCall::function(Some("call_7".into()), "run_sql", "DROP TABLE t".into())
        };
        let retried = retried(
            WireFormat::Responses,
            br#"{"input":[]}"#,
            &call,
            "not allowed",
        );
        assert_eq!(
            retried["input"],
            json!([
                {"type": "custom_tool_call", "call_id": "call_7", "name": "run_sql",
                 "input": "DROP TABLE t"},
                {"type": "custom_tool_call_output", "call_id": "call_7", "output": "not allowed"}
            ])
        );
    }

    #[test]
    fn a_built_in_call_cannot_be_answered_with_feedback() {
        let call = ToolCall {
            choice: 0,
            id: Some("ws_1".into()),
            name: "web_search".into(),
            kind: ToolKind::Builtin,
            arguments: "{}".into(),
        };
        let feedback = [CallFeedback {
            call: &call,
            result: "no".into(),
        }];
        assert!(retry_request(br#"{"input":[]}"#, &feedback).is_err());
    }
}
