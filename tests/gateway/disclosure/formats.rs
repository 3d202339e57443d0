//! Disclosure on the Responses API and Anthropic Messages: each format's discovery tools and
//! index in its own place, and the discovery round answered in its own shape
//! (`function_call_output`, `tool_result`).

use serde_json::{Value, json};

use super::{
    DECLARED, DISCOVERY, disclosed_route, filler, last_items, sent_tool_names, weather_schema,
};
use crate::common::{Reply, ScriptedUpstream, TestGateway};

fn responses_request() -> Value {
    let mut tools = vec![json!({"type": "function", "name": "get_weather",
        "description": "Reports the weather of a city.", "parameters": weather_schema()})];
    tools.extend((1..DECLARED).map(|n| {
        json!({"type": "function", "name": filler(n),
        "description": "Filler.", "parameters": {"type": "object"}})
    }));
    tools.push(json!({"type": "web_search"}));
    json!({"model": "gpt-4o-mini", "input": "Weather in Paris, please.",
           "instructions": "Be brief.", "tools": tools})
}

fn responses_answer(call_id: &str, name: &str, arguments: &str) -> Value {
    json!({"id": format!("resp_{call_id}"), "object": "response", "created_at": 1,
           "status": "completed", "model": "gpt-4o-mini",
           "output": [{"type": "function_call", "id": format!("fc_{call_id}"), "call_id": call_id,
                       "name": name, "arguments": arguments, "status": "completed"}],
           "usage": {"input_tokens": 50, "output_tokens": 9, "total_tokens": 59}})
}

fn anthropic_request() -> Value {
    let mut tools = vec![
        json!({"name": "get_weather", "description": "Reports the weather of a city.",
        "input_schema": weather_schema()}),
    ];
    tools.extend((1..DECLARED).map(|n| {
        json!({"name": filler(n), "description": "Filler.",
        "input_schema": {"type": "object"}})
    }));
    json!({"model": "claude-sonnet-4-5", "max_tokens": 256, "system": "Be brief.",
           "messages": [{"role": "user", "content": "Weather in Paris, please."}],
           "tools": tools})
}

fn anthropic_answer(id: &str, name: &str, input: Value) -> Value {
    json!({"id": format!("msg_{id}"), "type": "message", "role": "assistant",
           "model": "claude-sonnet-4-5",
           "content": [{"type": "tool_use", "id": id, "name": name, "input": input}],
           "stop_reason": "tool_use", "stop_sequence": null,
           "usage": {"input_tokens": 40, "output_tokens": 12}})
}

#[tokio::test]
async fn responses_discovery_is_answered_with_a_function_call_output() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &disclosed_route("")).await;
    upstream.push(Reply::json(
        200,
        responses_answer("call_load", "load_tool", r#"{"tool_name":"get_weather"}"#),
    ));
    upstream.push(Reply::json(
        200,
        responses_answer("call_w", "get_weather", r#"{"city":"Paris"}"#),
    ));

    let response = gateway.post("/v1/responses", &responses_request()).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.expect("JSON");
    assert_eq!(answer["output"][0]["name"], "get_weather");
    assert_eq!(answer["usage"]["input_tokens"], 100, "both rounds billed");

    let requests = upstream.requests();
    let first = requests[0].json();
    let mut names = sent_tool_names(&first);
    assert_eq!(
        names, DISCOVERY,
        "the built-in web_search stays, unnamed: {first}"
    );
    assert!(
        first["tools"]
            .as_array()
            .is_some_and(|tools| tools.iter().any(|tool| tool["type"] == "web_search"))
    );
    let instructions = first["instructions"].as_str().unwrap_or_default();
    assert!(instructions.starts_with("Be brief.\n\n"), "{instructions}");
    assert!(instructions.contains("- get_weather: Reports the weather of a city."));
    let second = requests[1].json();
    names = sent_tool_names(&second);
    assert_eq!(names[0], "get_weather");
    let round = last_items(&second, "input", 2);
    assert_eq!(round[0]["type"], "function_call");
    assert_eq!(round[1]["type"], "function_call_output");
    assert_eq!(round[1]["call_id"], "call_load");
    assert!(
        round[1]["output"]
            .as_str()
            .unwrap_or_default()
            .contains("\"tool\":\"get_weather\"")
    );
}

#[tokio::test]
async fn anthropic_discovery_is_answered_with_a_tool_result() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &disclosed_route("")).await;
    upstream.push(Reply::json(
        200,
        anthropic_answer(
            "toolu_load",
            "load_tool",
            json!({"tool_name": "get_weather"}),
        ),
    ));
    upstream.push(Reply::json(
        200,
        anthropic_answer("toolu_w", "get_weather", json!({"city": "Paris"})),
    ));

    let response = gateway.post("/v1/messages", &anthropic_request()).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.expect("JSON");
    assert_eq!(answer["content"][0]["name"], "get_weather");

    let requests = upstream.requests();
    let first = requests[0].json();
    assert_eq!(sent_tool_names(&first), DISCOVERY);
    assert!(
        first["tools"][0]["input_schema"].is_object(),
        "Anthropic's shape: {first}"
    );
    let system = first["system"].as_str().unwrap_or_default();
    assert!(
        system.starts_with("Be brief.\n\n") && system.contains("get_weather"),
        "{system}"
    );
    let second = requests[1].json();
    assert_eq!(sent_tool_names(&second)[0], "get_weather");
    let round = last_items(&second, "messages", 2);
    assert_eq!(round[0]["role"], "assistant");
    assert_eq!(round[0]["content"][0]["name"], "load_tool");
    assert_eq!(round[1]["role"], "user");
    assert_eq!(round[1]["content"][0]["type"], "tool_result");
    assert_eq!(round[1]["content"][0]["tool_use_id"], "toolu_load");
}

