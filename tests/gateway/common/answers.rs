//! Reading and checking what came back: the gateway's error envelopes and request ids, the
//! OpenAI SDK's view of a refusal, and the located errors of a config that must not load. One
//! place for each, so a test says which refusal it expects instead of how to dig it out.

use async_openai::error::OpenAIError;
use async_openai::types::chat::CreateChatCompletionRequest;
use serde_json::Value;
use toolgate::{Config, PluginRegistry};

/// Asserts that `response` has `status` and returns its JSON body (mostly an error envelope).
pub async fn json_with_status(response: reqwest::Response, status: u16) -> Value {
    assert_eq!(response.status(), status);
    response.json().await.expect("the body is JSON")
}

/// The status and JSON body of an answer, whatever they are (`null` for a body that is not
/// JSON), for checks that read both.
pub async fn status_and_json(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body)
}

/// Asserts a refusal envelope's `error.code` and the `check` of its first violation: which
/// refusal it is, and which check made it.
pub fn assert_refusal(body: &Value, code: &str, check: &str) {
    assert_eq!(body["error"]["code"], code, "{body}");
    assert_eq!(body["error"]["violations"][0]["check"], check, "{body}");
}

/// A block as the client reads it raw: a 403 that carries an `x-request-id`; returns the
/// envelope.
pub async fn blocked_envelope(response: reqwest::Response) -> Value {
    assert_eq!(response.status(), 403, "expected a block");
    assert!(response.headers().contains_key("x-request-id"));
    response.json().await.expect("the envelope is JSON")
}

/// An answer the gateway made itself (404, 413, 502, 504): `status`, and an envelope whose
/// `request_id` is the answer's `x-request-id` and whose message says something. Returns it.
pub async fn gateway_error_envelope(response: reqwest::Response, status: u16) -> Value {
    assert_eq!(response.status(), status);
    let request_id = request_id(&response);
    let body: Value = response.json().await.expect("an error envelope");
    assert_eq!(body["error"]["request_id"], request_id.as_str());
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    body
}

/// The answer's `x-request-id`, which the audit line of its exchange carries too.
pub fn request_id(response: &reqwest::Response) -> String {
    response.headers()["x-request-id"]
        .to_str()
        .expect("ascii")
        .to_owned()
}

/// A chat request in the OpenAI SDK's own type, for tests that go through the SDK.
pub fn sdk_chat_request(body: Value) -> CreateChatCompletionRequest {
    serde_json::from_value(body).expect("a valid chat completion request")
}

/// The SDK's error for an answer it refused to read as a success: the HTTP status and the
/// error object it parsed (`code`, `type`, `message`), as JSON.
pub fn sdk_api_error(error: OpenAIError) -> (u16, Value) {
    match error {
        OpenAIError::ApiError(error) => (
            error.status_code.as_u16(),
            serde_json::to_value(&error.api_error).expect("serializable"),
        ),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Asserts that the SDK raised an API error with `status` whose error object has `code`;
/// returns that object for the test's further checks (`type`, `message`).
pub fn assert_sdk_error(error: OpenAIError, status: u16, code: &str) -> Value {
    let (got, body) = sdk_api_error(error);
    assert_eq!(got, status, "{body}");
    assert_eq!(body["code"], code, "{body}");
    body
}

/// The errors of a config text that must not load (named `origin` in them), as text.
pub fn config_errors(text: &str, origin: &str, plugins: &PluginRegistry) -> String {
    match Config::from_toml(text, origin, plugins) {
        Ok(_) => panic!("the config loaded, though it is wrong:\n{text}"),
        Err(errors) => errors.to_string(),
    }
}

/// Asserts that `text` contains each of `expected`, naming the first that is missing.
pub fn assert_contains_all<S: AsRef<str>>(text: &str, expected: impl IntoIterator<Item = S>) {
    for expected in expected {
        let expected = expected.as_ref();
        assert!(text.contains(expected), "missing «{expected}» in:\n{text}");
    }
}

/// The names of the function tools in a chat `tools` list, in order (none without a list).
pub fn function_names(tools: &Value) -> Vec<String> {
    tools
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_owned))
        .collect()
}
