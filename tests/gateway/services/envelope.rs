//! What a service is sent: one request per answer carrying the tenant, the instance's config,
//! the declared tools and the calls in the instance's scope, with the descriptor's headers and
//! bearer token, the tenant's groups and access level and the workflow state toolgate keeps —
//! and no request at all when no call is in scope.

use crate::common::services::{instance, request, route, service};
use crate::common::{Reply, ScriptedUpstream, TestGateway};
use serde_json::json;

#[tokio::test]
async fn the_envelope_carries_tenant_config_tools_and_calls_with_the_descriptor_headers() {
    let upstream = ScriptedUpstream::start().await;
    let checker = ScriptedUpstream::start().await;
    checker.set_default(Reply::json(
        200,
        json!({"error": null, "decision": "allow", "violations": []}),
    ));
    let config = format!(
        "[tenants.acme]\napi_keys = [\"sk-client-key\"]\n\n{}{}",
        service(
            "audit",
            &format!("{}/check", checker.url()),
            "config-params = [{ name = \"team\", required = true }]\n\
             bearer_token = \"${TOOLGATE_SERVICES_TEST_TOKEN:-tok-123}\"\n\
             headers = { x-caller = \"toolgate-${CARGO_PKG_NAME}\" }"
        ),
        route(
            "/v1",
            &instance(
                "",
                "service = \"audit\"\nconfig = { team = \"payments\" }\ntools = [\"run_*\"]"
            ),
        ),
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    upstream.push(Reply::chat_calls(&[
        ("call_1", "run_sql", r#"{"q":"select 1"}"#),
        ("call_2", "drop_db", r#"{"q":"staging"}"#),
        ("call_3", "run_shell", r#"{"q":"ls"}"#),
    ]));
    let response = gateway.post_chat(&request()).await;
    assert_eq!(response.status(), 200);

    assert_eq!(
        checker.request_count(),
        1,
        "all calls of a response in one request"
    );
    let asked = checker.last_request().expect("the service was called");
    assert_eq!(asked.method, "POST");
    assert_eq!(asked.path_and_query, "/check");
    assert_eq!(asked.header("authorization"), Some("Bearer tok-123"));
    assert_eq!(asked.header("x-caller"), Some("toolgate-toolgate"));
    assert_eq!(asked.header("content-type"), Some("application/json"));
    let envelope = asked.json();
    assert_eq!(envelope["user"], "acme");
    assert_eq!(envelope["config"], json!({"team": "payments"}));
    assert_eq!(envelope["stage"], "pre_response");
    assert_eq!(envelope["format"], "chat_completions");
    let declared: Vec<&str> = envelope["declared_tools"]
        .as_array()
        .expect("declared tools")
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(declared, ["run_sql", "run_shell", "drop_db"]);
    assert_eq!(
        envelope["declared_tools"][0]["parameters"]["type"],
        "object"
    );
    assert_eq!(
        envelope["tool_calls"],
        json!([
            {"choice": 0, "id": "call_1", "name": "run_sql", "kind": "function", "arguments": "{\"q\":\"select 1\"}"},
            {"choice": 0, "id": "call_3", "name": "run_shell", "kind": "function", "arguments": "{\"q\":\"ls\"}"},
        ]),
        "only the calls in the instance's scope"
    );
    assert_eq!(envelope["context"]["route"], "/v1");
    assert_eq!(envelope["context"]["model"], "gpt-4o-mini");
    assert_eq!(
        envelope["context"]["user_request"],
        "Tidy the staging database."
    );
    let request_id = envelope["context"]["request_id"].as_str().expect("an id");
    assert_eq!(
        response
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok()),
        Some(request_id)
    );

    // No call in scope: the service is not asked at all.
    upstream.push(Reply::chat_calls(&[("call_4", "drop_db", "{}")]));
    let response = gateway.post_chat(&request()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(checker.request_count(), 1);
}

#[tokio::test]
async fn the_envelope_carries_the_tenants_groups_access_level_and_workflow_state() {
    let upstream = ScriptedUpstream::start().await;
    let checker = ScriptedUpstream::start().await;
    checker.set_default(Reply::json(
        200,
        json!({"error": null, "decision": "allow", "violations": []}),
    ));
    let config = format!(
        "[tools.search]\ngroups = [\"research\"]\nstate = \"analysis\"\n\n\
         [tools.summarise]\ngroups = [\"research\"]\navailable_in_states = [\"analysis\"]\n\n\
         [tenants.acme]\napi_keys = [\"sk-acme\"]\ngroups = [\"research\"]\n\
         access_level = \"standard\"\n\n{}\
         [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_groups\"\n\
         [[routes.plugins]]\nname = \"service\"\n[routes.plugins.settings]\n\
         service = \"context\"\nstages = [\"pre_request\", \"pre_response\"]\n",
        service("context", &format!("{}/check", checker.url()), ""),
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    let tool = |name: &str| {
        json!({"type": "function", "function": {"name": name,
               "parameters": {"type": "object", "properties": {}}}})
    };
    // search ran and its result is back: toolgate's state is analysis.
    let body = json!({
        "model": "gpt-4o-mini",
        "tools": [tool("search"), tool("summarise")],
        "messages": [
            {"role": "user", "content": "Look it up."},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
             "function": {"name": "search", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "found"},
        ],
    });
    upstream.push(Reply::chat_calls(&[("c2", "summarise", "{}")]));
    let answer = gateway
        .openai_with_key("sk-acme")
        .chat()
        .create(crate::common::answers::sdk_chat_request(body))
        .await
        .expect("allowed");
    assert!(answer.choices[0].message.tool_calls.is_some());

    let envelopes: Vec<serde_json::Value> = checker
        .requests()
        .iter()
        .map(|request| request.json())
        .collect();
    assert_eq!(envelopes.len(), 2, "pre_request and pre_response");
    for envelope in &envelopes {
        let context = &envelope["context"];
        assert_eq!(context["tenant_groups"], json!(["research"]), "{envelope}");
        assert_eq!(context["access_level"], "standard");
        assert_eq!(context["workflow_state"], "analysis");
    }
}
