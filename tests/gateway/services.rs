//! Validator services end to end with services that answer: the `service` plugin calling the
//! reference validator from `examples/` (and scripted services) over loopback — the envelope both
//! ways, deny, modify, streams, observe mode, per-route and per-tool instances of one service —
//! and `toolgate check` on malformed descriptors. Misbehaving services: `service_failures.rs`.

use crate::common;
use crate::common::services::{
    ARGCHECK_PARAMS, Validator, answer_of, calling, instance, request, route, service,
};
use crate::common::upstream::chat_stream;
use crate::common::{Reply, ScriptedUpstream, TestGateway};
use serde_json::{Value, json};
use toolgate::{Config, Runtime};

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
    upstream.push(calling(&[
        ("call_1", "run_sql", r#"{"q":"select 1"}"#),
        ("call_2", "drop_db", r#"{"q":"staging"}"#),
        ("call_3", "run_shell", r#"{"q":"ls"}"#),
    ]));
    let response = gateway.post("/v1/chat/completions", &request()).await;
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
    upstream.push(calling(&[("call_4", "drop_db", "{}")]));
    let response = gateway.post("/v1/chat/completions", &request()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(checker.request_count(), 1);
}

#[tokio::test]
async fn the_example_service_denies_with_a_403_carrying_its_violations() {
    let upstream = ScriptedUpstream::start().await;
    let validator = Validator::start().await;
    let config = format!(
        "{}{}",
        service("argcheck", &validator.url, ARGCHECK_PARAMS),
        route(
            "/v1",
            &instance(
                "",
                "service = \"argcheck\"\nconfig = { deny_substrings = [\"DROP TABLE\"] }"
            ),
        ),
    );
    let gateway = TestGateway::start(&upstream, &config).await;

    upstream.push(calling(&[("call_1", "run_sql", r#"{"q":"select 1"}"#)]));
    assert_eq!(
        gateway
            .post("/v1/chat/completions", &request())
            .await
            .status(),
        200
    );

    upstream.push(calling(&[
        ("call_1", "run_sql", r#"{"q":"select 1"}"#),
        ("call_2", "run_sql", r#"{"q":"drop table users"}"#),
    ]));
    let (status, body) = answer_of(gateway.post("/v1/chat/completions", &request()).await).await;
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
    upstream.push(calling(&[("call_9", "run_sql", r#"{"q":"DROP TABLE x"}"#)]));
    let typed: async_openai::types::chat::CreateChatCompletionRequest =
        serde_json::from_value(request()).expect("a valid request");
    let refused = gateway.openai().chat().create(typed).await;
    assert!(
        matches!(&refused, Err(async_openai::error::OpenAIError::ApiError(api)) if api.api_error.message.contains("DROP TABLE")),
        "{refused:?}"
    );

    let text = gateway.metrics_text().await;
    for expected in [
        "toolgate_service_calls_total{service=\"argcheck\",outcome=\"allow\"} 1",
        "toolgate_service_calls_total{service=\"argcheck\",outcome=\"deny\"} 2",
        "toolgate_service_latency_seconds_count{service=\"argcheck\"} 3",
        "toolgate_service_breaker_state{service=\"argcheck\"} 0",
    ] {
        assert!(text.contains(expected), "{expected} in\n{text}");
    }
}

#[tokio::test]
async fn a_streamed_answer_is_checked_by_the_service_before_its_calls_are_released() {
    let upstream = ScriptedUpstream::start().await;
    let validator = Validator::start().await;
    let config = format!(
        "{}{}",
        service("argcheck", &validator.url, ARGCHECK_PARAMS),
        route(
            "/v1",
            &instance(
                "",
                "service = \"argcheck\"\nconfig = { deny_substrings = [\"drop table\"] }"
            ),
        ),
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    let mut streamed = request();
    streamed["stream"] = json!(true);

    upstream.push(Reply::sse_events(&chat_stream(
        &[("call_1", "run_sql", r#"{"q":"DROP TABLE users"}"#)],
        None,
    )));
    let (status, body) = answer_of(gateway.post("/v1/chat/completions", &streamed).await).await;
    assert_eq!(status, 403, "nothing was sent yet, so a real 403: {body}");
    assert_eq!(body["error"]["code"], "denied_substring");
    assert_eq!(body["error"]["violations"][0]["tool_call_id"], "call_1");

    upstream.push(Reply::sse_events(&chat_stream(
        &[("call_1", "run_sql", r#"{"q":"select 1"}"#)],
        Some("Running it."),
    )));
    let response = gateway.post("/v1/chat/completions", &streamed).await;
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
    let upstream = ScriptedUpstream::start().await;
    let validator = Validator::start().await;
    let config = format!(
        "{}{}",
        service("argcheck", &validator.url, ARGCHECK_PARAMS),
        route(
            "/v1",
            &instance(
                "",
                "service = \"argcheck\"\nstages = [\"pre_request\"]\n\
                 config = { deny_substrings = [], remove_tools = [\"drop_db\"] }"
            ),
        ),
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    upstream.push(calling(&[("call_1", "run_sql", "{}")]));
    assert_eq!(
        gateway
            .post("/v1/chat/completions", &request())
            .await
            .status(),
        200
    );
    let forwarded = upstream.last_request().expect("forwarded").json();
    let names: Vec<&str> = forwarded["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["function"]["name"].as_str())
        .collect();
    assert_eq!(names, ["run_sql", "run_shell"]);
    assert_eq!(
        forwarded["messages"],
        request()["messages"],
        "the rest is untouched"
    );
    assert!(
        gateway
            .metrics_text()
            .await
            .contains("toolgate_service_calls_total{service=\"argcheck\",outcome=\"modify\"} 1")
    );
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
    let (status, body) = answer_of(
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

    upstream.push(calling(&[("call_1", "drop_db", "{}")]));
    let response = gateway
        .post("/observed/v1/chat/completions", &request())
        .await;
    assert_eq!(response.status(), 200);
    let request_id = response
        .headers()
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .expect("a request id")
        .to_owned();
    let line = gateway.audit_line(&request_id).await;
    assert_eq!(line["verdict"], "observed", "{line}");
    assert_eq!(checker.request_count(), 2);
}

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
    let sql_with_shell_words = [("call_1", "run_sql", r#"{"q":"rm -rf is not SQL"}"#)];
    let shell_with_sql_words = [("call_1", "run_shell", r#"{"q":"echo drop table"}"#)];

    // Each instance sees only its tools, with its own substrings.
    for calls in [&sql_with_shell_words, &shell_with_sql_words] {
        upstream.push(calling(calls));
        let (status, body) = answer_of(
            gateway
                .post("/guarded/v1/chat/completions", &request())
                .await,
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    upstream.push(calling(&[("call_1", "run_shell", r#"{"q":"rm -rf /"}"#)]));
    let (status, body) = answer_of(
        gateway
            .post("/guarded/v1/chat/completions", &request())
            .await,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["violations"][0]["tool"], "run_shell");

    // The same calls on a route whose instance denies both.
    for calls in [&sql_with_shell_words, &shell_with_sql_words] {
        upstream.push(calling(calls));
        let (status, body) = answer_of(
            gateway
                .post("/strict/v1/chat/completions", &request())
                .await,
        )
        .await;
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

/// Loads `body` after the usual head; the errors as text.
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

    upstream.push(calling(&[(
        "call_1",
        "Run_Sql",
        r#"{"q":"drop table users"}"#,
    )]));
    let (status, answer) = answer_of(gateway.post("/v1/chat/completions", &body).await).await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["error"]["code"], "denied_substring");
    assert_eq!(answer["error"]["violations"][0]["tool"], "Run_Sql");

    let forwarded = upstream.last_request().expect("forwarded").json();
    let names: Vec<&str> = forwarded["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["function"]["name"].as_str())
        .collect();
    assert_eq!(names, ["run_sql", "run_shell"], "`Drop_DB ` is drop_db");

    // Out of scope stays out of scope: the same words in another tool's call pass.
    upstream.push(calling(&[(
        "call_2",
        "run_shell",
        r#"{"q":"drop table users"}"#,
    )]));
    let (status, answer) = answer_of(gateway.post("/v1/chat/completions", &body).await).await;
    assert_eq!(status, 200, "{answer}");
}

fn load_errors(body: &str) -> String {
    let text = common::config_text("http://127.0.0.1:1", &common::temp_audit_path(), body);
    match Config::from_toml(&text, "s.toml", &Runtime::new().plugins) {
        Ok(_) => panic!("the config loaded:\n{text}"),
        Err(errors) => errors.to_string(),
    }
}

#[test]
fn malformed_descriptors_and_instances_are_located_errors() {
    let service_block = service("argcheck", "http://127.0.0.1:8181/v", ARGCHECK_PARAMS);
    let head_lines = common::config_text("http://127.0.0.1:1", &common::temp_audit_path(), "")
        .lines()
        .count();
    let at = |line: usize| format!("s.toml:{}:", head_lines + line);

    let cases = [
        (
            instance("", "config = { deny_substrings = [] }"),
            "routes[0].plugins[0].settings: missing field `service`",
        ),
        (
            instance("", "service = \"nope\""),
            "routes[0].plugins[0].settings.service: unknown service 'nope' (defined in [services.NAME]: argcheck)",
        ),
        (
            instance("", "service = \"argcheck\"\nconfig = { remove_tools = [] }"),
            "routes[0].plugins[0].settings.config: service 'argcheck' requires config param 'deny_substrings'",
        ),
        (
            instance(
                "",
                "service = \"argcheck\"\nconfig = { deny_substrings = [], colour = 1 }",
            ),
            "routes[0].plugins[0].settings.config.colour: service 'argcheck' has no config param 'colour'",
        ),
        (
            format!(
                "{}{}",
                instance(
                    "",
                    "service = \"argcheck\"\nconfig = { deny_substrings = [] }"
                ),
                instance(
                    "",
                    "service = \"argcheck\"\nconfig = { deny_substrings = [] }"
                )
            ),
            "routes[0].plugins[1].name: plugin 'service' appears twice in this list: give each entry a distinct `id`",
        ),
    ];
    for (plugins, expected) in cases {
        let errors = load_errors(&format!("{service_block}{}", route("/v1", &plugins)));
        assert!(errors.contains(expected), "{expected}\nin\n{errors}");
        assert!(errors.starts_with("s.toml:"), "located: {errors}");
    }

    let errors = load_errors(
        "[services.bad]\nurl = \"localhost:8181/validate\"\ntimeout_ms = 0\n\
         config-params = [{ name = \"a\" }, { name = \"a\" }]\n\
         headers = { \"bad header\" = \"x\" }\n",
    );
    for expected in [
        format!(
            "{}1: services.bad.url: 'localhost:8181/validate' is not an absolute http(s) URL",
            at(2)
        ),
        format!(
            "{}1: services.bad.timeout_ms: must be greater than 0",
            at(3)
        ),
        "services.bad.config-params[1]: config param 'a' is declared twice".to_owned(),
        "services.bad.headers.bad header: 'bad header' is not a valid header name".to_owned(),
    ] {
        assert!(errors.contains(&expected), "{expected}\nin\n{errors}");
    }
    let errors = load_errors("[services.x]\nurl = \"http://h\"\ncolour = 1\n");
    assert!(errors.contains("unknown field `colour`"), "{errors}");
}

#[test]
fn toolgate_check_reports_each_malformed_descriptor_and_exits_2() {
    let path = common::temp_audit_path().with_extension("toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[upstreams.llm]\nurl = \"http://127.0.0.1:1\"\n\n\
             {}{}",
            service("argcheck", "ftp://x", ARGCHECK_PARAMS),
            route(
                "/v1",
                &format!(
                    "{}{}",
                    instance("id = \"a\"", "service = \"nope\""),
                    instance("id = \"b\"", "service = \"argcheck\"")
                )
            ),
        ),
    )
    .expect("writes a temp config");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["check", "--config", path.to_str().expect("utf-8 path")])
        .output()
        .expect("the binary runs");
    let _ = std::fs::remove_file(&path);
    assert_eq!(output.status.code(), Some(2));
    let errors = String::from_utf8_lossy(&output.stderr);
    let file = path.display().to_string();
    for expected in [
        format!("{file}:8:1: services.argcheck.url: 'ftp://x' is not an absolute http(s) URL"),
        format!("{file}:17:1: routes[0].plugins[0].settings.service: unknown service 'nope'"),
        format!(
            "{file}:21:17: routes[0].plugins[1].settings.config: service 'argcheck' requires config param 'deny_substrings'"
        ),
    ] {
        assert!(errors.contains(&expected), "{expected}\nin\n{errors}");
    }
}

#[test]
fn the_commented_service_example_in_gateway_toml_loads_once_uncommented() {
    let shipped = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/gateway.toml"))
        .expect("gateway.toml");
    let mut uncommenting = false;
    let mut lines = Vec::new();
    for line in shipped.lines() {
        if line.starts_with("# [services.argcheck]")
            || line.starts_with("# [[routes.plugins]]") && line.contains("validator service")
        {
            uncommenting = true;
        }
        if uncommenting && !line.starts_with("# ") {
            uncommenting = false;
        }
        lines.push(if uncommenting { &line[2..] } else { line });
    }
    let text = lines.join("\n");
    assert!(
        text.contains("\n[services.argcheck]\n"),
        "the example is in gateway.toml"
    );
    assert!(text.contains("\nname = \"service\"\n"), "with its instance");
    if let Err(errors) = Config::from_toml(&text, "gateway.toml", &Runtime::new().plugins) {
        panic!("the uncommented example does not load:\n{errors}");
    }
}
