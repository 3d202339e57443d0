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
    upstream.push(Reply::raw(200, "text/plain", b"not json at all".to_vec()));
    let response = gateway.post_chat(&request_with_tools()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.expect("body"), "not json at all");
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
