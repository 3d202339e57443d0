//! No bypass by format or by `stream`: every recorded exchange of the three formats is sent
//! streamed and not, on its endpoint and on a route whose format is found from the body, and
//! the decision must be the same each time and the one its `verdicts.json` records.

use crate::common::answers::{assert_sdk_error, json_with_status};
use crate::common::upstream::chat_stream;
use crate::common::{GUARDED_V1, Reply, ScriptedUpstream, TestGateway, fixture, fixture_json};
use serde_json::{Value, json};

/// What the client got, reduced to the decision: allowed, or blocked with a code.
#[derive(Debug, PartialEq, Eq)]
enum Decision {
    Allowed,
    Blocked(String),
}

/// Reads the decision from an answer: a 2xx without an error event is allowed; a 403 or a 502
/// (a stream cut before its end), or an error event in a stream (each format shapes it its own
/// way), is blocked with its code.
fn decision(status: u16, body: &str) -> Decision {
    if status == 403 || status == 502 {
        let envelope: Value = serde_json::from_str(body).unwrap_or_default();
        return Decision::Blocked(envelope["error"]["code"].as_str().unwrap_or("?").to_owned());
    }
    assert_eq!(status, 200, "neither allowed nor blocked: {status} {body}");
    for data in body.lines().filter_map(|line| line.strip_prefix("data: ")) {
        let Ok(event) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        let code = if event["type"] == "error" && event["error"].is_object() {
            &event["error"]["code"] // Anthropic
        } else if event["type"] == "error" {
            &event["code"] // Responses API
        } else {
            &event["error"]["code"] // chat completions
        };
        if let Some(code) = code.as_str() {
            return Decision::Blocked(code.to_owned());
        }
    }
    Decision::Allowed
}

fn expected_decision(verdict: &Value) -> Decision {
    match verdict["verdict"].as_str() {
        Some("allowed") => Decision::Allowed,
        _ => Decision::Blocked(verdict["code"].as_str().unwrap_or("?").to_owned()),
    }
}

async fn send(
    gateway: &TestGateway,
    upstream: &ScriptedUpstream,
    path: &str,
    request: &Value,
    reply: Reply,
) -> Decision {
    upstream.push(reply);
    let response = gateway.post(path, request).await;
    let status = response.status().as_u16();
    decision(status, &response.text().await.unwrap_or_default())
}

#[tokio::test]
async fn every_format_gets_the_same_decision_streamed_or_not_and_wherever_it_is_sent() {
    let upstream = ScriptedUpstream::start().await;
    let routes = "[[plugins]]\nname = \"tool_selection\"\n\n\
                  [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n\n\
                  [[routes]]\npath = \"/gateway\"\nupstream = \"llm\"\n";
    let gateway = TestGateway::start(&upstream, routes).await;
    let mut failures = Vec::new();
    let mut cases = 0;
    for (folder, path) in [
        ("responses", "/v1/responses"),
        ("anthropic", "/v1/messages"),
    ] {
        let verdicts = fixture_json(&format!("{folder}/verdicts.json"));
        for (name, verdict) in verdicts.as_object().cloned().unwrap_or_default() {
            let expected = expected_decision(&verdict);
            let request = fixture_json(&format!("{folder}/{name}.request.json"));
            let mut streamed = request.clone();
            streamed["stream"] = json!(true);
            let body = fixture(&format!("{folder}/{name}.response.json"));
            let stream = fixture(&format!("{folder}/{name}.sse"));
            let sends = [
                (
                    "plain",
                    path,
                    &request,
                    Reply::raw(200, "application/json", body.clone().into_bytes()),
                ),
                ("streamed", path, &streamed, Reply::sse_chunked(&stream, 13)),
                // `/gateway/…` says nothing of the format: the body's shape must.
                (
                    "plain, format from the body",
                    "/gateway/anything",
                    &request,
                    Reply::raw(200, "application/json", body.into_bytes()),
                ),
                (
                    "streamed, format from the body",
                    "/gateway/anything",
                    &streamed,
                    Reply::sse_chunked(&stream, 29),
                ),
            ];
            for (how, path, request, reply) in sends {
                cases += 1;
                let got = send(&gateway, &upstream, path, request, reply).await;
                if got != expected {
                    failures.push(format!(
                        "{folder}/{name} {how}: expected {expected:?}, got {got:?}"
                    ));
                }
            }
        }
    }

    // Chat completions, built from the same calls streamed and not.
    let tools = json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]);
    let chat_cases: [(&str, &str, Decision); 4] = [
        ("get_weather", r#"{"city":"Oslo"}"#, Decision::Allowed),
        (
            "delete_user",
            "{}",
            Decision::Blocked("undeclared_tool".into()),
        ),
        (
            "get_weather",
            r#"{"town":"Oslo"}"#,
            Decision::Blocked("schema_violation".into()),
        ),
        (
            "get_weather",
            r#"{"city":"Os"#,
            Decision::Blocked("invalid_arguments".into()),
        ),
    ];
    for (name, arguments, expected) in chat_cases {
        for stream in [false, true] {
            let request = json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}], "tools": tools});
            let calls = [("call_1", name, arguments)];
            let reply = if stream {
                Reply::sse_chunked(&chat_stream(&calls, Some("One moment.")), 7)
            } else {
                Reply::chat_calls(&calls)
            };
            cases += 1;
            let got = send(&gateway, &upstream, "/v1/chat/completions", &request, reply).await;
            if got != expected {
                failures.push(format!(
                    "chat {name} {arguments} stream={stream}: expected {expected:?}, got {got:?}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {cases} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(cases >= 60, "{cases} cases");
}

#[tokio::test]
async fn anthropic_clients_get_anthropic_errors_from_the_gateway_itself() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(
        &upstream,
        "[[routes]]\npath = \"/v1/chat\"\nupstream = \"llm\"\n",
    )
    .await;
    let response = gateway
        .post(
            "/v1/messages",
            &json!({"model": "claude", "max_tokens": 10, "messages": []}),
        )
        .await;
    let body = json_with_status(response, 404).await;
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "not_found_error");
    assert_eq!(body["error"]["code"], "route_not_found");
}

