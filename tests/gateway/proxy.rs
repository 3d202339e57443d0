//! The reverse proxy end to end: what is forwarded and how, and the gateway's own answers
//! (404, 413, 502, 504) in the OpenAI error envelope with an `x-request-id`.

use std::time::Duration;

use crate::common::answers::{gateway_error_envelope, request_id};
use crate::common::{
    PASS_THROUGH, Reply, ScriptedUpstream, TestGateway, guarded_chat, start_guarded,
};
use serde_json::json;

#[tokio::test]
async fn method_path_query_headers_and_body_are_forwarded_without_hop_by_hop_headers() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, PASS_THROUGH).await;
    upstream.push(
        Reply::json(200, json!({"object": "list", "data": []})).with_header("x-upstream", "yes"),
    );
    let response = crate::common::http()
        .put(format!(
            "{}/v1/files/abc?purpose=batch&limit=2",
            gateway.url()
        ))
        .header("authorization", "Bearer sk-client")
        .header("x-custom", "kept")
        .header("connection", "x-private")
        .header("x-private", "dropped")
        .header("proxy-authorization", "Basic secret")
        .body("raw body bytes")
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-upstream"], "yes");
    let seen = upstream.last_request().expect("forwarded");
    assert_eq!(seen.method, "PUT");
    assert_eq!(seen.path_and_query, "/v1/files/abc?purpose=batch&limit=2");
    assert_eq!(seen.header("x-custom"), Some("kept"));
    assert_eq!(
        seen.header("authorization"),
        Some("Bearer sk-client"),
        "no api_key: the client's credentials go on"
    );
    assert_eq!(seen.header("x-private"), None, "named by Connection");
    assert_eq!(seen.header("proxy-authorization"), None);
    assert_eq!(
        seen.header("host"),
        Some(upstream.addr().to_string().as_str()),
        "Host is the upstream's"
    );
    assert_eq!(seen.body.as_ref(), b"raw body bytes");
}

#[tokio::test]
async fn an_upstream_api_key_replaces_the_client_credentials() {
    let upstream = ScriptedUpstream::start().await;
    let body = format!(
        "[upstreams.keyed]\nurl = \"{}\"\napi_key = \"${{TOOLGATE_TEST_UPSTREAM_KEY:-sk-upstream-secret}}\"\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"keyed\"\n",
        upstream.url()
    );
    let gateway = TestGateway::start(&upstream, &body).await;
    upstream.push(Reply::json(200, json!({"ok": true})));
    gateway.post("/v1/models", &json!({})).await;
    let seen = upstream.last_request().expect("forwarded");
    assert_eq!(
        seen.header("authorization"),
        Some("Bearer sk-upstream-secret")
    );
}

#[tokio::test]
async fn the_request_id_is_kept_or_made_and_travels_both_ways() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, PASS_THROUGH).await;
    upstream.set_default(Reply::json(200, json!({})));
    let client = crate::common::http();
    let given = client
        .get(format!("{}/v1/models", gateway.url()))
        .header("x-request-id", "trace-42")
        .send()
        .await
        .expect("answers");
    assert_eq!(given.headers()["x-request-id"], "trace-42");
    assert_eq!(
        upstream
            .last_request()
            .expect("forwarded")
            .header("x-request-id"),
        Some("trace-42")
    );
    let made = client
        .get(format!("{}/v1/models", gateway.url()))
        .send()
        .await
        .expect("answers");
    let id = request_id(&made);
    assert_eq!(id.len(), 36, "a fresh UUID: {id}");
    assert_eq!(
        upstream
            .last_request()
            .expect("forwarded")
            .header("x-request-id"),
        Some(id.as_str())
    );
}

#[tokio::test]
async fn an_unknown_route_is_a_404_envelope() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(
        &upstream,
        "[[routes]]\npath = \"/v1/chat\"\nupstream = \"llm\"\n",
    )
    .await;
    let body = gateway_error_envelope(gateway.post("/v2/anything", &json!({})).await, 404).await;
    assert_eq!(body["error"]["code"], "route_not_found");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    // Prefixes match whole segments.
    gateway_error_envelope(gateway.post("/v1/chatter", &json!({})).await, 404).await;
    assert_eq!(upstream.request_count(), 0);
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_502_envelope() {
    let upstream = ScriptedUpstream::start().await;
    let body = "[upstreams.down]\nurl = \"http://127.0.0.1:1\"\nconnect_timeout_ms = 1000\n\n\
                [[routes]]\npath = \"/v1\"\nupstream = \"down\"\n";
    let gateway = TestGateway::start(&upstream, body).await;
    let body = gateway_error_envelope(gateway.post_chat(&json!({})).await, 502).await;
    assert_eq!(body["error"]["code"], "upstream_unreachable");
    assert_eq!(body["error"]["type"], "upstream_error");
}

#[tokio::test]
async fn an_upstream_that_closes_without_answering_is_a_502_envelope() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, PASS_THROUGH).await;
    upstream.push(Reply::close_connection());
    let body = gateway_error_envelope(gateway.post_chat(&json!({})).await, 502).await;
    assert_eq!(body["error"]["type"], "upstream_error");
}

