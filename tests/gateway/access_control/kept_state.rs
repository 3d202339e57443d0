//! Workflow state kept by toolgate (`state_source = "store"`): seed 000's whole workflow across
//! two replicas sharing one Redis, with reused tool_call_ids and a replayed request moving
//! nothing twice; a forged state, an invalid transition and a missing conversation refused.

use super::{SEED_TOOLS, executed, forwarded_tools, groups_route, request, sdk_chat_as};
use crate::common::answers::assert_sdk_error;
use crate::common::redis::RedisServer;
use crate::common::{Reply, ScriptedUpstream, TestGateway};
use serde_json::{Value, json};

fn store_route(store: &str, settings: &str) -> String {
    format!(
        "{store}\n{}",
        groups_route(&format!("state_source = \"store\"\n{settings}"))
    )
}

const GROUPS: (&str, &str) = ("x-toolgate-group", "knowledge,compute,admin");

/// One step as an SDK client in conversation `conversation`: the model answers by calling
/// `tool` with id `call_id`; returns the tools the upstream was offered.
async fn step(
    upstream: &ScriptedUpstream,
    gateway: &TestGateway,
    conversation: &str,
    history: &[Value],
    (call_id, tool): (&str, &str),
) -> Option<Vec<String>> {
    upstream.push(Reply::chat_calls(&[(call_id, tool, "{}")]));
    let answer = sdk_chat_as(
        gateway,
        "sk",
        &[GROUPS, ("x-toolgate-conversation", conversation)],
        request(&SEED_TOOLS, history.to_vec()),
    )
    .await
    .unwrap_or_else(|error| panic!("calling {tool}: {error}"));
    assert!(
        answer.choices[0].message.tool_calls.is_some(),
        "{tool} let through"
    );
    forwarded_tools(upstream)
}

#[tokio::test]
async fn the_seed_workflow_is_kept_across_two_replicas_sharing_redis() {
    let redis = RedisServer::start();
    let upstream = ScriptedUpstream::start().await;
    let config = store_route(&format!("[store]\nurl = \"{}\"\n", redis.url()), "");
    let (first, second) = (
        TestGateway::start(&upstream, &config).await,
        TestGateway::start(&upstream, &config).await,
    );
    let names = |tools: &[&str]| Some(tools.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>());
    // Every call reuses the id `call_1`, as some agents do.
    let mut history = Vec::new();
    let offered = step(
        &upstream,
        &first,
        "conv-1",
        &history,
        ("call_1", "knowledge-query"),
    )
    .await;
    assert_eq!(offered, names(&["knowledge-query"]));
    history.extend(executed("call_1", "knowledge-query"));

    let offered = step(
        &upstream,
        &second,
        "conv-1",
        &history,
        ("call_1", "complex-analysis"),
    )
    .await;
    assert_eq!(
        offered,
        names(&["graph-update", "complex-analysis", "reset-workflow"]),
        "the other replica knows the conversation is in analysis"
    );
    history.extend(executed("call_1", "complex-analysis"));

    let offered = step(
        &upstream,
        &first,
        "conv-1",
        &history,
        ("call_1", "reset-workflow"),
    )
    .await;
    assert_eq!(offered, names(&["reset-workflow"]), "results");
    history.extend(executed("call_1", "reset-workflow"));

    // The last request twice, once on each replica: the second moves nothing.
    for gateway in [&second, &first] {
        upstream.push(Reply::chat_text("done"));
        let mut body = request(&SEED_TOOLS, history.clone());
        body["toolgate"] =
            json!({"group": ["knowledge", "compute", "admin"], "conversation": "conv-1"});
        let response = gateway.post_chat(&body).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["x-toolgate-state"], "undefined");
        assert_eq!(forwarded_tools(&upstream), names(&["knowledge-query"]));
    }

    // Each transition recorded once, with its time, over both replicas' audit lines.
    let recorded: Vec<Value> = first
        .audit_lines()
        .into_iter()
        .chain(second.audit_lines())
        .flat_map(|line| {
            line["state_transitions"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    let mut moves: Vec<(String, String)> = recorded
        .iter()
        .map(|t| {
            (
                t["from"].as_str().unwrap_or_default().into(),
                t["to"].as_str().unwrap_or_default().into(),
            )
        })
        .collect();
    moves.sort();
    assert_eq!(
        moves,
        [
            ("analysis".to_owned(), "results".to_owned()),
            ("results".into(), "undefined".into()),
            ("undefined".into(), "analysis".into()),
        ]
    );
    assert!(
        recorded
            .iter()
            .all(|t| t["at"].as_u64().is_some_and(|at| at > 0))
    );
}

#[tokio::test]
async fn a_forged_state_an_invalid_transition_and_a_missing_conversation_are_refused() {
    let upstream = ScriptedUpstream::start().await;
    // No [store]: the in-memory store of one gateway.
    let gateway = TestGateway::start(&upstream, &store_route("", "")).await;

    // The conversation is in undefined; a client claiming results gets no results tools.
    let forged = sdk_chat_as(
        &gateway,
        "sk",
        &[
            GROUPS,
            ("x-toolgate-conversation", "conv-f"),
            ("x-toolgate-state", "results"),
        ],
        request(&SEED_TOOLS, vec![]),
    )
    .await
    .expect_err("a forged state is refused");
    let error = assert_sdk_error(forged, 403, "forged_state");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("'undefined'"),
        "{error}"
    );

    // A history in which complex-analysis ran in undefined, where it is not offered.
    let invented = sdk_chat_as(
        &gateway,
        "sk",
        &[GROUPS, ("x-toolgate-conversation", "conv-i")],
        request(&SEED_TOOLS, executed("call_9", "complex-analysis")),
    )
    .await
    .expect_err("an invalid transition is refused");
    assert_sdk_error(invented, 403, "invalid_transition");

    let anonymous = sdk_chat_as(&gateway, "sk", &[GROUPS], request(&SEED_TOOLS, vec![]))
        .await
        .expect_err("no conversation named");
    assert_sdk_error(anonymous, 400, "missing_conversation");
    assert_eq!(
        upstream.request_count(),
        0,
        "nothing refused reached the upstream"
    );
    gateway
        .assert_metrics_contain(&["agent_invalid_state_transition_total 1"])
        .await;
}

#[tokio::test]
async fn on_invalid_transition_allow_counts_and_moves_on() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(
        &upstream,
        &store_route("", "on_invalid_transition = \"allow\""),
    )
    .await;
    upstream.push(Reply::chat_text("ok"));
    let response = gateway
        .post_json_with(
            "/v1/chat/completions",
            &[GROUPS, ("x-toolgate-conversation", "conv-a")],
            &request(&SEED_TOOLS, executed("call_1", "complex-analysis")),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-toolgate-state"], "results");
    gateway
        .assert_metrics_contain(&["agent_invalid_state_transition_total 1"])
        .await;
}
