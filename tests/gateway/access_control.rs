//! Access control end to end (issue: tool catalog, groups and workflow states, permissions,
//! tenants): what the model is shown, what calls are let through, with a real OpenAI client,
//! the gateway, and a scripted upstream that records what it was sent.

use crate::common;
use crate::common::upstream::chat_completion;
use crate::common::{Reply, ScriptedUpstream, TestGateway};
use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::chat::CreateChatCompletionRequest;
use serde_json::{Value, json};

/// The tools of seed 000 §5.1, plus an untagged one, with permission metadata.
const CATALOG: &str = r#"
[tools.knowledge-query]
groups = ["read-only", "knowledge", "basic"]
state = "analysis"
available_in_states = ["undefined", "research"]
category = "database"
action = "db:query"

[tools.graph-update]
groups = ["write", "knowledge", "admin"]
applicable-states = ["analysis", "modification"]
category = "database"
action = "db:mutate"

[tools.text-completion]
groups = ["read-only", "text", "basic"]
state = "undefined"
category = "analytics"

[tools.complex-analysis]
groups = ["advanced", "compute", "expensive"]
state = "results"
available_in_states = ["analysis"]
category = "code_execution"

[tools.reset-workflow]
groups = ["admin"]
state = "undefined"
available_in_states = ["analysis", "results"]
category = "deployment"
action = "deploy:staging"

[tools.weather]
category = "web"
"#;

const SEED_TOOLS: [&str; 6] = [
    "knowledge-query",
    "graph-update",
    "text-completion",
    "complex-analysis",
    "reset-workflow",
    "weather",
];

fn groups_route(settings: &str) -> String {
    format!(
        "{CATALOG}\n[[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_groups\"\n[routes.plugins.settings]\n{settings}\n"
    )
}

/// A chat request declaring `tools` (each with an object schema), after `history` messages.
fn request(tools: &[&str], history: Vec<Value>) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "Work through the analysis."})];
    messages.extend(history);
    json!({
        "model": "gpt-4o-mini",
        "messages": messages,
        "tools": tools.iter().map(|name| json!({"type": "function", "function": {
            "name": name, "parameters": {"type": "object", "properties": {}}}})).collect::<Vec<_>>(),
    })
}

/// The assistant turn that called `tool` and the tool's result, for a history.
fn executed(call_id: &str, tool: &str) -> Vec<Value> {
    vec![
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": call_id, "type": "function",
               "function": {"name": tool, "arguments": "{}"}}]}),
        json!({"role": "tool", "tool_call_id": call_id, "content": "done"}),
    ]
}

/// A real OpenAI client sending `headers` with every request (and `key`, a tenant's).
fn client(gateway: &TestGateway, key: &str, headers: &[(&str, &str)]) -> Client<OpenAIConfig> {
    let mut config = OpenAIConfig::new()
        .with_api_base(format!("{}/v1", gateway.url()))
        .with_api_key(key);
    for (name, value) in headers {
        config = config
            .with_header(
                http::HeaderName::try_from(*name).expect("a valid header name"),
                value.to_string(),
            )
            .expect("a valid test header");
    }
    Client::with_config(config)
}

fn sdk(body: Value) -> CreateChatCompletionRequest {
    serde_json::from_value(body).expect("a valid chat completion request")
}

