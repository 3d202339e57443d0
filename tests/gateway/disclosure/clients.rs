//! Real agent loops through disclosure: the OpenAI Agents SDK (Python, `tests/sdk/
//! disclosure_agent.py`) and the Vercel AI SDK (Node, `tests/sdk/disclosure_vercel.mjs`) each
//! declare get_weather and 110 generated tools on a route with `tool_disclosure`. The scripted
//! model first loads get_weather, then calls it, then answers; the client runs get_weather, never
//! sees the discovery call, and its run completes, while the upstream was shown only the
//! discovery tools at first and get_weather in full once it was loaded.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{DISCOVERY, LOAD_WEATHER, WEATHER, disclosed_route, filler, sent_tool_names};
use crate::common::upstream::RecordedRequest;
use crate::common::{Reply, ScriptedUpstream, TestGateway};

/// How many generated tools each client declares besides get_weather.
const FILLERS: usize = 110;

/// The model's final answer.
const FINAL: &str = "It is sunny in Paris.";

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

/// Where `.ci/frameworks.sh` installs the Vercel AI SDK, when it is there.
fn vercel_ai_sdk() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/frameworks");
    let missing: Vec<&str> = ["ai", "@ai-sdk/openai"]
        .into_iter()
        .filter(|package| {
            !dir.join("node_modules")
                .join(package)
                .join("package.json")
                .exists()
        })
        .collect();
    if missing.is_empty() {
        return Some(dir);
    }
    crate::common::skip_for_missing(
        &format!("the Node packages {missing:?} in {}", dir.display()),
        "run .ci/frameworks.sh",
    );
    None
}

/// A gateway with disclosure in front of an upstream that loads get_weather, calls it, then
/// answers [`FINAL`].
async fn scripted() -> (ScriptedUpstream, TestGateway) {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &disclosed_route("")).await;
    upstream.push(Reply::chat_calls(&[LOAD_WEATHER]));
    upstream.push(Reply::chat_calls(&[WEATHER]));
    upstream.push(Reply::chat_text(FINAL));
    (upstream, gateway)
}

/// Runs a client script to its end; the one JSON line it printed.
async fn run_client(mut command: tokio::process::Command, which: &str) -> Value {
    let output = command
        .kill_on_drop(true)
        .output()
        .await
        .unwrap_or_else(|error| panic!("{which} does not start: {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{which} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|error| panic!("{which} prints one JSON line ({error}):\n{stdout}"))
}

/// What the client saw: the final text, get_weather run once on Paris, and no discovery call,
/// neither run nor among the run's calls.
fn assert_the_client_completed(seen: &Value) {
    assert_eq!(seen["error"], Value::Null, "{seen}");
    assert_eq!(
        seen["declared"],
        FILLERS + 1,
        "the client declared them all: {seen}"
    );
    assert_eq!(seen["output"], FINAL, "{seen}");
    let ran = seen["ran"].as_array().cloned().unwrap_or_default();
    assert_eq!(ran.len(), 1, "the client ran get_weather only: {seen}");
    assert_eq!(ran[0]["name"], "get_weather", "{seen}");
    assert_eq!(ran[0]["city"], "Paris", "{seen}");
    assert_eq!(
        seen["calls"],
        serde_json::json!(["get_weather"]),
        "the discovery call never reached the client: {seen}"
    );
}

/// What the upstream was sent: the index and only the discovery tools first; get_weather in
/// full after the gateway answered the load; and the client's own result on the third request.
fn assert_the_upstream_saw_disclosure(requests: &[RecordedRequest]) {
    assert_eq!(requests.len(), 3, "a discovery round and the client's turn");
    let first = requests[0].json();
    assert_eq!(
        sent_tool_names(&first),
        DISCOVERY,
        "no declared definition at first"
    );
    let first_text = requests[0].text();
    assert!(
        first_text.contains("- get_weather: Reports the weather of a city."),
        "the index names get_weather: {first_text}"
    );
    assert!(
        first_text.contains(&format!(
            "- {}: Does task number {FILLERS}.",
            filler(FILLERS)
        )),
        "the index names the last generated tool: {first_text}"
    );

    let second = requests[1].json();
    assert_eq!(
        sent_tool_names(&second),
        [
            "get_weather",
            "list_tools",
            "load_tool",
            "load_tool_resource"
        ],
        "the loaded tool is declared in full, the others not: {second}"
    );
    let weather = &second["tools"][0]["function"];
    assert_eq!(
        weather["parameters"]["properties"]["city"]["type"], "string",
        "{weather}"
    );
    assert_eq!(
        weather["parameters"]["required"],
        serde_json::json!(["city"]),
        "{weather}"
    );
    let second_text = requests[1].text();
    assert!(
        second_text.contains("\"call_load\""),
        "the gateway sent the load's round: {second_text}"
    );

    let third = requests[2].text();
    assert!(
        third.contains("Sunny in Paris."),
        "the client sent its tool's result: {third}"
    );
    assert!(
        !third.contains("call_load"),
        "the client's history has no discovery call: {third}"
    );
    assert_eq!(
        sent_tool_names(&requests[2].json())[0],
        "get_weather",
        "the history's call counts as loaded"
    );
}

#[tokio::test]
async fn the_openai_agents_sdk_completes_a_task_with_a_hundred_tools_disclosed() {
    if !agents_sdk_installed() {
        return;
    }
    let (upstream, gateway) = scripted().await;
    let mut command = tokio::process::Command::new("python3");
    command
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/sdk/disclosure_agent.py"
        ))
        .arg(gateway.url())
        .arg(FILLERS.to_string());
    let seen = run_client(command, "tests/sdk/disclosure_agent.py").await;
    assert_the_client_completed(&seen);
    assert_the_upstream_saw_disclosure(&upstream.requests());
}

#[tokio::test]
async fn the_vercel_ai_sdk_completes_a_task_with_a_hundred_tools_disclosed() {
    let Some(packages) = vercel_ai_sdk() else {
        return;
    };
    let (upstream, gateway) = scripted().await;
    let script = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/sdk/disclosure_vercel.mjs"
    ))
    .expect("tests/sdk/disclosure_vercel.mjs is readable");
    // An ES module resolving its imports from the installed node_modules, as frameworks.rs
    // runs the guide's snippets.
    let mut command = tokio::process::Command::new("node");
    command
        .args(["--input-type=module", "-e", &script])
        .arg(gateway.url())
        .arg(FILLERS.to_string())
        .current_dir(&packages);
    let seen = run_client(command, "tests/sdk/disclosure_vercel.mjs").await;
    assert_the_client_completed(&seen);
    assert_eq!(
        seen["tool_errors"],
        serde_json::json!([]),
        "no call of a tool the SDK does not know: {seen}"
    );
    assert_the_upstream_saw_disclosure(&upstream.requests());
}
