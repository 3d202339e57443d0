//! The official Python SDKs end to end (issue 21): `openai` and `anthropic` from PyPI drive a
//! guarded gateway in front of the scripted upstream, streamed and not, and the assertions are
//! on what the SDK user sees: the tool calls an allowed answer carries, unchanged; the exception
//! a blocked one raises (class, status, `code` and `violations` where the SDK puts the body);
//! and never a call toolgate did not check, nor a normal end of a cut stream.
//!
//! Each test starts an upstream and a gateway, queues the upstream's replies in order, and runs
//! one `python3 tests/sdk/run.py` for its cases; the script prints one JSON line per case. Without
//! the SDKs the tests fail and say to run `.ci/test` (which installs them), unless
//! `TOOLGATE_SKIP_SDK_TESTS=1`. This module is that harness and the requests and stream edits
//! the files below share.

mod budgets;
mod calls;
mod frameworks;
mod readme;
mod streams;
mod unreadable;

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::common::{GUARDED_V1, Reply, ScriptedUpstream, TestGateway, fixture, fixture_json};

/// Whether the SDK tests run: true when `python3` imports the SDKs; when they are missing, a
/// failure unless the run opted out ([`crate::common::skip_for_missing`]), then false.
fn sdks_installed() -> bool {
    static IMPORTS: OnceLock<Result<(), String>> = OnceLock::new();
    let imports = IMPORTS.get_or_init(|| {
        match std::process::Command::new("python3")
            .args(["-c", "import openai, anthropic, agents"])
            .output()
        {
            Ok(output) if output.status.success() => Ok(()),
            Ok(output) => Err(String::from_utf8_lossy(&output.stderr).trim().to_owned()),
            Err(error) => Err(format!("python3 does not run: {error}")),
        }
    });
    match imports {
        Ok(()) => true,
        Err(why) => !crate::common::skip_for_missing(
            &format!("the official Python SDKs (`import openai, anthropic, agents`: {why})"),
            "run .ci/test, which pip installs them",
        ),
    }
}

/// One scenario: the upstream, the gateway, and the cases the SDK script performs in order.
struct Scenario {
    upstream: ScriptedUpstream,
    /// `None` when the SDK talks to the upstream directly (what it would read without toolgate).
    gateway: Option<TestGateway>,
    cases: Vec<Value>,
}

impl Scenario {
    /// `None` when the SDK tests are skipped.
    async fn start() -> Option<Scenario> {
        let mut scenario = Scenario::without_gateway().await?;
        scenario.gateway = Some(TestGateway::start(&scenario.upstream, GUARDED_V1).await);
        Some(scenario)
    }

    /// The SDK straight to the upstream: what a client would read if nothing stood between.
    async fn without_gateway() -> Option<Scenario> {
        if !sdks_installed() {
            return None;
        }
        Some(Scenario {
            upstream: ScriptedUpstream::start().await,
            gateway: None,
            cases: Vec::new(),
        })
    }

    /// A case whose request reaches the upstream, which answers `reply`. `call` is what the
    /// script does: `chat`, `responses` (openai) or `messages` (anthropic); `request` holds the
    /// SDK call's arguments, without `stream`.
    fn case(&mut self, name: &str, call: &str, stream: bool, request: Value, reply: Reply) {
        self.upstream.push(reply);
        self.refused(name, call, stream, request);
    }

    /// A `chat` case sending [`chat_request`], the request most cases need.
    fn chat_case(&mut self, name: &str, stream: bool, reply: Reply) {
        self.case(name, "chat", stream, chat_request(), reply);
    }

    /// A recorded exchange (`responses/NAME` or `anthropic/NAME` under `fixtures/`) as two
    /// cases: `plain` answered by its complete response, then `streamed` answered by its stream
    /// in `chunk`-byte pieces.
    fn recorded(&mut self, plain: &str, streamed: &str, exchange: &str, chunk: usize) {
        let call = if exchange.starts_with("anthropic/") {
            "messages"
        } else {
            "responses"
        };
        let request = request(&format!("{exchange}.request.json"));
        let response = fixture(&format!("{exchange}.response.json"));
        let stream = fixture(&format!("{exchange}.sse"));
        self.case(
            plain,
            call,
            false,
            request.clone(),
            Reply::json(200, response),
        );
        self.case(
            streamed,
            call,
            true,
            request,
            Reply::sse_chunked(&stream, chunk),
        );
    }

    /// A case toolgate answers itself: no upstream reply is queued for it.
    fn refused(&mut self, name: &str, call: &str, stream: bool, request: Value) {
        let sdk = if call == "messages" {
            "anthropic"
        } else {
            "openai"
        };
        self.cases
            .push(json!({"case": name, "sdk": sdk, "call": call,
                               "stream": stream, "request": request}));
    }

    /// `client.responses.retrieve(id)`, answered by `reply`.
    fn retrieve(&mut self, name: &str, id: &str, reply: Reply) {
        self.upstream.push(reply);
        self.cases.push(
            json!({"case": name, "sdk": "openai", "call": "retrieve", "stream": false, "id": id}),
        );
    }

