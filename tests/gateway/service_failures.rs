//! Validator services that misbehave, end to end: slow (timeout), erroring (5xx or `error` set),
//! garbage answers, the circuit breaker opening and recovering (in `/metrics` and `/health`),
//! each under both fail modes; and services called concurrently with each other and with the
//! tool_selection judge.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::answers::assert_refusal;
use crate::common::services::{exchange, instance, request, route, service};
use crate::common::upstream::judge_verdict;
use crate::common::{Reply, ScriptedUpstream, TestGateway};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// A scripted service `flaky` (the `checker`, whose answers a test scripts to misbehave), and
/// a gateway whose two routes call it with a 150 ms timeout: one fails closed, one open.
async fn misbehaving(extra: &str) -> (ScriptedUpstream, ScriptedUpstream, TestGateway) {
    let checker = ScriptedUpstream::start().await;
    let upstream = ScriptedUpstream::start().await;
    let config = format!(
        "{}{}{}",
        service(
            "flaky",
            &checker.url(),
            &format!("timeout_ms = 150\n{extra}")
        ),
        route("/closed", &instance("", "service = \"flaky\"")),
        route(
            "/open",
            &instance("", "service = \"flaky\"\nfail_mode = \"allow\"")
        ),
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    (checker, upstream, gateway)
}

/// Sends one exchange with a call on each route; returns the statuses and the closed route's body.
async fn both_routes(upstream: &ScriptedUpstream, gateway: &TestGateway) -> (u16, Value, u16) {
    let call = [("call_1", "run_sql", "{}")];
    let (closed, closed_body) = exchange(
        upstream,
        gateway,
        "/closed/v1/chat/completions",
        &request(),
        &call,
    )
    .await;
    let (open, _) = exchange(
        upstream,
        gateway,
        "/open/v1/chat/completions",
        &request(),
        &call,
    )
    .await;
    (closed, closed_body, open)
}

/// The `/metrics` series counting the `kind` errors of the service `flaky`, at `count`.
fn flaky_errors(kind: &str, count: u32) -> String {
    format!("toolgate_service_errors_total{{service=\"flaky\",kind=\"{kind}\"}} {count}")
}

/// The `/metrics` series counting the calls of `flaky` that ended in `outcome`, at `count`.
fn flaky_calls(outcome: &str, count: u32) -> String {
    format!("toolgate_service_calls_total{{service=\"flaky\",outcome=\"{outcome}\"}} {count}")
}

/// The `/metrics` series of `flaky`'s breaker state: 0 closed, 1 open.
fn flaky_breaker(state: u32) -> String {
    format!("toolgate_service_breaker_state{{service=\"flaky\"}} {state}")
}

fn assert_unavailable(body: &Value, kind: &str) {
    assert_refusal(body, "service_unavailable", "service");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("'flaky'") && message.contains(kind),
        "{message}"
    );
}

#[tokio::test]
async fn a_slow_service_times_out_and_the_fail_mode_decides() {
    let (checker, upstream, gateway) = misbehaving("").await;
    checker.set_default(
        Reply::json(200, json!({"decision": "allow"})).with_delay(Duration::from_millis(600)),
    );
    let (closed, closed_body, open) = both_routes(&upstream, &gateway).await;
    assert_eq!(closed, 403);
    assert_unavailable(&closed_body, "timeout");
    assert_eq!(open, 200, "fail_mode = allow lets the call through");
    gateway
        .assert_metrics_contain(&[flaky_errors("timeout", 2), flaky_calls("unavailable", 2)])
        .await;
}

#[tokio::test]
async fn an_erroring_service_is_unavailable_whether_by_status_or_by_its_error_field() {
    let (checker, upstream, gateway) = misbehaving("").await;
    // Each reply with the kind of failure it is.
    for (reply, kind) in [
        (
            Reply::json(
                503,
                json!({"error": {"type": "overloaded", "message": "later"}}),
            ),
            "status",
        ),
        (
            Reply::json(
                200,
                json!({"error": {"type": "bad_config", "message": "no model"}, "decision": null}),
            ),
            "service_error",
        ),
    ] {
        checker.push(reply.clone());
        checker.push(reply);
        let (closed, closed_body, open) = both_routes(&upstream, &gateway).await;
        assert_eq!((closed, open), (403, 200));
        assert_unavailable(&closed_body, kind);
    }
    gateway
        .assert_metrics_contain(&[flaky_errors("status", 2), flaky_errors("service_error", 2)])
        .await;
}

#[tokio::test]
async fn garbage_answers_are_unavailable_never_an_allow() {
    let (checker, upstream, gateway) = misbehaving("breaker_failures = 100").await;
    let garbage = [
        (
            Reply::raw(200, "text/html", "<html>maintenance</html>"),
            "invalid_answer",
        ),
        (Reply::json(200, json!({"verdict": "ok"})), "invalid_answer"),
        (
            Reply::json(
                200,
                json!({"decision": "modify", "patch": {"arguments": "x"}}),
            ),
            "invalid_answer",
        ),
        (
            Reply::json(
                200,
                json!({"decision": "modify", "patch": {"remove_tools": ["drop_db"]}}),
            ),
            "invalid_answer",
        ),
        (Reply::close_connection(), "transport"),
    ];
    for (reply, kind) in garbage {
        checker.push(reply.clone());
        checker.push(reply);
        let (closed, closed_body, open) = both_routes(&upstream, &gateway).await;
        assert_eq!((closed, open), (403, 200), "{closed_body}");
        assert_unavailable(&closed_body, kind);
    }
    gateway
        .assert_metrics_contain(&[flaky_errors("invalid_answer", 8)])
        .await;
}

