//! Usage on retried streams: the first attempt is blocked with usage X, the second passes with
//! usage Y, and the client reads X+Y where its format reports usage (chat's last chunk, the
//! Responses `response.completed`, Anthropic's `message_start` and `message_delta`).

use std::time::Duration;

use async_openai::types::responses::{CreateResponse, ResponseStreamEvent};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::{BAD, GOOD, chat_request, guarded_with};
use crate::common::upstream::chat_stream;
use crate::common::{Reply, ScriptedUpstream, TestGateway, fixture, fixture_json};

/// The blocked attempt's stream, its events apart: its usage arrives after the block was
/// decided, so the gateway must read on to bill it.
fn blocked_first(stream: &str) -> Reply {
    Reply::sse_events(stream).with_chunk_delay(Duration::from_millis(20))
}

/// A chat stream with the usage chunk `stream_options.include_usage` asks for, before `[DONE]`.
fn chat_stream_with_usage(call: (&str, &str, &str), prompt: u64, completion: u64) -> String {
    let usage = json!({"id": "chatcmpl-u", "object": "chat.completion.chunk", "created": 1,
                       "model": "gpt-4o-mini", "choices": [],
                       "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                 "total_tokens": prompt + completion}});
    chat_stream(&[call], None).replace(
        "data: [DONE]\n\n",
        &format!("data: {usage}\n\ndata: [DONE]\n\n"),
    )
}

fn chat_request_with_usage() -> Value {
    let mut request = chat_request();
    request["stream"] = json!(true);
    request["stream_options"] = json!({"include_usage": true});
    request
}

/// The usage async-openai read from a chat stream, and the calls' names.
async fn sdk_stream_usage(gateway: &TestGateway) -> (Vec<String>, Option<(u32, u32, u32)>) {
    let mut stream = gateway
        .sdk_chat_stream(chat_request_with_usage())
        .await
        .expect("the stream starts");
    let (mut calls, mut usage) = (Vec::new(), None);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.expect("a clean stream");
        for choice in chunk.choices {
            for call in choice.delta.tool_calls.unwrap_or_default() {
                calls.extend(call.function.and_then(|function| function.name));
            }
        }
        if let Some(reported) = chunk.usage {
            usage = Some((
                reported.prompt_tokens,
                reported.completion_tokens,
                reported.total_tokens,
            ));
        }
    }
    (calls, usage)
}

#[tokio::test]
async fn a_retried_chat_stream_reports_the_usage_of_both_attempts() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_with("on_block = \"retry\"")).await;
    upstream.push(blocked_first(&chat_stream_with_usage(BAD, 100, 10)));
    upstream.push(Reply::sse_events(&chat_stream_with_usage(GOOD, 130, 20)));
    let (calls, usage) = sdk_stream_usage(&gateway).await;
    assert_eq!(calls, ["get_weather"]);
    assert_eq!(usage, Some((230, 30, 260)));

    // A message in place of the blocked stream bills the blocked attempt.
    let gateway = TestGateway::start(&upstream, &guarded_with("on_block = \"message\"")).await;
    upstream.push(blocked_first(&chat_stream_with_usage(BAD, 100, 10)));
    let (calls, usage) = sdk_stream_usage(&gateway).await;
    assert!(calls.is_empty());
    assert_eq!(usage, Some((100, 10, 110)));
}

/// The recorded Responses stream of an allowed call, with its usage changed to `input` and
/// `output` tokens and its call renamed to `name`.
fn responses_stream(name: &str, input: u64, output: u64) -> String {
    fixture("responses/function_call_allowed.sse")
        .replace("\"name\":\"get_weather\"", &format!("\"name\":\"{name}\""))
        .replace("\"input_tokens\":141", &format!("\"input_tokens\":{input}"))
        .replace(
            "\"output_tokens\":26",
            &format!("\"output_tokens\":{output}"),
        )
        .replace(
            "\"total_tokens\":167",
            &format!("\"total_tokens\":{}", input + output),
        )
}

