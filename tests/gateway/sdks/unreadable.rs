//! Answers toolgate cannot read unambiguously (a repeated key, a string index, another format
//! than asked for): through toolgate they never reach the SDK user; straight from the upstream
//! the SDK reads calls from them — the control that shows what the blocks stand between.

use serde_json::{Value, json};

use super::{Scenario, calls, chunk};
use crate::common::upstream::chat_stream;
use crate::common::{Reply, fixture};

/// Answers a forgiving reader could take a call from, though toolgate cannot read them
/// unambiguously (or they are in another format than asked for).
fn queue_unreadable_answers(scenario: &mut Scenario) {
    // Two names in one function: a last-key-wins reader would call wipe_disk.
    let repeated = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","name":"wipe_disk","arguments":"{\"city\":\"Paris\"}"}}]}}]}"#;
    scenario.chat_case(
        "repeated key",
        false,
        Reply::raw(200, "application/json", repeated.as_bytes().to_vec()),
    );
    let role = chunk(json!({"role": "assistant", "content": null}));
    let repeated_event = r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","name":"wipe_disk","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":null}]}"#;
    let finish = "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\
                  \"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\
                  \"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
    scenario.chat_case(
        "repeated key, streamed",
        true,
        Reply::sse_chunked(&format!("{role}{repeated_event}\n\n{finish}"), 11),
    );
    let string_index = chunk(json!({"tool_calls": [{"index": "0", "id": "call_1",
        "type": "function", "function": {"name": "wipe_disk", "arguments": "{}"}}]}));
    scenario.chat_case(
        "string index, streamed",
        true,
        Reply::sse_chunked(&format!("{role}{string_index}{finish}"), 11),
    );
    scenario.chat_case(
        "Responses answer to a chat request",
        false,
        Reply::json(200, fixture("responses/undeclared_tool.response.json")),
    );
    let delete = [("call_1", "delete_user", r#"{"user_id":"u1"}"#)];
    scenario.chat_case(
        "SSE labelled JSON",
        false,
        Reply::raw(
            200,
            "application/json",
            chat_stream(&delete, None).into_bytes(),
        ),
    );
    scenario.chat_case(
        "Responses stream answering a chat stream",
        true,
        Reply::sse_chunked(&fixture("responses/undeclared_tool.sse"), 23),
    );
    let anthropic_event = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\
        \"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\
        \"name\":\"delete_user\",\"input\":{}}}\n\n";
    scenario.chat_case(
        "Anthropic event in a chat stream",
        true,
        Reply::sse_chunked(&format!("{role}{anthropic_event}{finish}"), 11),
    );
}

#[tokio::test]
async fn answers_toolgate_cannot_read_unambiguously_never_reach_the_sdk_user() {
    let Some(mut scenario) = Scenario::start().await else {
        return;
    };
    queue_unreadable_answers(&mut scenario);
    let seen = scenario.run().await;

    let violation = seen.blocked(
        "repeated key",
        "PermissionDeniedError",
        Some(403),
        "ambiguous_response",
    );
    assert_eq!(violation["check"], "parse");
    // In a stream event the repeated key makes the event unreadable as chat: refused as
    // `unparsable_response` today, though the README names `ambiguous_response`; either blocks.
    let error = seen.raised("repeated key, streamed", "PermissionDeniedError", Some(403));
    assert!(
        ["ambiguous_response", "unparsable_response"]
            .contains(&error["code"].as_str().unwrap_or("")),
        "{error}"
    );
    assert_eq!(error["violations"][0]["check"], "parse", "{error}");
    let violation = seen.blocked(
        "string index, streamed",
        "PermissionDeniedError",
        Some(403),
        "unparsable_response",
    );
    assert_eq!(violation["check"], "parse");
    // Read by their own shape, these calls are checked: delete_user was never declared.
    for name in ["Responses answer to a chat request", "SSE labelled JSON"] {
        let violation = seen.blocked(name, "PermissionDeniedError", Some(403), "undeclared_tool");
        assert_eq!(violation["tool"], "delete_user", "{name}");
    }
    // Another format's event carrying a call, inside a chat stream, is refused as unreadable:
    // before anything was sent (a 403), or after the Responses preamble's events (an error event).
    for (name, class, status) in [
        (
            "Anthropic event in a chat stream",
            "PermissionDeniedError",
            Some(403),
        ),
        ("Responses stream answering a chat stream", "APIError", None),
    ] {
        let violation = seen.blocked(name, class, status, "unparsable_response");
        assert_eq!(violation["check"], "parse", "{name}");
    }
}

/// The control for the test above: the same answers straight from the upstream.
#[tokio::test]
async fn without_toolgate_the_sdk_reads_calls_from_those_answers() {
    let Some(mut scenario) = Scenario::without_gateway().await else {
        return;
    };
    queue_unreadable_answers(&mut scenario);
    let seen = scenario.run().await;
    // Python's last-key-wins JSON and the SDK's unvalidated models read a call toolgate refuses:
    // the blocks above are what stands between it and the user.
    for (name, arguments) in [
        ("repeated key", r#"{"city":"Paris"}"#),
        ("repeated key, streamed", r#"{"city":"Paris"}"#),
        ("string index, streamed", "{}"),
    ] {
        assert_eq!(
            calls(seen.case(name)),
            [("wipe_disk".to_owned(), Value::from(arguments))],
            "{name}: {}",
            seen.case(name)
        );
    }
    // The chat SDK reads no call from these shapes; toolgate still checks them (above).
    for name in [
        "Responses answer to a chat request",
        "SSE labelled JSON",
        "Responses stream answering a chat stream",
        "Anthropic event in a chat stream",
    ] {
        assert_eq!(calls(seen.case(name)), [], "{name}: {}", seen.case(name));
    }
}
