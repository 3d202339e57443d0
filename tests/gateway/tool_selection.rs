//! tool_selection end to end: a real OpenAI client, the gateway, and a scripted upstream.
//! Membership, schema, arguments, every choice and the legacy fields, strict, observe mode,
//! per-route overrides, and allowed bodies forwarded byte for byte.

use crate::common::upstream::{chat_completion, chat_stream};
use crate::common::{Reply, ScriptedUpstream, TestGateway, fixture, fixture_json, guarded_chat};
use async_openai::error::OpenAIError;
use async_openai::types::chat::CreateChatCompletionRequest;
use serde_json::{Value, json};

/// A realistic request declaring a weather lookup and an e-mail sender.
fn request_with_tools() -> Value {
    json!({
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What's the weather in Paris? Then mail it to ops@example.com."}
        ],
        "tools": [
            {"type": "function", "function": {
                "name": "get_weather",
                "description": "Current weather for a city",
                "parameters": {"type": "object",
                    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
                    "required": ["city"], "additionalProperties": false}}},
            {"type": "function", "function": {
                "name": "send_email",
                "description": "Send an e-mail",
                "parameters": {"type": "object",
                    "properties": {"to": {"type": "string"}, "subject": {"type": "string"}, "body": {"type": "string"}},
                    "required": ["to", "subject", "body"]}}}
        ]
    })
}

fn sdk_request(body: Value) -> CreateChatCompletionRequest {
    serde_json::from_value(body).expect("a valid chat completion request")
}

async fn guarded(settings: &str) -> (ScriptedUpstream, TestGateway) {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_chat(settings)).await;
    (upstream, gateway)
}

/// The error envelope of a blocked exchange, read raw.
async fn blocked_body(response: reqwest::Response) -> Value {
    assert_eq!(response.status(), 403, "expected a block");
    assert!(response.headers().contains_key("x-request-id"));
    response.json().await.expect("the envelope is JSON")
}

