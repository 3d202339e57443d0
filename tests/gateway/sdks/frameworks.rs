//! docs/frameworks.md as a user runs it: every Python block marked `<!-- checked: NAME -->` is
//! run as written, with only its base URL pointed at a guarded gateway whose upstream makes a
//! call the snippet never declared, and must print the blocked call's violation. So the guide's
//! exception classes and the place it says the violations are cannot drift from what the SDKs do.

use std::collections::BTreeMap;

use crate::common::{GUARDED_V1, Reply, ScriptedUpstream, TestGateway, fixture};

use super::sdks_installed;

/// The guide's address for toolgate, replaced by the test gateway's.
const DOCS_GATEWAY: &str = "http://127.0.0.1:8080";

/// What the upstream answers for a checked block, and what its output must contain.
fn scenario(name: &str) -> (Reply, &'static [&'static str]) {
    match name {
        "openai-blocked" => (
            Reply::chat_calls(&[("call_1", "delete_user", "{}")]),
            &["blocked: undeclared_tool", "membership delete_user"],
        ),
        "openai-stream-blocked" => (
            Reply::sse_events(&crate::common::upstream::chat_stream(
                &[("call_1", "delete_user", "{}")],
                Some("Let me check."),
            )),
            &[
                "Let me check.",
                "blocked mid-stream: undeclared_tool delete_user",
            ],
        ),
        "anthropic-blocked" => (
            Reply::raw(
                200,
                "application/json",
                fixture("anthropic/tool_use_allowed.response.json")
                    .replace("\"get_weather\"", "\"delete_user\""),
            ),
            &["blocked: undeclared_tool", "membership delete_user"],
        ),
        "agents-blocked" => (
            Reply::raw(
                200,
                "application/json",
                fixture("responses/undeclared_tool.response.json"),
            ),
            &["blocked: ['delete_user']"],
        ),
        other => panic!("docs/frameworks.md checks {other:?}, which this test does not know"),
    }
}

/// The `<!-- checked: NAME -->` Python blocks of the guide, by name.
fn checked_blocks() -> BTreeMap<String, String> {
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/frameworks.md"))
        .expect("docs/frameworks.md is readable");
    let mut blocks = BTreeMap::new();
    for marked in guide.split("<!-- checked: ").skip(1) {
        let (name, rest) = marked.split_once(" -->\n").expect("a closed marker");
        let code = rest
            .strip_prefix("```python\n")
            .and_then(|code| code.split_once("```"))
            .map(|(code, _)| code.to_owned())
            .unwrap_or_else(|| panic!("{name}: the marker is followed by a python block"));
        assert!(
            blocks.insert(name.to_owned(), code).is_none(),
            "{name} is checked twice"
        );
    }
    blocks
}

#[tokio::test]
async fn the_python_snippets_of_the_frameworks_guide_print_the_violations() {
    if !sdks_installed() {
        return;
    }
    let blocks = checked_blocks();
    assert!(
        blocks.len() >= 4,
        "the guide checks its snippets: {blocks:?}"
    );
    for (name, code) in blocks {
        let (reply, expected) = scenario(&name);
        let upstream = ScriptedUpstream::start().await;
        upstream.set_default(reply);
        let gateway = TestGateway::start(&upstream, GUARDED_V1).await;
        assert!(
            code.contains(DOCS_GATEWAY),
            "{name}: the snippet names toolgate's address"
        );
        let code = code.replace(DOCS_GATEWAY, &gateway.url());
        let output = tokio::process::Command::new("python3")
            .args(["-c", &code])
            .env("OPENAI_API_KEY", "sk-client-key")
            .env("ANTHROPIC_API_KEY", "sk-client-key")
            .env("OPENAI_AGENTS_DISABLE_TRACING", "1")
            .kill_on_drop(true)
            .output()
            .await
            .expect("python3 runs");
        let printed = String::from_utf8_lossy(&output.stdout);
        let errors = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "{name} failed:\n{printed}\n{errors}"
        );
        for needle in expected {
            assert!(
                printed.contains(needle),
                "{name}: {needle:?} not in its output:\n{printed}\n{errors}"
            );
        }
        assert!(
            upstream.request_count() >= 1,
            "{name}: the snippet went through the gateway"
        );
        gateway.stop().await;
    }
}
