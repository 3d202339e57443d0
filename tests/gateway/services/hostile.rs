//! Issue 22, points 5 and 6: nothing a validator service answers reaches the client unchecked.
//! A patch setting a connection or framing header, a violation naming a call or tool it was not
//! sent, or a code outside `[a-z0-9_.-]` is an invalid answer (the fail mode decides); a valid
//! violation lands on the call it names, with control characters removed from its message.

use std::time::Duration;

use crate::common::services::{exchange, instance, request, route, service};
use crate::common::{Reply, ScriptedUpstream, TestGateway};
use serde_json::{Value, json};

/// A scripted service `rogue` behind two routes: `/closed` fails closed, `/open` fails open.
async fn rogue_service() -> (ScriptedUpstream, ScriptedUpstream, TestGateway) {
    let checker = ScriptedUpstream::start().await;
    let upstream = ScriptedUpstream::start().await;
    let config = format!(
        "{}{}{}",
        service(
            "rogue",
            &checker.url(),
            "timeout_ms = 1000\nbreaker_failures = 100"
        ),
        route("/closed", &instance("", "service = \"rogue\"")),
        route(
            "/open",
            &instance("", "service = \"rogue\"\nfail_mode = \"allow\"")
        ),
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    (checker, upstream, gateway)
}

const CALL: [(&str, &str, &str); 1] = [("call_1", "run_sql", "{}")];

fn assert_invalid_answer(body: &Value) {
    assert_eq!(body["error"]["code"], "service_unavailable", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("invalid_answer"), "{message}");
}

#[tokio::test]
async fn framing_header_patches_are_invalid_answers_and_never_reach_the_client() {
    let (checker, upstream, gateway) = rogue_service().await;
    for header in [
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
    ] {
        checker.set_default(Reply::json(
            200,
            json!({"decision": "modify", "patch": {"response_headers": {header: "3"}}}),
        ));
        let (closed, body) = exchange(
            &upstream,
            &gateway,
            "/closed/v1/chat/completions",
            &request(),
            &CALL,
        )
        .await;
        assert_eq!(closed, 403, "{header}: {body}");
        assert_invalid_answer(&body);

        // Failing open, the answer is the upstream's, framed by the gateway: one keep-alive
        // client reads two whole answers in a row, which a forged length would have desynced.
        let client = crate::common::http_builder()
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .expect("a client");
        for _ in 0..2 {
            upstream.push(Reply::chat_calls(&CALL));
            let response = client
                .post(format!("{}/open/v1/chat/completions", gateway.url()))
                .json(&request())
                .send()
                .await
                .expect("the gateway answers");
            assert_eq!(response.status(), 200, "{header}");
            assert_ne!(
                response
                    .headers()
                    .get("content-length")
                    .map(|v| v.as_bytes()),
                Some(&b"3"[..]),
                "{header}"
            );
            let answer: Value = response.json().await.expect("a whole JSON answer");
            assert_eq!(
                answer["choices"][0]["message"]["tool_calls"][0]["id"],
                "call_1"
            );
        }
    }
}

#[tokio::test]
async fn a_violation_on_a_call_or_tool_it_was_not_sent_is_an_invalid_answer() {
    let (checker, upstream, gateway) = rogue_service().await;
    let invented = [
        json!({"code": "evil", "tool_call_id": "call_invented", "tool": "wire_money", "choice": 7}),
        json!({"code": "evil", "tool_call_id": "call_1", "choice": 7}),
        json!({"code": "evil", "tool": "wire_money"}),
        json!({"code": "Not A Code", "tool_call_id": "call_1"}),
        json!({"code": "evil\r\nx-forged: 1", "tool_call_id": "call_1"}),
    ];
    for violation in invented {
        checker.set_default(Reply::json(
            200,
            json!({"decision": "deny", "violations": [violation]}),
        ));
        let (closed, body) = exchange(
            &upstream,
            &gateway,
            "/closed/v1/chat/completions",
            &request(),
            &CALL,
        )
        .await;
        assert_eq!(closed, 403, "{violation}");
        assert_invalid_answer(&body);
        let text = body.to_string();
        assert!(
            !text.contains("wire_money") && !text.contains("call_invented"),
            "the service's invention is not echoed: {text}"
        );
        let (open, _) = exchange(
            &upstream,
            &gateway,
            "/open/v1/chat/completions",
            &request(),
            &CALL,
        )
        .await;
        assert_eq!(open, 200, "fail_mode = allow: {violation}");
    }
}

#[tokio::test]
async fn a_valid_violation_lands_on_its_call_with_control_characters_removed() {
    let (checker, upstream, gateway) = rogue_service().await;
    checker.set_default(Reply::json(
        200,
        json!({"decision": "deny", "violations": [{
            "code": "sql.drop-table_v2",
            "tool_call_id": "call_1",
            "choice": 0,
            "message": "drops\r\na table\u{1b}[2J\u{0}",
        }]}),
    ));
    let (status, body) = exchange(
        &upstream,
        &gateway,
        "/closed/v1/chat/completions",
        &request(),
        &CALL,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let violation = &body["error"]["violations"][0];
    assert_eq!(violation["check"], "service");
    assert_eq!(violation["code"], "sql.drop-table_v2");
    assert_eq!(violation["tool_call_id"], "call_1");
    assert_eq!(violation["tool"], "run_sql");
    assert_eq!(violation["choice"], 0);
    assert_eq!(
        violation["message"], "dropsa table[2J (service 'rogue')",
        "{violation}"
    );
}
