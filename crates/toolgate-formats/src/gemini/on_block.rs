//! Gemini when a guarded answer is blocked: the retry request (the blocked `functionCall`s as a
//! `model` turn, answered in a `user` turn by `functionResponse`s whose `response` carries why
//! they did not run as its `error`), the `message` answer (a candidate whose text says what was
//! blocked, finishing with `STOP`), and toolgate's own errors as Google's API shapes them.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::format::{ErrorFacts, ParseError};
use crate::on_block::{
    BlockNotice, CallFeedback, append_to_field, array_items, provider_runs, replayed_arguments,
};
use crate::tool::ToolKind;

/// The request continued with the blocked model turn and a user turn of responses.
pub(crate) fn retry_request(
    body: &[u8],
    feedback: &[CallFeedback<'_>],
) -> Result<Bytes, ParseError> {
    let mut calls = Vec::new();
    let mut responses = Vec::new();
    for item in feedback {
        let call = item.call;
        if call.kind == ToolKind::Builtin {
            return Err(provider_runs(call));
        }
        let args = replayed_arguments(call);
        let mut function_call = json!({"name": call.name, "args": args});
        let mut function_response = json!({"name": call.name, "response": {"error": item.result}});
        if let Some(id) = &call.id {
            function_call["id"] = json!(id);
            function_response["id"] = json!(id);
        }
        calls.push(json!({"functionCall": function_call}));
        responses.push(json!({"functionResponse": function_response}));
    }
    let turns = [
        json!({"role": "model", "parts": calls}),
        json!({"role": "user", "parts": responses}),
    ];
    append_to_field(body, "contents", array_items, &turns)
}

fn zero_usage() -> Value {
    json!({"promptTokenCount": 0, "candidatesTokenCount": 0, "totalTokenCount": 0})
}

/// An answer whose one candidate is the text saying what was blocked.
fn answer(notice: &BlockNotice<'_>) -> Value {
    json!({
        "candidates": [{
            "content": {"role": "model", "parts": [{"text": notice.text}]},
            "finishReason": "STOP",
            "index": 0,
        }],
        "usageMetadata": notice.usage_or(zero_usage()),
        "modelVersion": notice.model,
        "responseId": notice.id(""),
        "toolgate": notice.toolgate,
    })
}

pub(crate) fn block_message(notice: &BlockNotice<'_>) -> Bytes {
    Bytes::from(answer(notice).to_string())
}

/// The same answer as a stream of one chunk, as `alt=sse` writes them.
pub(crate) fn block_message_stream(notice: &BlockNotice<'_>) -> Bytes {
    Bytes::from(format!("data: {}\r\n\r\n", answer(notice)))
}

/// toolgate's own error as Google's API shapes one: `{"error": {code, message, status,
/// details}}`, the HTTP status as `code` and its canonical name as `status` (the SDKs raise
/// their client or server error from these), toolgate's code as the `reason` of an `ErrorInfo`
/// detail, and the request id and violations beside them.
pub(crate) fn error_body(facts: &ErrorFacts<'_>) -> Value {
    let mut error = json!({
        "code": facts.status,
        "message": facts.message,
        "status": status_name(facts.status),
        "details": [{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": facts.code,
            "domain": "toolgate",
            "metadata": {"request_id": facts.request_id, "type": facts.error_type},
        }],
        "request_id": facts.request_id,
    });
    facts.add_violations(&mut error);
    json!({ "error": error })
}

/// A stream ends on an error with a chunk that is the error body: the SDKs raise it.
pub(crate) fn error_event(facts: &ErrorFacts<'_>, _sequence_number: u64) -> Bytes {
    Bytes::from(format!("data: {}\r\n\r\n", error_body(facts)))
}

/// The canonical status name Google's APIs give an HTTP status.
fn status_name(status: u16) -> &'static str {
    match status {
        400 | 413 | 422 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        408 | 504 => "DEADLINE_EXCEEDED",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        _ => "INTERNAL",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WireFormat;
    use crate::testing::retried;
    use crate::tool::ToolCall;

    #[test]
    fn the_blocked_calls_are_answered_by_error_responses_the_history_reads() {
        let call = ToolCall::function(Some("c1".into()), "delete_user", r#"{"id":7}"#.into());
        let body =
            br#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{}}"#;
        let retried = retried(WireFormat::Gemini, body, &call, "not declared");
        let contents = retried["contents"].as_array().expect("contents");
        assert_eq!(
            contents[1]["parts"][0]["functionCall"]["args"],
            json!({"id": 7})
        );
        assert_eq!(
            contents[2],
            json!({"role": "user", "parts": [{"functionResponse": {"name": "delete_user", "id": "c1",
                "response": {"error": "not declared"}}}]})
        );
        let history = WireFormat::Gemini
            .adapter()
            .history(&serde_json::to_vec(&retried).expect("json"));
        assert_eq!(history.len(), 1);
        assert_eq!(history[0].outcome, crate::tool::CallOutcome::Failed);
    }

    #[test]
    fn an_error_is_google_shaped_with_the_status_as_its_code() {
        let violations = json!([{"check": "membership"}]);
        let facts = ErrorFacts {
            status: 403,
            error_type: "tool_call_blocked",
            code: "undeclared_tool",
            message: "blocked",
            request_id: "r1",
            violations: Some(&violations),
        };
        let body = error_body(&facts);
        assert_eq!(body["error"]["code"], 403);
        assert_eq!(body["error"]["status"], "PERMISSION_DENIED");
        assert_eq!(body["error"]["details"][0]["reason"], "undeclared_tool");
        assert_eq!(body["error"]["violations"], violations);
        let event = String::from_utf8(error_event(&facts, 3).to_vec()).expect("utf-8");
        assert!(event.starts_with("data: {\"error\":"), "{event}");
    }
}
