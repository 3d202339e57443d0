//! What is checked on an MCP call, both ways: arguments against the tool's input schema before
//! forwarding, results against its output schema (and garbage that is no answer) before the
//! client sees them, and the route's plugins — one a user could write, knowing nothing of MCP —
//! governing MCP tools by their qualified names, with the audit line and metrics of a block.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_plugin::{
    BuildContext, Check, Plugin, PluginFactory, Rejection, RequestEdit, RequestExchange,
    ResponseEdit, ResponseExchange, SettingsError, Verdict, Violation, async_trait,
};

use super::{
    call, config_with_own_ops_policy, connect, refusal_data, servers_dir, start_config,
    start_standard, start_standard_with_plugin, temp_dir, tool_names,
};

#[tokio::test]
async fn arguments_are_checked_against_the_input_schema_before_forwarding() {
    let Some((_files, _upstream, gateway)) = start_standard("schema").await else {
        return;
    };
    let dev = connect(&gateway, "sk-dev", None).await;

    let error = call(&dev, "everything__get-sum", json!({"a": "two"}))
        .await
        .expect_err("a is a number and b is required");
    assert_eq!(error.code.0, -32001);
    let violations = refusal_data(&error)["violations"]
        .as_array()
        .expect("violations")
        .clone();
    let paths: Vec<&str> = violations
        .iter()
        .map(|violation| violation["instance_path"].as_str().unwrap_or_default())
        .collect();
    assert!(
        paths.contains(&"/a") && paths.contains(&"/b"),
        "{violations:?}"
    );
    assert!(
        violations
            .iter()
            .all(|violation| violation["check"] == "schema")
    );
    assert_eq!(violations[0]["tool"], "everything__get-sum");

    let error = call(
        &dev,
        "everything__get-structured-content",
        json!({"location": "Atlantis"}),
    )
    .await
    .expect_err("not one of the enum");
    assert_eq!(refusal_data(&error)["violations"][0]["keyword"], "enum");
}

#[tokio::test]
async fn results_that_break_their_output_schema_or_are_garbage_are_errors() {
    let Some(servers) = servers_dir() else { return };
    let files = temp_dir("liar");
    let liar = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/mcp/liar.js");
    let extra = format!(
        r#"
[mcp_servers.liar]
command = "node"
args = ["{}"]
call_timeout_ms = 1500

[mcp.agent_policies.ops]
allowed_servers = ["liar"]

[mcp.default_policy]
allow_unknown_tools = true
"#,
        liar.display()
    );
    let config = config_with_own_ops_policy(&servers, &files, &extra);
    let (_upstream, gateway) = start_config(&config, &["liar", "everything"]).await;
    let ops = connect(&gateway, "sk-ops", None).await;

    let error = call(&ops, "liar__lie", json!({}))
        .await
        .expect_err("the result breaks the outputSchema");
    assert_eq!(error.code.0, -32004, "{error:?}");
    let data = refusal_data(&error);
    assert_eq!(data["violations"][0]["code"], "output_schema_violation");
    assert_eq!(data["violations"][0]["instance_path"], "/n");
    assert!(
        error.message.starts_with("the tool's result was withheld"),
        "{}",
        error.message
    );

    let error = call(&ops, "liar__babble", json!({}))
        .await
        .expect_err("garbage is no answer");
    // rmcp skips a line that is not JSON-RPC, so the call runs into its timeout.
    assert_eq!(error.code.0, -32003, "{error:?}");
    // The proxy is still there for everyone else.
    let dev = connect(&gateway, "sk-dev", None).await;
    call(&dev, "everything__echo", json!({"message": "fine"}))
        .await
        .expect("unaffected");
}

/// A plugin a user could write: hides `everything__echo` from every list, and blocks a sum
/// whose first term is over 100 — knowing nothing about MCP.
struct LimitSums;

#[async_trait]
impl Plugin for LimitSums {
    async fn pre_request(&self, _exchange: &RequestExchange<'_>) -> Verdict<RequestEdit> {
        Verdict::Modify(vec![RequestEdit::RemoveDeclaredTools(vec![
            "everything__echo".into(),
        ])])
    }
    async fn pre_response(&self, exchange: &ResponseExchange<'_>) -> Verdict<ResponseEdit> {
        let Some(response) = exchange.response.as_parsed() else {
            return Verdict::Continue;
        };
        let violations: Vec<Violation> = response
            .calls
            .iter()
            .filter(|call| call.name == "everything__get-sum")
            .filter(|call| {
                serde_json::from_str::<Value>(&call.arguments)
                    .ok()
                    .and_then(|arguments| arguments["a"].as_f64())
                    .is_some_and(|a| a > 100.0)
            })
            .map(|call| {
                Violation::on_call(Check::Rule, "sum_too_large", call, "a must be at most 100")
            })
            .collect();
        if violations.is_empty() {
            Verdict::Continue
        } else {
            Verdict::Block(Rejection::forbidden(violations))
        }
    }
}