#[tokio::test]
async fn a_slow_upstream_is_a_504_envelope() {
    let upstream = ScriptedUpstream::start().await;
    let body = format!(
        "[upstreams.slow]\nurl = \"{}\"\nresponse_timeout_ms = 200\n\n[[routes]]\npath = \"/v1\"\nupstream = \"slow\"\n",
        upstream.url()
    );
    let gateway = TestGateway::start(&upstream, &body).await;
    upstream.push(Reply::json(200, json!({})).with_delay(Duration::from_secs(3)));
    let body = gateway_error_envelope(gateway.post_chat(&json!({})).await, 504).await;
    assert_eq!(body["error"]["code"], "upstream_timeout");
}

#[tokio::test]
async fn a_guarded_request_over_the_size_limit_is_a_413_envelope() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start_tuned(
        &upstream,
        "max_request_body_bytes = 1024",
        &guarded_chat(""),
    )
    .await;
    let large = json!({"model": "m", "messages": [{"role": "user", "content": "x".repeat(4096)}]});
    let response = gateway
        .post_json_with("/v1/chat/completions", &[], &large)
        .await;
    let body = gateway_error_envelope(response, 413).await;
    assert_eq!(body["error"]["code"], "request_too_large");
    assert_eq!(upstream.request_count(), 0);
}

#[tokio::test]
async fn http2_clients_are_served() {
    let (upstream, gateway) = start_guarded("").await;
    upstream.push(Reply::chat_text("hi"));
    let client = crate::common::http_builder()
        .http2_prior_knowledge()
        .build()
        .expect("client");
    let response = client
        .post(format!("{}/v1/chat/completions", gateway.url()))
        .json(&json!({"model": "m", "messages": []}))
        .send()
        .await
        .expect("answers over h2c");
    assert_eq!(response.version(), reqwest::Version::HTTP_2);
    assert_eq!(response.status(), 200);
}

/// The drain closes an idle keep-alive connection at once and lets the exchange in flight on
/// another finish: the idle one ends before the slow answer is out, which says `connection:
/// close`.
#[tokio::test]
async fn graceful_shutdown_lets_an_in_flight_request_finish() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, PASS_THROUGH).await;
    let addr = gateway.addr;
    upstream.push(Reply::json(200, json!({"quick": true})));
    let mut idle = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    idle.write_all(b"GET /v1/models HTTP/1.1\r\nhost: gateway\r\n\r\n")
        .await
        .expect("sends");
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    while !answer.ends_with(br#"{"quick":true}"#) {
        let read = idle.read(&mut buffer).await.expect("reads the answer");
        assert!(read > 0, "answered before closing");
        answer.extend_from_slice(&buffer[..read]);
    }

    upstream.push(Reply::json(200, json!({"slow": true})).with_delay(Duration::from_millis(300)));
    let url = format!("{}/v1/models", gateway.url());
    let in_flight = tokio::spawn(async move { crate::common::http().get(url).send().await });
    // Stop only once the request is inside the gateway (it has reached the upstream).
    for _ in 0..200 {
        if upstream.request_count() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(upstream.request_count(), 2);
    let stopping = tokio::spawn(gateway.stop());
    assert_eq!(idle.read(&mut buffer).await.expect("reads"), 0, "closed");
    assert!(!in_flight.is_finished(), "the idle connection closed first");
    let response = in_flight
        .await
        .expect("joins")
        .expect("the in-flight request was answered");
    assert_eq!(response.status(), 200);
    assert_eq!(
        response
            .headers()
            .get("connection")
            .and_then(|value| value.to_str().ok()),
        Some("close"),
        "the answer says the connection closes after it, so no client reuses it"
    );
    stopping.await.expect("the drain ends");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "no longer accepting"
    );
}

/// On a route without plugins the stream is passed on as the upstream sends it: every byte in
/// order however it was cut, to the SDK's client as to a raw one, and a lone event without
/// waiting for the next (the pass-through gathers only the frames already at hand).
#[tokio::test]
async fn a_pass_through_stream_keeps_its_bytes_and_does_not_hold_a_lone_event() {
    use futures_util::StreamExt;

    use crate::common::upstream::chat_stream;

    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, PASS_THROUGH).await;
    let request = json!({
        "model": "gpt-4o-mini",
        "stream": true,
        "messages": [{"role": "user", "content": "Say hello."}],
    });
    let stream = chat_stream(&[], Some("Hello from upstream."));

    upstream.push(Reply::sse_chunked(&stream, 7));
    let mut events = gateway
        .sdk_chat_stream(request.clone())
        .await
        .expect("stream opens");
    let mut text = String::new();
    while let Some(chunk) = events.next().await {
        for choice in chunk.expect("no error in the stream").choices {
            text.push_str(choice.delta.content.as_deref().unwrap_or_default());
        }
    }
    assert_eq!(text, "Hello from upstream.");

    for chunk_size in [1, 50, stream.len()] {
        upstream.push(Reply::sse_chunked(&stream, chunk_size));
        let raw = gateway.post_chat(&request).await;
        assert_eq!(raw.status(), 200);
        assert_eq!(
            raw.text().await.expect("body"),
            stream,
            "chunk size {chunk_size}"
        );
    }

    let event = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n";
    upstream.push(Reply::stall_after([event]));
    let mut response = gateway.post_chat(&request).await;
    assert_eq!(response.status(), 200);
    let first = tokio::time::timeout(Duration::from_secs(2), response.chunk())
        .await
        .expect("the event is not held back")
        .expect("readable")
        .expect("a chunk");
    assert_eq!(first.as_ref(), event.as_bytes());
}
