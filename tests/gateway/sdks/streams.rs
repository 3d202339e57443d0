//! Streams as the SDKs read them: a stream cut before its terminal event is an exception, never
//! a normal end; a call the SDK would assemble from any event (the completed response, an
//! item's done event, `message_start`) is checked, and so is one sent after the terminal event.

use serde_json::json;

use super::{Scenario, chunk, edit_events, request, without_last_event};
use crate::common::upstream::chat_stream;
use crate::common::{Reply, fixture};

#[tokio::test]
async fn a_stream_cut_before_its_terminal_event_is_an_exception_never_a_normal_end() {
    let Some(mut scenario) = Scenario::start().await else {
        return;
    };
    let chat = chat_stream(&[], Some("The forecast says"));
    // Without `[DONE]`; the finish chunk is there, nothing is held.
    scenario.chat_case(
        "chat",
        true,
        Reply::sse_chunked(&without_last_event(&chat), 13),
    );
    scenario.case(
        "responses",
        "responses",
        true,
        request("responses/text_only.request.json"),
        Reply::sse_chunked(&without_last_event(&fixture("responses/text_only.sse")), 23),
    );
    scenario.case(
        "anthropic",
        "messages",
        true,
        request("anthropic/text_only.request.json"),
        Reply::sse_chunked(&without_last_event(&fixture("anthropic/text_only.sse")), 19),
    );
    let seen = scenario.run().await;

    let error = seen.raised("chat", "APIError", None);
    assert_eq!(error["code"], "upstream_failed", "{error}");
    assert_eq!(seen.text("chat"), "The forecast says");
    let error = seen.raised("responses", "APIError", None);
    assert_eq!(error["code"], "upstream_failed", "{error}");
    assert!(!seen.text("responses").is_empty(), "the text was read");
    assert!(!seen.events("responses").contains(&"response.completed"));
    let error = seen.raised("anthropic", "APIStatusError", Some(200));
    assert_eq!(error["code"], "upstream_failed", "{error}");
    assert!(seen.text("anthropic").starts_with("Double it and add 30"));
}

/// The SDKs build a final answer from more than the call events: the Responses stream's
/// `response.completed` carries the whole response, an item's `done` event repeats it whole,
/// and Anthropic's `message_start` carries a message whose content the stream helper keeps.
/// A call in any of them is one the user reads, so it is checked.
#[tokio::test]
async fn a_call_the_sdk_assembles_from_any_stream_event_is_checked() {
    let Some(mut scenario) = Scenario::start().await else {
        return;
    };
    let responses = request("responses/function_call_allowed.request.json");
    let stream = fixture("responses/function_call_allowed.sse");
    let extra_item = edit_events(&stream, |event| {
        if event["type"] == "response.completed"
            && let Some(output) = event["response"]["output"].as_array_mut()
        {
            output.push(json!({"id": "fc_1", "type": "function_call", "status": "completed",
                "arguments": "{\"user_id\":\"usr_1\"}", "call_id": "call_9", "name": "delete_user"}));
        }
    });
    scenario.case(
        "responses, a call only in response.completed",
        "responses",
        true,
        responses.clone(),
        Reply::sse_chunked(&extra_item, 23),
    );
    let renamed_when_done = edit_events(&stream, |event| {
        if event["type"] == "response.output_item.done" {
            event["item"]["name"] = json!("delete_user");
        }
        if let Some(output) = event["response"]["output"].as_array_mut() {
            for item in output {
                item["name"] = json!("delete_user");
            }
        }
    });
    scenario.case(
        "responses, renamed in output_item.done",
        "responses",
        true,
        responses,
        Reply::sse_chunked(&renamed_when_done, 23),
    );
    let started_with_a_call = edit_events(&fixture("anthropic/tool_use_allowed.sse"), |event| {
        if event["type"] == "message_start" {
            event["message"]["content"] = json!([{"type": "tool_use", "id": "toolu_9",
                "name": "delete_user", "input": {"user_id": "usr_1"}}]);
        }
    });
    scenario.case(
        "anthropic, a call in message_start",
        "messages",
        true,
        request("anthropic/tool_use_allowed.request.json"),
        Reply::sse_chunked(&started_with_a_call, 19),
    );
    let seen = scenario.run().await;
    // Nothing visible comes before the calls, so each is a real 403.
    for name in [
        "responses, a call only in response.completed",
        "responses, renamed in output_item.done",
        "anthropic, a call in message_start",
    ] {
        let violation = seen.blocked(name, "PermissionDeniedError", Some(403), "undeclared_tool");
        assert_eq!(violation["tool"], "delete_user", "{name}");
    }
}

/// The SDKs read on after a stream's terminal event: the openai SDK stops only at `[DONE]` (a
/// Responses stream has none), the anthropic SDK at the end of the body. A call sent after
/// `response.completed`, `message_stop` or a chat choice's finish is read, so it is checked.
#[tokio::test]
async fn a_call_after_the_terminal_event_is_checked() {
    let Some(mut scenario) = Scenario::start().await else {
        return;
    };
    let chat = chat_stream(&[], Some("Done for today."));
    let late_call = chunk(
        json!({"tool_calls": [{"index": 0, "id": "call_9", "type": "function",
        "function": {"name": "delete_user", "arguments": "{\"user_id\":\"u1\"}"}}]}),
    );
    let (body, done) = chat.split_at(chat.find("data: [DONE]").expect("[DONE]"));
    scenario.chat_case(
        "chat, a call after the finish chunk",
        true,
        Reply::sse_chunked(&format!("{body}{late_call}{done}"), 13),
    );
    let late_item = json!({"id": "fc_9", "type": "function_call", "status": "completed",
        "arguments": "{\"user_id\":\"usr_1\"}", "call_id": "call_9", "name": "delete_user"});
    let after_completed = format!(
        "{}event: response.output_item.done\ndata: {}\n\n",
        fixture("responses/text_only.sse"),
        json!({"type": "response.output_item.done", "sequence_number": 40, "output_index": 1,
               "item": late_item})
    );
    scenario.case(
        "responses, a call after response.completed",
        "responses",
        true,
        request("responses/text_only.request.json"),
        Reply::sse_chunked(&after_completed, 23),
    );
    let after_stop = format!(
        "{}event: content_block_start\ndata: {}\n\nevent: content_block_stop\ndata: {}\n\n",
        fixture("anthropic/text_only.sse"),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use",
               "id": "toolu_9", "name": "delete_user", "input": {"user_id": "usr_1"}}}),
        json!({"type": "content_block_stop", "index": 1})
    );
    scenario.case(
        "anthropic, a call after message_stop",
        "messages",
        true,
        request("anthropic/text_only.request.json"),
        Reply::sse_chunked(&after_stop, 19),
    );
    let seen = scenario.run().await;
    // Text was sent before each: the SDKs raise on the error event that replaces the call.
    for (name, class, status) in [
        ("chat, a call after the finish chunk", "APIError", None),
        (
            "responses, a call after response.completed",
            "APIError",
            None,
        ),
        (
            "anthropic, a call after message_stop",
            "APIStatusError",
            Some(200),
        ),
    ] {
        let violation = seen.blocked(name, class, status, "undeclared_tool");
        assert_eq!(violation["tool"], "delete_user", "{name}");
        assert!(!seen.text(name).is_empty(), "{name}: the text came first");
    }
}