#[tokio::test]
async fn the_breaker_opens_after_consecutive_failures_and_a_probe_closes_it() {
    let (checker, upstream, gateway) =
        misbehaving("breaker_failures = 2\nbreaker_cool_down_ms = 1000").await;
    checker.set_default(Reply::json(
        500,
        json!({"error": {"type": "down", "message": ""}}),
    ));

    let (closed, _, open) = both_routes(&upstream, &gateway).await;
    assert_eq!((closed, open), (403, 200));
    assert_eq!(
        checker.request_count(),
        2,
        "one breaker for the service, across routes"
    );

    // Open: the service is not called, and the fail modes still apply.
    let (closed, closed_body, open) = both_routes(&upstream, &gateway).await;
    assert_eq!((closed, open), (403, 200));
    assert_unavailable(&closed_body, "breaker_open");
    assert_eq!(checker.request_count(), 2);
    gateway
        .assert_metrics_contain(&[flaky_breaker(1), flaky_errors("breaker_open", 2)])
        .await;
    let health = gateway.admin_json("/health").await;
    assert_eq!(
        health["services"]["flaky"]["breaker"], "open",
        "/health shows the breaker too: {health}"
    );

    // After the cool-down one probe goes through; the service has recovered, so it closes.
    // Until then every exchange is refused without a call.
    checker.set_default(Reply::json(200, json!({"decision": "allow"})));
    let mut attempts = 0;
    loop {
        attempts += 1;
        let (status, body) = exchange(
            &upstream,
            &gateway,
            "/closed/v1/chat/completions",
            &request(),
            &[("call_1", "run_sql", "{}")],
        )
        .await;
        if status == 200 {
            break;
        }
        assert_unavailable(&body, "breaker_open");
        assert_eq!(checker.request_count(), 2);
        assert!(attempts < 40, "the breaker never let a probe through");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(checker.request_count(), 3, "one probe");
    let (closed, closed_body, open) = both_routes(&upstream, &gateway).await;
    assert_eq!((closed, open), (200, 200), "{closed_body}");
    assert_eq!(checker.request_count(), 5);
    gateway.assert_metrics_contain(&[flaky_breaker(0)]).await;
    let health = gateway.admin_json("/health").await;
    assert_eq!(health["services"]["flaky"]["breaker"], "closed", "{health}");
}

/// A server where every request waits until `expected` requests are in flight together (for at
/// most a second). Sequential calls would never meet: the first would give up alone and answer
/// a deny, so an allow proves the calls overlapped. Judge requests get a judge's allow.
struct Rendezvous {
    addr: SocketAddr,
    most_in_flight: Arc<AtomicUsize>,
}

impl Rendezvous {
    async fn start(expected: usize) -> Rendezvous {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let addr = listener.local_addr().expect("bound");
        let in_flight = Arc::new(AtomicUsize::new(0));
        let most_in_flight = Arc::new(AtomicUsize::new(0));
        let arrived = Arc::new(Notify::new());
        let (flight, most) = (in_flight.clone(), most_in_flight.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (flight, most, arrived) = (flight.clone(), most.clone(), arrived.clone());
                tokio::spawn(async move {
                    let answer = service_fn(move |request: Request<Incoming>| {
                        let (flight, most, arrived) =
                            (flight.clone(), most.clone(), arrived.clone());
                        async move {
                            let path = request.uri().path().to_owned();
                            let _ = request.into_body().collect().await;
                            let now = flight.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            arrived.notify_waiters();
                            let met = tokio::time::timeout(Duration::from_secs(1), async {
                                while most.load(Ordering::SeqCst) < expected {
                                    let notified = arrived.notified();
                                    if most.load(Ordering::SeqCst) >= expected {
                                        break;
                                    }
                                    notified.await;
                                }
                            })
                            .await
                            .is_ok();
                            flight.fetch_sub(1, Ordering::SeqCst);
                            let body = if path.ends_with("/chat/completions") {
                                judge_verdict(if met { "allow" } else { "deny" }, "rendezvous")
                            } else if met {
                                json!({"decision": "allow"})
                            } else {
                                json!({"decision": "deny", "violations": [{"code": "alone", "message": "called alone"}]})
                            };
                            let mut response =
                                Response::new(Full::new(Bytes::from(body.to_string())));
                            response.headers_mut().insert(
                                http::header::CONTENT_TYPE,
                                http::HeaderValue::from_static("application/json"),
                            );
                            Ok::<_, Infallible>(response)
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), answer)
                        .await;
                });
            }
        });
        Rendezvous {
            addr,
            most_in_flight,
        }
    }
}

#[tokio::test]
async fn services_are_called_concurrently_with_each_other_and_with_the_judge() {
    let rendezvous = Rendezvous::start(3).await;
    let upstream = ScriptedUpstream::start().await;
    let base = format!("http://{}", rendezvous.addr);
    let config = format!(
        "{}{}{}",
        service("first", &format!("{base}/first"), "timeout_ms = 3000"),
        service("second", &format!("{base}/second"), "timeout_ms = 3000"),
        route(
            "/v1",
            &format!(
                "{}{}[[plugins]]\nname = \"tool_selection\"\n[routes.plugins.settings]\n\
                 openai_api_key = \"sk-judge\"\nbase_url = \"{base}/judge/v1\"\njudge_timeout_ms = 3000\n",
                instance("id = \"a\"", "service = \"first\""),
                instance("id = \"b\"", "service = \"second\""),
            ),
        ),
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    let (status, body) = exchange(
        &upstream,
        &gateway,
        "/v1/chat/completions",
        &request(),
        &[("call_1", "run_sql", r#"{"q":"select 1"}"#)],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(rendezvous.most_in_flight.load(Ordering::SeqCst), 3);
}