/// The names of the tools the upstream was sent, in order; `None` without a `tools` field.
fn forwarded_tools(upstream: &ScriptedUpstream) -> Option<Vec<String>> {
    let body = upstream
        .last_request()
        .expect("the upstream was called")
        .json();
    body.get("tools").map(|tools| {
        tools
            .as_array()
            .expect("tools is a list")
            .iter()
            .map(|tool| {
                tool["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    })
}

/// Sends `body` through the SDK with `headers`; returns the tools the upstream saw.
async fn offered(
    upstream: &ScriptedUpstream,
    gateway: &TestGateway,
    headers: &[(&str, &str)],
    body: Value,
) -> Option<Vec<String>> {
    upstream.push(Reply::json(200, chat_completion(&[], Some("ok"))));
    client(gateway, "sk-client", headers)
        .chat()
        .create(sdk(body))
        .await
        .expect("the request is allowed");
    forwarded_tools(upstream)
}

fn api_error(error: OpenAIError) -> (u16, Value) {
    match error {
        OpenAIError::ApiError(error) => (
            error.status_code.as_u16(),
            serde_json::to_value(&error.api_error).expect("serializable"),
        ),
        other => panic!("expected an API error, got {other:?}"),
    }
}

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
    upstream.push(Reply::json(200, chat_completion(&[], Some("ok"))));
    let response = gateway.post("/v1/chat/completions", &body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-toolgate-state"], "analysis");
    assert_eq!(
        forwarded_tools(&upstream),
        Some(vec!["graph-update".into(), "complex-analysis".into()])
    );
    let forwarded = upstream.last_request().expect("forwarded").json();
    assert!(forwarded.get("toolgate").is_none(), "{forwarded}");
}

#[tokio::test]
async fn a_request_that_asks_for_nothing_special_is_forwarded_byte_for_byte() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &groups_route("")).await;
    let body = r#"{"model":"m",  "messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"weather"}}]}"#;
    upstream.push(Reply::json(200, chat_completion(&[], Some("ok"))));
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gateway.url()))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), 200);
    assert_eq!(
        upstream.last_request().expect("forwarded").body.as_ref(),
        body.as_bytes()
    );
}

#[tokio::test]
async fn the_seed_workflow_moves_through_its_states_from_the_conversation() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &groups_route("")).await;
    // §9.3: one set of groups for the whole workflow (plus admin, for the reset).
    let groups = [("x-toolgate-group", "knowledge,compute,admin")];
    let step = |history: Vec<Value>| request(&SEED_TOOLS, history);

    // Start (undefined): knowledge-query is offered and the model calls it.
    upstream.push(Reply::json(
        200,
        chat_completion(&[("c1", "knowledge-query", "{}")], None),
    ));
    let answer = client(&gateway, "sk", &groups)
        .chat()
        .create(sdk(step(vec![])))
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
    upstream.push(Reply::json(200, chat_completion(&[], Some("ok"))));
    let response = gateway
        .post("/v1/chat/completions", &{
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
    let request_id = response.headers()["x-request-id"]
        .to_str()
        .expect("ascii")
        .to_owned();
    let audit = gateway.audit_line(&request_id).await;
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
    assert_eq!(
        transitions,
        [
            ("undefined".to_owned(), "analysis".to_owned()),
            ("analysis".into(), "results".into()),
            ("results".into(), "undefined".into())
        ]
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
    let response = reqwest::Client::new()
        .post(format!("{}/v1/messages", gateway2.url()))
        .header("x-toolgate-group", "knowledge,compute")
        .json(&body)
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-toolgate-state"], "undefined");
    let seen = upstream.last_request().expect("forwarded").json();
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
async fn a_call_to_a_tool_the_request_was_not_offered_is_blocked() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &groups_route("")).await;
    upstream.push(Reply::json(
        200,
        chat_completion(
            &[
                ("c1", "text-completion", "{}"),
                ("c2", "graph-update", "{}"),
            ],
            None,
        ),
    ));
    let error = client(&gateway, "sk", &[("x-toolgate-group", "read-only")])
        .chat()
        .create(sdk(request(&SEED_TOOLS, vec![])))
        .await
        .expect_err("graph-update is not in read-only");
    let (status, body) = api_error(error);
    assert_eq!(status, 403);
    assert_eq!(body["code"], "tool_not_in_requested_groups");
    // The SDK keeps the envelope's standard fields; the violations are read raw.
    upstream.push(Reply::json(
        200,
        chat_completion(
            &[
                ("c1", "text-completion", "{}"),
                ("c2", "graph-update", "{}"),
            ],
            None,
        ),
    ));
    let raw = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gateway.url()))
        .header("x-toolgate-group", "read-only")
        .json(&request(&SEED_TOOLS, vec![]))
        .send()
        .await
        .expect("answers");
    let body: Value = raw.json().await.expect("json");
    let violations = body["error"]["violations"].as_array().expect("violations");
    assert_eq!(violations.len(), 1, "{body}");
    assert_eq!(violations[0]["check"], "group");
    assert_eq!(violations[0]["tool"], "graph-update");

    // A tool of the group but not of the state is a `state` violation.
    upstream.push(Reply::json(
        200,
        chat_completion(&[("c3", "complex-analysis", "{}")], None),
    ));
    let error = client(&gateway, "sk", &[("x-toolgate-group", "compute")])
        .chat()
        .create(sdk(request(&SEED_TOOLS, vec![])))
        .await
        .expect_err("complex-analysis needs the analysis state");
    let (_, body) = api_error(error);
    assert_eq!(body["code"], "tool_not_available_in_state");

    let metrics = gateway.metrics_text().await;
    assert!(
        metrics.contains("agent_privilege_escalation_attempts_total{tenant=\"\"} 3"),
        "{metrics}"
    );
    assert!(
        metrics.contains("agent_tool_group_requests_total{group=\"read-only\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("agent_filtered_tools_count_count"),
        "{metrics}"
    );
    assert!(
        metrics.contains("agent_tool_group_availability{group=\"knowledge\"} 2"),
        "{metrics}"
    );
}

