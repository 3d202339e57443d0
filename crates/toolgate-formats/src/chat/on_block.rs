//! Chat Completions when a guarded answer is blocked: the retry request (the model's blocked
//! `tool_calls` as an assistant message, each answered by a `tool` message carrying why it did
//! not run) and the `message` answer, whole and streamed, with finish reason `stop`.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::format::{ErrorFacts, ParseError};
use crate::on_block::{
    BlockNotice, CallFeedback, append_to_field, array_items, call_id, replayed_arguments_text,
};
use crate::tool::ToolKind;

/// The request continued with the blocked assistant turn and a result for each of its calls.
pub(crate) fn retry_request(
    body: &[u8],
    feedback: &[CallFeedback<'_>],
) -> Result<Bytes, ParseError> {
    let mut tool_calls = Vec::new();
    let mut results = Vec::new();
    let mut legacy = Vec::new();
    for (position, item) in feedback.iter().enumerate() {
        let call = item.call;
        match call.kind {
            ToolKind::LegacyFunction => {
                legacy.push(json!({"role": "assistant", "content": null,
                    "function_call": {"name": call.name, "arguments": replayed_arguments_text(call)}}));
                legacy.push(json!({"role": "function", "name": call.name, "content": item.result}));
            }
            ToolKind::Custom => {
                let id = call_id(call, position);
                tool_calls.push(json!({"id": id, "type": "custom",
                    "custom": {"name": call.name, "input": call.arguments}}));
                results.push(json!({"role": "tool", "tool_call_id": id, "content": item.result}));
            }
            ToolKind::Function | ToolKind::Builtin => {
                let id = call_id(call, position);
                tool_calls.push(json!({"id": id, "type": "function",
                    "function": {"name": call.name, "arguments": replayed_arguments_text(call)}}));
                results.push(json!({"role": "tool", "tool_call_id": id, "content": item.result}));
            }
        }
    }
    let mut items = Vec::new();
    if !tool_calls.is_empty() {
        items.push(json!({"role": "assistant", "content": null, "tool_calls": tool_calls}));
        items.extend(results);
    }
    items.extend(legacy);
    append_to_field(body, "messages", array_items, &items)
}

fn zero_usage() -> Value {
    json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
}

/// A `chat.completion` whose only choice says what was blocked.
pub(crate) fn block_message(notice: &BlockNotice<'_>) -> Bytes {
    let answer = json!({
        "id": notice.id("chatcmpl-"),
        "object": "chat.completion",
        "created": notice.created,
        "model": notice.model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": notice.text, "refusal": null},
            "logprobs": null,
            "finish_reason": "stop",
        }],
        "usage": notice.usage_or(zero_usage()),
        "toolgate": notice.toolgate,
    });
    Bytes::from(answer.to_string())
}

/// The same answer as a stream: the role, the text, the finish chunk (with the `toolgate`
/// field, and the usage when known), then `[DONE]`.
pub(crate) fn block_message_stream(notice: &BlockNotice<'_>) -> Bytes {
    let id = notice.id("chatcmpl-");
    let chunk = |delta: Value, finish: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": notice.created,
               "model": notice.model,
               "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
    };
    let mut last = chunk(json!({}), json!("stop"));
    last["toolgate"] = notice.toolgate.clone();
    if let Some(usage) = notice.usage {
        last["usage"] = usage.clone();
    }
    let events = [
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": notice.text}), Value::Null),
        last,
    ];
    let mut text = String::new();
    for event in events {
        text.push_str(&format!("data: {event}\n\n"));
    }
    text.push_str("data: [DONE]\n\n");
    Bytes::from(text)
}

/// toolgate's own error as OpenAI's API shapes one: `{"error": {message, type, param, code}}`,
/// with toolgate's `request_id` and `violations` inside `error`.
pub(crate) fn error_body(facts: &ErrorFacts<'_>) -> Value {
    let mut error = json!({
        "message": facts.message,
        "type": facts.error_type,
        "param": null,
        "code": facts.code,
        "request_id": facts.request_id,
    });
    facts.add_violations(&mut error);
    json!({ "error": error })
}

/// A chat stream ends on an error as OpenAI's does: `data: {"error": …}`.
pub(crate) fn error_event(facts: &ErrorFacts<'_>, _sequence_number: u64) -> Bytes {
    Bytes::from(format!("data: {}\n\n", error_body(facts)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WireFormat;
    use crate::testing::retried;
    use crate::tool::ToolCall;

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            choice: 0,
            id: Some(id.into()),
            name: name.into(),
            kind: ToolKind::Function,
            arguments: arguments.into(),
        }
    }

    #[test]
    fn the_retry_request_answers_each_blocked_call_with_a_tool_message() {
        let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        let call = call("call_1", "delete_user", "{}");
        let retried = retried(WireFormat::ChatCompletions, body, &call, "not declared");
        let messages = retried["messages"].as_array().expect("messages");
        assert_eq!(messages.len(), 3);
        assert_eq!(
            messages[1]["tool_calls"][0]["function"]["name"],
            "delete_user"
        );
        assert_eq!(
            messages[2],
            json!({"role": "tool", "tool_call_id": "call_1", "content": "not declared"})
        );
    }
}
