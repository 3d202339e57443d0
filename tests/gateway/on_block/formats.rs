//! `on_block` on the Responses API and Anthropic Messages: the feedback in each format's own
//! shape (`function_call_output`; `tool_result` with `is_error` in a user turn), and the
//! message as each format's completed text answer.

use serde_json::{Value, json};

use super::{guarded_with, last_items, weather_schema};
use crate::common::{Reply, ScriptedUpstream, TestGateway};

fn responses_request() -> Value {
    json!({"model": "gpt-4o-mini", "input": "Weather in Paris, please.",
           "tools": [{"type": "function", "name": "get_weather", "parameters": weather_schema()}]})
}

fn responses_answer(call_id: &str, name: &str, arguments: &str) -> Value {
    json!({"id": format!("resp_{call_id}"), "object": "response", "created_at": 1,
           "status": "completed", "model": "gpt-4o-mini",
           "output": [{"type": "function_call", "id": format!("fc_{call_id}"), "call_id": call_id,
                       "name": name, "arguments": arguments, "status": "completed"}],
           "usage": {"input_tokens": 50, "output_tokens": 9, "total_tokens": 59}})
}

fn anthropic_request() -> Value {
    json!({"model": "claude-sonnet-4-5", "max_tokens": 256,
           "messages": [{"role": "user", "content": "Weather in Paris, please."}],
           "tools": [{"name": "get_weather", "input_schema": weather_schema()}]})
}

fn anthropic_answer(id: &str, name: &str, input: Value) -> Value {
    json!({"id": format!("msg_{id}"), "type": "message", "role": "assistant",
           "model": "claude-sonnet-4-5",
           "content": [{"type": "tool_use", "id": id, "name": name, "input": input}],
           "stop_reason": "tool_use", "stop_sequence": null,
           "usage": {"input_tokens": 40, "output_tokens": 12}})
}

#[tokio::test]
async fn responses_retry_answers_the_blocked_call_with_a_function_call_output() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_with("on_block = \"retry\"")).await;
    upstream.push(Reply::json(
        200,
        responses_answer("call_bad", "delete_user", "{}"),
    ));
    upstream.push(Reply::json(
        200,
        responses_answer("call_good", "get_weather", r#"{"city":"Paris"}"#),
    ));

    let response = gateway.post("/v1/responses", &responses_request()).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.expect("JSON");
    assert_eq!(answer["output"][0]["name"], "get_weather");
    assert_eq!(
        answer["usage"]["input_tokens"], 100,
        "both attempts are billed"
    );

    let second = upstream.requests()[1].json();
    assert_eq!(
        second["input"][0],
        json!({"role": "user", "content": "Weather in Paris, please."})
    );
    let fed_back = last_items(&second, "input", 2);
    assert_eq!(fed_back[0]["type"], "function_call");
    assert_eq!(fed_back[0]["call_id"], "call_bad");
    assert_eq!(fed_back[1]["type"], "function_call_output");
    assert_eq!(fed_back[1]["call_id"], "call_bad");
    let output = fed_back[1]["output"].as_str().unwrap_or_default();
    assert!(
        output.contains("'delete_user' is not a declared tool"),
        "{output}"
    );
}

#[tokio::test]
async fn anthropic_retry_answers_the_blocked_call_with_an_error_tool_result() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_with("on_block = \"retry\"")).await;
    // The schema forbids extra keys: the first call breaks it.
    upstream.push(Reply::json(
        200,
        anthropic_answer("toolu_bad", "get_weather", json!({"town": "Paris"})),
    ));
    upstream.push(Reply::json(
        200,
        anthropic_answer("toolu_good", "get_weather", json!({"city": "Paris"})),
    ));

    let response = gateway.post("/v1/messages", &anthropic_request()).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.expect("JSON");
    assert_eq!(answer["content"][0]["id"], "toolu_good");
    assert_eq!(
        answer["usage"],
        json!({"input_tokens": 80, "output_tokens": 24})
    );

    let fed_back = last_items(&upstream.requests()[1].json(), "messages", 2);
    assert_eq!(fed_back[0]["role"], "assistant");
    assert_eq!(
        fed_back[0]["content"][0],
        json!({"type": "tool_use", "id": "toolu_bad", "name": "get_weather",
               "input": {"town": "Paris"}})
    );
    assert_eq!(fed_back[1]["role"], "user");
    let result = &fed_back[1]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_bad");
    assert_eq!(result["is_error"], true);
    let text = result["content"].as_str().unwrap_or_default();
    assert!(text.contains("'town' was unexpected"), "{text}");
    assert!(text.contains("match its parameters' schema"), "{text}");
}

#[tokio::test]
async fn message_is_each_formats_completed_text_answer() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_with("on_block = \"message\"")).await;

    upstream.push(Reply::json(
        200,
        responses_answer("call_bad", "delete_user", "{}"),
    ));
    let response = gateway.post("/v1/responses", &responses_request()).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("x-toolgate-violations"));
    let answer: Value = response.json().await.expect("JSON");
    assert_eq!(answer["status"], "completed");
    assert_eq!(answer["output"].as_array().map(Vec::len), Some(1));
    assert_eq!(answer["output"][0]["type"], "message");
    let text = answer["output"][0]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("delete_user"), "{text}");
    assert_eq!(answer["toolgate"]["violations"][0]["check"], "membership");

    upstream.push(Reply::json(
        200,
        anthropic_answer("toolu_bad", "delete_user", json!({})),
    ));
    let response = gateway.post("/v1/messages", &anthropic_request()).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.expect("JSON");
    assert_eq!(answer["stop_reason"], "end_turn");
    assert_eq!(answer["content"][0]["type"], "text");
    assert_eq!(answer["content"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        answer["usage"],
        json!({"input_tokens": 40, "output_tokens": 12})
    );
}
