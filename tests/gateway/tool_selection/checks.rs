//! What tool_selection checks in an answer: membership and schema, arguments that are not
//! JSON, every choice (so `n > 1` is no bypass) and the legacy `functions` fields — a declared
//! call with valid arguments reaches the SDK, anything else is a 403 naming each violation.

use super::{guarded_answering, request_with_tools};
use crate::common::answers::{assert_refusal, assert_sdk_error, blocked_envelope};
use crate::common::upstream::chat_completion;
use crate::common::{Reply, start_guarded};
use serde_json::json;

#[tokio::test]
async fn a_declared_call_with_valid_arguments_reaches_the_sdk_client() {
    let (upstream, gateway) =
        guarded_answering(&[("call_1", "get_weather", r#"{"city":"Paris"}"#)]).await;
    let response = gateway
        .sdk_chat(request_with_tools())
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
    let (_upstream, gateway) = guarded_answering(&[("call_1", "delete_user", r#"{"id":7}"#)]).await;
    let error = gateway
        .sdk_chat(request_with_tools())
        .await
        .expect_err("an undeclared tool is blocked");
    let body = assert_sdk_error(error, 403, "undeclared_tool");
    assert_eq!(body["type"], "tool_call_blocked");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("'delete_user' is not a declared tool"),
        "{message}"
    );
}

#[tokio::test]
async fn violations_name_the_check_the_call_and_the_schema_location() {
    let (_upstream, gateway) = guarded_answering(&[
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
    ])
    .await;
    let body = blocked_envelope(gateway.post_chat(&request_with_tools()).await).await;
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
    let (_upstream, gateway) =
        guarded_answering(&[("call_1", "get_weather", r#"{"city": "Par"#)]).await;
    let body = blocked_envelope(gateway.post_chat(&request_with_tools()).await).await;
    assert_refusal(&body, "invalid_arguments", "arguments");
}

#[tokio::test]
async fn every_choice_is_checked_so_n_greater_than_one_is_no_bypass() {
    let (upstream, gateway) = start_guarded("").await;
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
    let body = blocked_envelope(gateway.post_chat(&request).await).await;
    assert_eq!(body["error"]["violations"][0]["choice"], 1);
    assert_eq!(body["error"]["violations"][0]["tool"], "drop_database");
}

#[tokio::test]
async fn the_legacy_functions_and_function_call_fields_are_checked() {
    let (upstream, gateway) = start_guarded("").await;
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
        gateway.post_status("/v1/chat/completions", &request).await,
        200
    );
    upstream.push(Reply::json(200, legacy("get_weather", "{}")));
    let body = blocked_envelope(gateway.post_chat(&request).await).await;
    assert_eq!(body["error"]["violations"][0]["keyword"], "required");
    upstream.push(Reply::json(200, legacy("rm_rf", "{}")));
    let body = blocked_envelope(gateway.post_chat(&request).await).await;
    assert_eq!(body["error"]["code"], "undeclared_tool");
}

/// Each turn is checked against the tools that turn declares, though the gateway reads a
/// `tools` array it has seen before from its cache: the same bytes are the same tools, and a
/// byte changed (a tool dropped, a schema tightened) is read anew.
#[tokio::test]
async fn each_turn_is_checked_against_its_own_tools_when_earlier_turns_sent_others() {
    let (upstream, gateway) = start_guarded("").await;
    let mail = [(
        "call_1",
        "send_email",
        r#"{"to":"a","subject":"b","body":"c"}"#,
    )];
    for turn in 0..2 {
        upstream.push(Reply::chat_calls(&mail));
        let status = gateway
            .post_status("/v1/chat/completions", &request_with_tools())
            .await;
        assert_eq!(status, 200, "turn {turn}: send_email is declared");
    }
    let mut dropped = request_with_tools();
    let tools = dropped["tools"].as_array_mut().expect("tools");
    tools.retain(|tool| tool["function"]["name"] != "send_email");
    upstream.push(Reply::chat_calls(&mail));
    let body = blocked_envelope(gateway.post_chat(&dropped).await).await;
    assert_eq!(body["error"]["code"], "undeclared_tool");

    let mut tightened = request_with_tools();
    tightened["tools"][1]["function"]["parameters"]["properties"]["to"]["pattern"] =
        json!("@example\\.com$");
    upstream.push(Reply::chat_calls(&mail));
    let body = blocked_envelope(gateway.post_chat(&tightened).await).await;
    assert_eq!(body["error"]["violations"][0]["keyword"], "pattern");
}