#[tokio::test]
async fn bad_group_and_state_input_is_refused_never_widened() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &groups_route("")).await;
    let send = |headers: Vec<(&'static str, &'static str)>, body: Value| {
        let url = format!("{}/v1/chat/completions", gateway.url());
        async move {
            let mut request = reqwest::Client::new().post(url).json(&body);
            for (name, value) in headers {
                request = request.header(name, value);
            }
            let response = request.send().await.expect("answers");
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.expect("json"))
        }
    };
    let mut malformed = request(&SEED_TOOLS, vec![]);
    malformed["toolgate"] = json!({"group": 7});
    let (status, body) = send(vec![], malformed).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], "invalid_directives");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("toolgate")
    );

    let mut typo = request(&SEED_TOOLS, vec![]);
    typo["toolgate"] = json!({"grups": ["admin"]});
    assert_eq!(send(vec![], typo).await.0, 400);

    let (status, body) = send(
        vec![("x-toolgate-group", "admin\"*")],
        request(&SEED_TOOLS, vec![]),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_group"))
    );

    let mut disagree = request(&SEED_TOOLS, vec![]);
    disagree["toolgate"] = json!({"group": "admin"});
    let (status, body) = send(vec![("x-toolgate-group", "read-only")], disagree).await;
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

// ---- tool_permission -------------------------------------------------------------------------

/// One tool per category, each named after its category.
fn category_catalog() -> String {
    toolgate_plugin::taxonomy::CATEGORIES
        .iter()
        .map(|category| format!("[tools.{category}_tool]\ncategory = \"{category}\"\n"))
        .collect()
}

fn permission_config(settings: &str, tenants: &str) -> String {
    format!(
        "{}\n{tenants}\n[[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_permission\"\n[routes.plugins.settings]\n{settings}\n",
        category_catalog()
    )
}

#[tokio::test]
async fn every_access_level_opens_exactly_its_categories() {
    let upstream = ScriptedUpstream::start().await;
    let levels = ["sandboxed", "restricted", "standard", "elevated", "custom"];
    let tenants: String = levels
        .iter()
        .map(|level| {
            format!("[tenants.{level}]\napi_keys = [\"sk-{level}\"]\naccess_level = \"{level}\"\n")
        })
        .collect::<String>()
        + "[access_levels.custom]\ncategories = [\"memory\", \"design\"]\n";
    let gateway = TestGateway::start(&upstream, &permission_config("", &tenants)).await;
    let all: Vec<String> = toolgate_plugin::taxonomy::CATEGORIES
        .iter()
        .map(|category| format!("{category}_tool"))
        .collect();
    let names: Vec<&str> = all.iter().map(String::as_str).collect();
    for level in levels {
        upstream.push(Reply::json(200, chat_completion(&[], Some("ok"))));
        gateway
            .openai_with_key(&format!("sk-{level}"))
            .chat()
            .create(sdk(request(&names, vec![])))
            .await
            .expect("allowed");
        let seen = forwarded_tools(&upstream).unwrap_or_default();
        let expected: Vec<String> = if level == "custom" {
            vec!["design_tool".into(), "memory_tool".into()]
        } else {
            toolgate_plugin::taxonomy::builtin_level(level)
                .expect("built in")
                .iter()
                .map(|category| format!("{category}_tool"))
                .collect()
        };
        let mut seen_sorted = seen.clone();
        seen_sorted.sort();
        let mut expected_sorted = expected.clone();
        expected_sorted.sort();
        assert_eq!(seen_sorted, expected_sorted, "level {level}");
    }
}

