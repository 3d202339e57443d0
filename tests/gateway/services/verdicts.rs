//! What a service's answer does: a deny is a 403 carrying its violations (complete, streamed,
//! or through the OpenAI SDK), a modify before the request removes declared tools upstream, a
//! pre_request deny never reaches the upstream, and observe mode only records.

use crate::common::answers::{function_names, status_and_json};
use crate::common::services::{exchange, instance, request, route, service, start_with_argcheck};
use crate::common::upstream::chat_stream;
use crate::common::{Reply, ScriptedUpstream, TestGateway};
use serde_json::{Value, json};

#[tokio::test]
async fn the_example_service_denies_with_a_403_carrying_its_violations() {
    let (upstream, _validator, gateway) = start_with_argcheck(
        "service = \"argcheck\"\nconfig = { deny_substrings = [\"DROP TABLE\"] }",
    )
    .await;

    upstream.push(Reply::chat_calls(&[(
        "call_1",
        "run_sql",
        r#"{"q":"select 1"}"#,
    )]));
    assert_eq!(
        gateway
            .post_status("/v1/chat/completions", &request())
            .await,
        200
    );

    let (status, body) = exchange(
        &upstream,
        &gateway,
        "/v1/chat/completions",
        &request(),
        &[
            ("call_1", "run_sql", r#"{"q":"select 1"}"#),
            ("call_2", "run_sql", r#"{"q":"drop table users"}"#),
        ],
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let error = &body["error"];
    assert_eq!(error["type"], "tool_call_blocked");
    assert_eq!(error["code"], "denied_substring");
    let violations = error["violations"].as_array().expect("violations");
    assert_eq!(violations.len(), 1, "{body}");
    assert_eq!(violations[0]["check"], "service");
    assert_eq!(violations[0]["tool_call_id"], "call_2");
    assert_eq!(violations[0]["tool"], "run_sql");
    assert_eq!(violations[0]["choice"], 0);
    let message = violations[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("DROP TABLE") && message.contains("argcheck"),
        "{message}"
    );

    // The real OpenAI SDK surfaces the same refusal as an API error.
    upstream.push(Reply::chat_calls(&[(
        "call_9",
        "run_sql",
        r#"{"q":"DROP TABLE x"}"#,
    )]));
    let refused = gateway.sdk_chat(request()).await;
    assert!(
        matches!(&refused, Err(async_openai::error::OpenAIError::ApiError(api)) if api.api_error.message.contains("DROP TABLE")),
        "{refused:?}"
    );

    gateway
        .assert_metrics_contain(&[
            "toolgate_service_calls_total{service=\"argcheck\",outcome=\"allow\"} 1",
            "toolgate_service_calls_total{service=\"argcheck\",outcome=\"deny\"} 2",
            "toolgate_service_latency_seconds_count{service=\"argcheck\"} 3",
            "toolgate_service_breaker_state{service=\"argcheck\"} 0",
        ])
        .await;
}

#[tokio::test]
async fn a_streamed_answer_is_checked_by_the_service_before_its_calls_are_released() {
    let (upstream, _validator, gateway) = start_with_argcheck(
        "service = \"argcheck\"\nconfig = { deny_substrings = [\"drop table\"] }",
    )
    .await;
    let mut streamed = request();
    streamed["stream"] = json!(true);

    upstream.push(Reply::sse_events(&chat_stream(
        &[("call_1", "run_sql", r#"{"q":"DROP TABLE users"}"#)],
        None,
    )));
    let (status, body) = status_and_json(gateway.post_chat(&streamed).await).await;
    assert_eq!(status, 403, "nothing was sent yet, so a real 403: {body}");
    assert_eq!(body["error"]["code"], "denied_substring");
    assert_eq!(body["error"]["violations"][0]["tool_call_id"], "call_1");

    upstream.push(Reply::sse_events(&chat_stream(
        &[("call_1", "run_sql", r#"{"q":"select 1"}"#)],
        Some("Running it."),
    )));
    let response = gateway.post_chat(&streamed).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("the stream");
    // Arguments arrive in fragments; the call's header fragment names the tool.
    assert!(
        text.contains(r#""name":"run_sql""#) && text.contains("data: [DONE]"),
        "{text}"
    );
}

#[tokio::test]
async fn a_modify_before_the_request_removes_declared_tools_upstream() {
    let (upstream, _validator, gateway) = start_with_argcheck(
        "service = \"argcheck\"\nstages = [\"pre_request\"]\n\
         config = { deny_substrings = [], remove_tools = [\"drop_db\"] }",
    )
    .await;
    upstream.push(Reply::chat_calls(&[("call_1", "run_sql", "{}")]));
    assert_eq!(
        gateway
            .post_status("/v1/chat/completions", &request())
            .await,
        200
    );
    let forwarded = upstream.forwarded_json();
    assert_eq!(
        function_names(&forwarded["tools"]),
        ["run_sql", "run_shell"]
    );
    assert_eq!(
        forwarded["messages"],
        request()["messages"],
        "the rest is untouched"
    );
    gateway
        .assert_metrics_contain(&[
            "toolgate_service_calls_total{service=\"argcheck\",outcome=\"modify\"} 1",
        ])
        .await;
}

#[tokio::test]
async fn a_pre_request_deny_never_reaches_the_upstream_and_observe_mode_only_records() {
    let upstream = ScriptedUpstream::start().await;
    let checker = ScriptedUpstream::start().await;
    checker.set_default(Reply::json(
        200,
        json!({"decision": "deny", "violations": [{"code": "tool_not_approved",
            "message": "drop_db needs a ticket"}]}),
    ));
    let config = format!(
        "{}{}{}",
        service("tickets", &checker.url(), ""),
        route(
            "/enforced",
            &instance(
                "",
                "service = \"tickets\"\nstages = [\"pre_request\"]\ntools = [\"drop_*\"]"
            ),
        ),
        route(
            "/observed",
            &instance(
                "mode = \"observe\"",
                "service = \"tickets\"\nstages = [\"pre_request\"]\ntools = [\"drop_*\"]"
            ),
        ),
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    let (status, body) = status_and_json(
        gateway
            .post("/enforced/v1/chat/completions", &request())
            .await,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "tool_not_approved");
    assert_eq!(upstream.request_count(), 0, "blocked before the upstream");
    let envelope = checker.last_request().expect("asked").json();
    assert_eq!(envelope["stage"], "pre_request");
    assert_eq!(envelope["tool_calls"], json!([]));
    assert_eq!(envelope["user"], Value::Null, "no tenants on this gateway");

    upstream.push(Reply::chat_calls(&[("call_1", "drop_db", "{}")]));
    let response = gateway
        .post("/observed/v1/chat/completions", &request())
        .await;
    assert_eq!(response.status(), 200);
    let line = gateway.audit_line_of(&response).await;
    assert_eq!(line["verdict"], "observed", "{line}");
    assert_eq!(checker.request_count(), 2);
}