    /// Runs the script once for every case and returns what each case saw, by name.
    async fn run(self) -> Seen {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/run.py");
        let url = self
            .gateway
            .as_ref()
            .map_or_else(|| self.upstream.url(), TestGateway::url);
        let output = tokio::process::Command::new("python3")
            .arg(script)
            .arg(url)
            .arg(Value::Array(self.cases.clone()).to_string())
            .kill_on_drop(true)
            .output()
            .await
            .expect("python3 runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "tests/sdk/run.py failed ({}):\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let lines: HashMap<String, Value> = stdout
            .lines()
            .map(|line| {
                let seen: Value = serde_json::from_str(line).expect("one JSON line per case");
                (seen["case"].as_str().unwrap_or_default().to_owned(), seen)
            })
            .collect();
        assert_eq!(
            lines.len(),
            self.cases.len(),
            "one line per case:\n{stdout}"
        );
        assert_eq!(
            self.upstream.queued_replies(),
            0,
            "every scripted reply was asked for:\n{stdout}"
        );
        Seen(lines)
    }
}

/// What the SDK user saw, per case.
struct Seen(HashMap<String, Value>);

impl Seen {
    fn case(&self, name: &str) -> &Value {
        self.0
            .get(name)
            .unwrap_or_else(|| panic!("no line for case {name}"))
    }

    /// The case ended without an exception; its calls as `(name, arguments)`.
    fn allowed(&self, name: &str) -> Vec<(String, Value)> {
        let seen = self.case(name);
        assert!(seen["error"].is_null(), "{name}: the SDK raised: {seen}");
        calls(seen)
    }

    /// The SDK raised `class` (with `status`, `None` for an error read from a stream) and no call
    /// reached the user; returns the error object where the SDK's exception body has it (openai:
    /// the body itself; anthropic: its `error`).
    fn raised(&self, name: &str, class: &str, status: Option<u64>) -> &Value {
        let seen = self.case(name);
        let error = &seen["error"];
        assert_eq!(error["class"], class, "{name}: {seen}");
        assert_eq!(error["status"].as_u64(), status, "{name}: {seen}");
        assert_eq!(calls(seen), [], "{name}: no call reaches the user: {seen}");
        if error["module"] == "anthropic" {
            &error["body"]["error"]
        } else {
            &error["body"]
        }
    }

    /// [`Seen::raised`] for a block: the error object's `code` is `code` and its first violation
    /// (check and tool) is reachable from the exception.
    fn blocked(&self, name: &str, class: &str, status: Option<u64>, code: &str) -> &Value {
        let error = self.raised(name, class, status);
        assert_eq!(error["code"], code, "{name}: {error}");
        let violation = &error["violations"][0];
        assert!(
            violation["check"].is_string() && violation["message"].is_string(),
            "{name}: the violations are in the exception's body: {error}"
        );
        violation
    }

    fn text(&self, name: &str) -> &str {
        self.case(name)["text"].as_str().unwrap_or_default()
    }

    fn events(&self, name: &str) -> Vec<&str> {
        self.case(name)["events"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect()
    }
}

fn calls(seen: &Value) -> Vec<(String, Value)> {
    seen["calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|call| {
            (
                call["name"].as_str().unwrap_or_default().to_owned(),
                call["arguments"].clone(),
            )
        })
        .collect()
}

/// A chat request declaring `get_weather(city)`.
fn chat_request() -> Value {
    json!({
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Weather in Paris, please."}],
        "tools": [{"type": "function", "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"], "additionalProperties": false}}}]
    })
}

/// A fixture request without its `stream` flag (the script sets it).
fn request(path: &str) -> Value {
    let mut request = fixture_json(path);
    if let Some(fields) = request.as_object_mut() {
        fields.remove("stream");
    }
    request
}

/// One chat stream chunk with this delta.
fn chunk(delta: Value) -> String {
    let chunk = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                       "model": "gpt-4o-mini",
                       "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
    format!("data: {chunk}\n\n")
}

/// A stream's text without its last event (its terminal one).
fn without_last_event(stream: &str) -> String {
    let events: Vec<&str> = stream.split_inclusive("\n\n").collect();
    events[..events.len() - 1].concat()
}

/// A stream's text with every `data:` JSON passed through `edit` (other lines kept as they are).
fn edit_events(stream: &str, edit: impl Fn(&mut Value)) -> String {
    stream
        .split_inclusive('\n')
        .map(|line| {
            let Some(data) = line.strip_prefix("data: ") else {
                return line.to_owned();
            };
            let Ok(mut event) = serde_json::from_str::<Value>(data) else {
                return line.to_owned();
            };
            edit(&mut event);
            format!("data: {event}\n")
        })
        .collect()
}

fn arguments(text: &str) -> Value {
    Value::String(text.to_owned())
}
