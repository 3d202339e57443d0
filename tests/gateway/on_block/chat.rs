//! `on_block` on chat completions, not streamed: the retry the client never sees, the 403 once
//! retries are spent, and the message an SDK reads as a plain answer.

use serde_json::Value;

use super::{BAD, GOOD, chat_request, guarded_with, last_items};
use crate::common::answers::{blocked_envelope, json_with_status};
use crate::common::{Reply, ScriptedUpstream, TestGateway};

#[tokio::test]
async fn retry_returns_the_answer_that_passes_after_the_model_read_why_its_call_was_blocked() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_with("on_block = \"retry\"")).await;
    upstream.push(Reply::chat_calls(&[BAD]));
    upstream.push(Reply::chat_calls(&[GOOD]));

    let answer = gateway
        .sdk_chat(chat_request())
        .await
        .expect("the SDK reads the answer that passed");
    let calls = answer.choices[0]
        .message
        .tool_calls
        .clone()
        .unwrap_or_default();
    let call = serde_json::to_value(&calls[0]).expect("serializable");
    assert_eq!(call["function"]["name"], "get_weather");
    // Both attempts are billed: 142 prompt tokens each.
    let usage = answer.usage.expect("usage");
    assert_eq!(usage.prompt_tokens, 284);

    let requests = upstream.requests();
    assert_eq!(requests.len(), 2);
    let fed_back = last_items(&requests[1].json(), "messages", 2);
    assert_eq!(fed_back[0]["role"], "assistant");
    assert_eq!(fed_back[0]["tool_calls"][0]["id"], "call_bad");
    assert_eq!(
        fed_back[0]["tool_calls"][0]["function"]["name"],
        "delete_user"
    );
    assert_eq!(fed_back[1]["role"], "tool");
    assert_eq!(fed_back[1]["tool_call_id"], "call_bad");
    let result = fed_back[1]["content"].as_str().unwrap_or_default();
    assert!(
        result.contains("'delete_user' is not a declared tool"),
        "{result}"
    );
    assert!(result.contains("available tools: get_weather"), "{result}");

    // The gateway forwards its request id: the audit line of this exchange is found by it.
    let request_id = requests[1]
        .header("x-request-id")
        .expect("forwarded")
        .to_owned();
    let line = gateway.audit_line(&request_id).await;
    assert_eq!(line["verdict"], "allowed", "{line}");
    assert_eq!(line["attempts"][0]["attempt"], 1);
    assert_eq!(line["attempts"][0]["violations"][0]["check"], "membership");
    assert_eq!(line["attempts"][1]["attempt"], 2);
    assert_eq!(line["attempts"][1]["violations"], Value::Array(vec![]));
    gateway
        .assert_metrics_contain(&[
            "toolgate_block_retries_total{route=\"/v1\",outcome=\"passed\"} 1",
        ])
        .await;
}

#[tokio::test]
async fn once_the_retries_are_spent_the_client_gets_the_last_block() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(
        &upstream,
        &guarded_with("on_block = \"retry\"\nmax_retries = 1"),
    )
    .await;
    upstream.push(Reply::chat_calls(&[BAD]));
    upstream.push(Reply::chat_calls(&[("call_worse", "drop_table", "{}")]));

    let envelope = blocked_envelope(gateway.post_chat(&chat_request()).await).await;
    assert_eq!(envelope["error"]["code"], "undeclared_tool");
    assert_eq!(envelope["error"]["violations"][0]["tool"], "drop_table");
    assert_eq!(upstream.request_count(), 2, "one retry, no more");
    gateway
        .assert_metrics_contain(&[
            "toolgate_block_retries_total{route=\"/v1\",outcome=\"blocked\"} 1",
        ])
        .await;
}

