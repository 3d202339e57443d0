//! docs/frameworks.md as a user runs it: every block marked `<!-- checked: NAME -->` (Python or
//! JavaScript) is run as written, with only its base URL pointed at a guarded gateway whose
//! upstream makes a call the snippet never declared, and must print the blocked call's violation
//! (or, where the gateway recovers from blocks, the completed run). The upstream's record of the
//! models it was asked for shows who a fallback asked. So the guide's exception classes, the
//! place it says the violations are, and its fallback advice cannot drift from what the SDKs do.
//!
//! The Python snippets need the packages `.ci/test` installs with pip, the Node ones the packages
//! `.ci/frameworks.sh` installs into `.ci/frameworks/`; missing, the tests fail unless the run
//! opted out ([`crate::common::skip_for_missing`]), which its closing line then counts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::upstream::chat_stream;
use crate::common::{GUARDED_V1, Reply, ScriptedUpstream, TestGateway, fixture};

use super::sdks_installed;

/// The guide's address for toolgate, replaced by the test gateway's.
const DOCS_GATEWAY: &str = "http://127.0.0.1:8080";

/// The model the snippets ask for, and the backup their fallbacks name.
const PRIMARY: &str = "gpt-4o-mini";
const BACKUP: &str = "gpt-4o";

/// The bad call every scenario's model makes: a tool no snippet declares.
const BAD: (&str, &str, &str) = ("call_bad", "delete_user", "{}");

/// The bad call's violation as the snippets print it: check, tool, message.
const VIOLATION: &str = "membership delete_user 'delete_user' is not a declared tool";

/// One run of a snippet: the gateway it talks to, what the upstream answers, and what must be
/// seen.
struct Run {
    /// The gateway's plugins and routes.
    gateway: String,
    /// The upstream's answers in order; the last one answers every later request too.
    replies: Vec<Reply>,
    /// Lines or parts of lines the snippet must print.
    printed: &'static [&'static str],
    /// The `model` of every request the upstream received, in order.
    asked: &'static [&'static str],
}

impl Run {
    fn blocked(reply: Reply, printed: &'static [&'static str]) -> Run {
        Run {
            gateway: GUARDED_V1.to_owned(),
            replies: vec![reply],
            printed,
            asked: &[PRIMARY],
        }
    }
}

/// The runs of a checked block, by its name in the guide.
fn runs(name: &str) -> Vec<Run> {
    match name {
        "openai-blocked" => vec![Run::blocked(
            Reply::chat_calls(&[BAD]),
            &["blocked: undeclared_tool", "membership delete_user"],
        )],
        "openai-stream-blocked" => vec![Run::blocked(
            text_then_bad_call(),
            &[
                "Let me check.",
                "blocked mid-stream: undeclared_tool delete_user",
            ],
        )],
        "anthropic-blocked" => vec![Run {
            asked: &["claude-sonnet-5-5"],
            ..Run::blocked(
                anthropic_bad_call(),
                &["blocked: undeclared_tool", "membership delete_user"],
            )
        }],
        "agents-blocked" => vec![Run::blocked(
            Reply::raw(
                200,
                "application/json",
                fixture("responses/undeclared_tool.response.json"),
            ),
            &["blocked: ['delete_user']"],
        )],
        "pydantic-ai-blocked" | "langchain-blocked" => {
            vec![Run::blocked(Reply::chat_calls(&[BAD]), &[VIOLATION])]
        }
        "pydantic-ai-fallback" => vec![Run {
            // By default the backup is asked after the 403; with `fallback_on` it is not.
            asked: &[PRIMARY, BACKUP, PRIMARY],
            ..Run::blocked(
                Reply::chat_calls(&[BAD]),
                &[
                    "default, both asked: [('gpt-4o-mini', 403), ('gpt-4o', 403)]",
                    "fallback_on, blocked: gpt-4o-mini delete_user",
                ],
            )
        }],
        "langchain-fallbacks" => vec![Run {
            asked: &[PRIMARY, BACKUP, PRIMARY],
            ..Run::blocked(
                Reply::chat_calls(&[BAD]),
                &[
                    "default, the backup asked too: delete_user",
                    "\nblocked: delete_user",
                ],
            )
        }],
        "openai-node-blocked" => vec![Run::blocked(
            Reply::chat_calls(&[BAD]),
            &["blocked: undeclared_tool", VIOLATION],
        )],
        "openai-node-stream-blocked" => vec![
            Run::blocked(
                text_then_bad_call(),
                &[
                    "Let me check.",
                    "blocked mid-stream: undeclared_tool delete_user",
                ],
            ),
            Run::blocked(only_a_bad_call_streamed(), &["\nblocked: delete_user"]),
        ],
        "anthropic-node-blocked" => vec![Run {
            asked: &["claude-sonnet-5-5"],
            ..Run::blocked(
                anthropic_bad_call(),
                &["blocked: undeclared_tool", VIOLATION],
            )
        }],
        "agents-js-blocked" => vec![
            Run::blocked(
                responses_answer(function_call(BAD)),
                &["blocked: [ 'delete_user' ]"],
            ),
            Run {
                // The run goes on with the call that passed, and the agent runs it.
                gateway: guarded_with_on_block("retry"),
                replies: vec![
                    responses_answer(function_call(BAD)),
                    responses_answer(function_call((
                        "call_good",
                        "get_weather",
                        r#"{"city":"Paris"}"#,
                    ))),
                    responses_answer(json!({
                        "id": "msg_1", "type": "message", "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": "It is sunny in Paris.",
                                     "annotations": []}]})),
                ],
                printed: &["completed: It is sunny in Paris."],
                asked: &[PRIMARY, PRIMARY, PRIMARY],
            },
            Run {
                gateway: guarded_with_on_block("message"),
                ..Run::blocked(
                    responses_answer(function_call(BAD)),
                    &[
                        "completed: toolgate blocked the tool call",
                        "'delete_user' is not a declared tool",
                    ],
                )
            },
        ],
        "vercel-blocked" => vec![Run::blocked(
            Reply::chat_calls(&[BAD]),
            &["blocked: undeclared_tool retryable: false", VIOLATION],
        )],
        "vercel-stream-blocked" => vec![
            Run::blocked(
                text_then_bad_call(),
                &[
                    "Let me check.",
                    "blocked mid-stream: undeclared_tool tool call blocked: 'delete_user'",
                    "finishReason: error",
                ],
            ),
            Run::blocked(
                only_a_bad_call_streamed(),
                &[
                    "blocked: delete_user",
                    "no output: AI_NoOutputGeneratedError",
                ],
            ),
        ],
        "vercel-responses-stream-blocked" => vec![Run::blocked(
            Reply::raw(
                200,
                "text/event-stream",
                fixture("responses/text_then_call.sse"),
            ),
            &[
                "Let me check where it is.",
                "blocked mid-stream: undeclared_tool tool call blocked: 'get_order_status'",
                "[membership undeclared_tool get_order_status (call_",
            ],
        )],
        other => panic!("docs/frameworks.md checks {other:?}, which this test does not know"),
    }
}

