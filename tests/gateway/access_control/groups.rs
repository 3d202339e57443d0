//! Tool groups: the seed's examples of what each group shows the model, groups named in the
//! body's `toolgate` object or a header, calls to tools outside the requested groups blocked
//! (complete or streamed, however the name is cased), bad group input refused — never
//! widened — and a request that asks for nothing special forwarded byte for byte.

use super::{
    SEED_TOOLS, executed, forwarded_tools, groups_route, offered, refused_in_groups, request,
    sdk_chat_as,
};
use crate::common::answers::{assert_sdk_error, sdk_api_error, status_and_json};
use crate::common::upstream::chat_stream;
use crate::common::{Reply, ScriptedUpstream, TestGateway};
use serde_json::{Value, json};

#[tokio::test]
async fn the_seed_group_examples_decide_what_the_model_sees() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &groups_route("")).await;
    let all = || request(&SEED_TOOLS, vec![]);

    let read_only = offered(
        &upstream,
        &gateway,
        &[("x-toolgate-group", "read-only")],
        all(),
    )
    .await;
    assert_eq!(
        read_only,
        Some(vec!["knowledge-query".into(), "text-completion".into()])
    );

    let everything = offered(&upstream, &gateway, &[("x-toolgate-group", "*")], all()).await;
    assert_eq!(
        everything,
        Some(vec![
            "knowledge-query".into(),
            "text-completion".into(),
            "weather".into()
        ]),
        "`*` opens every group; the state `undefined` still hides the rest"
    );

    let default = offered(&upstream, &gateway, &[], all()).await;
    assert_eq!(
        default,
        Some(vec!["weather".into()]),
        "no group named: `default`"
    );

    let none = offered(&upstream, &gateway, &[("x-toolgate-group", "")], all()).await;
    assert_eq!(
        none, None,
        "`[]`: no tools, so the tool fields are stripped"
    );
}

#[tokio::test]
async fn the_body_object_names_groups_and_state_and_is_stripped_before_forwarding() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &groups_route("")).await;
    let mut body = request(&SEED_TOOLS, vec![]);
    body["toolgate"] = json!({"group": ["advanced", "write"], "state": "analysis"});
    upstream.push(Reply::chat_text("ok"));
    let response = gateway.post_chat(&body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-toolgate-state"], "analysis");
    assert_eq!(
        forwarded_tools(&upstream),
        Some(vec!["graph-update".into(), "complex-analysis".into()])
    );
    let forwarded = upstream.forwarded_json();
    assert!(forwarded.get("toolgate").is_none(), "{forwarded}");
}

#[tokio::test]
async fn a_request_that_asks_for_nothing_special_is_forwarded_byte_for_byte() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &groups_route("")).await;
    let body = r#"{"model":"m",  "messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"weather"}}]}"#;
    upstream.push(Reply::chat_text("ok"));
    let response = gateway.post_json_text("/v1/chat/completions", body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        upstream.last_request().expect("forwarded").body.as_ref(),
        body.as_bytes()
    );
}

#[tokio::test]
async fn a_call_to_a_tool_the_request_was_not_offered_is_blocked() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &groups_route("")).await;
    upstream.push(Reply::chat_calls(&[
        ("c1", "text-completion", "{}"),
        ("c2", "graph-update", "{}"),
    ]));
    let error = refused_in_groups(
        &gateway,
        "sk",
        "read-only",
        &SEED_TOOLS,
        "graph-update is not in read-only",
    )
    .await;
    assert_sdk_error(error, 403, "tool_not_in_requested_groups");
    // The SDK keeps the envelope's standard fields; the violations are read raw.
    upstream.push(Reply::chat_calls(&[
        ("c1", "text-completion", "{}"),
        ("c2", "graph-update", "{}"),
    ]));
    let raw = gateway
        .post_json_with(
            "/v1/chat/completions",
            &[("x-toolgate-group", "read-only")],
            &request(&SEED_TOOLS, vec![]),
        )
        .await;
    let body: Value = raw.json().await.expect("json");
    let violations = body["error"]["violations"].as_array().expect("violations");
    assert_eq!(violations.len(), 1, "{body}");
    assert_eq!(violations[0]["check"], "group");
    assert_eq!(violations[0]["tool"], "graph-update");

    // A tool of the group but not of the state is a `state` violation.
    upstream.push(Reply::chat_calls(&[("c3", "complex-analysis", "{}")]));
    let error = refused_in_groups(
        &gateway,
        "sk",
        "compute",
        &SEED_TOOLS,
        "complex-analysis needs the analysis state",
    )
    .await;
    let (_, body) = sdk_api_error(error);
    assert_eq!(body["code"], "tool_not_available_in_state");

    gateway
        .assert_metrics_contain(&[
            "agent_privilege_escalation_attempts_total{tenant=\"\"} 3",
            "agent_tool_group_requests_total{group=\"read-only\"} 2",
            "agent_filtered_tools_count_count",
            "agent_tool_group_availability{group=\"knowledge\"} 2",
        ])
        .await;
}

