//! What a conversation keeps: the tools it loaded, in the state store under its name, so the
//! next request shows them without a discovery round; without a name, the tools its history
//! already called; and, past the L2 budget, the earliest loaded unloaded first.

use serde_json::json;

use super::{
    DISCOVERY, LOAD_WEATHER, WEATHER, chat_request, disclosed_route, filler, sent_tool_names,
};
use crate::common::{Reply, ScriptedUpstream, TestGateway};

#[tokio::test]
async fn a_named_conversations_loaded_tools_are_shown_on_its_next_request() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &disclosed_route("")).await;
    upstream.push(Reply::chat_calls(&[LOAD_WEATHER]));
    upstream.push(Reply::chat_calls(&[WEATHER]));
    upstream.push(Reply::chat_text("Sunny."));
    upstream.push(Reply::chat_text("Hello."));

    let mut request = chat_request();
    request["toolgate"] = json!({"conversation": "trip-42"});
    assert_eq!(gateway.post_chat(&request).await.status(), 200);
    assert_eq!(gateway.post_chat(&request).await.status(), 200);
    let requests = upstream.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        sent_tool_names(&requests[2].json())[0],
        "get_weather",
        "loaded on the first request, shown on the second without a round"
    );
    assert!(
        requests[2].json().get("toolgate").is_none(),
        "directives are not forwarded"
    );

    // Another conversation starts with nothing loaded.
    request["toolgate"] = json!({"conversation": "other"});
    assert_eq!(gateway.post_chat(&request).await.status(), 200);
    assert_eq!(sent_tool_names(&upstream.requests()[3].json()), DISCOVERY);
}

#[tokio::test]
async fn without_a_conversation_the_tools_the_history_called_count_as_loaded() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &disclosed_route("")).await;
    upstream.push(Reply::chat_text("It is sunny in Paris."));
    let mut request = chat_request();
    let messages = request["messages"].as_array_mut().expect("messages");
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}));
    messages.push(json!({"role": "tool", "tool_call_id": "call_w", "content": "sunny"}));
    assert_eq!(gateway.post_chat(&request).await.status(), 200);
    let sent = upstream.requests()[0].json();
    assert_eq!(sent_tool_names(&sent)[0], "get_weather");
    assert_eq!(sent_tool_names(&sent).len(), 4);
}

#[tokio::test]
async fn past_the_budget_the_earliest_loaded_tool_is_unloaded() {
    let upstream = ScriptedUpstream::start().await;
    // Each filler's definition and body come to about 100 tokens: two fit under 250, three do not.
    let gateway = TestGateway::start(
        &upstream,
        &disclosed_route("settings = { l2_token_budget = 250, unload_threshold_percent = 100 }"),
    )
    .await;
    for (n, id) in [(1, "call_a"), (2, "call_b"), (3, "call_c")] {
        let arguments = format!(r#"{{"tool_name":"{}"}}"#, filler(n));
        upstream.push(Reply::chat_calls(&[(id, "load_tool", &arguments)]));
    }
    upstream.push(Reply::chat_text("Done."));
    assert_eq!(gateway.post_chat(&chat_request()).await.status(), 200);
    let last = upstream.requests()[3].json();
    let names = sent_tool_names(&last);
    assert!(
        !names.contains(&filler(1)),
        "the earliest is unloaded: {names:?}"
    );
    assert!(names.contains(&filler(3)), "the latest stays: {names:?}");
    let request_id = upstream.requests()[0]
        .header("x-request-id")
        .expect("id")
        .to_owned();
    let line = gateway.audit_line(&request_id).await;
    assert_eq!(line["disclosure"]["unloaded"][0], filler(1), "{line}");
    gateway
        .assert_metrics_contain(&["toolgate_disclosure_unloads_total 1"])
        .await;
}
