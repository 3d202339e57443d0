//! tool_arguments end to end: a rule refuses a call (403, `check: rule`, naming the rule, the
//! pointer and the offence, never the value) or redacts a value, and the client receives valid
//! JSON with the value replaced — in chat completions, the Responses API and Anthropic Messages,
//! complete and streamed (however the upstream chunks the stream). Bad rules are located load
//! errors.

use crate::common;
use crate::common::answers::{config_errors, json_with_status};
use crate::common::upstream::{chat_completion, chat_stream};
use crate::common::{Reply, ScriptedUpstream, TestGateway, fixture, fixture_json};
use serde_json::{Value, json};
use toolgate::Runtime;
use toolgate_formats::stream::reassemble;
use toolgate_plugin::WireFormat;

/// Every `/v1` endpoint guarded by tool_arguments with these rules (TOML array-of-tables).
fn rules_config(rules: &str) -> String {
    format!(
        "[[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_arguments\"\n{rules}\n"
    )
}

const CHAT_RULES: &str = r#"
[[routes.plugins.settings.rules]]
name = "internal-mail-only"
tools = "send_email"
pointer = "/to"
matches = '[a-z.]+@example\.com'

[[routes.plugins.settings.rules]]
name = "no-passwords"
tools = "login"
pointer = "/password"
matches = ""
action = "redact"
"#;

/// A fresh upstream behind a gateway whose `/v1` endpoints are guarded by these `rules`.
async fn start_with_rules(rules: &str) -> (ScriptedUpstream, TestGateway) {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &rules_config(rules)).await;
    (upstream, gateway)
}

/// The 403 envelope the client gets when the upstream answers the chat request with `calls`
/// that the rules refuse.
async fn refusal_of(
    upstream: &ScriptedUpstream,
    gateway: &TestGateway,
    calls: &[(&str, &str, &str)],
) -> Value {
    upstream.push(Reply::chat_calls(calls));
    let refused = gateway.post_chat(&chat_request(false)).await;
    json_with_status(refused, 403).await
}

fn chat_request(stream: bool) -> Value {
    json!({
        "model": "gpt-test",
        "stream": stream,
        "messages": [{"role": "user", "content": "go"}],
        "tools": [
            {"type": "function", "function": {"name": "send_email", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "login", "parameters": {"type": "object"}}},
        ],
    })
}

const LOGIN_ARGUMENTS: &str = r#"{"user":"ada","password":"hunter2-secret"}"#;
const REDACTED_LOGIN: &str = r#"{"password":"[REDACTED]","user":"ada"}"#;

