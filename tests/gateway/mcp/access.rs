//! Who may list and call which MCP tools: each caller's filtered list, allowed calls in every
//! name form, refused calls (a tool outside the policy, an unknown or unexposed one, an agent
//! the tenant does not hold, no key) as JSON-RPC errors with the violations and an audit line,
//! and a bare name two servers have answered with both candidates.

use serde_json::{Value, json};

use super::{
    ACCEPT_MCP, assert_refused, call, config_with_own_ops_policy, connect, refusal_data,
    servers_dir, start_config, start_standard, temp_dir, text_of, tool_names, try_connect,
};
use crate::common::answers::json_with_status;

#[tokio::test]
async fn each_caller_lists_only_the_tools_its_policy_allows() {
    let Some((_files, _upstream, gateway)) = start_standard("lists").await else {
        return;
    };

    let dev = connect(&gateway, "sk-dev", None).await;
    assert_eq!(
        tool_names(&dev).await,
        [
            "everything__echo",
            "everything__get-structured-content",
            "everything__get-sum",
            "everything__trigger-long-running-operation",
            "files__list_directory",
            "files__read_text_file",
            "files__write_file",
            "memory__create_entities",
            "memory__read_graph",
        ]
    );
    let reader = connect(&gateway, "sk-dev", Some("reader")).await;
    assert_eq!(
        tool_names(&reader).await,
        ["files__list_directory", "files__read_text_file"]
    );
    let ops = connect(&gateway, "sk-ops", None).await;
    let names = tool_names(&ops).await;
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(names.iter().all(|name| name.starts_with("everything__")));

    // Listed tools keep their backend's schema and description.
    let tools = dev.list_all_tools().await.expect("tools/list");
    let sum = tools
        .iter()
        .find(|tool| tool.name == "everything__get-sum")
        .expect("listed");
    assert!(sum.input_schema.contains_key("properties"), "{sum:?}");
}

#[tokio::test]
async fn allowed_calls_reach_the_backends_in_every_name_form() {
    let Some((files, _upstream, gateway)) = start_standard("calls").await else {
        return;
    };
    std::fs::write(files.join("note.txt"), "hello from the temp dir").expect("write");

    let dev = connect(&gateway, "sk-dev", None).await;
    let echoed = call(&dev, "everything__echo", json!({"message": "ping"}))
        .await
        .expect("allowed");
    assert!(text_of(&echoed).contains("ping"), "{echoed:?}");
    let sum = call(&dev, "everything:get-sum", json!({"a": 2, "b": 3}))
        .await
        .expect("the seed's server:tool form");
    assert!(text_of(&sum).contains('5'), "{sum:?}");

    // A bare name that exactly one permitted server has.
    let reader = connect(&gateway, "sk-dev", Some("reader")).await;
    let path = files.join("note.txt").display().to_string();
    let read = call(&reader, "read_text_file", json!({"path": path}))
        .await
        .expect("a bare name");
    assert!(
        text_of(&read).contains("hello from the temp dir"),
        "{read:?}"
    );

    // Memory keeps what one call wrote for the next.
    call(
        &dev,
        "memory__create_entities",
        json!({"entities": [{"name": "toolgate", "entityType": "proxy", "observations": ["filters MCP"]}]}),
    )
    .await
    .expect("allowed");
    let graph = call(&dev, "memory__read_graph", json!({}))
        .await
        .expect("allowed");
    assert!(text_of(&graph).contains("filters MCP"), "{graph:?}");

    // A result with structuredContent that satisfies its outputSchema passes.
    let weather = call(
        &dev,
        "everything__get-structured-content",
        json!({"location": "Chicago"}),
    )
    .await
    .expect("valid structured content");
    assert!(weather.structured_content.is_some(), "{weather:?}");
}

