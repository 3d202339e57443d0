//! The README's code as a newcomer runs it: every ```python block is either marked
//! `<!-- checked: NAME -->` and run here as written (python3 with the official SDK, against a
//! gateway in front of the scripted upstream), or marked `<!-- fragment: … -->` and said not to
//! run. The quick start must print the model's message when the call passes and each violation
//! when it is blocked.

use crate::common::{GUARDED_V1, Reply, ScriptedUpstream, TestGateway};

use super::sdks_installed;

/// The README's python blocks: `(marker, code)`, the marker the line before the block.
fn python_blocks() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md is readable");
    let mut blocks = Vec::new();
    let mut rest = readme.as_str();
    while let Some(at) = rest.find("```python\n") {
        let before = rest[..at]
            .trim_end()
            .lines()
            .last()
            .unwrap_or_default()
            .to_owned();
        let code_start = at + "```python\n".len();
        let Some(length) = rest[code_start..].find("```") else {
            panic!("an unclosed python block in README.md");
        };
        blocks.push((before, rest[code_start..code_start + length].to_owned()));
        rest = &rest[code_start + length + 3..];
    }
    blocks
}

/// Runs `code` with python3 against `gateway`; returns what it printed.
async fn run_python(code: &str, gateway: &TestGateway) -> String {
    let output = tokio::process::Command::new("python3")
        .arg("-c")
        .arg(code)
        .env("TOOLGATE_URL", format!("{}/v1", gateway.url()))
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .await
        .expect("python3 runs");
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "the README's snippet failed:\n{printed}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    printed
}

#[tokio::test]
async fn every_python_block_of_the_readme_runs_as_written_or_says_it_is_a_fragment() {
    if !sdks_installed() {
        return;
    }
    let blocks = python_blocks();
    let checked: Vec<&(String, String)> = blocks
        .iter()
        .filter(|(marker, _)| marker.starts_with("<!-- checked: "))
        .collect();
    for (marker, code) in &blocks {
        assert!(
            marker.starts_with("<!-- checked: ") || marker.starts_with("<!-- fragment: "),
            "a README python block neither runs nor says why not:\n{code}"
        );
    }
    let quickstart = checked
        .iter()
        .find(|(marker, _)| marker.contains("readme-quickstart"))
        .map(|(_, code)| code.as_str())
        .expect("the quick start is checked");

    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, GUARDED_V1).await;
    upstream.push(Reply::chat_calls(&[(
        "call_1",
        "get_weather",
        r#"{"city":"Paris"}"#,
    )]));
    let passed = run_python(quickstart, &gateway).await;
    assert!(passed.contains("get_weather"), "{passed}");
    upstream.push(Reply::chat_calls(&[("call_2", "delete_user", "{}")]));
    let blocked = run_python(quickstart, &gateway).await;
    assert!(
        blocked.contains("membership delete_user 'delete_user' is not a declared tool"),
        "{blocked}"
    );
}