#[tokio::test]
async fn a_declared_call_with_valid_arguments_reaches_the_sdk_client() {
    let (upstream, gateway) = guarded("").await;
    upstream.push(Reply::json(
        200,
        chat_completion(&[("call_1", "get_weather", r#"{"city":"Paris"}"#)], None),
    ));
    let response = gateway
        .openai()
        .chat()
        .create(sdk_request(request_with_tools()))
        .await
        .expect("an allowed call passes");
    let calls = response.choices[0]
        .message
        .tool_calls
        .as_ref()
        .expect("the call is delivered");
    assert_eq!(calls.len(), 1);
    let forwarded = upstream.last_request().expect("the upstream was called");
    assert_eq!(forwarded.path_and_query, "/v1/chat/completions");
    assert_eq!(
        forwarded.json()["tools"][0]["function"]["name"],
        "get_weather"
    );
}

#[tokio::test]
async fn an_undeclared_tool_is_blocked_with_a_permission_error_in_the_sdk() {
    let (upstream, gateway) = guarded("").await;
    upstream.push(Reply::json(
        200,
        chat_completion(&[("call_1", "delete_user", r#"{"id":7}"#)], None),
    ));
    let error = gateway
        .openai()
        .chat()
        .create(sdk_request(request_with_tools()))
        .await
        .expect_err("an undeclared tool is blocked");
    let OpenAIError::ApiError(api) = error else {
        panic!("expected an API error, got {error:?}");
    };
    assert_eq!(api.status_code.as_u16(), 403);
    assert_eq!(api.api_error.code.as_deref(), Some("undeclared_tool"));
    assert_eq!(api.api_error.r#type.as_deref(), Some("tool_call_blocked"));
    assert!(
        api.api_error
            .message
            .contains("'delete_user' is not a declared tool"),
        "{}",
        api.api_error.message
    );
}

#[tokio::test]
async fn violations_name_the_check_the_call_and_the_schema_location() {
    let (upstream, gateway) = guarded("").await;
    upstream.push(Reply::json(
        200,
        chat_completion(
            &[
                ("call_1", "delete_user", "{}"),
                (
                    "call_2",
                    "send_email",
                    r#"{"subject":"Weather","body":"Sunny"}"#,
                ),
                (
                    "call_3",
                    "get_weather",
                    r#"{"city":"Paris","unit":"kelvin"}"#,
                ),
            ],
            None,
        ),
    ));
    let body = blocked_body(
        gateway
            .post("/v1/chat/completions", &request_with_tools())
            .await,
    )
    .await;
    let violations = body["error"]["violations"]
        .as_array()
        .expect("violations")
        .clone();
    assert_eq!(violations.len(), 3, "{violations:#?}");
    assert_eq!(violations[0]["check"], "membership");
    assert_eq!(violations[0]["tool_call_id"], "call_1");
    assert_eq!(violations[0]["choice"], 0);
    assert_eq!(violations[1]["check"], "schema");
    assert_eq!(violations[1]["tool"], "send_email");
    assert_eq!(violations[1]["keyword"], "required");
    assert_eq!(
        violations[1]["instance_path"], "/to",
        "a missing property is located where it belongs"
    );
    assert!(
        violations[1]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("to")
    );
    assert_eq!(violations[2]["keyword"], "enum");
    assert_eq!(violations[2]["instance_path"], "/unit");
    assert!(body["error"]["request_id"].is_string());
}

#[tokio::test]
async fn arguments_that_are_not_json_are_a_violation_when_a_schema_exists() {
    let (upstream, gateway) = guarded("").await;
    upstream.push(Reply::json(
        200,
        chat_completion(&[("call_1", "get_weather", r#"{"city": "Par"#)], None),
    ));
    let body = blocked_body(
        gateway
            .post("/v1/chat/completions", &request_with_tools())
            .await,
    )
    .await;
    assert_eq!(body["error"]["code"], "invalid_arguments");
    assert_eq!(body["error"]["violations"][0]["check"], "arguments");
}

#[tokio::test]
async fn every_choice_is_checked_so_n_greater_than_one_is_no_bypass() {
    let (upstream, gateway) = guarded("").await;
    let mut completion = chat_completion(&[("call_1", "get_weather", r#"{"city":"Paris"}"#)], None);
    let mut second = completion["choices"][0].clone();
    second["index"] = json!(1);
    second["message"]["tool_calls"][0]["function"]["name"] = json!("drop_database");
    second["message"]["tool_calls"][0]["id"] = json!("call_9");
    completion["choices"]
        .as_array_mut()
        .expect("choices")
        .push(second);
    upstream.push(Reply::json(200, completion));
    let mut request = request_with_tools();
    request["n"] = json!(2);
    let body = blocked_body(gateway.post("/v1/chat/completions", &request).await).await;
    assert_eq!(body["error"]["violations"][0]["choice"], 1);
    assert_eq!(body["error"]["violations"][0]["tool"], "drop_database");
}

#[tokio::test]
async fn the_legacy_functions_and_function_call_fields_are_checked() {
    let (upstream, gateway) = guarded("").await;
    let request = json!({
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "weather in Oslo"}],
        "functions": [{"name": "get_weather", "parameters": {"type": "object", "required": ["city"]}}]
    });
    let legacy = |name: &str, arguments: &str| {
        json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
               "choices": [{"index": 0, "finish_reason": "function_call",
                            "message": {"role": "assistant", "content": null,
                                        "function_call": {"name": name, "arguments": arguments}}}]})
    };
    upstream.push(Reply::json(
        200,
        legacy("get_weather", r#"{"city":"Oslo"}"#),
    ));
    assert_eq!(
        gateway
            .post("/v1/chat/completions", &request)
            .await
            .status(),
        200
    );
    upstream.push(Reply::json(200, legacy("get_weather", "{}")));
    let body = blocked_body(gateway.post("/v1/chat/completions", &request).await).await;
    assert_eq!(body["error"]["violations"][0]["keyword"], "required");
    upstream.push(Reply::json(200, legacy("rm_rf", "{}")));
    let body = blocked_body(gateway.post("/v1/chat/completions", &request).await).await;
    assert_eq!(body["error"]["code"], "undeclared_tool");
}

#[tokio::test]
async fn custom_tools_are_declared_by_name_only() {
    let (upstream, gateway) = guarded("").await;
    let request = json!({
        "model": "gpt-5",
        "messages": [{"role": "user", "content": "count users"}],
        "tools": [{"type": "custom", "custom": {"name": "sql", "description": "read-only SQL"}}]
    });
    let custom = |name: &str| {
        json!({"id": "chatcmpl-2", "object": "chat.completion", "created": 1, "model": "gpt-5",
               "choices": [{"index": 0, "finish_reason": "tool_calls",
                            "message": {"role": "assistant", "content": null, "tool_calls": [
                                {"id": "call_c", "type": "custom", "custom": {"name": name, "input": "select count(*) from users"}}]}}]})
    };
    upstream.push(Reply::json(200, custom("sql")));
    assert_eq!(
        gateway
            .post("/v1/chat/completions", &request)
            .await
            .status(),
        200
    );
    upstream.push(Reply::json(200, custom("shell")));
    let body = blocked_body(gateway.post("/v1/chat/completions", &request).await).await;
    assert_eq!(body["error"]["violations"][0]["tool"], "shell");
}

/// A request declaring the custom tool `sql` and the function `get_weather`, so each name is
/// declared under one kind only.
fn request_with_both_kinds(stream: bool) -> Value {
    json!({
        "model": "gpt-5",
        "stream": stream,
        "messages": [{"role": "user", "content": "count users, then the weather in Oslo"}],
        "tools": [
            // `format` is optional in the API, but async-openai's type requires it.
            {"type": "custom", "custom": {"name": "sql", "description": "read-only SQL",
                                          "format": {"type": "text"}}},
            {"type": "function", "function": {"name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
        ]
    })
}

#[tokio::test]
async fn a_function_call_to_a_custom_tool_is_blocked_as_undeclared_in_the_sdk() {
    let (upstream, gateway) = guarded("").await;
    upstream.push(Reply::json(
        200,
        chat_completion(
            &[("call_1", "sql", r#"{"query":"drop table users"}"#)],
            None,
        ),
    ));
    let error = gateway
        .openai()
        .chat()
        .create(sdk_request(request_with_both_kinds(false)))
        .await
        .expect_err("the name matches, the kind does not");
    let OpenAIError::ApiError(api) = error else {
        panic!("expected an API error, got {error:?}");
    };
    assert_eq!(api.status_code.as_u16(), 403);
    assert_eq!(api.api_error.code.as_deref(), Some("undeclared_tool"));
    assert!(
        api.api_error
            .message
            .contains("'sql' is declared as a custom tool, not a function"),
        "{}",
        api.api_error.message
    );
}

#[tokio::test]
async fn a_custom_call_to_a_function_tool_is_blocked_as_undeclared() {
    let (upstream, gateway) = guarded("").await;
    let custom = |name: &str| {
        json!({"id": "chatcmpl-3", "object": "chat.completion", "created": 1, "model": "gpt-5",
               "choices": [{"index": 0, "finish_reason": "tool_calls",
                            "message": {"role": "assistant", "content": null, "tool_calls": [
                                {"id": "call_c", "type": "custom", "custom": {"name": name, "input": "Oslo"}}]}}]})
    };
    let request = request_with_both_kinds(false);
    // The same call shape passes when its name is a custom tool: the kind is what blocks.
    upstream.push(Reply::json(200, custom("sql")));
    let allowed = gateway.post("/v1/chat/completions", &request).await;
    assert_eq!(allowed.status(), 200);
    upstream.push(Reply::json(200, custom("get_weather")));
    let body = blocked_body(gateway.post("/v1/chat/completions", &request).await).await;
    assert_eq!(body["error"]["code"], "undeclared_tool");
    let violation = &body["error"]["violations"][0];
    assert_eq!(violation["check"], "membership");
    assert_eq!(violation["tool"], "get_weather");
    assert_eq!(
        violation["message"],
        "'get_weather' is declared as a function, not a custom tool"
    );
}

#[tokio::test]
async fn a_streamed_function_call_to_a_custom_tool_is_blocked() {
    let (upstream, gateway) = guarded("").await;
    let stream = chat_stream(&[("call_1", "sql", r#"{"query":"select 1"}"#)], None);
    upstream.push(Reply::sse_chunked(&stream, 13));
    let response = gateway
        .post("/v1/chat/completions", &request_with_both_kinds(true))
        .await;
    let body = blocked_body(response).await;
    assert_eq!(body["error"]["code"], "undeclared_tool");
    assert_eq!(body["error"]["violations"][0]["tool_call_id"], "call_1");
    assert_eq!(body["error"]["violations"][0]["tool"], "sql");
}

#[tokio::test]
async fn an_anthropic_tool_use_of_a_server_tool_is_blocked_with_an_anthropic_error() {
    let upstream = ScriptedUpstream::start().await;
    let config = "[[routes]]\npath = \"/v1/messages\"\nupstream = \"llm\"\n\
                  [[routes.plugins]]\nname = \"tool_selection\"\n";
    let gateway = TestGateway::start(&upstream, config).await;
    // web_search is declared only as Anthropic's server tool (web_search_20250305).
    let request = fixture_json("anthropic/server_web_search.request.json");
    let served = fixture("anthropic/server_web_search.response.json");
    upstream.push(Reply::raw(200, "application/json", served.clone()));
    assert_eq!(gateway.post("/v1/messages", &request).await.status(), 200);

    // The same block as a client `tool_use`: the client has no web_search handler.
    let client_call = served.replace("\"server_tool_use\"", "\"tool_use\"");
    assert_ne!(
        client_call, served,
        "the fixture has a server_tool_use block"
    );
    upstream.push(Reply::raw(200, "application/json", client_call));
    let body = blocked_body(gateway.post("/v1/messages", &request).await).await;
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "permission_error");
    assert_eq!(body["error"]["code"], "undeclared_tool");
    let violation = &body["error"]["violations"][0];
    assert_eq!(violation["check"], "membership");
    assert_eq!(violation["tool"], "web_search");
    assert_eq!(
        violation["message"],
        "'web_search' is declared as a built-in (server) tool, not a function"
    );
}

#[tokio::test]
async fn an_allowed_response_is_forwarded_byte_for_byte() {
    let (upstream, gateway) = guarded("").await;
    // Odd spacing, key order and escapes a re-serialization would change.
    let raw = "{ \"id\":\"chatcmpl-x\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"m\",\n  \"choices\":[{\"index\":0,\"finish_reason\":\"tool_calls\",\"message\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Z\\u00fcrich\\\"}\"}}]}}],\n  \"usage\":{\"total_tokens\":1.0e1} }";
    upstream.push(Reply::raw(200, "application/json", raw.as_bytes().to_vec()));
    let request = request_with_tools();
    let response = gateway.post("/v1/chat/completions", &request).await;
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
    let (upstream, gateway) = guarded("").await;
    let no_tools = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    upstream.push(Reply::json(
        200,
        chat_completion(&[("call_1", "anything", "{}")], None),
    ));
    assert_eq!(
        gateway
            .post("/v1/chat/completions", &no_tools)
            .await
            .status(),
        200
    );
    upstream.push(Reply::json(200, chat_completion(&[], Some("Hello!"))));
    assert_eq!(
        gateway
            .post("/v1/chat/completions", &request_with_tools())
            .await
            .status(),
        200
    );
    upstream.push(Reply::raw(200, "text/plain", b"not json at all".to_vec()));
    let response = gateway
        .post("/v1/chat/completions", &request_with_tools())
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.expect("body"), "not json at all");
}

#[tokio::test]
async fn strict_blocks_calls_without_declared_tools_and_unparsable_answers() {
    let (upstream, gateway) = guarded("strict = true").await;
    let no_tools = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    upstream.push(Reply::json(
        200,
        chat_completion(&[("call_1", "anything", "{}")], None),
    ));
    let body = blocked_body(gateway.post("/v1/chat/completions", &no_tools).await).await;
    assert_eq!(body["error"]["code"], "no_tools_declared");
    upstream.push(Reply::raw(
        200,
        "application/json",
        b"{\"choices\": 12}".to_vec(),
    ));
    let body = blocked_body(
        gateway
            .post("/v1/chat/completions", &request_with_tools())
            .await,
    )
    .await;
    assert_eq!(body["error"]["violations"][0]["check"], "parse");
    upstream.push(Reply::json(200, chat_completion(&[], Some("plain text"))));
    assert_eq!(
        gateway
            .post("/v1/chat/completions", &no_tools)
            .await
            .status(),
        200,
        "no calls, nothing to block"
    );
}

#[tokio::test]
async fn upstream_errors_pass_through_unchanged() {
    let (upstream, gateway) = guarded("strict = true").await;
    let error = r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#;
    upstream.push(
        Reply::raw(429, "application/json", error.as_bytes().to_vec())
            .with_header("retry-after", "7"),
    );
    let response = gateway
        .post("/v1/chat/completions", &request_with_tools())
        .await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
    assert_eq!(response.text().await.expect("body"), error);
}

#[tokio::test]
async fn observe_mode_records_the_block_and_lets_the_answer_through() {
    let upstream = ScriptedUpstream::start().await;
    let routes = "[[plugins]]\nname = \"tool_selection\"\nmode = \"observe\"\n\n\
                  [[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n";
    let gateway = TestGateway::start(&upstream, routes).await;
    upstream.push(Reply::json(
        200,
        chat_completion(&[("call_1", "delete_user", "{}")], None),
    ));
    let response = gateway
        .post("/v1/chat/completions", &request_with_tools())
        .await;
    assert_eq!(response.status(), 200);
    let request_id = response.headers()["x-request-id"]
        .to_str()
        .expect("ascii")
        .to_owned();
    let line = gateway.audit_line(&request_id).await;
    assert_eq!(line["verdict"], "observed");
    assert_eq!(line["observed"][0]["check"], "membership");
    assert_eq!(line["violations"], json!([]));

    // An answer the guard cannot read is refused only where a check enforces: observing never
    // blocks.
    let unreadable = r#"{"choices":[{"index":"0","message":{"tool_calls":[{"id":"c","type":"function","function":{"name":"delete_user","arguments":"{}"}}]}}]}"#;
    upstream.push(Reply::raw(
        200,
        "application/json",
        unreadable.as_bytes().to_vec(),
    ));
    let response = gateway
        .post("/v1/chat/completions", &request_with_tools())
        .await;
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn a_route_entry_overrides_the_gateway_wide_chain_by_name() {
    let upstream = ScriptedUpstream::start().await;
    let routes = "[[plugins]]\nname = \"tool_selection\"\n\n\
                  [[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\n\
                  [[routes]]\npath = \"/v1/unguarded\"\nupstream = \"llm\"\n\
                  [[routes.plugins]]\nname = \"tool_selection\"\nenabled = false\n\n\
                  [[routes]]\npath = \"/v1/strict\"\nupstream = \"llm\"\n\
                  [[routes.plugins]]\nname = \"tool_selection\"\n[routes.plugins.settings]\nstrict = true\n";
    let gateway = TestGateway::start(&upstream, routes).await;
    let bad = || {
        Reply::json(
            200,
            chat_completion(&[("call_1", "delete_user", "{}")], None),
        )
    };
    upstream.push(bad());
    assert_eq!(
        gateway
            .post("/v1/chat/completions", &request_with_tools())
            .await
            .status(),
        403,
        "gateway-wide chain"
    );
    upstream.push(bad());
    assert_eq!(
        gateway
            .post("/v1/unguarded", &request_with_tools())
            .await
            .status(),
        200,
        "switched off on the route"
    );
    let no_tools = json!({"model": "m", "messages": []});
    upstream.push(bad());
    assert_eq!(
        gateway.post("/v1/strict", &no_tools).await.status(),
        403,
        "the route's settings win"
    );
    upstream.push(bad());
    assert_eq!(
        gateway
            .post("/v1/chat/completions", &no_tools)
            .await
            .status(),
        200,
        "not strict elsewhere"
    );
}

#[tokio::test]
async fn malformed_requests_are_passed_on_and_calls_answering_them_refused_never_a_crash() {
    let (upstream, gateway) = guarded("").await;
    let client = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", gateway.url());
    let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let bodies: Vec<Vec<u8>> = vec![
        b"{not json".to_vec(),
        vec![0xff, 0xfe, b'{', 0x80],
        deep.into_bytes(),
        br#"{"tools": "not a list", "messages": 5}"#.to_vec(),
        br#"{"tools": [{"type": "function"}]}"#.to_vec(),
    ];
    for body in bodies {
        upstream.push(Reply::json(
            200,
            chat_completion(&[("call_1", "get_weather", "{}")], None),
        ));
        let response = client
            .post(&url)
            .body(body)
            .send()
            .await
            .expect("the gateway answers");
        // The request goes on, as the seed says; but the calls of its answer cannot be held
        // against declared tools nobody could read, so they do not reach the client.
        let body = blocked_body(response).await;
        assert_eq!(body["error"]["code"], "unverifiable_calls");
    }
    assert_eq!(upstream.request_count(), 5);
    upstream.push(Reply::json(200, chat_completion(&[], Some("just text"))));
    let response = client
        .post(&url)
        .body(b"{not json".to_vec())
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(response.status(), 200, "an answer without calls passes");
}
