//! Disclosure on chat completions, whole and streamed: the index and the discovery tools in
//! place of forty definitions, a discovery round the client never sees, and the client's call
//! checked against its own declaration.

use serde_json::json;

use super::{
    DECLARED, DISCOVERY, LOAD_WEATHER, WEATHER, chat_request, disclosed_route, last_items,
    sent_tool_names,
};
use crate::common::{Reply, ScriptedUpstream, TestGateway};
use crate::on_block::streams::{read_sdk_stream, streamed};

#[tokio::test]
async fn the_model_sees_an_index_loads_a_tool_and_the_client_gets_only_its_call() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &disclosed_route("")).await;
    upstream.push(Reply::chat_calls(&[LOAD_WEATHER]));
    upstream.push(Reply::chat_calls(&[WEATHER]));

    let answer = gateway
        .sdk_chat(chat_request())
        .await
        .expect("the SDK reads the answer");
    let calls = answer.choices[0]
        .message
        .tool_calls
        .clone()
        .unwrap_or_default();
    let calls = serde_json::to_value(&calls).expect("serializable");
    assert_eq!(calls.as_array().map(Vec::len), Some(1), "{calls}");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    assert_eq!(
        answer.usage.expect("usage").prompt_tokens,
        284,
        "both rounds are billed"
    );

    let requests = upstream.requests();
    assert_eq!(requests.len(), 2);
    let first = requests[0].json();
    assert_eq!(
        sent_tool_names(&first),
        DISCOVERY,
        "no declared definition at first"
    );
    assert_eq!(first["messages"][0]["content"], "You are helpful.");
    let index = first["messages"][1]["content"].as_str().unwrap_or_default();
    assert_eq!(first["messages"][1]["role"], "system");
    assert!(
        index.contains("- get_weather: Reports the weather of a city."),
        "{index}"
    );
    assert!(
        index.contains("- tool_039: Does task number 39."),
        "{index}"
    );
    assert_eq!(first["messages"][2]["role"], "user");

    let second = requests[1].json();
    assert_eq!(
        sent_tool_names(&second),
        [
            "get_weather",
            "list_tools",
            "load_tool",
            "load_tool_resource"
        ],
        "the loaded tool is declared in full"
    );
    assert!(
        second["messages"][1]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("- get_weather: Reports the weather of a city. (loaded)")
    );
    let round = last_items(&second, "messages", 2);
    assert_eq!(round[0]["tool_calls"][0]["function"]["name"], "load_tool");
    assert_eq!(round[1]["role"], "tool");
    assert_eq!(round[1]["tool_call_id"], "call_load");
    let body: serde_json::Value =
        serde_json::from_str(round[1]["content"].as_str().unwrap_or_default()).expect("JSON");
    assert_eq!(body["tool"], "get_weather");
    assert_eq!(
        body["definition"]["function"]["parameters"]["required"],
        json!(["city"])
    );

    let request_id = requests[0]
        .header("x-request-id")
        .expect("forwarded")
        .to_owned();
    let line = gateway.audit_line(&request_id).await;
    assert_eq!(line["verdict"], "allowed", "{line}");
    assert_eq!(line["disclosure"]["rounds"], 1, "{line}");
    assert_eq!(
        line["disclosure"]["loaded"],
        json!(["get_weather"]),
        "{line}"
    );
    let declared = line["disclosure"]["declared_bytes"]
        .as_u64()
        .unwrap_or_default();
    let sent = line["disclosure"]["sent_bytes"]
        .as_u64()
        .unwrap_or(u64::MAX);
    assert!(sent < declared, "sent {sent} of {declared} declared bytes");
    gateway
        .assert_metrics_contain(&[
            "toolgate_disclosure_loads_total 1",
            "toolgate_disclosure_rounds_total 1",
            "toolgate_disclosure_calls_total{tool=\"load_tool\"} 1",
        ])
        .await;
}