/// A chat stream whose text reaches the client before the bad call: blocked mid-stream.
fn text_then_bad_call() -> Reply {
    Reply::sse_events(&chat_stream(&[BAD], Some("Let me check.")))
}

/// A chat stream of only the bad call: held, so blocked before the first byte (a 403).
fn only_a_bad_call_streamed() -> Reply {
    Reply::sse_events(&chat_stream(&[BAD], None))
}

fn anthropic_bad_call() -> Reply {
    Reply::raw(
        200,
        "application/json",
        fixture("anthropic/tool_use_allowed.response.json")
            .replace("\"get_weather\"", "\"delete_user\""),
    )
}

fn function_call((call_id, name, arguments): (&str, &str, &str)) -> Value {
    json!({"type": "function_call", "id": format!("fc_{call_id}"), "call_id": call_id,
           "name": name, "arguments": arguments, "status": "completed"})
}

/// A completed Responses answer whose output is this one item.
fn responses_answer(item: Value) -> Reply {
    Reply::json(
        200,
        json!({"id": "resp_1", "object": "response", "created_at": 1, "status": "completed",
               "model": PRIMARY, "output": [item],
               "usage": {"input_tokens": 50, "output_tokens": 9, "total_tokens": 59,
                         "input_tokens_details": {"cached_tokens": 0},
                         "output_tokens_details": {"reasoning_tokens": 0}}}),
    )
}

