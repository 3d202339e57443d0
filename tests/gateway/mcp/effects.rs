//! What the route's plugins do to an MCP call takes effect where toolgate executes it: a
//! tool_arguments redaction is what the backend receives, and a tool_budget counting executed
//! calls counts each call the backend answered, exactly.

use serde_json::json;

use crate::common::TestGateway;

use super::{
    call, connect, refusal_data, servers_dir, standard_config, start_config, temp_dir, text_of,
};

#[tokio::test]
async fn a_redacted_argument_never_reaches_the_backend() {
    let Some(servers) = servers_dir() else { return };
    let files = temp_dir("redact");
    let extra = r#"
[[routes.plugins]]
name = "tool_arguments"
[[routes.plugins.settings.rules]]
name = "no-secrets"
tools = "everything__echo"
pointer = "/message"
deny = ["sk-live-"]
action = "redact"
replacement = "[REDACTED]"
"#;
    let (_upstream, gateway) =
        start_config(&standard_config(&servers, &files, extra), &["everything"]).await;
    let dev = connect(&gateway, "sk-dev", None).await;

    // server-everything's echo answers with what it received.
    let echo = call(
        &dev,
        "everything__echo",
        json!({"message": "key sk-live-123"}),
    )
    .await
    .expect("redacted, then forwarded");
    let text = text_of(&echo);
    assert!(text.contains("[REDACTED]"), "{text}");
    assert!(
        !text.contains("sk-live-"),
        "the secret reached the backend: {text}"
    );
    let plain = call(
        &dev,
        "everything__echo",
        json!({"message": "nothing to hide"}),
    )
    .await
    .expect("forwarded as sent");
    assert!(text_of(&plain).contains("nothing to hide"));
}

/// A gateway whose `everything__echo` has a budget of 3 counted `count`, with `dev` having
/// spent it: three calls answered, the fourth refused as over the budget. One call, one count.
async fn spend_a_budget_of_three(
    count: &str,
) -> Option<(super::TempDir, TestGateway, super::Client)> {
    let servers = servers_dir()?;
    let files = temp_dir(&format!("budget-{count}"));
    let extra = format!(
        "\n[[routes.plugins]]\nname = \"tool_budget\"\n[routes.plugins.settings]\n\
         count = \"{count}\"\n[[routes.plugins.settings.budgets]]\n\
         tools = \"everything__echo\"\nlimits = [\"3/hour\"]\n"
    );
    let (_upstream, gateway) =
        start_config(&standard_config(&servers, &files, &extra), &["everything"]).await;
    let dev = connect(&gateway, "sk-dev", None).await;
    for turn in 0..3 {
        call(
            &dev,
            "everything__echo",
            json!({"message": format!("call {turn}")}),
        )
        .await
        .unwrap_or_else(|error| {
            panic!("{count}: call {turn} of 3 is within the budget: {error:?}")
        });
    }
    let error = call(&dev, "everything__echo", json!({"message": "one too many"}))
        .await
        .expect_err("the fourth call is over a budget of 3");
    assert_eq!(error.code.0, -32001, "{error:?}");
    assert_eq!(
        refusal_data(&error)["code"],
        "tool_budget_exceeded",
        "{count}: {error:?}"
    );
    Some((files, gateway, dev))
}

#[tokio::test]
async fn executed_mcp_calls_use_up_a_budget_exactly() {
    let Some((_files, gateway, dev)) = spend_a_budget_of_three("executed").await else {
        return;
    };
    // Another tool is not covered; another tenant has a budget of its own.
    call(&dev, "everything__get-sum", json!({"a": 1, "b": 2}))
        .await
        .expect("not covered by the budget");
    let ops = connect(&gateway, "sk-ops", None).await;
    call(&ops, "everything__echo", json!({"message": "ops"}))
        .await
        .expect("ops has its own count");
}

#[tokio::test]
async fn a_proposed_budget_counts_each_call_once() {
    // The helper asserts it: three calls admitted, the fourth refused.
    spend_a_budget_of_three("proposed").await;
}
