//! Workflow states: the seed's workflow moving through its states as the conversation's tool
//! results arrive (each transition counted once however long the conversation), the
//! per-request states of §5.2, and a failed tool result that moves no state.

use super::{
    CATALOG, SEED_TOOLS, executed, forwarded_tools, groups_route, offered, request, sdk_chat_as,
};
use crate::common::{Reply, ScriptedUpstream, TestGateway, transitions_recorded};
use serde_json::{Value, json};

#[tokio::test]
async fn the_seed_workflow_moves_through_its_states_from_the_conversation() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &groups_route("")).await;
    // §9.3: one set of groups for the whole workflow (plus admin, for the reset).
    let groups = [("x-toolgate-group", "knowledge,compute,admin")];
    let step = |history: Vec<Value>| request(&SEED_TOOLS, history);

    // Start (undefined): knowledge-query is offered and the model calls it.
    upstream.push(Reply::chat_calls(&[("c1", "knowledge-query", "{}")]));
    let answer = sdk_chat_as(&gateway, "sk", &groups, step(vec![]))
        .await
        .expect("allowed");
    assert!(answer.choices[0].message.tool_calls.is_some());
    assert_eq!(
        forwarded_tools(&upstream),
        Some(vec!["knowledge-query".into()]),
        "undefined: only knowledge-query of these groups"
    );

    // Its result is in the history: the state is now analysis.
    let mut history = executed("c1", "knowledge-query");
    let in_analysis = offered(&upstream, &gateway, &groups, step(history.clone())).await;
    assert_eq!(
        in_analysis,
        Some(vec![
            "graph-update".into(),
            "complex-analysis".into(),
            "reset-workflow".into()
        ])
    );

    // complex-analysis done: results, where only reset-workflow remains.
    history.extend(executed("c2", "complex-analysis"));
    let in_results = offered(&upstream, &gateway, &groups, step(history.clone())).await;
    assert_eq!(in_results, Some(vec!["reset-workflow".into()]));

    // reset-workflow done: back to undefined, and the workflow can start again.
    history.extend(executed("c3", "reset-workflow"));
    upstream.push(Reply::chat_text("ok"));
    let response = gateway
        .post_chat(&{
            let mut body = step(history);
            body["toolgate"] = json!({"group": ["knowledge", "compute", "admin"]});
            body
        })
        .await;
    assert_eq!(response.headers()["x-toolgate-state"], "undefined");
    assert_eq!(
        forwarded_tools(&upstream),
        Some(vec!["knowledge-query".into()])
    );

    // The audit line of that exchange tells the whole story.
    let audit = gateway.audit_line_of(&response).await;
    assert_eq!(
        audit["requested_groups"],
        json!(["knowledge", "compute", "admin"])
    );
    assert_eq!(audit["initial_state"], "undefined");
    let transitions: Vec<(String, String)> = audit["state_transitions"]
        .as_array()
        .expect("transitions")
        .iter()
        .map(|t| {
            (
                t["from"].as_str().unwrap_or_default().into(),
                t["to"].as_str().unwrap_or_default().into(),
            )
        })
        .collect();
    // Only the transition whose result this request brought: the earlier two were recorded by
    // the requests that brought theirs.
    assert_eq!(
        transitions,
        [("results".to_owned(), "undefined".to_owned())]
    );
    assert_eq!(audit["available_tools"], json!(["knowledge-query"]));
    assert!(
        audit["filtered_by_group"]
            .as_array()
            .expect("list")
            .contains(&json!("text-completion"))
    );
    assert!(
        audit["filtered_by_state"]
            .as_array()
            .expect("list")
            .contains(&json!("graph-update"))
    );
}

#[tokio::test]
async fn the_seed_per_request_states_of_section_5_2() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &groups_route("")).await;
    let cases: [(&str, &str, &[&str]); 3] = [
        (
            "read-only,knowledge",
            "undefined",
            &["knowledge-query", "text-completion"],
        ),
        (
            "advanced,compute,write",
            "analysis",
            &["graph-update", "complex-analysis"],
        ),
        ("admin", "results", &["reset-workflow"]),
    ];
    for (groups, state, expected) in cases {
        let seen = offered(
            &upstream,
            &gateway,
            &[("x-toolgate-group", groups), ("x-toolgate-state", state)],
            request(&SEED_TOOLS, vec![]),
        )
        .await;
        let expected: Vec<String> = expected.iter().map(|name| (*name).to_owned()).collect();
        assert_eq!(seen, Some(expected), "groups {groups} in state {state}");
    }
}

#[tokio::test]
async fn a_failed_tool_result_moves_no_state() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &groups_route("")).await;
    // Anthropic flags a failed result with is_error; the state stays where it was.
    let body = json!({
        "model": "claude", "max_tokens": 64, "system": "agent",
        "tools": [{"name": "knowledge-query", "input_schema": {"type": "object"}},
                  {"name": "complex-analysis", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "knowledge-query", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": true, "content": "timeout"}]}
        ]
    });
    let routes = format!(
        "{CATALOG}\n[[routes]]\npath = \"/v1/messages\"\nupstream = \"llm\"\n[[routes.plugins]]\nname = \"tool_groups\"\n"
    );
    let gateway2 = TestGateway::start(&upstream, &routes).await;
    upstream.push(Reply::json(
        200,
        json!({"id": "m", "type": "message", "role": "assistant",
        "model": "claude", "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1}}),
    ));
    let response = gateway2
        .post_json_with(
            "/v1/messages",
            &[("x-toolgate-group", "knowledge,compute")],
            &body,
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-toolgate-state"], "undefined");
    let seen = upstream.forwarded_json();
    let names: Vec<&str> = seen["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["knowledge-query"]);
    drop(gateway);
}

#[tokio::test]
async fn a_ten_step_conversation_counts_each_transition_once() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &groups_route("")).await;
    let groups = [("x-toolgate-group", "knowledge,compute,admin")];
    // The workflow's loop: each call moves the state on to where the next one is offered.
    let cycle = ["knowledge-query", "complex-analysis", "reset-workflow"];
    let mut history = Vec::new();
    for step in 0..10 {
        let tool = cycle[step % cycle.len()];
        let id = format!("call_{step}");
        upstream.push(Reply::chat_calls(&[(&id, tool, "{}")]));
        let answer = sdk_chat_as(
            &gateway,
            "sk",
            &groups,
            request(&SEED_TOOLS, history.clone()),
        )
        .await
        .unwrap_or_else(|error| panic!("step {step}: {error}"));
        let calls = answer.choices[0]
            .message
            .tool_calls
            .clone()
            .unwrap_or_default();
        assert_eq!(
            calls.len(),
            1,
            "step {step}: the model's call to {tool} is let through"
        );
        history.extend(executed(&id, tool));
    }
    // Nine results came back (the tenth call's is still out): three of each transition, not
    // the 45 a re-count of the whole history on every request would give.
    gateway
        .assert_metrics_contain(&[
            "agent_state_transitions_total{tool=\"knowledge-query\",from=\"undefined\",to=\"analysis\"} 3",
            "agent_state_transitions_total{tool=\"complex-analysis\",from=\"analysis\",to=\"results\"} 3",
            "agent_state_transitions_total{tool=\"reset-workflow\",from=\"results\",to=\"undefined\"} 3",
        ])
        .await;
    let recorded = gateway
        .audit_lines_until(|lines| transitions_recorded(lines) >= 9)
        .await;
    let recorded = transitions_recorded(&recorded);
    assert_eq!(recorded, 9, "the audit lines record each transition once");
}
