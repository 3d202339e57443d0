//! Self-check of the scripted upstream (`common/upstream.rs`) that every end-to-end test
//! stands on: talked to directly with reqwest, no gateway in between.

use std::time::{Duration, Instant};

use crate::common::answers::json_with_status;
use crate::common::upstream::{
    Reply, ScriptedUpstream, chat_completion, chat_stream, judge_verdict,
};
use futures_util::StreamExt;
use serde_json::{Value, json};

fn client() -> reqwest::Client {
    crate::common::http()
}

async fn post(upstream: &ScriptedUpstream, path: &str, body: &Value) -> reqwest::Response {
    client()
        .post(format!("{}{path}", upstream.url()))
        .json(body)
        .send()
        .await
        .expect("the scripted upstream answers")
}

/// Reads a streamed body frame by frame as the client receives it.
async fn received_chunks(response: reqwest::Response) -> Vec<Vec<u8>> {
    let mut chunks = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        chunks.push(chunk.expect("the stream completes").to_vec());
    }
    chunks
}

#[tokio::test]
async fn json_replies_keep_their_exact_bytes_status_and_headers() {
    let upstream = ScriptedUpstream::start().await;
    let exact = "{ \"id\" : \"x\",\n  \"n\": 1.50 }";
    upstream.push(Reply::json(201, exact).with_header("x-upstream", "scripted"));
    let response = post(&upstream, "/v1/chat/completions", &json!({})).await;
    assert_eq!(response.status(), 201);
    assert_eq!(response.headers()["content-type"], "application/json");
    assert_eq!(response.headers()["x-upstream"], "scripted");
    assert_eq!(response.text().await.unwrap(), exact);
}

#[tokio::test]
async fn replies_are_served_in_fifo_order_and_requests_are_recorded() {
    let upstream = ScriptedUpstream::start().await;
    upstream.push(Reply::json(200, json!({"n": 1})));
    upstream.push(Reply::raw(404, "text/plain", "not here"));
    upstream.push(Reply::json(
        429,
        r#"{"error":{"code":"rate_limit_exceeded"}}"#,
    ));
    assert_eq!(upstream.queued_replies(), 3);

    let first = post(
        &upstream,
        "/v1/chat/completions?api-version=1",
        &json!({"a": 1}),
    )
    .await;
    assert_eq!(first.status(), 200);
    assert_eq!(first.json::<Value>().await.unwrap(), json!({"n": 1}));
    let second = client()
        .get(format!("{}/v1/models", upstream.url()))
        .header("authorization", "Bearer sk-test")
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 404);
    assert_eq!(second.headers()["content-type"], "text/plain");
    assert_eq!(second.text().await.unwrap(), "not here");
    let third = post(&upstream, "/v1/chat/completions", &json!({"a": 3})).await;
    assert_eq!(third.status(), 429);

    assert_eq!(upstream.queued_replies(), 0);
    assert_eq!(upstream.request_count(), 3);
    let requests = upstream.requests();
    assert_eq!(requests[0].method, "POST");
    assert_eq!(
        requests[0].path_and_query,
        "/v1/chat/completions?api-version=1"
    );
    assert_eq!(requests[0].json(), json!({"a": 1}));
    assert_eq!(requests[0].header("content-type"), Some("application/json"));
    assert_eq!(requests[1].method, "GET");
    assert_eq!(requests[1].path_and_query, "/v1/models");
    assert_eq!(requests[1].header("authorization"), Some("Bearer sk-test"));
    assert!(requests[1].body.is_empty());
    assert_eq!(requests[1].json(), Value::Null, "an empty body is not JSON");
    assert_eq!(upstream.last_request().unwrap().json(), json!({"a": 3}));
}