#[tokio::test]
async fn a_retry_the_upstream_fails_gets_the_block_it_answers() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_with("on_block = \"retry\"")).await;
    upstream.push(Reply::chat_calls(&[BAD]));
    upstream.push(Reply::json(500, r#"{"error":{"message":"overloaded"}}"#));

    let envelope = blocked_envelope(gateway.post_chat(&chat_request()).await).await;
    assert_eq!(envelope["error"]["violations"][0]["tool"], "delete_user");
    // The audit line tells a block whose retry failed from one never retried.
    let lines = gateway.audit_lines_until(|lines| !lines.is_empty()).await;
    assert_eq!(lines[0]["retry_failed"]["attempt"], 2);
    assert_eq!(lines[0]["violations"][0]["tool"], "delete_user");
    gateway
        .assert_metrics_contain(&[
            "toolgate_block_retries_total{route=\"/v1\",outcome=\"failed\"} 1",
        ])
        .await;
}

#[tokio::test]
async fn message_is_a_plain_answer_the_sdk_reads_with_the_violations_beside_it() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_with("on_block = \"message\"")).await;
    upstream.push(Reply::chat_calls(&[BAD]));
    let answer = gateway
        .sdk_chat(chat_request())
        .await
        .expect("async-openai reads the message as a completion");
    let choice = &answer.choices[0];
    assert!(
        choice.message.tool_calls.is_none(),
        "no call reaches the client"
    );
    let text = choice.message.content.clone().unwrap_or_default();
    assert!(
        text.contains("'delete_user' is not a declared tool"),
        "{text}"
    );
    let finish = serde_json::to_value(choice.finish_reason).expect("serializable");
    assert_eq!(finish, "stop");

    upstream.push(Reply::chat_calls(&[BAD]));
    let response = gateway.post_chat(&chat_request()).await;
    assert_eq!(response.status(), 200);
    let header = response.headers()["x-toolgate-violations"]
        .to_str()
        .expect("visible ASCII")
        .to_owned();
    let from_header: Value = serde_json::from_str(&header).expect("compact JSON");
    assert_eq!(from_header[0]["check"], "membership");
    let line = gateway.audit_line_of(&response).await;
    assert_eq!(line["verdict"], "blocked", "{line}");
    assert_eq!(line["on_block"], "message", "{line}");
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(body["toolgate"]["violations"], from_header);
    assert_eq!(
        body["usage"]["prompt_tokens"], 142,
        "the blocked answer's usage"
    );
}

#[tokio::test]
async fn a_budget_keeps_its_429_whatever_on_block_says() {
    let upstream = ScriptedUpstream::start().await;
    let routes = "[[plugins]]\nname = \"tool_budget\"\non_block = \"message\"\n\
                  [plugins.settings]\ncount = \"proposed\"\n\
                  [[plugins.settings.budgets]]\ntools = \"get_weather\"\nlimits = [\"1/30d\"]\n\n\
                  [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n";
    let gateway = TestGateway::start(&upstream, routes).await;
    upstream.set_default(Reply::chat_calls(&[GOOD]));
    let within = gateway.post_chat(&chat_request()).await;
    assert_eq!(within.status(), 200, "within the budget");
    // Raw HTTP: the SDK would wait and retry a 429 itself.
    let refused = gateway.post_chat(&chat_request()).await;
    assert!(refused.headers().get("x-toolgate-violations").is_none());
    let body = json_with_status(refused, 429).await;
    assert_eq!(body["error"]["code"], "tool_budget_exceeded");
}

#[tokio::test]
async fn the_judges_reason_is_in_the_feedback_the_model_reads() {
    let upstream = ScriptedUpstream::start().await;
    let judge = ScriptedUpstream::start().await;
    let config = format!(
        "[[plugins]]\nname = \"tool_selection\"\non_block = \"retry\"\n\
         [plugins.settings]\nopenai_api_key = \"sk-judge\"\nbase_url = \"{}/v1\"\n\
         model = \"judge-model\"\njudge_timeout_ms = 2000\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n",
        judge.url()
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    upstream.push(Reply::chat_calls(&[(
        "call_lyon",
        "get_weather",
        r#"{"city":"Lyon"}"#,
    )]));
    judge.push(Reply::judge("deny", "the user asked about Paris, not Lyon"));
    upstream.push(Reply::chat_calls(&[GOOD]));
    judge.push(Reply::judge("allow", "matches the user's request"));

    let answer = gateway.sdk_chat(chat_request()).await.expect("passes");
    let calls = answer.choices[0]
        .message
        .tool_calls
        .clone()
        .unwrap_or_default();
    let call = serde_json::to_value(&calls[0]).expect("serializable");
    assert_eq!(call["function"]["arguments"], GOOD.2);
    let fed_back = last_items(&upstream.requests()[1].json(), "messages", 1);
    assert_eq!(fed_back[0]["tool_call_id"], "call_lyon");
    let result = fed_back[0]["content"].as_str().unwrap_or_default();
    assert!(
        result.contains("the user asked about Paris, not Lyon"),
        "{result}"
    );
    assert_eq!(judge.request_count(), 2, "each attempt was judged");
}
