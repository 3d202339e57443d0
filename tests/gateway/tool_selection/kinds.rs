//! A tool is declared as one kind: custom tools by name only, and a call of another kind than
//! its declaration (a function call to a custom tool, a custom call to a function, a client
//! `tool_use` of Anthropic's server tool) is undeclared — complete or streamed.

use super::{guarded_answering, request_with_both_kinds};
use crate::common::answers::{assert_sdk_error, blocked_envelope};
use crate::common::upstream::chat_stream;
use crate::common::{Reply, ScriptedUpstream, TestGateway, fixture, fixture_json, start_guarded};
use serde_json::json;

#[tokio::test]
async fn custom_tools_are_declared_by_name_only() {
    let (upstream, gateway) = start_guarded("").await;
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
        gateway.post_status("/v1/chat/completions", &request).await,
        200
    );
    upstream.push(Reply::json(200, custom("shell")));
    let body = blocked_envelope(gateway.post_chat(&request).await).await;
    assert_eq!(body["error"]["violations"][0]["tool"], "shell");
}

#[tokio::test]
async fn a_function_call_to_a_custom_tool_is_blocked_as_undeclared_in_the_sdk() {
    let (_upstream, gateway) =
        guarded_answering(&[("call_1", "sql", r#"{"query":"drop table users"}"#)]).await;
    let error = gateway
        .sdk_chat(request_with_both_kinds(false))
        .await
        .expect_err("the name matches, the kind does not");
    let body = assert_sdk_error(error, 403, "undeclared_tool");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("'sql' is declared as a custom tool, not a function"),
        "{message}"
    );
}

#[tokio::test]
async fn a_custom_call_to_a_function_tool_is_blocked_as_undeclared() {
    let (upstream, gateway) = start_guarded("").await;
    let custom = |name: &str| {
        json!({"id": "chatcmpl-3", "object": "chat.completion", "created": 1, "model": "gpt-5",
               "choices": [{"index": 0, "finish_reason": "tool_calls",
                            "message": {"role": "assistant", "content": null, "tool_calls": [
                                {"id": "call_c", "type": "custom", "custom": {"name": name, "input": "Oslo"}}]}}]})
    };
    let request = request_with_both_kinds(false);
    // The same call shape passes when its name is a custom tool: the kind is what blocks.
    upstream.push(Reply::json(200, custom("sql")));
    let allowed = gateway.post_chat(&request).await;
    assert_eq!(allowed.status(), 200);
    upstream.push(Reply::json(200, custom("get_weather")));
    let body = blocked_envelope(gateway.post_chat(&request).await).await;
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
    let (upstream, gateway) = start_guarded("").await;
    let stream = chat_stream(&[("call_1", "sql", r#"{"query":"select 1"}"#)], None);
    upstream.push(Reply::sse_chunked(&stream, 13));
    let response = gateway.post_chat(&request_with_both_kinds(true)).await;
    let body = blocked_envelope(response).await;
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
    assert_eq!(gateway.post_status("/v1/messages", &request).await, 200);

    // The same block as a client `tool_use`: the client has no web_search handler.
    let client_call = served.replace("\"server_tool_use\"", "\"tool_use\"");
    assert_ne!(
        client_call, served,
        "the fixture has a server_tool_use block"
    );
    upstream.push(Reply::raw(200, "application/json", client_call));
    let body = blocked_envelope(gateway.post("/v1/messages", &request).await).await;
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