#[tokio::test]
async fn deny_beats_allow_and_names_are_case_folded() {
    let upstream = ScriptedUpstream::start().await;
    let settings = "access_level = \"elevated\"\nallow = [\"WEB_*\"]\ndeny = [\" Web_Tool \", \"terminal_*\"]\n";
    let gateway = TestGateway::start(&upstream, &permission_config(settings, "")).await;
    let seen = offered(
        &upstream,
        &gateway,
        &[],
        request(&["web_tool", "Terminal_Tool", "memory_tool"], vec![]),
    )
    .await;
    assert_eq!(seen, Some(vec!["memory_tool".into()]));

    // A call to a denied tool is blocked with the reason in words.
    upstream.push(Reply::json(
        200,
        chat_completion(&[("c1", "WEB_TOOL", "{}")], None),
    ));
    let error = gateway
        .openai()
        .chat()
        .create(sdk(request(&["memory_tool"], vec![])))
        .await
        .expect_err("denied");
    let (status, body) = api_error(error);
    assert_eq!(status, 403);
    assert_eq!(body["code"], "tool_not_permitted");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("deny list") && message.contains("Web_Tool"),
        "{message}"
    );
}

#[tokio::test]
async fn an_untouched_request_keeps_its_bytes_and_on_empty_is_honoured() {
    let upstream = ScriptedUpstream::start().await;
    for (on_empty, expect_status, expect_tools) in [
        ("strip_tools_field", 200, None),
        ("pass_through_empty", 200, Some(json!([]))),
        ("reject", 403, None),
    ] {
        let settings = format!("access_level = \"sandboxed\"\non_empty = \"{on_empty}\"\n");
        let gateway = TestGateway::start(&upstream, &permission_config(&settings, "")).await;
        let before = upstream.request_count();
        upstream.push(Reply::json(200, chat_completion(&[], Some("ok"))));
        let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"web_tool"}}],"tool_choice":"required"}"#;
        let response = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", gateway.url()))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("answers");
        assert_eq!(response.status().as_u16(), expect_status, "{on_empty}");
        if expect_status == 200 {
            let seen = upstream.last_request().expect("forwarded").json();
            assert_eq!(seen.get("tools").cloned(), expect_tools, "{on_empty}");
            assert!(
                seen.get("tool_choice").is_none(),
                "{on_empty}: no choice without tools"
            );
        } else {
            assert_eq!(
                upstream.request_count(),
                before,
                "rejected before the upstream"
            );
            let _ = upstream.queued_replies();
            upstream.set_default(Reply::json(200, chat_completion(&[], Some("ok"))));
        }
        gateway.stop().await;
    }

    // Nothing removed: the upstream gets the client's exact bytes.
    let gateway = TestGateway::start(
        &upstream,
        &permission_config("access_level = \"restricted\"", ""),
    )
    .await;
    let body = r#"{ "model":"m","messages":[],"tools":[{"type":"function","function":{"name":"web_tool"}}] }"#;
    upstream.push(Reply::json(200, chat_completion(&[], Some("ok"))));
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gateway.url()))
        .body(body)
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), 200);
    assert_eq!(
        upstream.last_request().expect("forwarded").body.as_ref(),
        body.as_bytes()
    );
}

// ---- tenants -----------------------------------------------------------------------------------

fn tenant_config() -> String {
    format!(
        "{CATALOG}\n\
         [tenants.reader]\napi_keys = [\"sk-reader\"]\ngroups = [\"read-only\", \"default\"]\naccess_level = \"restricted\"\n\n\
         [tenants.operator]\napi_keys = [\"sk-operator\"]\ngroups = [\"*\"]\naccess_level = \"elevated\"\ndenied_tools = [\"reset-*\"]\n\n\
         [[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_groups\"\n\
         [[routes.plugins]]\nname = \"tool_permission\"\n"
    )
}

