//! The shipped gateway.toml's route table end to end (issue 21): its generation endpoints are
//! guarded by tool_selection, and the other endpoints (models, embeddings, Anthropic token
//! counts) pass through unchanged, with `strict = true` as well as without.

use bytes::Bytes;
use serde_json::{Value, json};
use toolgate::Runtime;

use crate::common::{Reply, ScriptedUpstream, TestGateway, fixture, temp_audit_path};

/// gateway.toml as shipped, with loopback addresses, a temp audit file, the scripted upstream
/// and the given `strict`. Each replaced text must be in the file, so a change to it fails here
/// by name instead of testing something else.
fn shipped(upstream: &ScriptedUpstream, audit: &std::path::Path, strict: bool) -> String {
    let mut text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/gateway.toml"))
        .expect("gateway.toml");
    for (from, to) in [
        (
            "\"${TOOLGATE_LISTEN:-127.0.0.1:8080}\"",
            "\"127.0.0.1:0\"".to_owned(),
        ),
        (
            "\"${TOOLGATE_ADMIN:-127.0.0.1:9090}\"",
            "\"off\"".to_owned(),
        ),
        (
            "\"${UPSTREAM_URL:-https://api.openai.com}\"",
            format!("\"{}\"", upstream.url()),
        ),
        (
            "\"${TOOLGATE_AUDIT:-stdout}\"",
            format!("\"{}\"", audit.display()),
        ),
        ("\nstrict = false ", format!("\nstrict = {strict} ")),
    ] {
        assert!(text.contains(from), "gateway.toml no longer has {from}");
        text = text.replace(from, &to);
    }
    text
}

async fn start(strict: bool) -> (ScriptedUpstream, TestGateway) {
    let upstream = ScriptedUpstream::start().await;
    let audit = temp_audit_path();
    let text = shipped(&upstream, &audit, strict);
    let gateway = TestGateway::start_text(&text, audit, Runtime::new()).await;
    (upstream, gateway)
}

/// Sends `method path` with `body` (JSON) and returns the status and the body's bytes.
async fn send(
    gateway: &TestGateway,
    method: reqwest::Method,
    path: &str,
    body: Option<&Value>,
) -> (u16, Bytes) {
    let mut request = crate::common::http()
        .request(method, format!("{}{path}", gateway.url()))
        .header("authorization", "Bearer sk-client-key");
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = request.send().await.expect("the gateway answers");
    let status = response.status().as_u16();
    (status, response.bytes().await.expect("a body"))
}

/// Answers as OpenAI and Anthropic give them, with spacing a re-serialization would lose.
const EMBEDDINGS: &str = "{\"object\": \"list\", \"data\": [{\"object\": \"embedding\", \"index\": 0, \
     \"embedding\": [0.0023064255, -0.009327292, 0.015797347]}], \"model\": \"text-embedding-3-small\", \
     \"usage\": {\"prompt_tokens\": 8, \"total_tokens\": 8}}";
const MODELS: &str = "{\"object\": \"list\", \"data\": [{\"id\": \"gpt-4o-mini\", \"object\": \"model\", \
     \"created\": 1721172741, \"owned_by\": \"system\"}]}";
const COUNT_TOKENS: &str = "{\"input_tokens\": 2095}";

#[tokio::test]
async fn other_endpoints_pass_through_unchanged_strict_or_not() {
    for strict in [false, true] {
        let (upstream, gateway) = start(strict).await;
        let exchanges = [
            (
                reqwest::Method::POST,
                "/v1/embeddings",
                Some(json!({"model": "text-embedding-3-small", "input": "The food was delicious"})),
                EMBEDDINGS,
            ),
            (reqwest::Method::GET, "/v1/models", None, MODELS),
            (
                reqwest::Method::POST,
                "/v1/messages/count_tokens",
                Some(
                    json!({"model": "claude-sonnet-4-5", "system": "You are a scientist",
                    "messages": [{"role": "user", "content": "Hello, Claude"}]}),
                ),
                COUNT_TOKENS,
            ),
        ];
        for (method, path, body, answer) in exchanges {
            upstream.push(Reply::json(200, answer));
            let (status, received) = send(&gateway, method, path, body.as_ref()).await;
            assert_eq!(status, 200, "{path} (strict = {strict}): {received:?}");
            assert_eq!(
                received,
                answer.as_bytes(),
                "{path} (strict = {strict}) is forwarded byte for byte"
            );
            let forwarded = upstream.last_request().expect("forwarded");
            assert_eq!(forwarded.path_and_query, path);
        }
    }
}

#[tokio::test]
async fn a_chat_completion_calling_an_undeclared_tool_is_403_strict_or_not() {
    for strict in [false, true] {
        let (upstream, gateway) = start(strict).await;
        upstream.push(Reply::chat_calls(&[(
            "call_1",
            "delete_user",
            "{\"user_id\": \"u1\"}",
        )]));
        let request = json!({"model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": "What's the weather in Paris?"}],
            "tools": [{"type": "function", "function": {"name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]});
        let (status, body) = send(
            &gateway,
            reqwest::Method::POST,
            "/v1/chat/completions",
            Some(&request),
        )
        .await;
        assert_eq!(status, 403, "strict = {strict}: {body:?}");
        let error: Value = serde_json::from_slice(&body).expect("a JSON error");
        assert_eq!(error["error"]["code"], "undeclared_tool", "{error}");
    }
}

#[tokio::test]
async fn a_retrieved_response_is_read_as_a_response_and_its_calls_are_refused_strict_or_not() {
    for strict in [true, false] {
        let (upstream, gateway) = start(strict).await;
        upstream.push(Reply::json(
            200,
            fixture("responses/undeclared_tool.response.json"),
        ));
        let (status, body) = send(
            &gateway,
            reqwest::Method::GET,
            "/v1/responses/resp_68af0c7f",
            None,
        )
        .await;
        assert_eq!(status, 403, "{body:?}");
        let error: Value = serde_json::from_slice(&body).expect("a JSON error");
        // Nothing was declared in a GET: the calls of a stored answer cannot be checked.
        assert_eq!(error["error"]["code"], "unverifiable_calls", "{error}");
        let tools: Vec<&Value> = error["error"]["violations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|violation| &violation["tool"])
            .collect();
        assert!(
            tools.contains(&&json!("delete_user")),
            "the call was read from the Responses body: {error}"
        );
    }
}
