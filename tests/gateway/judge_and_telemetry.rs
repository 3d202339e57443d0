//! The semantic judge through the gateway (a scripted OpenAI-compatible judge server), and what
//! operators see: the audit line of each decided exchange, `/health`, `/ready` and `/metrics`.

use std::time::Duration;

use crate::common::answers::{assert_refusal, json_with_status};
use crate::common::{Reply, ScriptedUpstream, TestGateway, guarded_chat, start_guarded};
use serde_json::{Value, json};

fn request() -> Value {
    json!({
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Refund order 1234 to the customer."}],
        "tools": [{"type": "function", "function": {
            "name": "refund_order",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
                           "required": ["order_id"]}}}]
    })
}

fn refund(arguments: &str) -> Reply {
    Reply::chat_calls(&[("call_r", "refund_order", arguments)])
}

/// The status the gateway answers the refund request with.
async fn status_of_refund_request(gateway: &TestGateway) -> u16 {
    gateway
        .post_status("/v1/chat/completions", &request())
        .await
}

async fn with_judge(extra: &str) -> (ScriptedUpstream, ScriptedUpstream, TestGateway) {
    let upstream = ScriptedUpstream::start().await;
    let judge = ScriptedUpstream::start().await;
    let settings = format!(
        "openai_api_key = \"sk-judge\"\nbase_url = \"{}/v1\"\nmodel = \"judge-model\"\njudge_timeout_ms = 500\n{extra}",
        judge.url()
    );
    let gateway = TestGateway::start(&upstream, &guarded_chat(&settings)).await;
    (upstream, judge, gateway)
}

