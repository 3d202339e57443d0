//! The official Python SDKs end to end (issue 21): `openai` and `anthropic` from PyPI drive a
//! guarded gateway in front of the scripted upstream, streamed and not, and the assertions are
//! on what the SDK user sees: the tool calls an allowed answer carries, unchanged; the exception
//! a blocked one raises (class, status, `code` and `violations` where the SDK puts the body);
//! and never a call toolgate did not check, nor a normal end of a cut stream.
//!
//! Each test starts an upstream and a gateway, queues the upstream's replies in order, and runs
//! one `python3 tests/sdk/run.py` for its cases; the script prints one JSON line per case. Without
//! the SDKs the tests fail and say to run `.ci/test` (which installs them), unless
//! `TOOLGATE_SKIP_SDK_TESTS=1`.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::common::upstream::{chat_completion, chat_stream};
use crate::common::{Reply, ScriptedUpstream, TestGateway, fixture, fixture_json};

/// Every route guarded by tool_selection, with its defaults (`unreadable_answers = "block"`).
const GUARDED: &str = "[[plugins]]\nname = \"tool_selection\"\n\n\
                       [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n";

/// Whether the SDK tests run: true when `python3` imports both SDKs; false (skipped, said on
/// stderr) only when they are missing and `TOOLGATE_SKIP_SDK_TESTS=1`; otherwise a failure.
fn sdks_installed() -> bool {
    static IMPORTS: OnceLock<Result<(), String>> = OnceLock::new();
    let imports = IMPORTS.get_or_init(|| {
        match std::process::Command::new("python3")
            .args(["-c", "import openai, anthropic"])
            .output()
        {
            Ok(output) if output.status.success() => Ok(()),
            Ok(output) => Err(String::from_utf8_lossy(&output.stderr).trim().to_owned()),
            Err(error) => Err(format!("python3 does not run: {error}")),
        }
    });
    match imports {
        Ok(()) => true,
        Err(_) if std::env::var("TOOLGATE_SKIP_SDK_TESTS").as_deref() == Ok("1") => {
            eprintln!("SDK tests skipped: TOOLGATE_SKIP_SDK_TESTS=1 and the SDKs are missing");
            false
        }
        Err(why) => panic!(
            "the official Python SDKs are missing (`python3 -c \"import openai, anthropic\"` \
             failed: {why}); run .ci/test, which pip installs them, or set \
             TOOLGATE_SKIP_SDK_TESTS=1 to skip these tests"
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
        scenario.gateway = Some(TestGateway::start(&scenario.upstream, GUARDED).await);
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

#[tokio::test]
async fn an_allowed_call_reaches_the_sdk_user_unchanged() {
    let Some(mut scenario) = Scenario::start().await else {
        return;
    };
    let call = [("call_1", "get_weather", r#"{"city":"Paris"}"#)];
    scenario.case(
        "chat",
        "chat",
        false,
        chat_request(),
        Reply::json(200, chat_completion(&call, None)),
    );
    scenario.case(
        "chat streamed",
        "chat",
        true,
        chat_request(),
        Reply::sse_chunked(&chat_stream(&call, Some("Let me check.")), 17),
    );
    let responses = request("responses/function_call_allowed.request.json");
    scenario.case(
        "responses",
        "responses",
        false,
        responses.clone(),
        Reply::json(
            200,
            fixture("responses/function_call_allowed.response.json"),
        ),
    );
    scenario.case(
        "responses streamed",
        "responses",
        true,
        responses,
        Reply::sse_chunked(&fixture("responses/function_call_allowed.sse"), 23),
    );
    let messages = request("anthropic/tool_use_allowed.request.json");
    scenario.case(
        "anthropic",
        "messages",
        false,
        messages.clone(),
        Reply::json(200, fixture("anthropic/tool_use_allowed.response.json")),
    );
    scenario.case(
        "anthropic streamed",
        "messages",
        true,
        messages,
        Reply::sse_chunked(&fixture("anthropic/tool_use_allowed.sse"), 19),
    );
    let seen = scenario.run().await;

    let weather = vec![("get_weather".to_owned(), arguments(r#"{"city":"Paris"}"#))];
    assert_eq!(seen.allowed("chat"), weather);
    assert_eq!(seen.allowed("chat streamed"), weather);
    assert_eq!(seen.text("chat streamed"), "Let me check.");
    let paris = vec![(
        "get_weather".to_owned(),
        arguments(r#"{"city":"Paris","country":"FR","unit":"celsius"}"#),
    )];
    assert_eq!(seen.allowed("responses"), paris);
    assert_eq!(seen.allowed("responses streamed"), paris);
    assert_eq!(
        seen.events("responses streamed").last(),
        Some(&"response.completed")
    );
    // The SDK reads `input` as an object, streamed (from the partial JSON) or not.
    let location = vec![(
        "get_weather".to_owned(),
        json!({"location": "Paris, France", "unit": "celsius"}),
    )];
    assert_eq!(seen.allowed("anthropic"), location);
    assert_eq!(seen.allowed("anthropic streamed"), location);
    assert_eq!(
        seen.events("anthropic streamed").last(),
        Some(&"message_stop")
    );
}

#[tokio::test]
async fn an_undeclared_call_raises_the_sdks_permission_error_streamed_or_not() {
    let Some(mut scenario) = Scenario::start().await else {
        return;
    };
    let delete = [("call_1", "delete_user", r#"{"user_id":"u1"}"#)];
    scenario.case(
        "chat",
        "chat",
        false,
        chat_request(),
        Reply::json(200, chat_completion(&delete, None)),
    );
    scenario.case(
        "chat streamed, call first",
        "chat",
        true,
        chat_request(),
        Reply::sse_chunked(&chat_stream(&delete, None), 13),
    );
    scenario.case(
        "chat streamed, after text",
        "chat",
        true,
        chat_request(),
        Reply::sse_chunked(&chat_stream(&delete, Some("Deleting it now.")), 13),
    );
    let responses = request("responses/undeclared_tool.request.json");
    scenario.case(
        "responses",
        "responses",
        false,
        responses.clone(),
        Reply::json(200, fixture("responses/undeclared_tool.response.json")),
    );
    scenario.case(
        "responses streamed, call first",
        "responses",
        true,
        responses,
        Reply::sse_chunked(&fixture("responses/undeclared_tool.sse"), 23),
    );
    // The recorded text-then-call stream, its call renamed to a tool the request never declared.
    let renamed =
        fixture("responses/text_then_call.sse").replace("get_order_status", "cancel_order");
    scenario.case(
        "responses streamed, after text",
        "responses",
        true,
        request("responses/text_then_call.request.json"),
        Reply::sse_chunked(&renamed, 23),
    );
    scenario.case(
        "anthropic",
        "messages",
        false,
        request("anthropic/undeclared_tool.request.json"),
        Reply::json(200, fixture("anthropic/undeclared_tool.response.json")),
    );
    // The recorded stream that opens with get_weather's tool_use, renamed.
    let renamed = fixture("anthropic/tool_use_allowed.sse").replace("get_weather", "delete_user");
    scenario.case(
        "anthropic streamed, call first",
        "messages",
        true,
        request("anthropic/tool_use_allowed.request.json"),
        Reply::sse_chunked(&renamed, 19),
    );
    let renamed =
        fixture("anthropic/text_then_tool_use.sse").replace("search_orders", "delete_orders");
    scenario.case(
        "anthropic streamed, after text",
        "messages",
        true,
        request("anthropic/text_then_tool_use.request.json"),
        Reply::sse_chunked(&renamed, 19),
    );
    let seen = scenario.run().await;

    for name in ["chat", "chat streamed, call first"] {
        let violation = seen.blocked(name, "PermissionDeniedError", Some(403), "undeclared_tool");
        assert_eq!(violation["tool"], "delete_user", "{name}");
        assert_eq!(violation["tool_call_id"], "call_1", "{name}");
    }
    // After text the 200 is sent: the SDK raises on the error frame, a plain APIError.
    let violation = seen.blocked(
        "chat streamed, after text",
        "APIError",
        None,
        "undeclared_tool",
    );
    assert_eq!(violation["tool"], "delete_user");
    assert_eq!(seen.text("chat streamed, after text"), "Deleting it now.");

    for name in ["responses", "responses streamed, call first"] {
        let violation = seen.blocked(name, "PermissionDeniedError", Some(403), "undeclared_tool");
        assert_eq!(violation["tool"], "delete_user", "{name}");
    }
    let violation = seen.blocked(
        "responses streamed, after text",
        "APIError",
        None,
        "undeclared_tool",
    );
    assert_eq!(violation["tool"], "cancel_order");
    assert!(
        seen.text("responses streamed, after text")
            .starts_with("Your latest order is ORD-48213"),
        "the text before the call was read: {}",
        seen.text("responses streamed, after text")
    );
    assert!(
        !seen
            .events("responses streamed, after text")
            .contains(&"response.completed")
    );

    for name in ["anthropic", "anthropic streamed, call first"] {
        let violation = seen.blocked(name, "PermissionDeniedError", Some(403), "undeclared_tool");
        assert_eq!(violation["tool"], "delete_user", "{name}");
    }
    let violation = seen.blocked(
        "anthropic streamed, after text",
        "APIStatusError",
        Some(200),
        "undeclared_tool",
    );
    assert_eq!(violation["tool"], "delete_orders");
    assert_eq!(
        seen.text("anthropic streamed, after text"),
        "I'll look up your shipped orders — one moment."
    );
    assert!(
        !seen
            .events("anthropic streamed, after text")
            .contains(&"message_stop")
    );
}

/// Answers a forgiving reader could take a call from, though toolgate cannot read them
/// unambiguously (or they are in another format than asked for).
fn queue_unreadable_answers(scenario: &mut Scenario) {
    // Two names in one function: a last-key-wins reader would call wipe_disk.
    let repeated = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","name":"wipe_disk","arguments":"{\"city\":\"Paris\"}"}}]}}]}"#;
    scenario.case(
        "repeated key",
        "chat",
        false,
        chat_request(),
        Reply::raw(200, "application/json", repeated.as_bytes().to_vec()),
    );
    let role = chunk(json!({"role": "assistant", "content": null}));
    let repeated_event = r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","name":"wipe_disk","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":null}]}"#;
    let finish = "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\
                  \"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\
                  \"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
    scenario.case(
        "repeated key, streamed",
        "chat",
        true,
        chat_request(),
        Reply::sse_chunked(&format!("{role}{repeated_event}\n\n{finish}"), 11),
    );
    let string_index = chunk(json!({"tool_calls": [{"index": "0", "id": "call_1",
        "type": "function", "function": {"name": "wipe_disk", "arguments": "{}"}}]}));
    scenario.case(
        "string index, streamed",
        "chat",
        true,
        chat_request(),
        Reply::sse_chunked(&format!("{role}{string_index}{finish}"), 11),
    );
    scenario.case(
        "Responses answer to a chat request",
        "chat",
        false,
        chat_request(),
        Reply::json(200, fixture("responses/undeclared_tool.response.json")),
    );
    let delete = [("call_1", "delete_user", r#"{"user_id":"u1"}"#)];
    scenario.case(
        "SSE labelled JSON",
        "chat",
        false,
        chat_request(),
        Reply::raw(
            200,
            "application/json",
            chat_stream(&delete, None).into_bytes(),
        ),
    );
    scenario.case(
        "Responses stream answering a chat stream",
        "chat",
        true,
        chat_request(),
        Reply::sse_chunked(&fixture("responses/undeclared_tool.sse"), 23),
    );
    let anthropic_event = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\
        \"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\
        \"name\":\"delete_user\",\"input\":{}}}\n\n";
    scenario.case(
        "Anthropic event in a chat stream",
        "chat",
        true,
        chat_request(),
        Reply::sse_chunked(&format!("{role}{anthropic_event}{finish}"), 11),
    );
}

#[tokio::test]
async fn answers_toolgate_cannot_read_unambiguously_never_reach_the_sdk_user() {
    let Some(mut scenario) = Scenario::start().await else {
        return;
    };
    queue_unreadable_answers(&mut scenario);
    let seen = scenario.run().await;

    let violation = seen.blocked(
        "repeated key",
        "PermissionDeniedError",
        Some(403),
        "ambiguous_response",
    );
    assert_eq!(violation["check"], "parse");
    // In a stream event the repeated key makes the event unreadable as chat: refused as
    // `unparsable_response` today, though the README names `ambiguous_response`; either blocks.
    let error = seen.raised("repeated key, streamed", "PermissionDeniedError", Some(403));
    assert!(
        ["ambiguous_response", "unparsable_response"]
            .contains(&error["code"].as_str().unwrap_or("")),
        "{error}"
    );
    assert_eq!(error["violations"][0]["check"], "parse", "{error}");
    let violation = seen.blocked(
        "string index, streamed",
        "PermissionDeniedError",
        Some(403),
        "unparsable_response",
    );
    assert_eq!(violation["check"], "parse");
    // Read by their own shape, these calls are checked: delete_user was never declared.
    for name in ["Responses answer to a chat request", "SSE labelled JSON"] {
        let violation = seen.blocked(name, "PermissionDeniedError", Some(403), "undeclared_tool");
        assert_eq!(violation["tool"], "delete_user", "{name}");
    }
    // Another format's event carrying a call, inside a chat stream, is refused as unreadable:
    // before anything was sent (a 403), or after the Responses preamble's events (an error event).
    for (name, class, status) in [
        (
            "Anthropic event in a chat stream",
            "PermissionDeniedError",
            Some(403),
        ),
        ("Responses stream answering a chat stream", "APIError", None),
    ] {
        let violation = seen.blocked(name, class, status, "unparsable_response");
        assert_eq!(violation["check"], "parse", "{name}");
    }
}

/// The control for the test above: the same answers straight from the upstream.
#[tokio::test]
async fn without_toolgate_the_sdk_reads_calls_from_those_answers() {
    let Some(mut scenario) = Scenario::without_gateway().await else {
        return;
    };
    queue_unreadable_answers(&mut scenario);
    let seen = scenario.run().await;
    // Python's last-key-wins JSON and the SDK's unvalidated models read a call toolgate refuses:
    // the blocks above are what stands between it and the user.
    for (name, arguments) in [
        ("repeated key", r#"{"city":"Paris"}"#),
        ("repeated key, streamed", r#"{"city":"Paris"}"#),
        ("string index, streamed", "{}"),
    ] {
        assert_eq!(
            calls(seen.case(name)),
            [("wipe_disk".to_owned(), Value::from(arguments))],
            "{name}: {}",
            seen.case(name)
        );
    }
    // The chat SDK reads no call from these shapes; toolgate still checks them (above).
    for name in [
        "Responses answer to a chat request",
        "SSE labelled JSON",
        "Responses stream answering a chat stream",
        "Anthropic event in a chat stream",
    ] {
        assert_eq!(calls(seen.case(name)), [], "{name}: {}", seen.case(name));
    }
}

#[tokio::test]
async fn a_stream_cut_before_its_terminal_event_is_an_exception_never_a_normal_end() {
    let Some(mut scenario) = Scenario::start().await else {
        return;
    };
    let chat = chat_stream(&[], Some("The forecast says"));
    scenario.case(
        "chat",
        "chat",
        true,
        chat_request(),
        // Without `[DONE]`; the finish chunk is there, nothing is held.
        Reply::sse_chunked(&without_last_event(&chat), 13),
    );
    scenario.case(
        "responses",
        "responses",
        true,
        request("responses/text_only.request.json"),
        Reply::sse_chunked(&without_last_event(&fixture("responses/text_only.sse")), 23),
    );
    scenario.case(
        "anthropic",
        "messages",
        true,
        request("anthropic/text_only.request.json"),
        Reply::sse_chunked(&without_last_event(&fixture("anthropic/text_only.sse")), 19),
    );
    let seen = scenario.run().await;

    let error = seen.raised("chat", "APIError", None);
    assert_eq!(error["code"], "upstream_failed", "{error}");
    assert_eq!(seen.text("chat"), "The forecast says");
    let error = seen.raised("responses", "APIError", None);
    assert_eq!(error["code"], "upstream_failed", "{error}");
    assert!(!seen.text("responses").is_empty(), "the text was read");
    assert!(!seen.events("responses").contains(&"response.completed"));
    let error = seen.raised("anthropic", "APIStatusError", Some(200));
    assert_eq!(error["code"], "upstream_failed", "{error}");
    assert!(seen.text("anthropic").starts_with("Double it and add 30"));
}

#[tokio::test]
async fn a_function_call_to_a_name_declared_only_as_a_custom_tool_is_refused() {
    let Some(mut scenario) = Scenario::start().await else {
        return;
    };
    let request = json!({
        "model": "gpt-5",
        "messages": [{"role": "user", "content": "How many users are there?"}],
        "tools": [{"type": "custom", "custom": {"name": "sql", "description": "read-only SQL"}}]
    });
    let sql = [("call_1", "sql", r#"{"query":"drop table users"}"#)];
    scenario.case(
        "chat",
        "chat",
        false,
        request.clone(),
        Reply::json(200, chat_completion(&sql, None)),
    );
    scenario.case(
        "chat streamed",
        "chat",
        true,
        request,
        Reply::sse_chunked(&chat_stream(&sql, None), 13),
    );
    let seen = scenario.run().await;
    for name in ["chat", "chat streamed"] {
        let violation = seen.blocked(name, "PermissionDeniedError", Some(403), "undeclared_tool");
        assert_eq!(violation["check"], "membership", "{name}");
        assert_eq!(violation["tool"], "sql", "{name}");
    }
}

#[tokio::test]
async fn background_responses_are_refused_and_stored_calls_are_unverifiable() {
    let Some(mut scenario) = Scenario::start().await else {
        return;
    };
    let mut background = request("responses/function_call_allowed.request.json");
    background["background"] = json!(true);
    scenario.refused("background", "responses", false, background.clone());
    scenario.refused("background streamed", "responses", true, background);
    scenario.retrieve(
        "retrieve",
        "resp_68b7b697597812d597d444ad03949092645aa76a034c1edd",
        Reply::json(
            200,
            fixture("responses/function_call_allowed.response.json"),
        ),
    );
    let seen = scenario.run().await;
    for name in ["background", "background streamed"] {
        let error = seen.raised(name, "BadRequestError", Some(400));
        assert_eq!(error["code"], "background_not_supported", "{name}: {error}");
    }
    let violation = seen.blocked(
        "retrieve",
        "PermissionDeniedError",
        Some(403),
        "unverifiable_calls",
    );
    assert_eq!(violation["tool"], "get_weather");
}

/// The SDKs build a final answer from more than the call events: the Responses stream's
/// `response.completed` carries the whole response, an item's `done` event repeats it whole,
/// and Anthropic's `message_start` carries a message whose content the stream helper keeps.
/// A call in any of them is one the user reads, so it is checked.
#[tokio::test]
async fn a_call_the_sdk_assembles_from_any_stream_event_is_checked() {
    let Some(mut scenario) = Scenario::start().await else {
        return;
    };
    let responses = request("responses/function_call_allowed.request.json");
    let stream = fixture("responses/function_call_allowed.sse");
    let extra_item = edit_events(&stream, |event| {
        if event["type"] == "response.completed"
            && let Some(output) = event["response"]["output"].as_array_mut()
        {
            output.push(json!({"id": "fc_1", "type": "function_call", "status": "completed",
                "arguments": "{\"user_id\":\"usr_1\"}", "call_id": "call_9", "name": "delete_user"}));
        }
    });
    scenario.case(
        "responses, a call only in response.completed",
        "responses",
        true,
        responses.clone(),
        Reply::sse_chunked(&extra_item, 23),
    );
    let renamed_when_done = edit_events(&stream, |event| {
        if event["type"] == "response.output_item.done" {
            event["item"]["name"] = json!("delete_user");
        }
        if let Some(output) = event["response"]["output"].as_array_mut() {
            for item in output {
                item["name"] = json!("delete_user");
            }
        }
    });
    scenario.case(
        "responses, renamed in output_item.done",
        "responses",
        true,
        responses,
        Reply::sse_chunked(&renamed_when_done, 23),
    );
    let started_with_a_call = edit_events(&fixture("anthropic/tool_use_allowed.sse"), |event| {
        if event["type"] == "message_start" {
            event["message"]["content"] = json!([{"type": "tool_use", "id": "toolu_9",
                "name": "delete_user", "input": {"user_id": "usr_1"}}]);
        }
    });
    scenario.case(
        "anthropic, a call in message_start",
        "messages",
        true,
        request("anthropic/tool_use_allowed.request.json"),
        Reply::sse_chunked(&started_with_a_call, 19),
    );
    let seen = scenario.run().await;
    // Nothing visible comes before the calls, so each is a real 403.
    for name in [
        "responses, a call only in response.completed",
        "responses, renamed in output_item.done",
        "anthropic, a call in message_start",
    ] {
        let violation = seen.blocked(name, "PermissionDeniedError", Some(403), "undeclared_tool");
        assert_eq!(violation["tool"], "delete_user", "{name}");
    }
}

/// The SDKs read on after a stream's terminal event: the openai SDK stops only at `[DONE]` (a
/// Responses stream has none), the anthropic SDK at the end of the body. A call sent after
/// `response.completed`, `message_stop` or a chat choice's finish is read, so it is checked.
#[tokio::test]
async fn a_call_after_the_terminal_event_is_checked() {
    let Some(mut scenario) = Scenario::start().await else {
        return;
    };
    let chat = chat_stream(&[], Some("Done for today."));
    let late_call = chunk(
        json!({"tool_calls": [{"index": 0, "id": "call_9", "type": "function",
        "function": {"name": "delete_user", "arguments": "{\"user_id\":\"u1\"}"}}]}),
    );
    let (body, done) = chat.split_at(chat.find("data: [DONE]").expect("[DONE]"));
    scenario.case(
        "chat, a call after the finish chunk",
        "chat",
        true,
        chat_request(),
        Reply::sse_chunked(&format!("{body}{late_call}{done}"), 13),
    );
    let late_item = json!({"id": "fc_9", "type": "function_call", "status": "completed",
        "arguments": "{\"user_id\":\"usr_1\"}", "call_id": "call_9", "name": "delete_user"});
    let after_completed = format!(
        "{}event: response.output_item.done\ndata: {}\n\n",
        fixture("responses/text_only.sse"),
        json!({"type": "response.output_item.done", "sequence_number": 40, "output_index": 1,
               "item": late_item})
    );
    scenario.case(
        "responses, a call after response.completed",
        "responses",
        true,
        request("responses/text_only.request.json"),
        Reply::sse_chunked(&after_completed, 23),
    );
    let after_stop = format!(
        "{}event: content_block_start\ndata: {}\n\nevent: content_block_stop\ndata: {}\n\n",
        fixture("anthropic/text_only.sse"),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use",
               "id": "toolu_9", "name": "delete_user", "input": {"user_id": "usr_1"}}}),
        json!({"type": "content_block_stop", "index": 1})
    );
    scenario.case(
        "anthropic, a call after message_stop",
        "messages",
        true,
        request("anthropic/text_only.request.json"),
        Reply::sse_chunked(&after_stop, 19),
    );
    let seen = scenario.run().await;
    // Text was sent before each: the SDKs raise on the error event that replaces the call.
    for (name, class, status) in [
        ("chat, a call after the finish chunk", "APIError", None),
        (
            "responses, a call after response.completed",
            "APIError",
            None,
        ),
        (
            "anthropic, a call after message_stop",
            "APIStatusError",
            Some(200),
        ),
    ] {
        let violation = seen.blocked(name, class, status, "undeclared_tool");
        assert_eq!(violation["tool"], "delete_user", "{name}");
        assert!(!seen.text(name).is_empty(), "{name}: the text came first");
    }
}