#[tokio::test]
async fn a_streamed_discovery_round_is_never_shown_to_the_client() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &disclosed_route("")).await;
    upstream.push(Reply::sse_events(&crate::common::upstream::chat_stream(
        &[LOAD_WEATHER],
        None,
    )));
    upstream.push(Reply::sse_events(&crate::common::upstream::chat_stream(
        &[WEATHER],
        Some("Checking."),
    )));

    let (text, calls, finishes, error) = read_sdk_stream(&gateway, streamed(chat_request())).await;
    assert_eq!(error, None);
    assert_eq!(
        calls,
        ["get_weather"],
        "the discovery call never reaches the client"
    );
    assert_eq!(text, "Checking.");
    assert_eq!(finishes, ["\"tool_calls\""]);
    let second = upstream.requests()[1].json();
    assert_eq!(second["stream"], true);
    assert_eq!(sent_tool_names(&second)[0], "get_weather");
}

#[tokio::test]
async fn a_call_to_a_declared_tool_not_yet_loaded_is_checked_against_the_clients_declaration() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &disclosed_route("")).await;
    // Straight to the call, with arguments its schema refuses.
    upstream.push(Reply::chat_calls(&[(
        "call_1",
        "get_weather",
        r#"{"town":"Paris"}"#,
    )]));
    let response = gateway.post_chat(&chat_request()).await;
    assert_eq!(response.status(), 403);
    let body: serde_json::Value = response.json().await.expect("JSON");
    assert_eq!(body["error"]["code"], "schema_violation", "{body}");
    assert_eq!(upstream.request_count(), 1);
}

#[tokio::test]
async fn discovery_first_then_the_model_is_asked_again_when_it_mixes_calls() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &disclosed_route("")).await;
    upstream.push(Reply::chat_calls(&[LOAD_WEATHER, WEATHER]));
    upstream.push(Reply::chat_calls(&[WEATHER]));
    let answer = gateway.sdk_chat(chat_request()).await.expect("answer");
    let calls = answer.choices[0]
        .message
        .tool_calls
        .clone()
        .unwrap_or_default();
    assert_eq!(calls.len(), 1);
    let round = last_items(&upstream.requests()[1].json(), "messages", 3);
    assert_eq!(round[0]["tool_calls"].as_array().map(Vec::len), Some(2));
    assert_eq!(round[2]["tool_call_id"], "call_weather");
    assert!(
        round[2]["content"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Not run yet"),
        "{round:?}"
    );
}

#[tokio::test]
async fn below_min_tools_the_request_goes_as_declared() {
    let upstream = ScriptedUpstream::start().await;
    let settings = format!("settings = {{ min_tools = {} }}", DECLARED + 1);
    let gateway = TestGateway::start(&upstream, &disclosed_route(&settings)).await;
    upstream.push(Reply::chat_calls(&[WEATHER]));
    let response = gateway.post_chat(&chat_request()).await;
    assert_eq!(response.status(), 200);
    let sent = upstream.requests()[0].json();
    assert_eq!(sent_tool_names(&sent).len(), DECLARED);
    assert_eq!(sent["messages"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn a_forced_tool_stays_declared_once_when_the_model_loads_it() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &disclosed_route("")).await;
    upstream.push(Reply::chat_calls(&[LOAD_WEATHER]));
    upstream.push(Reply::chat_calls(&[WEATHER]));
    let mut request = chat_request();
    request["tool_choice"] = json!({"type": "function", "function": {"name": "get_weather"}});
    assert_eq!(gateway.post_chat(&request).await.status(), 200);
    for sent in upstream.requests() {
        let sent = sent.json();
        assert_eq!(
            sent_tool_names(&sent),
            [
                "get_weather",
                "list_tools",
                "load_tool",
                "load_tool_resource"
            ],
            "the forced tool is shown, once, in every round"
        );
        assert_eq!(sent["tool_choice"], request["tool_choice"]);
    }
}
