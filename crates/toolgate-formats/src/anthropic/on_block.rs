//! Anthropic Messages when a guarded answer is blocked: the retry request (the blocked
//! `tool_use` blocks as an assistant message, answered in a user message by `tool_result`
//! blocks with `is_error: true` carrying why they did not run) and the `message` answer, a
//! text message with stop reason `end_turn`, whole and as its events.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::format::{ErrorFacts, ParseError};
use crate::on_block::{
    BlockNotice, CallFeedback, append_to_field, array_items, call_id, named_events, provider_runs,
    replayed_arguments,
};
use crate::tool::ToolKind;

/// The request continued with the blocked assistant turn and a user turn of results.
pub(crate) fn retry_request(
    body: &[u8],
    feedback: &[CallFeedback<'_>],
) -> Result<Bytes, ParseError> {
    let mut uses = Vec::new();
    let mut results = Vec::new();
    for (position, item) in feedback.iter().enumerate() {
        let call = item.call;
        if call.kind == ToolKind::Builtin {
            return Err(provider_runs(call));
        }
        let id = call_id(call, position);
        let input = replayed_arguments(call);
        uses.push(json!({"type": "tool_use", "id": id, "name": call.name, "input": input}));
        results.push(
            json!({"type": "tool_result", "tool_use_id": id, "is_error": true,
                            "content": item.result}),
        );
    }
    let items = [
        json!({"role": "assistant", "content": uses}),
        json!({"role": "user", "content": results}),
    ];
    append_to_field(body, "messages", array_items, &items)
}

fn zero_usage() -> Value {
    json!({"input_tokens": 0, "output_tokens": 0})
}

fn message(notice: &BlockNotice<'_>, content: Value, stop_reason: Value) -> Value {
    json!({
        "id": notice.id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": notice.model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": notice.usage_or(zero_usage()),
    })
}

/// A message whose only block is the text saying what was blocked.
pub(crate) fn block_message(notice: &BlockNotice<'_>) -> Bytes {
    let mut whole = message(
        notice,
        json!([{"type": "text", "text": notice.text}]),
        json!("end_turn"),
    );
    whole["toolgate"] = notice.toolgate.clone();
    Bytes::from(whole.to_string())
}

/// The same message as its events, from `message_start` to `message_stop`.
pub(crate) fn block_message_stream(notice: &BlockNotice<'_>) -> Bytes {
    let usage = notice.usage_or(zero_usage());
    let output_tokens = usage.get("output_tokens").cloned().unwrap_or(json!(0));
    let events = [
        (
            "message_start",
            json!({"message": message(notice, json!([]), Value::Null)}),
        ),
        (
            "content_block_start",
            json!({"index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"index": 0, "delta": {"type": "text_delta", "text": notice.text}}),
        ),
        ("content_block_stop", json!({"index": 0})),
        (
            "message_delta",
            json!({"delta": {"stop_reason": "end_turn", "stop_sequence": null},
                "usage": {"output_tokens": output_tokens}, "toolgate": notice.toolgate}),
        ),
        ("message_stop", json!({})),
    ];
    named_events(events, None)
}

/// toolgate's own error as Anthropic's API shapes one: `{"type": "error", "error": {type,
/// message}}`, with the error type its SDKs map to the status (403 → `permission_error`), and
/// toolgate's `code`, `request_id` and `violations` inside `error`.
pub(crate) fn error_body(facts: &ErrorFacts<'_>) -> Value {
    let mut error = json!({
        "type": error_type(facts.status),
        "message": facts.message,
        "code": facts.code,
        "request_id": facts.request_id,
    });
    facts.add_violations(&mut error);
    json!({ "type": "error", "error": error })
}

/// An Anthropic stream ends on an error with an `error` event.
pub(crate) fn error_event(facts: &ErrorFacts<'_>, _sequence_number: u64) -> Bytes {
    Bytes::from(format!("event: error\ndata: {}\n\n", error_body(facts)))
}

/// Anthropic's error type for a status, so its SDKs raise the matching exception.
fn error_type(status: u16) -> &'static str {
    match status {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WireFormat;
    use crate::testing::retried;
    use crate::tool::ToolCall;

    #[test]
    fn the_results_are_errors_in_a_user_turn() {
        let call = ToolCall::function(Some("toolu_1".into()), "delete_user", r#"{"id":7}"#.into());
        let body = br#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}"#;
        let retried = retried(WireFormat::AnthropicMessages, body, &call, "not declared");
        let messages = retried["messages"].as_array().expect("messages");
        assert_eq!(messages[1]["content"][0]["input"], json!({"id": 7}));
        assert_eq!(
            messages[2],
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                "is_error": true, "content": "not declared"}]})
        );
        let history = WireFormat::AnthropicMessages
            .adapter()
            .history(&serde_json::to_vec(&retried).expect("json"));
        assert_eq!(
            history.len(),
            1,
            "the history reads the blocked call and its failed result"
        );
    }
}