#[tokio::test]
async fn an_empty_queue_answers_500_then_the_default_is_served_repeatedly() {
    let upstream = ScriptedUpstream::start().await;
    let unscripted = post(&upstream, "/v1/chat/completions", &json!({})).await;
    let error = json_with_status(unscripted, 500).await;
    assert_eq!(error["error"]["code"], "no_scripted_reply");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("no reply was scripted") && message.contains("POST /v1/chat/completions"),
        "{message}"
    );

    upstream.set_default(Reply::json(200, json!({"default": true})));
    upstream.push(Reply::json(200, json!({"queued": true})));
    let bodies = [
        post(&upstream, "/", &json!({}))
            .await
            .json::<Value>()
            .await
            .unwrap(),
        post(&upstream, "/", &json!({}))
            .await
            .json::<Value>()
            .await
            .unwrap(),
        post(&upstream, "/", &json!({}))
            .await
            .json::<Value>()
            .await
            .unwrap(),
    ];
    assert_eq!(
        bodies,
        [
            json!({"queued": true}),
            json!({"default": true}),
            json!({"default": true})
        ]
    );
    assert_eq!(upstream.request_count(), 4);
}

#[tokio::test]
async fn sse_chunks_arrive_as_separate_frames() {
    let upstream = ScriptedUpstream::start().await;
    let chunks = vec![
        "data: {\"a\":1}\n\n",
        "data: {\"a\":",
        "2}\n\n",
        "data: [DONE]\n\n",
    ];
    // A real pause between chunks, so that the client's reads cannot merge them.
    upstream.push(Reply::sse(chunks.clone()).with_chunk_delay(Duration::from_millis(30)));
    let response = post(&upstream, "/v1/chat/completions", &json!({"stream": true})).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let received = received_chunks(response).await;
    let expected: Vec<Vec<u8>> = chunks.iter().map(|c| c.as_bytes().to_vec()).collect();
    assert_eq!(received, expected);
}