struct LimitSumsFactory;

impl PluginFactory for LimitSumsFactory {
    fn name(&self) -> &'static str {
        "limit_sums"
    }
    fn build(
        &self,
        _settings: &Value,
        _context: &BuildContext,
    ) -> Result<Arc<dyn Plugin>, SettingsError> {
        Ok(Arc::new(LimitSums))
    }
}

#[tokio::test]
async fn the_route_plugins_govern_mcp_tools_by_qualified_name() {
    let extra = "[[routes.plugins]]\nname = \"limit_sums\"\n[[routes.plugins]]\nname = \"tool_selection\"\n";
    let started = start_standard_with_plugin("plugins", extra, Arc::new(LimitSumsFactory)).await;
    let Some((_files, _upstream, gateway)) = started else {
        return;
    };
    let dev = connect(&gateway, "sk-dev", None).await;

    let names = tool_names(&dev).await;
    assert!(!names.contains(&"everything__echo".to_owned()), "{names:?}");
    assert!(
        names.contains(&"everything__get-sum".to_owned()),
        "{names:?}"
    );

    let error = call(&dev, "everything__echo", json!({"message": "hi"}))
        .await
        .expect_err("hidden by a plugin, so not callable");
    assert_eq!(refusal_data(&error)["code"], "tool_not_permitted");

    call(&dev, "everything__get-sum", json!({"a": 1, "b": 2}))
        .await
        .expect("a small sum");
    let error = call(&dev, "everything__get-sum", json!({"a": 1000, "b": 2}))
        .await
        .expect_err("the plugin's rule");
    assert_eq!(error.code.0, -32001);
    let data = refusal_data(&error);
    assert_eq!(data["violations"][0]["check"], "rule");
    assert_eq!(data["violations"][0]["code"], "sum_too_large");

    // The audit line of the refused call names the tool, the server and the verdict.
    let request_id = data["request_id"].as_str().expect("request id").to_owned();
    let line = gateway.audit_line(&request_id).await;
    let line = if line["mcp"]["method"] == "tools/call" {
        line
    } else {
        gateway
            .audit_lines()
            .into_iter()
            .find(|line| line["request_id"] == request_id && line["mcp"]["method"] == "tools/call")
            .expect("a tools/call line")
    };
    assert_eq!(line["verdict"], "blocked");
    assert_eq!(line["tenant"], "dev");
    assert_eq!(line["mcp"]["server"], "everything");
    assert_eq!(line["calls"][0]["name"], "everything__get-sum");
    assert_eq!(line["violations"][0]["code"], "sum_too_large");
    gateway
        .assert_metrics_contain(&[
            r#"toolgate_mcp_calls_total{route="/mcp",server="everything",outcome="blocked"} 2"#,
        ])
        .await;
}

/// A fault while a call is checked (a plugin's panic here) answers the caller at once with
/// JSON-RPC's internal error, not forwarded and not left waiting on a session whose task died;
/// the session and the proxy go on serving.
#[tokio::test]
async fn a_panic_while_checking_a_call_answers_the_caller_with_an_internal_error() {
    use crate::common::faulty::PanicsOnCallFactory;

    let extra = "[[routes.plugins]]\nname = \"panics_on_call\"\n\
        [routes.plugins.settings]\ntool = \"everything__echo\"\n";
    let started = start_standard_with_plugin("panics", extra, Arc::new(PanicsOnCallFactory)).await;
    let Some((_files, _upstream, gateway)) = started else {
        return;
    };
    let dev = connect(&gateway, "sk-dev", None).await;

    let answered = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        call(&dev, "everything__echo", json!({"message": "hi"})),
    )
    .await;
    let Ok(answered) = answered else {
        panic!("the caller was left waiting");
    };
    let error = answered.expect_err("the call could not be checked");
    assert_eq!(error.code.0, -32603, "{error:?}");
    assert_eq!(refusal_data(&error)["code"], "internal_error");
    let request_id = refusal_data(&error)["request_id"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no request id: {error:?}"));
    // The call is audited and counted as failed, though the exchange that would have recorded
    // it is what panicked.
    let line = gateway.audit_line(&request_id).await;
    assert_eq!(line["verdict"], "error", "{line}");
    assert_eq!(line["mcp"]["method"], "tools/call", "{line}");
    assert_eq!(line["mcp"]["error_code"], -32603, "{line}");
    assert_eq!(line["calls"][0]["name"], "everything__echo", "{line}");
    gateway
        .assert_metrics_contain(&[
            r#"toolgate_mcp_calls_total{route="/mcp",server="",outcome="failed"} 1"#,
        ])
        .await;

    call(&dev, "everything__get-sum", json!({"a": 1, "b": 2}))
        .await
        .expect("the same session goes on");
}