#[tokio::test]
async fn bad_group_and_state_input_is_refused_never_widened() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &groups_route("")).await;
    let send = async |headers: &[(&str, &str)], body: Value| {
        status_and_json(
            gateway
                .post_json_with("/v1/chat/completions", headers, &body)
                .await,
        )
        .await
    };
    let mut malformed = request(&SEED_TOOLS, vec![]);
    malformed["toolgate"] = json!({"group": 7});
    let (status, body) = send(&[], malformed).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], "invalid_directive");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("toolgate")
    );

    let mut typo = request(&SEED_TOOLS, vec![]);
    typo["toolgate"] = json!({"grups": ["admin"]});
    assert_eq!(send(&[], typo).await.0, 400);

    let (status, body) = send(
        &[("x-toolgate-group", "admin\"*")],
        request(&SEED_TOOLS, vec![]),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_group"))
    );

    let mut disagree = request(&SEED_TOOLS, vec![]);
    disagree["toolgate"] = json!({"group": "admin"});
    let (status, body) = send(&[("x-toolgate-group", "read-only")], disagree).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("conflicting_directives"))
    );
    assert_eq!(
        upstream.request_count(),
        0,
        "nothing bad reached the upstream"
    );
}

#[tokio::test]
async fn a_streamed_call_to_a_tool_outside_the_groups_is_blocked_too() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &groups_route("")).await;
    upstream.push(Reply::sse_events(&chat_stream(
        &[("c1", "graph-update", "{}")],
        None,
    )));
    let mut body = request(&SEED_TOOLS, vec![]);
    body["stream"] = json!(true);
    let response = gateway
        .post_json_with(
            "/v1/chat/completions",
            &[("x-toolgate-group", "read-only")],
            &body,
        )
        .await;
    assert_eq!(response.status(), 403, "nothing was sent yet: a real 403");
    let envelope: Value = response.json().await.expect("json");
    assert_eq!(envelope["error"]["violations"][0]["check"], "group");
}

/// Issue 21 point 8: a tool is one tool however a model or client cases or pads its name, so
/// `Graph-Update` cannot dodge the groups and states of `[tools.graph-update]` by falling back to
/// the defaults of a tool the catalog does not describe (group `default`, every state).
#[tokio::test]
async fn a_case_or_space_variant_of_a_catalog_tool_keeps_its_groups_and_states() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &groups_route("")).await;

    // No group named: `default`, which graph-update is not in, whatever the client calls it.
    let seen = offered(
        &upstream,
        &gateway,
        &[],
        request(&["Graph-Update", "weather"], vec![]),
    )
    .await;
    assert_eq!(seen, Some(vec!["weather".into()]));

    upstream.push(Reply::chat_calls(&[("c1", " GRAPH-UPDATE", "{}")]));
    let error = sdk_chat_as(&gateway, "sk", &[], request(&["weather"], vec![]))
        .await
        .expect_err("graph-update is not in the default group");
    assert_sdk_error(error, 403, "tool_not_in_requested_groups");

    // Every group, state `undefined`: complex-analysis is available only in `analysis`.
    upstream.push(Reply::chat_calls(&[("c2", "Complex-Analysis", "{}")]));
    let error = refused_in_groups(
        &gateway,
        "sk",
        "*",
        &["weather"],
        "complex-analysis needs the analysis state",
    )
    .await;
    assert_eq!(
        sdk_api_error(error).1["code"],
        "tool_not_available_in_state"
    );

    // A completed call in the history moves the state by its catalog entry too.
    upstream.push(Reply::chat_text("ok"));
    let response = gateway
        .post_json_with(
            "/v1/chat/completions",
            &[("x-toolgate-group", "*")],
            &request(&["weather"], executed("c3", "Knowledge-QUERY ")),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-toolgate-state"], "analysis");
}