#[tokio::test]
async fn a_chat_call_that_breaks_a_rule_is_refused_without_echoing_the_value() {
    let (upstream, gateway) = start_with_rules(CHAT_RULES).await;
    let body = refusal_of(
        &upstream,
        &gateway,
        &[("call_1", "send_email", r#"{"to":"boss@evil.test"}"#)],
    )
    .await;
    let violation = &body["error"]["violations"][0];
    assert_eq!(violation["check"], "rule");
    assert_eq!(violation["code"], "argument_rule_violated");
    assert_eq!(violation["instance_path"], "/to");
    assert_eq!(violation["keyword"], "pattern");
    assert_eq!(violation["tool_call_id"], "call_1");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("internal-mail-only"), "{message}");
    assert!(
        !body.to_string().contains("evil.test"),
        "the value is never echoed: {body}"
    );

    // Streamed, the same call is a real 403 (nothing was sent before it).
    upstream.push(Reply::sse_events(&chat_stream(
        &[("call_1", "send_email", r#"{"to":"boss@evil.test"}"#)],
        None,
    )));
    let streamed = gateway.post_chat(&chat_request(true)).await;
    assert_eq!(streamed.status(), 403);

    // A call within the rule passes byte for byte.
    let allowed = chat_completion(
        &[("call_2", "send_email", r#"{"to":"ann@example.com"}"#)],
        None,
    );
    let allowed_bytes = serde_json::to_vec(&allowed).unwrap();
    upstream.push(Reply::raw(200, "application/json", allowed_bytes.clone()));
    let passed = gateway.post_chat(&chat_request(false)).await;
    assert_eq!(passed.status(), 200);
    assert_eq!(
        passed.bytes().await.unwrap().as_ref(),
        allowed_bytes.as_slice()
    );
}

#[tokio::test]
async fn a_redacted_chat_value_reaches_the_client_as_valid_json() {
    let (upstream, gateway) = start_with_rules(CHAT_RULES).await;
    upstream.push(Reply::json(
        200,
        chat_completion(&[("call_1", "login", LOGIN_ARGUMENTS)], Some("logging in")),
    ));
    let response = gateway.post_chat(&chat_request(false)).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(!text.contains("hunter2"), "{text}");
    let body: Value = serde_json::from_str(&text).expect("valid JSON");
    let arguments = body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap();
    assert_eq!(arguments, REDACTED_LOGIN);
    assert_eq!(body["choices"][0]["message"]["content"], "logging in");
    assert_eq!(body["usage"]["prompt_tokens"], 142, "untouched fields stay");

    // The same through the OpenAI SDK: it parses the edited answer like any other.
    upstream.push(Reply::chat_calls(&[("call_1", "login", LOGIN_ARGUMENTS)]));
    let completion = gateway
        .sdk_chat(chat_request(false))
        .await
        .expect("allowed");
    let call = &completion.choices[0].message.tool_calls.as_ref().unwrap()[0];
    let async_openai::types::chat::ChatCompletionMessageToolCalls::Function(call) = call else {
        panic!("a function call");
    };
    assert_eq!(call.function.arguments, REDACTED_LOGIN);
}

#[tokio::test]
async fn a_redacted_chat_stream_carries_the_new_arguments_at_every_chunk_size() {
    let (upstream, gateway) = start_with_rules(CHAT_RULES).await;
    let stream = chat_stream(
        &[
            ("call_1", "login", LOGIN_ARGUMENTS),
            ("call_2", "send_email", r#"{"to":"ann@example.com"}"#),
        ],
        Some("logging in"),
    );
    for chunk in [1, 3, 7, 64, stream.len()] {
        upstream.push(Reply::sse_chunked(&stream, chunk));
        let response = gateway.post_chat(&chat_request(true)).await;
        assert_eq!(response.status(), 200, "chunk {chunk}");
        let body = response.bytes().await.unwrap();
        let text = String::from_utf8_lossy(&body);
        assert!(!text.contains("hunter2"), "chunk {chunk}: {text}");
        assert!(text.ends_with("data: [DONE]\n\n"), "chunk {chunk}");
        let calls = reassemble(WireFormat::ChatCompletions, [body.as_ref()])
            .response
            .calls;
        assert_eq!(calls[0].arguments, REDACTED_LOGIN, "chunk {chunk}");
        assert_eq!(
            calls[1].arguments, r#"{"to":"ann@example.com"}"#,
            "chunk {chunk}"
        );
    }
}

/// The rules redacting Paris from a weather call, as a literal so that both constants below
/// can be built from it at compile time.
macro_rules! redact_paris_rules {
    () => {
        r#"
[[routes.plugins.settings.rules]]
name = "hide-city"
tools = "get_weather"
pointer = "/city"
deny = ["paris"]
action = "redact"
replacement = "somewhere"

[[routes.plugins.settings.rules]]
name = "hide-location"
tools = "get_weather"
pointer = "/location"
deny = ["paris"]
action = "redact"
replacement = "somewhere"
"#
    };
}

/// Paris redacted, and any unit but fahrenheit refused.
const WEATHER_RULES: &str = concat!(
    redact_paris_rules!(),
    r#"
[[routes.plugins.settings.rules]]
name = "units"
tools = "get_weather"
pointer = "/unit"
allowed = ["fahrenheit"]
"#
);

/// Paris redacted, nothing refused.
const REDACT_ONLY: &str = redact_paris_rules!();

/// The answer's text without the tool description the Responses API echoes (it names Paris).
fn without_description(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).replace("e.g. \\\"Paris\\\"", "")
}

fn with_stream(mut request: Value, stream: bool) -> Value {
    request["stream"] = json!(stream);
    request
}

#[tokio::test]
async fn responses_api_calls_are_refused_and_redacted_complete_and_streamed() {
    let upstream = ScriptedUpstream::start().await;
    let request = fixture_json("responses/function_call_allowed.request.json");
    let response = fixture("responses/function_call_allowed.response.json");
    let stream = fixture("responses/function_call_allowed.sse");

    let rejecting = TestGateway::start(&upstream, &rules_config(WEATHER_RULES)).await;
    upstream.push(Reply::raw(200, "application/json", response.clone()));
    let refused = rejecting
        .post("/v1/responses", &with_stream(request.clone(), false))
        .await;
    let body = json_with_status(refused, 403).await;
    assert_eq!(body["error"]["violations"][0]["keyword"], "not_allowed");
    assert_eq!(body["error"]["violations"][0]["instance_path"], "/unit");

    let redacting = TestGateway::start(&upstream, &rules_config(REDACT_ONLY)).await;
    upstream.push(Reply::raw(200, "application/json", response.clone()));
    let complete = redacting
        .post("/v1/responses", &with_stream(request.clone(), false))
        .await;
    assert_eq!(complete.status(), 200);
    let bytes = complete.bytes().await.unwrap();
    let parsed = WireFormat::Responses.parse_response(&bytes).expect("valid");
    let arguments: Value = serde_json::from_str(&parsed.calls[0].arguments).unwrap();
    assert_eq!(arguments["city"], "somewhere");
    assert!(!without_description(&bytes).contains("Paris"));

    for chunk in [1, 5, 97, stream.len()] {
        upstream.push(Reply::sse_chunked(&stream, chunk));
        let streamed = redacting
            .post("/v1/responses", &with_stream(request.clone(), true))
            .await;
        assert_eq!(streamed.status(), 200, "chunk {chunk}");
        let bytes = streamed.bytes().await.unwrap();
        assert!(
            !without_description(&bytes).contains("Paris"),
            "chunk {chunk}: the city is gone from every event"
        );
        let calls = reassemble(WireFormat::Responses, [bytes.as_ref()])
            .response
            .calls;
        let arguments: Value = serde_json::from_str(&calls[0].arguments).unwrap();
        assert_eq!(arguments["city"], "somewhere", "chunk {chunk}");
        assert_eq!(arguments["unit"], "celsius");
    }
}

#[tokio::test]
async fn anthropic_tool_use_input_is_redacted_as_an_object_complete_and_streamed() {
    let (upstream, gateway) = start_with_rules(REDACT_ONLY).await;
    let request = fixture_json("anthropic/tool_use_allowed.request.json");
    upstream.push(Reply::raw(
        200,
        "application/json",
        fixture("anthropic/tool_use_allowed.response.json"),
    ));
    let complete = gateway
        .post("/v1/messages", &with_stream(request.clone(), false))
        .await;
    let body = json_with_status(complete, 200).await;
    assert_eq!(body["content"][0]["input"]["location"], "somewhere");
    assert_eq!(body["content"][0]["input"]["unit"], "celsius");

    let stream = fixture("anthropic/tool_use_allowed.sse");
    for chunk in [2, 11, stream.len()] {
        upstream.push(Reply::sse_chunked(&stream, chunk));
        let streamed = gateway
            .post("/v1/messages", &with_stream(request.clone(), true))
            .await;
        assert_eq!(streamed.status(), 200);
        let bytes = streamed.bytes().await.unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains("Paris"),
            "chunk {chunk}"
        );
        let calls = reassemble(WireFormat::AnthropicMessages, [bytes.as_ref()])
            .response
            .calls;
        let input: Value = serde_json::from_str(&calls[0].arguments).unwrap();
        assert_eq!(input["location"], "somewhere", "chunk {chunk}");
    }
}

/// Issue 21 point 8: a rule selects a tool, not a spelling. Rules written `Send_Email ` and
/// `LOGIN` govern calls the model cased and padded otherwise, refusing and redacting alike.
#[tokio::test]
async fn a_rule_covers_case_and_space_variants_of_its_tool() {
    let rules = CHAT_RULES
        .replace("tools = \"send_email\"", "tools = \"Send_Email \"")
        .replace("tools = \"login\"", "tools = \"LOGIN\"");
    let (upstream, gateway) = start_with_rules(&rules).await;
    let body = refusal_of(
        &upstream,
        &gateway,
        &[("call_1", " SEND_email", r#"{"to":"boss@evil.test"}"#)],
    )
    .await;
    assert_eq!(body["error"]["violations"][0]["check"], "rule");
    assert_eq!(body["error"]["violations"][0]["tool"], " SEND_email");

    upstream.push(Reply::chat_calls(&[("call_2", "Login", LOGIN_ARGUMENTS)]));
    let redacted = gateway.post_chat(&chat_request(false)).await;
    let body = json_with_status(redacted, 200).await;
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        REDACTED_LOGIN
    );
}

#[test]
fn bad_rules_are_located_errors() {
    let runtime = Runtime::new();
    let cases = [
        (
            "[[routes.plugins.settings.rules]]\ntools = \"sql\"\npointer = \"/q\"\nmatches = \"(unclosed\"\n",
            "(unclosed",
            "routes[0].plugins[0].settings.rules[0].matches: the regex does not compile",
        ),
        (
            "[[routes.plugins.settings.rules]]\ntools = \"sql\"\npointer = \"q\"\ndeny = [\"x\"]\n",
            "pointer = \"q\"",
            "routes[0].plugins[0].settings.rules[0].pointer: 'q' is not a JSON Pointer",
        ),
        (
            "[[routes.plugins.settings.rules]]\ntools = \"pay\"\npointer = \"/n\"\nmaximum = \"ten\"\n",
            "\"ten\"",
            "routes[0].plugins[0].settings.rules[0].maximum: invalid type",
        ),
        (
            "[[routes.plugins.settings.rules]]\ntools = \"sql\"\npointer = \"/query\"\nmatches = \"select .*\"\n\
             [[routes.plugins.settings.rules]]\ntools = \"sql\"\npointer = \"/query/text\"\ndeny = [\"drop\"]\n",
            "/query/text",
            "routes[0].plugins[0].settings.rules[1].pointer: '/query/text' points inside '/query'",
        ),
        (
            // `SQL` and `sql` select the same calls, so the rules conflict all the same.
            "[[routes.plugins.settings.rules]]\ntools = \"sql\"\npointer = \"/query\"\nmatches = \"select .*\"\n\
             [[routes.plugins.settings.rules]]\ntools = \" SQL\"\npointer = \"/query/text\"\ndeny = [\"drop\"]\n",
            "/query/text",
            "routes[0].plugins[0].settings.rules[1].pointer: '/query/text' points inside '/query'",
        ),
    ];
    for (rules, needle, expected) in cases {
        let text = common::config_text(
            "http://127.0.0.1:9",
            std::path::Path::new("/dev/null"),
            &rules_config(rules),
        );
        let errors = config_errors(&text, "test.toml", &runtime.plugins);
        let line = text.lines().position(|line| line.contains(needle)).unwrap() + 1;
        assert!(
            errors.contains(&format!("test.toml:{line}:")) && errors.contains(expected),
            "{errors}\nexpected line {line}: {expected}"
        );
    }
}