#[tokio::test]
async fn sse_chunked_cuts_the_stream_text_every_n_bytes() {
    let upstream = ScriptedUpstream::start().await;
    let text = chat_stream(&[("call_1", "get_weather", r#"{"city":"Zürich"}"#)], None);
    upstream.push(Reply::sse_chunked(&text, 7));
    upstream.push(Reply::sse_chunked(&text, 0));
    upstream.push(Reply::sse_events(&text));
    for _ in 0..3 {
        let response = post(&upstream, "/", &json!({})).await;
        let received: Vec<u8> = received_chunks(response).await.concat();
        assert_eq!(received, text.as_bytes());
    }
}

#[tokio::test]
async fn chat_stream_reassembles_to_the_same_text_and_calls() {
    let calls = [
        (
            "call_a1",
            "get_weather",
            r#"{"city": "Paris", "unit": "celsius"}"#,
        ),
        ("call_b2", "send_email", r#"{"to": "ops@example.com"}"#),
    ];
    let text = chat_stream(&calls, Some("Let me check that for you."));
    assert!(text.ends_with("data: [DONE]\n\n"));
    let chunks: Vec<Value> = text
        .split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).expect("every chunk is JSON"))
        .collect();
    assert!(
        chunks.len() > 8,
        "text and arguments come in several pieces"
    );
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");

    let mut content = String::new();
    let mut assembled = vec![(String::new(), String::new(), String::new()); calls.len()];
    for chunk in &chunks {
        let delta = &chunk["choices"][0]["delta"];
        content.push_str(delta["content"].as_str().unwrap_or_default());
        for fragment in delta["tool_calls"].as_array().into_iter().flatten() {
            let call = &mut assembled[fragment["index"].as_u64().unwrap() as usize];
            if let Some(id) = fragment["id"].as_str() {
                call.0 = id.to_owned();
                call.1 = fragment["function"]["name"].as_str().unwrap().to_owned();
            }
            call.2
                .push_str(fragment["function"]["arguments"].as_str().unwrap());
        }
    }
    assert_eq!(content, "Let me check that for you.");
    let expected: Vec<(String, String, String)> = calls
        .iter()
        .map(|(id, name, args)| (id.to_string(), name.to_string(), args.to_string()))
        .collect();
    assert_eq!(assembled, expected);
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(last["choices"][0]["delta"], json!({}));
}

#[test]
fn chat_completion_and_judge_verdict_look_like_openai() {
    let completion = chat_completion(&[("call_1", "delete_user", r#"{"id":7}"#)], None);
    assert!(completion["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(completion["object"], "chat.completion");
    let choice = &completion["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["logprobs"], Value::Null);
    assert_eq!(choice["message"]["content"], Value::Null);
    assert_eq!(
        choice["message"]["tool_calls"],
        json!([{"id": "call_1", "type": "function",
                "function": {"name": "delete_user", "arguments": "{\"id\":7}"}}])
    );
    let usage = &completion["usage"];
    assert_eq!(
        usage["total_tokens"].as_u64(),
        Some(
            usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
        )
    );

    let text = chat_completion(&[], Some("Hello"));
    assert_eq!(text["choices"][0]["finish_reason"], "stop");
    assert!(text["choices"][0]["message"].get("tool_calls").is_none());

    let verdict = judge_verdict("deny", "transfers to unknown accounts need approval");
    let content = verdict["choices"][0]["message"]["content"]
        .as_str()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(content).unwrap(),
        json!({"decision": "deny", "reason": "transfers to unknown accounts need approval"})
    );
}

#[tokio::test]
async fn with_delay_holds_back_the_head() {
    let upstream = ScriptedUpstream::start().await;
    upstream.push(Reply::json(200, "{}").with_delay(Duration::from_secs(5)));
    let timed_out = client()
        .get(upstream.url())
        .timeout(Duration::from_millis(100))
        .send()
        .await
        .expect_err("the head is delayed past the timeout");
    assert!(timed_out.is_timeout(), "{timed_out:?}");

    upstream.push(Reply::json(200, "{}").with_delay(Duration::from_millis(150)));
    let started = Instant::now();
    let response = client().get(upstream.url()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(started.elapsed() >= Duration::from_millis(150));
}

#[tokio::test]
async fn stall_after_sends_its_chunks_then_goes_silent() {
    let upstream = ScriptedUpstream::start().await;
    upstream.push(Reply::stall_after(["data: {\"a\":1}\n\n"]));
    let response = post(&upstream, "/", &json!({})).await;
    let mut stream = response.bytes_stream();
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(&first[..], b"data: {\"a\":1}\n\n");
    let next = tokio::time::timeout(Duration::from_millis(200), stream.next()).await;
    assert!(next.is_err(), "nothing follows the scripted chunks");
}

#[tokio::test]
async fn close_connection_answers_nothing_but_records_the_request() {
    let upstream = ScriptedUpstream::start().await;
    upstream.push(Reply::close_connection());
    upstream.push(Reply::json(200, "{}"));
    let error = client()
        .post(format!("{}/v1/chat/completions", upstream.url()))
        .body("{}")
        .send()
        .await
        .expect_err("no response is written");
    assert!(!error.is_timeout(), "{error:?}");
    assert_eq!(upstream.request_count(), 1);
    let next = client().get(upstream.url()).send().await.unwrap();
    assert_eq!(
        next.status(),
        200,
        "the server keeps serving new connections"
    );
}

#[tokio::test]
async fn invalid_scripted_input_is_a_readable_500_not_a_panic() {
    let upstream = ScriptedUpstream::start().await;
    upstream.push(Reply::json(1000, "{}"));
    upstream.push(Reply::json(200, "{}").with_header("bad header", "x"));
    upstream.push(Reply::raw(200, "text/plain\n", "x"));
    for expected in [
        "1000 is not a valid",
        "invalid header name",
        "invalid header value",
    ] {
        let response = client().get(upstream.url()).send().await.unwrap();
        let error = json_with_status(response, 500).await;
        assert_eq!(error["error"]["code"], "invalid_scripted_reply");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "{message}");
    }
}

#[tokio::test]
async fn dropping_the_upstream_closes_its_port() {
    let upstream = ScriptedUpstream::start().await;
    let addr = upstream.addr();
    upstream.push(Reply::stall_after(["data: x\n\n"]));
    let stalled = post(&upstream, "/", &json!({})).await;
    upstream.shutdown().await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    let mut stream = stalled.bytes_stream();
    let mut rest = Vec::new();
    while let Some(Ok(chunk)) = stream.next().await {
        rest.push(chunk);
    }
    // The stalled stream ends (with an error) once the server is gone instead of hanging forever.
    assert_eq!(rest.concat(), b"data: x\n\n");
}