/// [`GUARDED_V1`] with this `on_block` on its tool_selection entry.
fn guarded_with_on_block(on_block: &str) -> String {
    format!(
        "[[plugins]]\nname = \"tool_selection\"\non_block = \"{on_block}\"\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n"
    )
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Language {
    Python,
    JavaScript,
}

/// The `<!-- checked: NAME -->` blocks of the guide, by name.
fn checked_blocks() -> BTreeMap<String, (Language, String)> {
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/frameworks.md"))
        .expect("docs/frameworks.md is readable");
    let mut blocks = BTreeMap::new();
    for marked in guide.split("<!-- checked: ").skip(1) {
        let (name, rest) = marked.split_once(" -->\n").expect("a closed marker");
        let (language, rest) = if let Some(rest) = rest.strip_prefix("```python\n") {
            (Language::Python, rest)
        } else if let Some(rest) = rest.strip_prefix("```js\n") {
            (Language::JavaScript, rest)
        } else {
            panic!("{name}: the marker is followed by a python or js block")
        };
        let (code, _) = rest
            .split_once("```")
            .unwrap_or_else(|| panic!("{name}: the block is closed"));
        assert!(
            blocks
                .insert(name.to_owned(), (language, code.to_owned()))
                .is_none(),
            "{name} is checked twice"
        );
    }
    blocks
}

/// The checked blocks in `language`; panics when the guide has fewer than `at_least`.
fn blocks_in(language: Language, at_least: usize) -> BTreeMap<String, String> {
    let blocks: BTreeMap<String, String> = checked_blocks()
        .into_iter()
        .filter(|(_, (block_language, _))| *block_language == language)
        .map(|(name, (_, code))| (name, code))
        .collect();
    assert!(
        blocks.len() >= at_least,
        "the guide checks its {language:?} snippets: {:?}",
        blocks.keys()
    );
    blocks
}

/// Runs every run of every block with `command` (given the code, with the gateway's URL in
/// it) and checks what each printed and who the upstream was asked for.
async fn run_blocks(
    blocks: BTreeMap<String, String>,
    command: impl Fn(&str) -> tokio::process::Command,
) {
    for (name, code) in blocks {
        assert!(
            code.contains(DOCS_GATEWAY),
            "{name}: the snippet names toolgate's address"
        );
        for (number, run) in runs(&name).into_iter().enumerate() {
            let upstream = ScriptedUpstream::start().await;
            if let Some(last) = run.replies.last() {
                upstream.set_default(last.clone());
            }
            let queued = run.replies.len() - 1;
            for reply in run.replies.into_iter().take(queued) {
                upstream.push(reply);
            }
            let gateway = TestGateway::start(&upstream, &run.gateway).await;
            let output = command(&code.replace(DOCS_GATEWAY, &gateway.url()))
                .env("OPENAI_API_KEY", "sk-client-key")
                .env("ANTHROPIC_API_KEY", "sk-client-key")
                .env("OPENAI_AGENTS_DISABLE_TRACING", "1")
                .kill_on_drop(true)
                .output()
                .await
                .expect("the interpreter runs");
            let printed = String::from_utf8_lossy(&output.stdout);
            let errors = String::from_utf8_lossy(&output.stderr);
            let which = format!("{name} (run {number})");
            assert!(
                output.status.success(),
                "{which} failed:\n{printed}\n{errors}"
            );
            for needle in run.printed {
                assert!(
                    printed.contains(needle),
                    "{which}: {needle:?} not in its output:\n{printed}\n{errors}"
                );
            }
            let asked: Vec<Value> = upstream
                .requests()
                .iter()
                .map(|request| request.json()["model"].clone())
                .collect();
            assert_eq!(
                asked, run.asked,
                "{which}: the models the upstream was asked for\n{printed}\n{errors}"
            );
            gateway.stop().await;
        }
    }
}

/// Whether the Python frameworks import; the same rule as the SDKs themselves
/// ([`sdks_installed`]).
fn python_frameworks_installed() -> bool {
    if !sdks_installed() {
        return false;
    }
    let imports = std::process::Command::new("python3")
        .args(["-c", "import pydantic_ai, langchain_openai"])
        .output()
        .is_ok_and(|output| output.status.success());
    imports
        || !crate::common::skip_for_missing(
            "pydantic-ai or langchain-openai (`import pydantic_ai, langchain_openai`)",
            "run .ci/test, which pip installs them",
        )
}

#[tokio::test]
async fn the_python_snippets_of_the_frameworks_guide_print_the_violations() {
    if !python_frameworks_installed() {
        return;
    }
    run_blocks(blocks_in(Language::Python, 8), |code| {
        let mut command = tokio::process::Command::new("python3");
        command.args(["-c", code]);
        command
    })
    .await;
}

/// Where `.ci/frameworks.sh` installs the Node packages, when they are there.
fn node_packages() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/frameworks");
    let packages = [
        "openai",
        "@anthropic-ai/sdk",
        "ai",
        "@ai-sdk/openai",
        "@openai/agents",
    ];
    let missing: Vec<&str> = packages
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

#[tokio::test]
async fn the_node_snippets_of_the_frameworks_guide_print_the_violations() {
    let Some(packages) = node_packages() else {
        return;
    };
    run_blocks(blocks_in(Language::JavaScript, 6), |code| {
        // An ES module (the snippets `import` and `await` at the top level), resolving its
        // imports from the installed node_modules.
        let mut command = tokio::process::Command::new("node");
        command
            .args(["--input-type=module", "-e", code])
            .current_dir(&packages);
        command
    })
    .await;
}
