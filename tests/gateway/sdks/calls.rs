//! Calls as the SDK user receives them: an allowed call unchanged in every format, streamed or
//! not; an undeclared one raised as the SDK's permission error (or, after text, an error on the
//! stream); a function call to a name declared only as a custom tool refused; background
//! responses refused and stored calls unverifiable.

use serde_json::json;

use super::{Scenario, arguments, request};
use crate::common::upstream::chat_stream;
use crate::common::{Reply, fixture};

#[tokio::test]
async fn an_allowed_call_reaches_the_sdk_user_unchanged() {
    let Some(mut scenario) = Scenario::start().await else {
        return;
    };
    let call = [("call_1", "get_weather", r#"{"city":"Paris"}"#)];
    scenario.chat_case("chat", false, Reply::chat_calls(&call));
    scenario.chat_case(
        "chat streamed",
        true,
        Reply::sse_chunked(&chat_stream(&call, Some("Let me check.")), 17),
    );
    scenario.recorded(
        "responses",
        "responses streamed",
        "responses/function_call_allowed",
        23,
    );
    scenario.recorded(
        "anthropic",
        "anthropic streamed",
        "anthropic/tool_use_allowed",
        19,
    );
    let seen = scenario.run().await;

    let weather = vec![("get_weather".to_owned(), arguments(r#"{"city":"Paris"}"#))];
    assert_eq!(seen.allowed("chat"), weather);
    assert_eq!(seen.allowed("chat streamed"), weather);
    assert_eq!(seen.text("chat streamed"), "Let me check.");
    let paris = vec![(
        "get_weather".to_owned(),
        arguments(r#"{"city":"Paris","country":"FR","unit":"celsius"}"#),
    )];
    assert_eq!(seen.allowed("responses"), paris);
    assert_eq!(seen.allowed("responses streamed"), paris);
    assert_eq!(
        seen.events("responses streamed").last(),
        Some(&"response.completed")
    );
    // The SDK reads `input` as an object, streamed (from the partial JSON) or not.
    let location = vec![(
        "get_weather".to_owned(),
        json!({"location": "Paris, France", "unit": "celsius"}),
    )];
    assert_eq!(seen.allowed("anthropic"), location);
    assert_eq!(seen.allowed("anthropic streamed"), location);
    assert_eq!(
        seen.events("anthropic streamed").last(),
        Some(&"message_stop")
    );
}

#[tokio::test]
async fn an_undeclared_call_raises_the_sdks_permission_error_streamed_or_not() {
    let Some(mut scenario) = Scenario::start().await else {
        return;
    };
    let delete = [("call_1", "delete_user", r#"{"user_id":"u1"}"#)];
    scenario.chat_case("chat", false, Reply::chat_calls(&delete));
    scenario.chat_case(
        "chat streamed, call first",
        true,
        Reply::sse_chunked(&chat_stream(&delete, None), 13),
    );
    scenario.chat_case(
        "chat streamed, after text",
        true,
        Reply::sse_chunked(&chat_stream(&delete, Some("Deleting it now.")), 13),
    );
    scenario.recorded(
        "responses",
        "responses streamed, call first",
        "responses/undeclared_tool",
        23,
    );
    // The recorded text-then-call stream, its call renamed to a tool the request never declared.
    let renamed =
        fixture("responses/text_then_call.sse").replace("get_order_status", "cancel_order");
    scenario.case(
        "responses streamed, after text",
        "responses",
        true,
        request("responses/text_then_call.request.json"),
        Reply::sse_chunked(&renamed, 23),
    );
    scenario.case(
        "anthropic",
        "messages",
        false,
        request("anthropic/undeclared_tool.request.json"),
        Reply::json(200, fixture("anthropic/undeclared_tool.response.json")),
    );
    // The recorded stream that opens with get_weather's tool_use, renamed.
    let renamed = fixture("anthropic/tool_use_allowed.sse").replace("get_weather", "delete_user");
    scenario.case(
        "anthropic streamed, call first",
        "messages",
        true,
        request("anthropic/tool_use_allowed.request.json"),
        Reply::sse_chunked(&renamed, 19),
    );
    let renamed =
        fixture("anthropic/text_then_tool_use.sse").replace("search_orders", "delete_orders");
    scenario.case(
        "anthropic streamed, after text",
        "messages",
        true,
        request("anthropic/text_then_tool_use.request.json"),
        Reply::sse_chunked(&renamed, 19),
    );
    let seen = scenario.run().await;

    for name in ["chat", "chat streamed, call first"] {
        let violation = seen.blocked(name, "PermissionDeniedError", Some(403), "undeclared_tool");
        assert_eq!(violation["tool"], "delete_user", "{name}");
        assert_eq!(violation["tool_call_id"], "call_1", "{name}");
    }
    // After text the 200 is sent: the SDK raises on the error frame, a plain APIError.
    let violation = seen.blocked(
        "chat streamed, after text",
        "APIError",
        None,
        "undeclared_tool",
    );
    assert_eq!(violation["tool"], "delete_user");
    assert_eq!(seen.text("chat streamed, after text"), "Deleting it now.");

    for name in ["responses", "responses streamed, call first"] {
        let violation = seen.blocked(name, "PermissionDeniedError", Some(403), "undeclared_tool");
        assert_eq!(violation["tool"], "delete_user", "{name}");
    }
    let violation = seen.blocked(
        "responses streamed, after text",
        "APIError",
        None,
        "undeclared_tool",
    );
    assert_eq!(violation["tool"], "cancel_order");
    assert!(
        seen.text("responses streamed, after text")
            .starts_with("Your latest order is ORD-48213"),
        "the text before the call was read: {}",
        seen.text("responses streamed, after text")
    );
    assert!(
        !seen
            .events("responses streamed, after text")
            .contains(&"response.completed")
    );

    for name in ["anthropic", "anthropic streamed, call first"] {
        let violation = seen.blocked(name, "PermissionDeniedError", Some(403), "undeclared_tool");
        assert_eq!(violation["tool"], "delete_user", "{name}");
    }
    let violation = seen.blocked(
        "anthropic streamed, after text",
        "APIStatusError",
        Some(200),
        "undeclared_tool",
    );
    assert_eq!(violation["tool"], "delete_orders");
    assert_eq!(
        seen.text("anthropic streamed, after text"),
        "I'll look up your shipped orders — one moment."
    );
    assert!(
        !seen
            .events("anthropic streamed, after text")
            .contains(&"message_stop")
    );
}

#[tokio::test]
async fn a_function_call_to_a_name_declared_only_as_a_custom_tool_is_refused() {
    let Some(mut scenario) = Scenario::start().await else {
        return;
    };
    let request = json!({
        "model": "gpt-5",
        "messages": [{"role": "user", "content": "How many users are there?"}],
        "tools": [{"type": "custom", "custom": {"name": "sql", "description": "read-only SQL"}}]
    });
    let sql = [("call_1", "sql", r#"{"query":"drop table users"}"#)];
    scenario.case(
        "chat",
        "chat",
        false,
        request.clone(),
        Reply::chat_calls(&sql),
    );
    scenario.case(
        "chat streamed",
        "chat",
        true,
        request,
        Reply::sse_chunked(&chat_stream(&sql, None), 13),
    );
    let seen = scenario.run().await;
    for name in ["chat", "chat streamed"] {
        let violation = seen.blocked(name, "PermissionDeniedError", Some(403), "undeclared_tool");
        assert_eq!(violation["check"], "membership", "{name}");
        assert_eq!(violation["tool"], "sql", "{name}");
    }
}

#[tokio::test]
async fn background_responses_are_refused_and_stored_calls_are_unverifiable() {
    let Some(mut scenario) = Scenario::start().await else {
        return;
    };
    let mut background = request("responses/function_call_allowed.request.json");
    background["background"] = json!(true);
    scenario.refused("background", "responses", false, background.clone());
    scenario.refused("background streamed", "responses", true, background);
    scenario.retrieve(
        "retrieve",
        "resp_68b7b697597812d597d444ad03949092645aa76a034c1edd",
        Reply::json(
            200,
            fixture("responses/function_call_allowed.response.json"),
        ),
    );
    let seen = scenario.run().await;
    for name in ["background", "background streamed"] {
        let error = seen.raised(name, "BadRequestError", Some(400));
        assert_eq!(error["code"], "background_not_supported", "{name}: {error}");
    }
    let violation = seen.blocked(
        "retrieve",
        "PermissionDeniedError",
        Some(403),
        "unverifiable_calls",
    );
    assert_eq!(violation["tool"], "get_weather");
}
