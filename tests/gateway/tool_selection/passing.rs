//! What tool_selection lets through untouched: an allowed answer byte for byte, requests
//! without tools and answers without calls, upstream errors as they are, and malformed requests
//! passed on — though calls answering them are refused, never a crash.

use super::request_with_tools;
use crate::common::answers::blocked_envelope;
use crate::common::{Reply, start_guarded};
use serde_json::json;

#[tokio::test]
async fn an_allowed_response_is_forwarded_byte_for_byte() {
    let (upstream, gateway) = start_guarded("").await;
    // Odd spacing, key order and escapes a re-serialization would change.
    let raw = "{ \"id\":\"chatcmpl-x\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"m\",\n  \"choices\":[{\"index\":0,\"finish_reason\":\"tool_calls\",\"message\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Z\\u00fcrich\\\"}\"}}]}}],\n  \"usage\":{\"total_tokens\":1.0e1} }";
    upstream.push(Reply::raw(200, "application/json", raw.as_bytes().to_vec()));
    let request = request_with_tools();
    let response = gateway.post_chat(&request).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.bytes().await.expect("body"), raw.as_bytes());
    let sent = serde_json::to_vec(&request).expect("serializes");
    assert_eq!(
        upstream.last_request().expect("forwarded").body,
        sent,
        "the request body is forwarded unchanged"
    );
}

#[tokio::test]
async fn requests_without_tools_and_responses_without_calls_pass_through() {
    let (upstream, gateway) = start_guarded("").await;
    let no_tools = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    upstream.push(Reply::chat_calls(&[("call_1", "anything", "{}")]));
    assert_eq!(
        gateway.post_status("/v1/chat/completions", &no_tools).await,
        200
    );
    upstream.push(Reply::chat_text("Hello!"));
    assert_eq!(
        gateway
            .post_status("/v1/chat/completions", &request_with_tools())
            .await,
        200
    );
}

#[tokio::test]
async fn a_generation_answer_that_is_not_json_or_events_is_refused_whatever_it_says_it_is() {
    let (upstream, gateway) = start_guarded("").await;
    let utf16: Vec<u8> = "\u{feff}{\"choices\":[]}"
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    for (content_type, body) in [
        ("text/plain", b"not json at all".to_vec()),
        ("application/json; charset=utf-16", utf16.clone()),
        ("text/event-stream", utf16),
        ("application/octet-stream", b"\x00\x01binary".to_vec()),
    ] {
        upstream.push(Reply::raw(200, content_type, body));
        let response = gateway.post_chat(&request_with_tools()).await;
        assert_eq!(response.status(), 403, "{content_type}");
        let body: serde_json::Value = response.json().await.expect("an envelope");
        assert_eq!(
            body["error"]["code"], "unparsable_response",
            "{content_type}: {body}"
        );
        assert_eq!(body["error"]["violations"][0]["check"], "parse", "{body}");
    }
}

#[tokio::test]
async fn upstream_errors_pass_through_unchanged() {
    let (upstream, gateway) = start_guarded("strict = true").await;
    let error = r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#;
    upstream.push(
        Reply::raw(429, "application/json", error.as_bytes().to_vec())
            .with_header("retry-after", "7"),
    );
    let response = gateway.post_chat(&request_with_tools()).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
    assert_eq!(response.text().await.expect("body"), error);
}

#[tokio::test]
async fn malformed_requests_are_passed_on_and_calls_answering_them_refused_never_a_crash() {
    let (upstream, gateway) = start_guarded("").await;
    let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let bodies: Vec<Vec<u8>> = vec![
        b"{not json".to_vec(),
        vec![0xff, 0xfe, b'{', 0x80],
        deep.into_bytes(),
        br#"{"tools": "not a list", "messages": 5}"#.to_vec(),
        br#"{"tools": [{"type": "function"}]}"#.to_vec(),
    ];
    for body in bodies {
        upstream.push(Reply::chat_calls(&[("call_1", "get_weather", "{}")]));
        let response = gateway.post_bytes("/v1/chat/completions", &[], body).await;
        // The request goes on, as the seed says; but the calls of its answer cannot be held
        // against declared tools nobody could read, so they do not reach the client.
        let body = blocked_envelope(response).await;
        assert_eq!(body["error"]["code"], "unverifiable_calls");
    }
    assert_eq!(upstream.request_count(), 5);
    upstream.push(Reply::chat_text("just text"));
    let response = gateway
        .post_bytes("/v1/chat/completions", &[], b"{not json".to_vec())
        .await;
    assert_eq!(response.status(), 200, "an answer without calls passes");
}
