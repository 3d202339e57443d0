//! A budget's 429 as the official SDKs read it: a window that ends later than a client can
//! usefully wait carries `x-should-retry: false`, and the OpenAI and Anthropic Python SDKs
//! raise at once instead of sleeping and retrying into the same 429; a short window keeps the
//! SDKs' own retries.

use crate::common::{Reply, ScriptedUpstream, TestGateway};

use super::sdks_installed;

/// A chat route whose `pay` budget allows `limit` proposed calls per `window`.
fn budget(limit: u32, window: &str) -> String {
    format!(
        "[[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_budget\"\n[routes.plugins.settings]\ncount = \"proposed\"\n\
         [[routes.plugins.settings.budgets]]\ntools = \"pay\"\nlimits = [\"{limit}/{window}\"]\n"
    )
}

/// Two `chat.completions.create` in a row with the OpenAI Python SDK and its default retries
/// (2); prints, for each, "passed" or the exception's class and status. Budget windows are
/// periods of the epoch clock, so the two calls start just after a period begins (`WINDOW`
/// seconds): a first call counted in one period and a second asked in the next would pass
/// without the 429 the test is about.
const CALLS: &str = r#"
import os, time, openai
client = openai.OpenAI(base_url=os.environ["BASE"], api_key="sk-test")
tools = [{"type": "function", "function": {"name": "pay", "parameters": {"type": "object"}}}]
window = float(os.environ["WINDOW"])
time.sleep(window - time.time() % window + 0.05)
for _ in range(2):
    try:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "pay"}], tools=tools)
        print("passed")
    except openai.APIStatusError as error:
        print(type(error).__name__, error.status_code)
"#;

/// What the two calls printed, one line each.
async fn sdk_calls(gateway: &TestGateway, window_seconds: u64) -> String {
    let output = tokio::process::Command::new("python3")
        .args(["-c", CALLS])
        .env("BASE", format!("{}/v1", gateway.url()))
        .env("WINDOW", window_seconds.to_string())
        .output()
        .await
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[tokio::test]
async fn a_spent_budget_whose_window_ends_late_is_not_retried_by_the_sdk() {
    if !sdks_installed() {
        return;
    }
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::chat_calls(&[("call_1", "pay", "{}")]));
    let gateway = TestGateway::start(&upstream, &budget(1, "30d")).await;
    // Thirty days are not waited for: any second aligns the calls well enough.
    assert_eq!(sdk_calls(&gateway, 1).await, "passed\nRateLimitError 429");
    assert_eq!(
        upstream.request_count(),
        2,
        "x-should-retry: false: the second call asked once, without the SDK's two retries"
    );
}

#[tokio::test]
async fn a_short_window_keeps_the_sdks_own_retries() {
    if !sdks_installed() {
        return;
    }
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::chat_calls(&[("call_1", "pay", "{}")]));
    let short = TestGateway::start(&upstream, &budget(1, "2s")).await;
    // Spent for two seconds: the SDK waits the `retry-after` out and its retry passes.
    assert_eq!(sdk_calls(&short, 2).await, "passed\npassed");
    assert!(
        upstream.request_count() >= 3,
        "the SDK retried the second call"
    );
}