#[tokio::test]
async fn a_retried_responses_stream_completes_with_the_usage_of_both_attempts() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_with("on_block = \"retry\"")).await;
    let first = responses_stream("delete_user", 100, 10);
    assert!(
        first.contains("\"total_tokens\":110"),
        "the fixture's usage"
    );
    upstream.push(blocked_first(&first));
    upstream.push(Reply::sse_events(&responses_stream("get_weather", 141, 26)));

    let mut request: CreateResponse =
        serde_json::from_value(fixture_json("responses/function_call_allowed.request.json"))
            .expect("the SDK reads the request");
    request.stream = Some(true);
    let mut events = gateway
        .openai()
        .responses()
        .create_stream(request)
        .await
        .expect("the stream starts");
    let mut completed = None;
    while let Some(event) = events.next().await {
        if let ResponseStreamEvent::ResponseCompleted(event) = event.expect("a clean stream") {
            completed = Some(event.response);
        }
    }
    let response = completed.expect("the stream completes");
    let names: Vec<String> = response
        .output
        .iter()
        .filter_map(|item| serde_json::to_value(item).ok())
        .filter_map(|item| item["name"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(names, ["get_weather"]);
    let usage = response.usage.expect("usage");
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.total_tokens),
        (241, 36, 277)
    );
    assert_eq!(upstream.request_count(), 2);
}

/// The recorded Anthropic stream of an allowed call, with `input_tokens` and the final
/// `output_tokens` changed and its call renamed to `name`.
fn anthropic_stream(name: &str, input: u64, output: u64) -> String {
    let stream = fixture("anthropic/tool_use_allowed.sse");
    let recorded_output = stream
        .split("\"usage\":{\"output_tokens\":")
        .nth(1)
        .and_then(|rest| rest.split('}').next())
        .expect("message_delta reports output tokens")
        .to_owned();
    let recorded_input = stream
        .split("\"input_tokens\":")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .expect("message_start reports input tokens")
        .to_owned();
    stream
        .replace("\"name\":\"get_weather\"", &format!("\"name\":\"{name}\""))
        .replace(
            &format!("\"input_tokens\":{recorded_input},"),
            &format!("\"input_tokens\":{input},"),
        )
        .replace(
            &format!("\"usage\":{{\"output_tokens\":{recorded_output}}}"),
            &format!("\"usage\":{{\"output_tokens\":{output}}}"),
        )
}

/// The usage a client rebuilds from an Anthropic stream: `message_start`'s, with each
/// `message_delta`'s counts in place of the ones it names.
fn anthropic_usage(body: &str) -> Value {
    let mut usage = Value::Null;
    for data in body.lines().filter_map(|line| line.strip_prefix("data: ")) {
        let event: Value = serde_json::from_str(data).unwrap_or_default();
        match event["type"].as_str() {
            Some("message_start") => usage = event["message"]["usage"].clone(),
            Some("message_delta") => {
                for (key, count) in event["usage"].as_object().into_iter().flatten() {
                    usage[key] = count.clone();
                }
            }
            _ => {}
        }
    }
    usage
}

#[tokio::test]
async fn a_retried_anthropic_stream_reports_the_usage_of_both_attempts() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_with("on_block = \"retry\"")).await;
    let first = anthropic_stream("delete_user", 100, 10);
    assert_eq!(
        anthropic_usage(&first)["input_tokens"],
        100,
        "the fixture's usage"
    );
    upstream.push(blocked_first(&first));
    upstream.push(Reply::sse_events(&anthropic_stream("get_weather", 130, 20)));

    let mut request = fixture_json("anthropic/tool_use_allowed.request.json");
    request["stream"] = json!(true);
    let response = gateway.post("/v1/messages", &request).await;
    assert_eq!(response.status(), 200);
    let body = response.text().await.expect("text");
    assert!(!body.contains("delete_user"), "{body}");
    assert!(body.contains("\"name\":\"get_weather\""), "{body}");
    let usage = anthropic_usage(&body);
    assert_eq!(usage["input_tokens"], 230, "{usage}");
    assert_eq!(usage["output_tokens"], 30, "{usage}");
    assert_eq!(upstream.request_count(), 2);
}
