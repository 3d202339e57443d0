//! `on_block` on streams: a tool-call-only stream is held whole, so a block can still be
//! retried (the client reads only the stream that passed) or answered with a message stream
//! that ends normally; once text has reached the client, a block ends the stream with its error
//! event, whatever `on_block` says.

use futures_util::StreamExt;
use serde_json::{Value, json};

use super::{BAD, GOOD, chat_request, guarded_with, last_items};
use crate::common::answers::blocked_envelope;
use crate::common::upstream::chat_stream;
use crate::common::{Reply, ScriptedUpstream, TestGateway};

/// What an SDK user read from a chat stream: the text, the calls' names, the finish reasons,
/// and the error that ended it, if any.
pub(crate) async fn read_sdk_stream(
    gateway: &TestGateway,
    request: Value,
) -> (String, Vec<String>, Vec<String>, Option<String>) {
    let mut stream = gateway
        .sdk_chat_stream(request)
        .await
        .expect("the stream starts");
    let (mut text, mut calls, mut finishes) = (String::new(), Vec::new(), Vec::new());
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(error) => return (text, calls, finishes, Some(error.to_string())),
        };
        for choice in chunk.choices {
            text.push_str(choice.delta.content.as_deref().unwrap_or_default());
            for call in choice.delta.tool_calls.unwrap_or_default() {
                if let Some(name) = call.function.and_then(|function| function.name) {
                    calls.push(name);
                }
            }
            if let Some(finish) = choice.finish_reason {
                finishes.push(
                    serde_json::to_value(finish)
                        .map(|v| v.to_string())
                        .unwrap_or_default(),
                );
            }
        }
    }
    (text, calls, finishes, None)
}

pub(crate) fn streamed(mut request: Value) -> Value {
    request["stream"] = json!(true);
    request
}

#[tokio::test]
async fn a_held_tool_call_stream_is_retried_and_the_client_reads_only_the_one_that_passed() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_with("on_block = \"retry\"")).await;
    upstream.push(Reply::sse_events(&chat_stream(&[BAD], None)));
    upstream.push(Reply::sse_events(&chat_stream(&[GOOD], None)));

    let (_, calls, _, error) = read_sdk_stream(&gateway, chat_request()).await;
    assert_eq!(error, None);
    assert_eq!(calls, ["get_weather"]);
    let second = upstream.requests()[1].json();
    assert_eq!(second["stream"], true, "the retry streams too");
    let fed_back = last_items(&second, "messages", 2);
    assert_eq!(
        fed_back[0]["tool_calls"][0]["function"]["name"],
        "delete_user"
    );
    assert_eq!(fed_back[1]["role"], "tool");
    assert_eq!(fed_back[1]["tool_call_id"], "call_bad");
    gateway
        .assert_metrics_contain(&[
            "toolgate_block_retries_total{route=\"/v1\",outcome=\"passed\"} 1",
        ])
        .await;
}

#[tokio::test]
async fn a_streamed_message_ends_like_any_text_answer() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_with("on_block = \"message\"")).await;
    upstream.push(Reply::sse_events(&chat_stream(&[BAD], None)));
    let (text, calls, finishes, error) = read_sdk_stream(&gateway, chat_request()).await;
    assert_eq!(error, None);
    assert!(calls.is_empty(), "no call reaches the client: {calls:?}");
    assert!(
        text.contains("'delete_user' is not a declared tool"),
        "{text}"
    );
    assert_eq!(finishes, ["\"stop\""]);

    upstream.push(Reply::sse_events(&chat_stream(&[BAD], None)));
    let response = gateway.post_chat(&streamed(chat_request())).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("x-toolgate-violations"));
    let body = response.text().await.expect("text");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
}

#[tokio::test]
async fn anthropic_and_responses_message_streams_end_with_their_own_terminal_events() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_with("on_block = \"message\"")).await;
    let tool_use = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n\
        event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"delete_user\",\"input\":{}}}\n\n\
        event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n\
        event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
        event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n\
        event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    upstream.push(Reply::sse_events(tool_use));
    let request = json!({"model": "m", "max_tokens": 64, "stream": true,
                         "messages": [{"role": "user", "content": "hi"}],
                         "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}]});
    let response = gateway.post("/v1/messages", &request).await;
    assert_eq!(response.status(), 200);
    let body = response.text().await.expect("text");
    assert!(!body.contains("tool_use"), "{body}");
    assert!(body.contains("\"stop_reason\":\"end_turn\""), "{body}");
    assert!(
        body.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"),
        "{body}"
    );

    let function_call = "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":0,\"output_index\":0,\"item\":{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"delete_user\",\"arguments\":\"{}\",\"status\":\"completed\"}}\n\n\
        event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":1,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"output\":[{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"delete_user\",\"arguments\":\"{}\",\"status\":\"completed\"}]}}\n\n";
    upstream.push(Reply::sse_events(function_call));
    let request = json!({"model": "m", "input": "hi", "stream": true,
                         "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]});
    let response = gateway.post("/v1/responses", &request).await;
    assert_eq!(response.status(), 200);
    let body = response.text().await.expect("text");
    assert!(!body.contains("delete_user\",\"arguments"), "{body}");
    let last = body
        .trim_end()
        .rsplit("\n\n")
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(last.starts_with("event: response.completed"), "{last}");
}

#[tokio::test]
async fn once_text_reached_the_client_a_block_ends_the_stream_with_its_error() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_with("on_block = \"retry\"")).await;
    upstream.push(Reply::sse_events(&chat_stream(
        &[BAD],
        Some("Let me check that."),
    )));
    let (text, calls, _, error) = read_sdk_stream(&gateway, chat_request()).await;
    assert_eq!(text, "Let me check that.");
    assert!(calls.is_empty());
    let error = error.expect("the stream ends with the block's error");
    assert!(error.contains("delete_user"), "{error}");
    assert_eq!(
        upstream.request_count(),
        1,
        "nothing is retried once the client read text"
    );
}

#[tokio::test]
async fn a_stream_whose_retries_are_spent_is_answered_with_a_real_403() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(
        &upstream,
        &guarded_with("on_block = \"retry\"\nmax_retries = 1"),
    )
    .await;
    upstream.push(Reply::sse_events(&chat_stream(&[BAD], None)));
    upstream.push(Reply::sse_events(&chat_stream(
        &[("call_worse", "drop_table", "{}")],
        None,
    )));
    let envelope = blocked_envelope(gateway.post_chat(&streamed(chat_request())).await).await;
    assert_eq!(envelope["error"]["code"], "undeclared_tool");
    assert_eq!(envelope["error"]["violations"][0]["tool"], "drop_table");
    assert_eq!(upstream.request_count(), 2, "one retry, no more");
    gateway
        .assert_metrics_contain(&[
            "toolgate_block_retries_total{route=\"/v1\",outcome=\"blocked\"} 1",
        ])
        .await;
}
