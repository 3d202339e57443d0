//! `hold_text = true` beside `on_block`: a stream's text is held until the answer's calls are
//! checked, so an answer of text and a blocked call can still be retried (the client reads only
//! the answer that passed) or replaced by a message stream; an answer that passes is released
//! in one write, its bytes unchanged; what is held counts against the response limit.

use super::streams::{read_sdk_stream, streamed};
use super::{BAD, GOOD, chat_request, guarded_with};
use crate::common::answers::json_with_status;
use crate::common::upstream::chat_stream;
use crate::common::{Reply, ScriptedUpstream, TestGateway};

#[tokio::test]
async fn held_text_and_its_blocked_call_are_retried_and_the_client_reads_only_the_second_answer() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(
        &upstream,
        &guarded_with("on_block = \"retry\"\nhold_text = true"),
    )
    .await;
    upstream.push(Reply::sse_events(&chat_stream(
        &[BAD],
        Some("Deleting the user now."),
    )));
    upstream.push(Reply::sse_events(&chat_stream(
        &[GOOD],
        Some("Checking the weather."),
    )));

    let (text, calls, finishes, error) = read_sdk_stream(&gateway, chat_request()).await;
    assert_eq!(error, None);
    assert_eq!(
        text, "Checking the weather.",
        "only the second answer's text"
    );
    assert_eq!(calls, ["get_weather"]);
    assert_eq!(finishes, ["\"tool_calls\""]);
    assert_eq!(upstream.request_count(), 2);
    gateway
        .assert_metrics_contain(&[
            "toolgate_block_retries_total{route=\"/v1\",outcome=\"passed\"} 1",
        ])
        .await;
}

#[tokio::test]
async fn held_text_and_its_blocked_call_become_a_clean_message_stream() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(
        &upstream,
        &guarded_with("on_block = \"message\"\nhold_text = true"),
    )
    .await;
    upstream.push(Reply::sse_events(&chat_stream(
        &[BAD],
        Some("Deleting the user now."),
    )));
    let (text, calls, finishes, error) = read_sdk_stream(&gateway, chat_request()).await;
    assert_eq!(error, None);
    assert!(calls.is_empty(), "{calls:?}");
    assert!(
        !text.contains("Deleting"),
        "the blocked text never left: {text}"
    );
    assert!(
        text.contains("'delete_user' is not a declared tool"),
        "{text}"
    );
    assert_eq!(finishes, ["\"stop\""]);
}

#[tokio::test]
async fn an_answer_that_passes_is_released_whole_with_its_own_bytes() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(
        &upstream,
        &guarded_with("on_block = \"retry\"\nhold_text = true"),
    )
    .await;
    for answer in [
        chat_stream(&[GOOD], Some("Checking the weather.")),
        chat_stream(&[], Some("It is sunny in Paris today.")),
    ] {
        upstream.push(Reply::sse_events(&answer));
        let response = gateway.post_chat(&streamed(chat_request())).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.expect("text"), answer);
    }
    assert_eq!(upstream.request_count(), 2, "nothing was retried");
}

#[tokio::test]
async fn held_text_past_the_response_limit_fails_closed_before_anything_is_sent() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start_tuned(
        &upstream,
        "max_response_body_bytes = 2048",
        &guarded_with("on_block = \"retry\"\nhold_text = true"),
    )
    .await;
    let long_text = "All work and no play. ".repeat(200);
    upstream.push(Reply::sse_events(&chat_stream(&[], Some(&long_text))));
    let response = gateway.post_chat(&streamed(chat_request())).await;
    let body = json_with_status(response, 502).await;
    assert_eq!(body["error"]["code"], "upstream_response_too_large");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("hold_text"), "{message}");
}