#[tokio::test]
async fn the_judge_sees_the_request_and_the_call_and_its_allow_lets_it_through() {
    let (upstream, judge, gateway) = with_judge("").await;
    judge.push(Reply::judge("allow", "matches the user's request"));
    upstream.push(refund(r#"{"order_id":"1234"}"#));
    assert_eq!(status_of_refund_request(&gateway).await, 200);
    let asked = judge.last_request().expect("the judge was asked");
    assert_eq!(asked.path_and_query, "/v1/chat/completions");
    assert_eq!(asked.header("authorization"), Some("Bearer sk-judge"));
    let body = asked.json();
    assert_eq!(body["model"], "judge-model");
    assert_eq!(body["response_format"]["type"], "json_schema");
    let prompt = body["messages"].to_string();
    assert!(
        prompt.contains("Refund order 1234"),
        "the user's request: {prompt}"
    );
    assert!(
        prompt.contains("refund_order") && prompt.contains("1234"),
        "the call: {prompt}"
    );
}

#[tokio::test]
async fn a_judge_deny_is_a_semantic_violation_with_its_reason() {
    let (upstream, judge, gateway) = with_judge("").await;
    judge.push(Reply::judge("deny", "the amount exceeds the order total"));
    upstream.push(refund(r#"{"order_id":"1234","amount":99999}"#));
    let response = gateway.post_chat(&request()).await;
    let body = json_with_status(response, 403).await;
    assert_refusal(&body, "semantic_denied", "semantic");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("exceeds the order total")
    );
}

#[tokio::test]
async fn the_judge_is_not_asked_when_a_structural_check_fails() {
    let (upstream, judge, gateway) = with_judge("").await;
    upstream.push(refund(r#"{"amount":5}"#));
    let response = gateway.post_chat(&request()).await;
    let body = json_with_status(response, 403).await;
    // Refused by the schema (no `order_id`), before any judge.
    assert_refusal(&body, "schema_violation", "schema");
    assert_eq!(judge.request_count(), 0);
}

#[tokio::test]
async fn an_unavailable_judge_blocks_unless_the_fail_mode_allows() {
    let (upstream, judge, gateway) = with_judge("").await;
    judge.push(Reply::judge("allow", "late").with_delay(Duration::from_secs(3)));
    upstream.push(refund(r#"{"order_id":"1234"}"#));
    let response = gateway.post_chat(&request()).await;
    let body = json_with_status(response, 403).await;
    assert_eq!(body["error"]["code"], "semantic_unavailable");

    let (upstream, judge, gateway) = with_judge("semantic_fail_mode = \"allow\"").await;
    judge.push(Reply::raw(200, "application/json", b"garbage".to_vec()));
    upstream.push(refund(r#"{"order_id":"1234"}"#));
    assert_eq!(status_of_refund_request(&gateway).await, 200);
}

#[tokio::test]
async fn every_decided_exchange_writes_one_audit_line_without_secrets() {
    let (upstream, gateway) = start_guarded("").await;
    upstream.push(Reply::chat_calls(&[("call_x", "wipe_disk", "{}")]));
    let response = gateway
        .post_json_with(
            "/v1/chat/completions",
            &[("authorization", "Bearer sk-very-secret-client-key")],
            &request(),
        )
        .await;
    assert_eq!(response.status(), 403);
    let line = gateway.audit_line_of(&response).await;
    let request_id = line["request_id"].clone();
    assert_eq!(
        (gateway.audit_lines().iter())
            .filter(|written| written["request_id"] == request_id)
            .count(),
        1,
        "one line for the exchange"
    );
    assert_eq!(line["route"], "/v1/chat/completions");
    assert_eq!(line["status"], 403);
    assert_eq!(line["verdict"], "blocked");
    assert_eq!(line["declared_tools"], json!(["refund_order"]));
    assert_eq!(line["calls"][0]["name"], "wipe_disk");
    assert_eq!(line["violations"][0]["check"], "membership");
    assert!(line["timings_ms"]["total"].as_f64().is_some());
    assert!(line["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')));
    let raw = std::fs::read_to_string(&gateway.audit_path).expect("audit file");
    assert!(
        !raw.contains("sk-very-secret"),
        "credentials never reach the audit log"
    );
}

/// With no audit line to write, the calls checked are counted rather than kept: the metric
/// reads the same.
#[tokio::test]
async fn calls_checked_are_counted_with_the_audit_off() {
    let upstream = ScriptedUpstream::start().await;
    let audit_path = crate::common::temp_audit_path();
    let text = crate::common::config_text(&upstream.url(), &audit_path, &guarded_chat("")).replace(
        &format!("output = \"{}\"", audit_path.display()),
        "output = \"off\"",
    );
    assert!(text.contains("output = \"off\""), "{text}");
    let gateway = TestGateway::start_text(&text, audit_path, toolgate::Runtime::new()).await;
    upstream.push(refund(r#"{"order_id":"1"}"#));
    assert_eq!(status_of_refund_request(&gateway).await, 200);
    upstream.push(Reply::chat_calls(&[
        ("call_y", "other", "{}"),
        ("call_z", "refund_order", r#"{"order_id":"2"}"#),
    ]));
    assert_eq!(status_of_refund_request(&gateway).await, 403);
    gateway
        .assert_metrics_contain(&[
            r#"toolgate_tool_calls_checked_total{route="/v1/chat/completions"} 3"#,
        ])
        .await;
    assert!(gateway.audit_lines().is_empty(), "no audit line written");
}

#[tokio::test]
async fn the_admin_listener_reports_health_readiness_and_metrics() {
    let (upstream, judge, gateway) = with_judge("").await;
    assert_eq!(gateway.admin_get("/health").await.status(), 200);
    let ready = gateway.admin_json("/ready").await;
    assert_eq!(ready["status"], "ready");

    judge.push(Reply::judge("allow", "fine"));
    upstream.push(refund(r#"{"order_id":"1"}"#));
    assert_eq!(status_of_refund_request(&gateway).await, 200);
    upstream.push(Reply::chat_calls(&[("call_y", "other", "{}")]));
    assert_eq!(status_of_refund_request(&gateway).await, 403);

    gateway
        .assert_metrics_contain(&[
            r#"toolgate_requests_total{route="/v1/chat/completions",status="200"} 1"#,
            r#"toolgate_requests_total{route="/v1/chat/completions",status="403"} 1"#,
            r#"toolgate_tool_calls_checked_total{route="/v1/chat/completions"} 2"#,
            r#"toolgate_tool_calls_blocked_total{route="/v1/chat/completions",check="membership",mode="enforce"} 1"#,
            "toolgate_judge_calls_total{outcome=\"allow\"} 1",
            "toolgate_judge_latency_seconds_count 1",
            "toolgate_request_duration_seconds_bucket",
            // Both requests declare the same tools: read once, then taken from the cache.
            "toolgate_declared_tools_cache_misses_total 1",
            "toolgate_declared_tools_cache_hits_total 1",
        ])
        .await;
    assert_eq!(gateway.admin_get("/nope").await.status(), 404);
}
