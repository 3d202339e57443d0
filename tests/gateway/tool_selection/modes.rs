//! How tool_selection is configured: `strict` blocks calls without declared tools and
//! unparsable answers, observe mode records a block and lets the answer through, and a route's
//! entry overrides the gateway-wide chain by name.

use super::request_with_tools;
use crate::common::answers::blocked_envelope;
use crate::common::{Reply, ScriptedUpstream, TestGateway, start_guarded};
use serde_json::json;

#[tokio::test]
async fn strict_blocks_calls_without_declared_tools_and_unparsable_answers() {
    let (upstream, gateway) = start_guarded("strict = true").await;
    let no_tools = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    upstream.push(Reply::chat_calls(&[("call_1", "anything", "{}")]));
    let body = blocked_envelope(gateway.post_chat(&no_tools).await).await;
    assert_eq!(body["error"]["code"], "no_tools_declared");
    upstream.push(Reply::raw(
        200,
        "application/json",
        b"{\"choices\": 12}".to_vec(),
    ));
    let body = blocked_envelope(gateway.post_chat(&request_with_tools()).await).await;
    assert_eq!(body["error"]["violations"][0]["check"], "parse");
    upstream.push(Reply::chat_text("plain text"));
    assert_eq!(
        gateway.post_status("/v1/chat/completions", &no_tools).await,
        200,
        "no calls, nothing to block"
    );
}

#[tokio::test]
async fn observe_mode_records_the_block_and_lets_the_answer_through() {
    let upstream = ScriptedUpstream::start().await;
    let routes = "[[plugins]]\nname = \"tool_selection\"\nmode = \"observe\"\n\n\
                  [[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n";
    let gateway = TestGateway::start(&upstream, routes).await;
    upstream.push(Reply::chat_calls(&[("call_1", "delete_user", "{}")]));
    let response = gateway.post_chat(&request_with_tools()).await;
    assert_eq!(response.status(), 200);
    let line = gateway.audit_line_of(&response).await;
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
    let response = gateway.post_chat(&request_with_tools()).await;
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
    let bad = || Reply::chat_calls(&[("call_1", "delete_user", "{}")]);
    upstream.push(bad());
    assert_eq!(
        gateway
            .post_status("/v1/chat/completions", &request_with_tools())
            .await,
        403,
        "gateway-wide chain"
    );
    upstream.push(bad());
    assert_eq!(
        gateway
            .post_status("/v1/unguarded", &request_with_tools())
            .await,
        200,
        "switched off on the route"
    );
    let no_tools = json!({"model": "m", "messages": []});
    upstream.push(bad());
    assert_eq!(
        gateway.post_status("/v1/strict", &no_tools).await,
        403,
        "the route's settings win"
    );
    upstream.push(bad());
    assert_eq!(
        gateway.post_status("/v1/chat/completions", &no_tools).await,
        200,
        "not strict elsewhere"
    );
}
