//! Streaming through the gateway: text passes as it arrives, tool calls are held until checked,
//! a bad call before any byte is a real 403 and after text an SSE error frame without `[DONE]`,
//! and the verdict is the same however the upstream chunks the stream.

use std::time::Duration;

use crate::common::upstream::chat_stream;
use crate::common::{Reply, start_guarded};
use futures_util::StreamExt;
use serde_json::{Value, json};

fn streamed_request() -> Value {
    json!({
        "model": "gpt-4o-mini",
        "stream": true,
        "messages": [{"role": "user", "content": "Weather in Paris, please."}],
        "tools": [{"type": "function", "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"], "additionalProperties": false}}}]
    })
}

#[tokio::test]
async fn an_allowed_stream_reaches_the_sdk_client_whole_and_byte_for_byte() {
    let (upstream, gateway) = start_guarded("").await;
    let stream = chat_stream(
        &[("call_1", "get_weather", r#"{"city":"Paris"}"#)],
        Some("Let me check."),
    );
    upstream.push(Reply::sse_chunked(&stream, 17));
    let mut events = gateway
        .sdk_chat_stream(streamed_request())
        .await
        .expect("stream opens");
    let mut text = String::new();
    let mut arguments = String::new();
    let mut name = String::new();
    while let Some(chunk) = events.next().await {
        let chunk = chunk.expect("no error in an allowed stream");
        for choice in chunk.choices {
            text.push_str(choice.delta.content.as_deref().unwrap_or_default());
            for call in choice.delta.tool_calls.unwrap_or_default() {
                if let Some(function) = call.function {
                    name.push_str(function.name.as_deref().unwrap_or_default());
                    arguments.push_str(function.arguments.as_deref().unwrap_or_default());
                }
            }
        }
    }
    assert_eq!(text, "Let me check.");
    assert_eq!(name, "get_weather");
    assert_eq!(arguments, r#"{"city":"Paris"}"#);

    upstream.push(Reply::sse_chunked(&stream, 5));
    let raw = gateway.post_chat(&streamed_request()).await;
    assert_eq!(raw.status(), 200);
    assert_eq!(
        raw.text().await.expect("body"),
        stream,
        "released events are the upstream's bytes"
    );
}

#[tokio::test]
async fn a_stream_that_opens_with_a_bad_call_gets_a_real_403() {
    let (upstream, gateway) = start_guarded("").await;
    let stream = chat_stream(&[("call_1", "delete_user", r#"{"id":1}"#)], None);
    upstream.push(Reply::sse_chunked(&stream, 9));
    let response = gateway.post_chat(&streamed_request()).await;
    assert_eq!(response.status(), 403);
    assert_eq!(response.headers()["content-type"], "application/json");
    let body: Value = response.json().await.expect("an envelope");
    assert_eq!(body["error"]["code"], "undeclared_tool");
    assert_eq!(body["error"]["violations"][0]["tool_call_id"], "call_1");
}

#[tokio::test]
async fn a_bad_call_after_text_ends_the_stream_with_an_error_frame_and_no_done() {
    let (upstream, gateway) = start_guarded("").await;
    let stream = chat_stream(
        &[("call_1", "get_weather", r#"{"town":"Paris"}"#)],
        Some("Checking now."),
    );
    upstream.push(Reply::sse_chunked(&stream, 11));
    let response = gateway.post_chat(&streamed_request()).await;
    assert_eq!(response.status(), 200);
    let body = response.text().await.expect("body");
    assert!(
        body.contains("\"Chec\"") && body.contains("\"king\""),
        "the text went through: {body}"
    );
    assert!(
        !body.contains("[DONE]"),
        "a blocked stream does not end cleanly"
    );
    assert!(
        !body.contains("\"town\""),
        "the bad call's fragments were never released"
    );
    let last = body.trim_end().lines().last().expect("an error frame");
    let frame: Value =
        serde_json::from_str(last.trim_start_matches("data: ")).expect("the frame is JSON");
    assert_eq!(frame["error"]["type"], "tool_call_blocked");
    assert_eq!(frame["error"]["violations"][0]["check"], "schema");

    // The SDK reports it as an error on the stream.
    upstream.push(Reply::sse_chunked(&stream, 11));
    let events: Vec<_> = gateway
        .sdk_chat_stream(streamed_request())
        .await
        .expect("opens")
        .collect()
        .await;
    assert!(
        events.iter().any(Result::is_err),
        "the SDK saw the error frame"
    );
}

#[tokio::test]
async fn the_verdict_does_not_depend_on_how_the_upstream_chunks_the_stream() {
    let (upstream, gateway) = start_guarded("").await;
    let good = chat_stream(
        &[("call_1", "get_weather", r#"{"city":"Zürich \"old town\""}"#)],
        Some("On it."),
    );
    let bad = chat_stream(&[("call_1", "get_weather", r#"{"city":42}"#)], None);
    for chunk_size in [1, 2, 3, 7, 16, 64, 100_000] {
        upstream.push(Reply::sse_chunked(&good, chunk_size));
        let response = gateway.post_chat(&streamed_request()).await;
        assert_eq!(response.status(), 200, "chunk size {chunk_size}");
        assert_eq!(
            response.text().await.expect("body"),
            good,
            "chunk size {chunk_size}"
        );
        upstream.push(Reply::sse_chunked(&bad, chunk_size));
        let response = gateway.post_chat(&streamed_request()).await;
        assert_eq!(response.status(), 403, "chunk size {chunk_size}");
        // The same violation, of the same call, at every chunk size.
        let body: Value = response.json().await.expect("an error envelope");
        let violation = &body["error"]["violations"][0];
        assert_eq!(
            (
                violation["code"].as_str(),
                violation["tool"].as_str(),
                violation["tool_call_id"].as_str(),
                violation["instance_path"].as_str(),
            ),
            (
                Some("schema_violation"),
                Some("get_weather"),
                Some("call_1"),
                Some("/city")
            ),
            "chunk size {chunk_size}: {body}"
        );
    }
}

#[tokio::test]
async fn text_reaches_the_client_before_the_upstream_finishes() {
    let (upstream, gateway) = start_guarded("").await;
    let chunk = |delta: Value| {
        format!(
            "data: {}\n\n",
            json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
        )
    };
    // Text, then the upstream goes silent: the text must already be with the client.
    upstream.push(Reply::stall_after([
        chunk(json!({"role": "assistant", "content": ""})),
        chunk(json!({"content": "Hello"})),
    ]));
    let mut response = gateway.post_chat(&streamed_request()).await;
    assert_eq!(response.status(), 200);
    let first = tokio::time::timeout(Duration::from_secs(2), response.chunk())
        .await
        .expect("text is not held back")
        .expect("readable")
        .expect("a chunk");
    assert!(String::from_utf8_lossy(&first).contains("Hello"));
}

#[tokio::test]
async fn a_stream_cut_mid_call_is_an_error_and_its_call_never_released() {
    let (upstream, gateway) = start_guarded("").await;
    let stream = chat_stream(&[("call_1", "get_weather", r#"{"city":"Paris"}"#)], None);
    // Cut inside the arguments: no finish, no [DONE], the JSON never closes.
    let cut_at = stream.find("Par").expect("the arguments are in the stream");
    let cut = stream[..cut_at]
        .rsplit_once("\n\n")
        .map(|(kept, _)| format!("{kept}\n\n"))
        .expect("whole events");
    upstream.push(Reply::sse_chunked(&cut, 8));
    let response = gateway.post_chat(&streamed_request()).await;
    assert_eq!(
        response.status(),
        502,
        "a cut stream is an error, not an end"
    );
    let body: Value = response.json().await.expect("envelope");
    assert_eq!(body["error"]["code"], "upstream_failed");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("terminal event")),
        "{body}"
    );
}

#[tokio::test]
async fn a_text_only_stream_passes_through_untouched() {
    let (upstream, gateway) = start_guarded("").await;
    let stream = chat_stream(&[], Some("Just words, no tools."));
    upstream.push(Reply::sse_chunked(&stream, 3));
    let response = gateway.post_chat(&streamed_request()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.expect("body"), stream);
}