#[tokio::test]
async fn the_openai_sdk_speaks_the_responses_api_through_the_gateway() {
    use async_openai::types::responses::{CreateResponse, OutputItem};
    use futures_util::StreamExt;

    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, GUARDED_V1).await;
    let request = |name: &str| -> CreateResponse {
        serde_json::from_value(fixture_json(&format!("responses/{name}.request.json")))
            .expect("the SDK reads the request")
    };
    // The recorded answer to the recorded request of the same name.
    let answer = |name: &str| {
        Reply::raw(
            200,
            "application/json",
            fixture(&format!("responses/{name}.response.json")).into_bytes(),
        )
    };

    upstream.push(answer("function_call_allowed"));
    let response = gateway
        .openai()
        .responses()
        .create(request("function_call_allowed"))
        .await
        .expect("allowed");
    assert!(
        response.output.iter().any(
            |item| matches!(item, OutputItem::FunctionCall(call) if call.name == "get_weather")
        )
    );

    upstream.push(answer("undeclared_tool"));
    let error = gateway
        .openai()
        .responses()
        .create(request("undeclared_tool"))
        .await
        .expect_err("blocked");
    assert_sdk_error(error, 403, "undeclared_tool");

    // Streamed: text then an allowed call reads cleanly, the call in it.
    upstream.push(Reply::sse_chunked(
        &fixture("responses/text_then_call.sse"),
        17,
    ));
    let mut streamed = request("text_then_call");
    streamed.stream = Some(true);
    let events: Vec<_> = gateway
        .openai()
        .responses()
        .create_stream(streamed)
        .await
        .expect("opens")
        .collect()
        .await;
    assert!(
        !events.is_empty() && events.iter().all(Result::is_ok),
        "an allowed stream reads cleanly"
    );
    let seen = format!("{events:?}");
    assert!(
        seen.contains("get_order_status"),
        "the call was released: {seen}"
    );

    // Streamed and blocked: the undeclared call is refused before anything was sent, so the
    // SDK gets the 403 (at opening, or as the stream's first item) and never the call.
    upstream.push(Reply::sse_chunked(
        &fixture("responses/undeclared_tool.sse"),
        17,
    ));
    let mut streamed = request("undeclared_tool");
    streamed.stream = Some(true);
    let outcome = match gateway.openai().responses().create_stream(streamed).await {
        Err(error) => format!("{error:?}"),
        Ok(stream) => format!("{:?}", stream.collect::<Vec<_>>().await),
    };
    assert!(outcome.contains("undeclared_tool"), "{outcome}");
    assert!(
        !outcome.contains("FunctionCallArgumentsDelta"),
        "no part of the call reached the SDK: {outcome}"
    );
}

#[tokio::test]
async fn truncated_and_disordered_streams_of_every_format_are_answered_never_hung() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, GUARDED_V1).await;
    for (folder, path, name) in [
        ("anthropic", "/v1/messages", "tool_use_allowed"),
        ("responses", "/v1/responses", "function_call_allowed"),
    ] {
        let stream = fixture(&format!("{folder}/{name}.sse"));
        let mut request = fixture_json(&format!("{folder}/{name}.request.json"));
        request["stream"] = json!(true);
        // Cut inside the call's arguments: the JSON never closes, so the call is refused.
        let events: Vec<&str> = stream.split_inclusive("\n\n").collect();
        let cut_at = events
            .iter()
            .position(|event| {
                (event.contains("arguments.delta") || event.contains("input_json_delta"))
                    && event.contains("Par")
            })
            .expect("an arguments delta");
        let truncated: String = events[..=cut_at].concat();
        let got = send(
            &gateway,
            &upstream,
            path,
            &request,
            Reply::sse_chunked(&truncated, 11),
        )
        .await;
        assert_ne!(
            got,
            Decision::Allowed,
            "{folder}: a call cut short is never released"
        );
        // Reversed events: nothing that makes sense, never a hang, never an unchecked call.
        let reversed: String = events.iter().rev().copied().collect();
        let answer = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            send(
                &gateway,
                &upstream,
                path,
                &request,
                Reply::sse_chunked(&reversed, 23),
            ),
        )
        .await;
        // Reversed, the terminal event comes first and the call's events after it: the call
        // is never released as checked-and-whole, so the answer is not an allowed one.
        let answer = answer.unwrap_or_else(|_| panic!("{folder}: reversed events were answered"));
        assert_ne!(
            answer,
            Decision::Allowed,
            "{folder}: a disordered stream's call is not released"
        );
    }
}