#[tokio::test]
async fn an_anthropic_stream_hides_its_discovery_round() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &disclosed_route("")).await;
    let stream = |id: &str, name: &str, input: &str| {
        let input = serde_json::to_string(input).unwrap_or_default();
        format!(
            "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"msg_{id}\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{{\"input_tokens\":40,\"output_tokens\":1}}}}}}\n\n\
             event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"tool_use\",\"id\":\"{id}\",\"name\":\"{name}\",\"input\":{{}}}}}}\n\n\
             event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":{input}}}}}\n\n\
             event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\n\
             event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"tool_use\"}},\"usage\":{{\"output_tokens\":12}}}}\n\n\
             event: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n"
        )
    };
    upstream.push(Reply::sse_events(&stream(
        "toolu_load",
        "load_tool",
        r#"{"tool_name":"get_weather"}"#,
    )));
    upstream.push(Reply::sse_events(&stream(
        "toolu_w",
        "get_weather",
        r#"{"city":"Paris"}"#,
    )));
    let mut request = anthropic_request();
    request["stream"] = json!(true);
    let response = gateway.post("/v1/messages", &request).await;
    assert_eq!(response.status(), 200);
    let body = response.text().await.expect("text");
    assert!(!body.contains("load_tool"), "{body}");
    assert!(body.contains("\"name\":\"get_weather\""), "{body}");
    assert_eq!(body.matches("event: message_start").count(), 1, "{body}");
    assert_eq!(upstream.request_count(), 2);
}

#[tokio::test]
async fn a_responses_stream_hides_its_discovery_round() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &disclosed_route("")).await;
    let recorded = crate::common::fixture("responses/function_call_allowed.sse");
    // The recorded call renamed: a load_tool call whose arguments name no tool.
    let discovery = recorded.replace("\"name\":\"get_weather\"", "\"name\":\"load_tool\"");
    upstream.push(Reply::sse_events(&discovery));
    upstream.push(Reply::sse_events(&recorded));
    let mut request = crate::common::fixture_json("responses/function_call_allowed.request.json");
    let tools = request["tools"].as_array_mut().expect("tools");
    tools.extend((1..DECLARED).map(|n| {
        json!({"type": "function", "name": filler(n),
        "parameters": {"type": "object"}})
    }));
    request["stream"] = json!(true);

    let response = gateway.post("/v1/responses", &request).await;
    assert_eq!(response.status(), 200);
    let body = response.text().await.expect("text");
    assert!(!body.contains("load_tool"), "{body}");
    assert!(body.contains("\"name\":\"get_weather\""), "{body}");
    assert_eq!(body.matches("event: response.created").count(), 1, "{body}");
    let round = last_items(&upstream.requests()[1].json(), "input", 1);
    assert_eq!(round[0]["type"], "function_call_output");
    let output = round[0]["output"].as_str().unwrap_or_default();
    assert!(output.contains("load_tool takes"), "{output}");
}