#[tokio::test]
async fn refused_calls_are_json_rpc_errors_with_the_violations() {
    let Some((files, _upstream, gateway)) = start_standard("refused").await else {
        return;
    };

    let reader = connect(&gateway, "sk-dev", Some("reader")).await;
    let path = files.join("x.txt").display().to_string();
    let error = call(
        &reader,
        "files__write_file",
        json!({"path": path, "content": "no"}),
    )
    .await
    .expect_err("write_file is not the reader's");
    let data = assert_refused(&error, "tool_not_permitted");
    assert_eq!(data["type"], "tool_call_blocked");
    assert_eq!(data["violations"][0]["check"], "permission");
    assert!(data["request_id"].is_string(), "{data}");
    assert!(!files.join("x.txt").exists(), "nothing reached the backend");

    // Defence in depth: a server the caller cannot see at all, and a tool no one has.
    let ops = connect(&gateway, "sk-ops", None).await;
    let error = call(&ops, "memory__read_graph", json!({}))
        .await
        .expect_err("ops may not reach memory");
    assert_eq!(refusal_data(&error)["code"], "tool_not_permitted");
    let error = call(&ops, "no_such_tool", json!({}))
        .await
        .expect_err("unknown");
    assert_refused(&error, "unknown_tool");
    // Exposed tools are a ceiling: get-env exists on the backend but is not exposed.
    let error = call(&ops, "everything__get-env", json!({}))
        .await
        .expect_err("not exposed");
    assert_eq!(refusal_data(&error)["code"], "tool_not_permitted");

    // An agent the tenant does not hold is refused before MCP starts.
    let refused = try_connect(&gateway, "sk-ops", Some("reader")).await;
    assert!(refused.is_err(), "ops does not hold the agent 'reader'");
    let raw = gateway
        .post_json_with(
            "/mcp",
            &[
                ("authorization", "Bearer sk-ops"),
                ("x-toolgate-agent", "reader"),
                ("accept", ACCEPT_MCP),
            ],
            &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        )
        .await;
    let body: Value = json_with_status(raw, 403).await;
    assert_eq!(body["error"]["code"], -32005);
    assert_eq!(body["error"]["data"]["code"], "agent_not_held");
    let request_id = body["error"]["data"]["request_id"]
        .as_str()
        .expect("a request id")
        .to_owned();
    let line = gateway.audit_line(&request_id).await;
    assert_eq!(line["status"], 403);
    assert_eq!(line["tenant"], "ops");
    assert_eq!(line["refusal"], "agent_not_held");
    // No key at all.
    assert!(try_connect(&gateway, "sk-nobody", None).await.is_err());
}

#[tokio::test]
async fn a_bare_name_two_servers_have_is_an_error_naming_both() {
    let Some(servers) = servers_dir() else { return };
    let files = temp_dir("ambiguous");
    let extra = format!(
        r#"
[mcp_servers.notes]
command = "node"
args = ["{}/server-memory/dist/index.js"]
env = {{ MEMORY_FILE_PATH = "{}/notes.jsonl" }}

[mcp.agent_policies.ops]
allowed_servers = ["memory", "notes"]

[mcp.default_policy]
allow_unknown_tools = true
"#,
        servers.display(),
        files.display()
    );
    let config = config_with_own_ops_policy(&servers, &files, &extra);
    let (_upstream, gateway) = start_config(&config, &["memory", "notes"]).await;
    let ops = connect(&gateway, "sk-ops", None).await;
    let error = call(&ops, "read_graph", json!({}))
        .await
        .expect_err("two servers have read_graph");
    assert_eq!(error.code.0, -32602);
    assert!(
        error.message.contains("memory__read_graph") && error.message.contains("notes__read_graph"),
        "{}",
        error.message
    );
    assert_eq!(
        error.data.as_ref().expect("data")["candidates"],
        json!(["memory__read_graph", "notes__read_graph"])
    );
    // Qualified, each is fine.
    call(&ops, "notes__read_graph", json!({}))
        .await
        .expect("qualified");
}
