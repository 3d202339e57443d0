//! `call_limit`, the plugin added the way docs/writing-a-plugin.md describes: an answer past
//! `max_calls` is refused with the plugin's own check kind, JSON and streamed, and an answer
//! within it passes untouched.

use serde_json::{Value, json};

use crate::common::upstream::{chat_completion, chat_stream};
use crate::common::{Reply, ScriptedUpstream, TestGateway};

const LIMITED: &str = "[[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
    [[routes.plugins]]\nname = \"call_limit\"\n[routes.plugins.settings]\nmax_calls = 1\n";

fn request(stream: bool) -> Value {
    json!({"model": "m", "stream": stream,
        "messages": [{"role": "user", "content": "weather in two cities?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object"}}}]})
}

const TWO_CALLS: [(&str, &str, &str); 2] = [
    ("call_1", "get_weather", "{\"city\":\"Paris\"}"),
    ("call_2", "get_weather", "{\"city\":\"Oslo\"}"),
];

#[tokio::test]
async fn an_answer_past_max_calls_is_refused_with_the_plugins_own_check() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, LIMITED).await;
    for stream in [false, true] {
        upstream.push(match stream {
            false => Reply::json(200, chat_completion(&TWO_CALLS, None)),
            true => Reply::sse_chunked(&chat_stream(&TWO_CALLS, None), 9),
        });
        let response = gateway.post("/v1/chat/completions", &request(stream)).await;
        assert_eq!(response.status(), 403, "stream = {stream}");
        let body: Value = response.json().await.expect("envelope");
        let violation = &body["error"]["violations"][0];
        assert_eq!(violation["check"], "call_limit", "{body}");
        assert_eq!(violation["code"], "too_many_calls");
        assert_eq!(violation["tool_call_id"], "call_2");
    }
    let one_call = chat_completion(&TWO_CALLS[..1], None);
    upstream.push(Reply::json(200, one_call.clone()));
    let response = gateway.post("/v1/chat/completions", &request(false)).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("the upstream's answer");
    assert_eq!(body, one_call);
}
