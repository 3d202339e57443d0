//! Instances of one service: per route and per tool, each with its own config and scope (and
//! audited by its id), and a scope or an answer that names a tool covers every case and space
//! variant of that tool.

use crate::common::answers::function_names;
use crate::common::services::{
    ARGCHECK_PARAMS, Validator, exchange, instance, request, route, service,
};
use crate::common::{Reply, ScriptedUpstream, TestGateway};
use serde_json::json;

#[tokio::test]
async fn one_service_backs_many_instances_each_with_its_own_config_and_tools() {
    let upstream = ScriptedUpstream::start().await;
    let validator = Validator::start().await;
    let config = format!(
        "{}{}{}",
        service("argcheck", &validator.url, ARGCHECK_PARAMS),
        route(
            "/guarded",
            &format!(
                "{}{}",
                instance(
                    "id = \"sql_guard\"",
                    "service = \"argcheck\"\ntools = [\"run_sql\"]\nconfig = { deny_substrings = [\"drop table\"] }"
                ),
                instance(
                    "id = \"shell_guard\"",
                    "service = \"argcheck\"\ntools = [\"run_shell\"]\nconfig = { deny_substrings = [\"rm -rf\"] }"
                )
            ),
        ),
        route(
            "/strict",
            &instance(
                "",
                "service = \"argcheck\"\nconfig = { deny_substrings = [\"rm -rf\", \"drop table\"] }"
            ),
        ),
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    // One exchange of the three-tool request on a route, answered with `calls`.
    let on_route = async |path: &str, calls: &[(&str, &str, &str)]| {
        exchange(&upstream, &gateway, path, &request(), calls).await
    };
    let sql_with_shell_words = [("call_1", "run_sql", r#"{"q":"rm -rf is not SQL"}"#)];
    let shell_with_sql_words = [("call_1", "run_shell", r#"{"q":"echo drop table"}"#)];

    // Each instance sees only its tools, with its own substrings.
    for calls in [&sql_with_shell_words, &shell_with_sql_words] {
        let (status, body) = on_route("/guarded/v1/chat/completions", calls).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = on_route(
        "/guarded/v1/chat/completions",
        &[("call_1", "run_shell", r#"{"q":"rm -rf /"}"#)],
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["violations"][0]["tool"], "run_shell");

    // The same calls on a route whose instance denies both.
    for calls in [&sql_with_shell_words, &shell_with_sql_words] {
        let (status, body) = on_route("/strict/v1/chat/completions", calls).await;
        assert_eq!(status, 403, "{body}");
        assert_eq!(body["error"]["code"], "denied_substring");
    }

    // The audit line names the instances by id.
    let request_id = upstream
        .last_request()
        .and_then(|request| request.header("x-request-id").map(str::to_owned))
        .expect("a request id upstream");
    let line = gateway.audit_line(&request_id).await;
    assert_eq!(line["plugins"], json!(["service"]), "{line}");
    let guarded_line = gateway
        .audit_lines()
        .into_iter()
        .find(|line| line["route"] == "/guarded")
        .expect("an audit line of /guarded");
    assert_eq!(
        guarded_line["plugins"],
        json!(["sql_guard", "shell_guard"]),
        "{guarded_line}"
    );
}

/// Issue 21 point 8: a service's scope and its answers name tools, not spellings. An instance
/// scoped to ` RUN_SQL` checks a call to `Run_Sql`; a service that answers "remove `drop_db`"
/// removes the client's `Drop_DB `.
#[tokio::test]
async fn a_service_sees_case_and_space_variants_of_its_tools_as_the_same_tools() {
    let upstream = ScriptedUpstream::start().await;
    let validator = Validator::start().await;
    let pruner = ScriptedUpstream::start().await;
    pruner.set_default(Reply::json(
        200,
        json!({"error": null, "decision": "modify", "violations": [],
               "patch": {"remove_tools": ["drop_db"]}}),
    ));
    let config = format!(
        "{}{}{}",
        service("argcheck", &validator.url, ARGCHECK_PARAMS),
        service("pruner", &format!("{}/prune", pruner.url()), ""),
        route(
            "/v1",
            &format!(
                "{}{}",
                instance(
                    "id = \"sql_guard\"",
                    "service = \"argcheck\"\ntools = [\" RUN_SQL\"]\nconfig = { deny_substrings = [\"drop table\"] }"
                ),
                instance(
                    "id = \"prune\"",
                    "service = \"pruner\"\nstages = [\"pre_request\"]"
                ),
            ),
        ),
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    let mut body = request();
    body["tools"][2]["function"]["name"] = json!("Drop_DB ");

    let (status, answer) = exchange(
        &upstream,
        &gateway,
        "/v1/chat/completions",
        &body,
        &[("call_1", "Run_Sql", r#"{"q":"drop table users"}"#)],
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["error"]["code"], "denied_substring");
    assert_eq!(answer["error"]["violations"][0]["tool"], "Run_Sql");

    assert_eq!(
        function_names(&upstream.forwarded_json()["tools"]),
        ["run_sql", "run_shell"],
        "`Drop_DB ` is drop_db"
    );

    // Out of scope stays out of scope: the same words in another tool's call pass.
    let (status, answer) = exchange(
        &upstream,
        &gateway,
        "/v1/chat/completions",
        &body,
        &[("call_2", "run_shell", r#"{"q":"drop table users"}"#)],
    )
    .await;
    assert_eq!(status, 200, "{answer}");
}