#[tokio::test]
async fn a_tenant_asking_for_groups_beyond_its_own_is_refused() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &tenant_config()).await;
    let error = client(
        &gateway,
        "sk-reader",
        &[("x-toolgate-group", "read-only,admin")],
    )
    .chat()
    .create(sdk(request(&SEED_TOOLS, vec![])))
    .await
    .expect_err("admin is not the reader's");
    let (status, body) = api_error(error);
    assert_eq!(status, 403);
    assert_eq!(body["code"], "group_access_denied");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("insufficient permissions for requested tool groups"),
        "{message}"
    );
    assert_eq!(upstream.request_count(), 0);

    let metrics = gateway.metrics_text().await;
    assert!(
        metrics.contains("agent_group_access_denied_total{group=\"admin\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("agent_privilege_escalation_attempts_total{tenant=\"reader\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn tenants_never_see_each_others_tools() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &tenant_config()).await;
    let mut seen = Vec::new();
    for (key, groups) in [("sk-reader", "read-only"), ("sk-operator", "*")] {
        upstream.push(Reply::json(200, chat_completion(&[], Some("ok"))));
        client(
            &gateway,
            key,
            &[
                ("x-toolgate-group", groups),
                ("x-toolgate-state", "analysis"),
            ],
        )
        .chat()
        .create(sdk(request(&SEED_TOOLS, vec![])))
        .await
        .expect("allowed");
        let forwarded = upstream.last_request().expect("forwarded");
        assert_eq!(
            forwarded.header("authorization"),
            None,
            "the tenant key stays here"
        );
        seen.push(forwarded_tools(&upstream));
    }
    // reader: read-only tools in analysis (none: knowledge-query is for undefined/research;
    // text-completion is analytics, open to restricted).
    assert_eq!(seen[0], Some(vec!["text-completion".into()]));
    // operator: every group, elevated, but reset-* denied to it.
    assert_eq!(
        seen[1],
        Some(vec![
            "graph-update".into(),
            "text-completion".into(),
            "complex-analysis".into(),
            "weather".into()
        ])
    );
    // The reader is never shown an operator-only tool, even asking by name in its own groups.
    upstream.push(Reply::json(
        200,
        chat_completion(&[("c1", "graph-update", "{}")], None),
    ));
    let error = client(&gateway, "sk-reader", &[("x-toolgate-group", "read-only")])
        .chat()
        .create(sdk(request(&["graph-update"], vec![])))
        .await
        .expect_err("blocked");
    assert_eq!(api_error(error).0, 403);
}

// ---- discovery and config errors --------------------------------------------------------------

#[tokio::test]
async fn the_admin_listener_says_which_tools_a_request_would_get_and_why_not() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &tenant_config()).await;
    let answer: Value = gateway
        .admin_get("/tools?group=read-only&tenant=reader")
        .await
        .json()
        .await
        .expect("json");
    let names = |list: &Value| -> Vec<String> {
        list.as_array()
            .expect("list")
            .iter()
            .map(|tool| tool["name"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(names(&answer["available"]), ["text-completion"]);
    let unavailable = answer["unavailable"].as_array().expect("list");
    let query = unavailable
        .iter()
        .find(|tool| tool["name"] == "knowledge-query")
        .expect("listed with reasons");
    assert_eq!(query["reasons"][0]["plugin"], "tool_permission");
    assert!(
        query["reasons"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("database")
    );
    let update = unavailable
        .iter()
        .find(|tool| tool["name"] == "graph-update")
        .expect("listed");
    assert_eq!(update["reasons"][0]["check"], "group");

    let refused = gateway.admin_get("/tools?group=admin&tenant=reader").await;
    let refused: Value = refused.json().await.expect("json");
    assert_eq!(
        refused["unavailable"][0]["reasons"][0]["code"],
        "group_access_denied"
    );
    assert_eq!(
        gateway.admin_get("/tools?tenant=nobody").await.status(),
        404
    );
    assert_eq!(gateway.admin_get("/tools?colour=red").await.status(), 400);
}

#[test]
fn catalog_and_permission_typos_are_located_load_errors() {
    let plugins = toolgate::PluginRegistry::builtin(&mut Default::default());
    let text = "[upstreams.llm]\nurl = \"http://127.0.0.1:1\"\n\n\
                [tools.a]\ncategory = \"databse\"\naction = \"db:drop\"\ngroup = [\"x\"]\n\n\
                [tenants.t]\napi_keys = [\"k\"]\naccess_level = \"root\"\n\n\
                [access_levels.ops]\ncategories = [\"deploy\"]\n\n\
                [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n\
                [[routes.plugins]]\nname = \"tool_permission\"\n[routes.plugins.settings]\ndeny_actions = [\"db:drop\"]\n";
    let errors = match toolgate::Config::from_toml(text, "g.toml", &plugins) {
        Ok(_) => panic!("the config has typos"),
        Err(errors) => errors.to_string(),
    };
    // An unknown key stops the parse first, with its location.
    assert!(
        errors.contains("g.toml:7:1") && errors.contains("group"),
        "{errors}"
    );

    let text = text.replace("group = [\"x\"]\n", "");
    let errors = match toolgate::Config::from_toml(&text, "g.toml", &plugins) {
        Ok(_) => panic!("the config has typos"),
        Err(errors) => errors.to_string(),
    };
    for expected in [
        "g.toml:5:1: tools.a.category: unknown category 'databse'",
        "g.toml:6:1: tools.a.action: unknown action type 'db:drop'",
        "tenants.t.access_level: unknown access level 'root'",
        "access_levels.ops.categories[0]: unknown category 'deploy'",
        "routes[0].plugins[0].settings.deny_actions[0]: unknown action type 'db:drop'",
    ] {
        assert!(
            errors.contains(expected),
            "missing {expected:?} in:\n{errors}"
        );
    }
}

#[tokio::test]
async fn a_streamed_call_to_a_tool_outside_the_groups_is_blocked_too() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &groups_route("")).await;
    upstream.push(Reply::sse_events(&common::upstream::chat_stream(
        &[("c1", "graph-update", "{}")],
        None,
    )));
    let mut body = request(&SEED_TOOLS, vec![]);
    body["stream"] = json!(true);
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gateway.url()))
        .header("x-toolgate-group", "read-only")
        .json(&body)
        .send()
        .await
        .expect("answers");
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

    upstream.push(Reply::json(
        200,
        chat_completion(&[("c1", " GRAPH-UPDATE", "{}")], None),
    ));
    let error = client(&gateway, "sk", &[])
        .chat()
        .create(sdk(request(&["weather"], vec![])))
        .await
        .expect_err("graph-update is not in the default group");
    let (status, body) = api_error(error);
    assert_eq!(status, 403);
    assert_eq!(body["code"], "tool_not_in_requested_groups");

    // Every group, state `undefined`: complex-analysis is available only in `analysis`.
    upstream.push(Reply::json(
        200,
        chat_completion(&[("c2", "Complex-Analysis", "{}")], None),
    ));
    let error = client(&gateway, "sk", &[("x-toolgate-group", "*")])
        .chat()
        .create(sdk(request(&["weather"], vec![])))
        .await
        .expect_err("complex-analysis needs the analysis state");
    assert_eq!(api_error(error).1["code"], "tool_not_available_in_state");

    // A completed call in the history moves the state by its catalog entry too.
    upstream.push(Reply::json(200, chat_completion(&[], Some("ok"))));
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gateway.url()))
        .header("x-toolgate-group", "*")
        .json(&request(&["weather"], executed("c3", "Knowledge-QUERY ")))
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-toolgate-state"], "analysis");
}

#[test]
fn two_catalog_entries_that_are_one_tool_are_a_load_error() {
    let plugins = toolgate::PluginRegistry::builtin(&mut Default::default());
    let text = "[upstreams.llm]\nurl = \"http://127.0.0.1:1\"\n\n\
                [tools.\"Graph-Update\"]\ngroups = [\"admin\"]\n\n\
                [tools.\"graph-update \"]\ngroups = [\"basic\"]\n\n\
                [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n\
                [[routes.plugins]]\nname = \"tool_groups\"\n";
    let errors = match toolgate::Config::from_toml(text, "g.toml", &plugins) {
        Ok(_) => panic!("two entries describe one tool"),
        Err(errors) => errors.to_string(),
    };
    assert!(
        errors.contains(r#"[tools."Graph-Update"] and [tools."graph-update "] are the same tool"#),
        "{errors}"
    );
    // One entry per tool loads.
    let single = text.replace("[tools.\"graph-update \"]\ngroups = [\"basic\"]\n\n", "");
    assert!(toolgate::Config::from_toml(&single, "g.toml", &plugins).is_ok());
}
