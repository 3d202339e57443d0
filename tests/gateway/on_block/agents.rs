//! A real agent loop through toolgate: the OpenAI Agents SDK (`openai-agents` from PyPI,
//! installed by `.ci/test`) runs `tests/sdk/agent.py` against a gateway whose tool_selection
//! retries blocks. The model first calls a tool the agent never declared; the agent never sees
//! it, runs the call the model makes after the feedback, and its run completes. With
//! `on_block = "message"` the run completes too, on the message; without `on_block` it is
//! lost on the 403 (the SDK raises `PermissionDeniedError`).

use serde_json::Value;

use super::{BAD, GOOD, guarded_with};
use crate::common::{Reply, ScriptedUpstream, TestGateway};

/// Whether the Agents SDK imports; missing, the test fails unless `TOOLGATE_SKIP_SDK_TESTS=1`.
fn agents_sdk_installed() -> bool {
    let imports = std::process::Command::new("python3")
        .args(["-c", "import agents"])
        .output()
        .is_ok_and(|output| output.status.success());
    imports
        || !crate::common::skip_for_missing(
            "the OpenAI Agents SDK (`import agents`)",
            "run .ci/test, which pip installs openai-agents",
        )
}

/// Runs the agent once against `gateway`; what its run ended with.
async fn run_agent(gateway: &TestGateway) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/agent.py");
    let output = tokio::process::Command::new("python3")
        .arg(script)
        .arg(gateway.url())
        .kill_on_drop(true)
        .output()
        .await
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "tests/sdk/agent.py failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).expect("one JSON line")
}

#[tokio::test]
async fn an_agent_run_completes_after_a_blocked_call() {
    if !agents_sdk_installed() {
        return;
    }
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_with("on_block = \"retry\"")).await;
    upstream.push(Reply::chat_calls(&[BAD]));
    upstream.push(Reply::chat_calls(&[GOOD]));
    upstream.push(Reply::chat_text("It is sunny in Paris."));

    let seen = run_agent(&gateway).await;
    assert_eq!(seen["error"], Value::Null, "{seen}");
    assert_eq!(seen["output"], "It is sunny in Paris.");
    assert_eq!(
        seen["ran"][0]["city"], "Paris",
        "the agent ran the call that passed: {seen}"
    );
    assert_eq!(seen["ran"].as_array().map(Vec::len), Some(1));
    let requests = upstream.requests();
    assert_eq!(requests.len(), 3);
    let third = requests[2].text();
    assert!(
        third.contains("Sunny in Paris."),
        "the agent sent its tool's result: {third}"
    );
    assert!(
        !third.contains("delete_user"),
        "the agent never saw the blocked call"
    );
}

#[tokio::test]
async fn an_agent_run_completes_on_the_message() {
    if !agents_sdk_installed() {
        return;
    }
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_with("on_block = \"message\"")).await;
    upstream.push(Reply::chat_calls(&[BAD]));

    let seen = run_agent(&gateway).await;
    assert_eq!(seen["error"], Value::Null, "{seen}");
    let output = seen["output"].as_str().unwrap_or_default();
    assert!(
        output.contains("'delete_user' is not a declared tool"),
        "{seen}"
    );
    assert_eq!(seen["ran"], Value::Array(vec![]));
}

#[tokio::test]
async fn without_on_block_the_agent_run_is_lost_on_the_403() {
    if !agents_sdk_installed() {
        return;
    }
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_with("")).await;
    upstream.push(Reply::chat_calls(&[BAD]));

    let seen = run_agent(&gateway).await;
    assert_eq!(seen["error"]["class"], "PermissionDeniedError", "{seen}");
    assert_eq!(seen["output"], Value::Null);
    assert_eq!(seen["ran"], Value::Array(vec![]));
}
