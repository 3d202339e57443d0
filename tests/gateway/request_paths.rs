//! Request paths read as the next hop reads them (issue 41), end to end against a real ASGI
//! server (FastAPI on uvicorn, as vLLM is): every way of writing a generation endpoint's path
//! (percent-encoding, dot segments, repeated slashes, capitals, `;` parameters, an encoded `/`)
//! is either refused with a 400 or routed to the guarded route the upstream serves it as, so no
//! tool call reaches the client unchecked; over HTTP/1.1 and HTTP/2, whole and streamed, in the
//! three formats.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{TestGateway, config_text, free_loopback_port, temp_audit_path};

/// Long enough for uvicorn to start on a loaded machine; a bound on a hang.
const PATIENCE: Duration = Duration::from_secs(30);

/// The ASGI upstream, stopped when dropped.
struct AsgiUpstream {
    child: Child,
    port: u16,
}

impl AsgiUpstream {
    /// The server, or `None` when FastAPI and uvicorn are missing and the run opted out.
    async fn start() -> Option<AsgiUpstream> {
        let imports = Command::new("python3")
            .args(["-c", "import fastapi, uvicorn"])
            .output()
            .is_ok_and(|output| output.status.success());
        if !imports
            && crate::common::skip_for_missing(
                "FastAPI and uvicorn (`import fastapi, uvicorn`)",
                "pip install fastapi uvicorn, which .ci/test does",
            )
        {
            return None;
        }
        Some(AsgiUpstream::spawn().await)
    }

    async fn spawn() -> AsgiUpstream {
        let port = free_loopback_port();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/asgi/upstream.py");
        let child = Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 starts");
        let mut upstream = AsgiUpstream { child, port };
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            if let Ok(Some(status)) = upstream.child.try_wait() {
                panic!(
                    "the ASGI upstream exited ({status}): FastAPI and uvicorn are needed \
                     (`pip install fastapi uvicorn`, which .ci/test does)"
                );
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "uvicorn did not listen"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        upstream.port = port;
        upstream
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for AsgiUpstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The shipped layout: each generation endpoint guarded, everything else under `/v1` passed.
const ROUTES: &str = "[[plugins]]\nname = \"tool_selection\"\n\n\
    [[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\nformat = \"chat_completions\"\n\n\
    [[routes]]\npath = \"/v1/responses\"\nupstream = \"llm\"\nformat = \"responses\"\n\n\
    [[routes]]\npath = \"/v1/messages\"\nupstream = \"llm\"\nformat = \"anthropic_messages\"\n\n\
    [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n\
    [[routes.plugins]]\nname = \"tool_selection\"\nenabled = false\n";

/// A request declaring `get_weather` only, in the format of `endpoint`.
fn request_for(endpoint: &str, stream: bool) -> Value {
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}});
    match endpoint {
        "responses" => json!({"model": "m", "input": "hi", "stream": stream,
            "tools": [{"type": "function", "name": "get_weather", "parameters": schema}]}),
        "messages" => json!({"model": "m", "max_tokens": 10, "stream": stream,
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"name": "get_weather", "input_schema": schema}]}),
        _ => json!({"model": "m", "stream": stream,
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": schema}}]}),
    }
}

/// Ways of writing `/v1/{endpoint...}` that some server reads as that endpoint.
fn spellings(endpoint: &str) -> Vec<String> {
    let (first, rest) = endpoint.split_at(1);
    let encoded_first = format!("%{:02X}", first.as_bytes()[0]);
    let last = endpoint.rsplit('/').next().unwrap_or(endpoint);
    vec![
        format!("/v1/{endpoint}"),
        format!("/v1/{encoded_first}{rest}"),
        format!("/v1/{}{rest}", encoded_first.to_ascii_lowercase()),
        format!("//v1//{endpoint}"),
        format!("/v1/./{endpoint}"),
        format!("/v1/%2e/{endpoint}"),
        format!("/v1/models/../{endpoint}"),
        format!("/v1/models/%2E%2E/{endpoint}"),
        format!("/V1/{}", endpoint.to_ascii_uppercase()),
        format!("/v1/{endpoint};x=1"),
        format!("/v1/{}", endpoint.replace('/', "%2F")),
        format!("/v1/{}", endpoint.replace('/', "%2f")),
        format!("/v1/models%2F..%2F{endpoint}"),
        format!("/v1/{}", endpoint.replace(last, &format!("%25{}", last))),
        format!("/v1\\{endpoint}"),
    ]
}

/// Whether uvicorn, which decodes a path and neither merges slashes, removes dot segments nor
/// folds case, serves this spelling as the endpoint (checked against it in the tests above).
fn serves_as_endpoint(path: &str, endpoint: &str) -> bool {
    let decoded = path
        .replace("%2F", "/")
        .replace("%2f", "/")
        .replace("%2e", ".")
        .replace("%2E", ".");
    let decoded = decoded.replace(&format!("%{:02X}", endpoint.as_bytes()[0]), &endpoint[..1]);
    let decoded = decoded.replace(&format!("%{:02x}", endpoint.as_bytes()[0]), &endpoint[..1]);
    decoded == format!("/v1/{endpoint}")
}

/// What one request got: its status and body.
struct Answer {
    status: u16,
    body: String,
}

/// Sends over HTTP/1.1 on a raw socket, so the path goes out exactly as written.
async fn send_http1(gateway: &TestGateway, path: &str, body: &Value) -> Answer {
    let body = body.to_string();
    let mut stream = TcpStream::connect(gateway.addr).await.expect("connects");
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream
        .write_all([head.as_bytes(), body.as_bytes()].concat().as_slice())
        .await
        .expect("sends");
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer))
        .await
        .expect("answers in time")
        .expect("reads");
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .get(9..12)
        .and_then(|status| status.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, body)| body.to_owned());
    Answer { status, body }
}

/// Sends over HTTP/2 (prior knowledge) with hyper's own connection, which writes `:path` as given.
async fn send_http2(gateway: &TestGateway, path: &str, body: &Value) -> Answer {
    let stream = TcpStream::connect(gateway.addr).await.expect("connects");
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("an HTTP/2 handshake");
    tokio::spawn(connection);
    let request = http::Request::post(format!("http://{}{path}", gateway.addr))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("a request");
    let response = tokio::time::timeout(PATIENCE, sender.send_request(request))
        .await
        .expect("answers in time")
        .expect("an answer");
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map(|body| String::from_utf8_lossy(&body.to_bytes()).into_owned())
        .unwrap_or_default();
    Answer { status, body }
}

#[tokio::test]
async fn no_spelling_of_a_generation_path_walks_around_its_guard() {
    let Some(upstream) = AsgiUpstream::start().await else {
        return;
    };
    let audit = temp_audit_path();
    let text = config_text(&upstream.url(), &audit, ROUTES);
    let gateway = TestGateway::start_text(&text, audit, toolgate::Runtime::new()).await;
    let mut checked_odd_spellings = 0;
    for endpoint in ["chat/completions", "responses", "messages"] {
        for stream in [false, true] {
            // The ASGI upstream streams chat only; the others answer whole either way.
            let request = request_for(endpoint, stream);
            for path in spellings(endpoint) {
                for http2 in [false, true] {
                    let answer = match http2 {
                        false => send_http1(&gateway, &path, &request).await,
                        true => send_http2(&gateway, &path, &request).await,
                    };
                    let seen = format!(
                        "{path} (HTTP/{}, stream {stream}): {} {}",
                        if http2 { "2" } else { "1.1" },
                        answer.status,
                        answer.body
                    );
                    // A spelling uvicorn serves as the endpoint is refused or is the guarded
                    // route's, its call checked: never merely kept from the upstream by a 404.
                    if serves_as_endpoint(&path, endpoint) {
                        assert!(matches!(answer.status, 400 | 403), "{seen}");
                        checked_odd_spellings += usize::from(answer.status == 403);
                    }
                    match answer.status {
                        400 => assert!(answer.body.contains("invalid_path"), "{seen}"),
                        403 => assert!(answer.body.contains("undeclared_tool"), "{seen}"),
                        404 | 405 => {}
                        _ => panic!("a tool call walked around the guard: {seen}"),
                    }
                }
            }
        }
    }
    // Plain, `%63`-style and `%2e`-style spellings of 3 endpoints, 2 stream modes, 2 versions.
    assert!(
        checked_odd_spellings >= 3 * 4 * 2 * 2,
        "{checked_odd_spellings}"
    );
}

#[tokio::test]
async fn a_path_is_forwarded_as_it_was_routed_and_the_rest_passes() {
    let Some(upstream) = AsgiUpstream::start().await else {
        return;
    };
    let audit = temp_audit_path();
    let text = config_text(&upstream.url(), &audit, ROUTES);
    let gateway = TestGateway::start_text(&text, audit, toolgate::Runtime::new()).await;
    // A pass-through endpoint written oddly reaches the upstream as the route that took it.
    let answer = send_http1_get(&gateway, "//v1/./%6Dodels").await;
    assert!(answer.starts_with("http/1.1 200"), "{answer}");
    assert!(answer.contains("x-seen-path: /v1/models"), "{answer}");
    // The encoded-slash spelling is refused with a reason, as the envelope every SDK reads.
    let refused = send_http1(&gateway, "/v1/chat%2Fcompletions", &json!({})).await;
    assert_eq!(refused.status, 400);
    let envelope: Value = serde_json::from_str(&refused.body).expect("an envelope");
    assert_eq!(envelope["error"]["code"], "invalid_path");
    assert!(
        envelope["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("%2F")),
        "{envelope}"
    );
}

/// A GET on a raw socket; the whole answer as text.
async fn send_http1_get(gateway: &TestGateway, path: &str) -> String {
    let mut stream = TcpStream::connect(gateway.addr).await.expect("connects");
    let head = format!("GET {path} HTTP/1.1\r\nhost: gateway\r\nconnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.expect("sends");
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer))
        .await
        .expect("answers in time")
        .expect("reads");
    String::from_utf8_lossy(&answer).to_ascii_lowercase()
}

// ---------------------------------------------------------------------------------------------
// The second line: a pass-through route never delivers tool calls unless told to.

mod unguarded {
    use serde_json::json;

    use crate::common::upstream::chat_stream;
    use crate::common::{PASS_THROUGH, Reply, ScriptedUpstream, TestGateway};

    fn chat_request() -> serde_json::Value {
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    }

    async fn pass_through(extra: &str) -> (ScriptedUpstream, TestGateway) {
        let upstream = ScriptedUpstream::start().await;
        let gateway = TestGateway::start(&upstream, &format!("{PASS_THROUGH}{extra}")).await;
        (upstream, gateway)
    }

    #[tokio::test]
    async fn calls_on_a_pass_through_route_are_refused_whole_and_streamed() {
        let (upstream, gateway) = pass_through("").await;
        upstream.push(Reply::chat_calls(&[("call_1", "delete_user", "{}")]));
        let response = gateway.post("/v1/chat/completions", &chat_request()).await;
        assert_eq!(response.status(), 403);
        let line = gateway.audit_line_of(&response).await;
        let body: serde_json::Value = response.json().await.expect("an envelope");
        assert_eq!(body["error"]["code"], "unguarded_tool_calls", "{body}");
        assert_eq!(body["error"]["violations"][0]["check"], "route");
        assert_eq!(body["error"]["violations"][0]["tool"], "delete_user");
        assert_eq!(line["verdict"], "blocked", "{line}");

        // Streamed, the text before the call goes out; the call never does.
        upstream.push(Reply::sse_events(&chat_stream(
            &[("call_1", "delete_user", "{}")],
            Some("Deleting."),
        )));
        let mut request = chat_request();
        request["stream"] = json!(true);
        let response = gateway.post("/v1/chat/completions", &request).await;
        let text = response.text().await.expect("the stream");
        assert!(text.contains("unguarded_tool_calls"), "{text}");
        assert!(!text.contains(r#""name":"delete_user""#), "{text}");
        assert!(!text.contains("[DONE]"), "{text}");
    }

    #[tokio::test]
    async fn a_pass_through_serves_what_carries_no_call_as_it_came() {
        let (upstream, gateway) = pass_through("").await;
        upstream.push(Reply::chat_text("Hello!"));
        assert_eq!(
            gateway
                .post_status("/v1/chat/completions", &chat_request())
                .await,
            200
        );
        // A batch's output file holds calls as data, from an endpoint that generates nothing.
        let batch_line = r#"{"custom_id":"1","response":{"body":{"choices":[{"message":{"tool_calls":[{"id":"c","type":"function","function":{"name":"x","arguments":"{}"}}]}}]}}}"#;
        upstream.push(Reply::raw(200, "application/jsonl", batch_line));
        let response = gateway.get_text("/v1/files/file-1/content").await;
        assert_eq!(response.0, 200);
        assert_eq!(response.1, batch_line);
        // Text that is no JSON on a path of no known API passes too.
        upstream.push(Reply::raw(200, "text/plain", "OK"));
        let response = gateway.get_text("/v1x/health").await;
        assert_eq!(response.0, 404, "no route: {}", response.1);
    }

    #[tokio::test]
    async fn log_delivers_with_a_record_and_pass_delivers_unread() {
        for (setting, observed) in [("log", true), ("pass", false)] {
            let (upstream, gateway) =
                pass_through(&format!("unguarded_calls = \"{setting}\"\n")).await;
            upstream.push(Reply::chat_calls(&[("call_1", "delete_user", "{}")]));
            let response = gateway.post("/v1/chat/completions", &chat_request()).await;
            assert_eq!(response.status(), 200, "{setting}");
            let request_id = response.headers()["x-request-id"]
                .to_str()
                .expect("an id")
                .to_owned();
            let text = response.text().await.expect("body");
            assert!(text.contains("delete_user"), "{setting}: {text}");
            if observed {
                // Written by the audit task once the answer is released: waited for.
                let line = gateway.audit_line(&request_id).await;
                assert_eq!(
                    line["observed"][0]["code"], "unguarded_tool_calls",
                    "{line}"
                );
            } else {
                // Nothing is handed to the audit task for a bare pass-through.
                let audited = gateway
                    .audit_lines()
                    .into_iter()
                    .any(|line| line["request_id"] == request_id.as_str());
                assert!(!audited, "{setting}");
            }
        }
    }

    #[tokio::test]
    async fn an_unversioned_generation_path_on_a_catch_all_is_watched_too() {
        let upstream = ScriptedUpstream::start().await;
        let gateway =
            TestGateway::start(&upstream, "[[routes]]\npath = \"/\"\nupstream = \"llm\"\n").await;
        upstream.push(Reply::chat_calls(&[("call_1", "delete_user", "{}")]));
        let response = gateway.post("/chat/completions", &chat_request()).await;
        assert_eq!(response.status(), 403);
        upstream.push(Reply::raw(200, "text/plain", "OK"));
        let response = gateway.get_text("/healthz").await;
        assert_eq!(response, (200, "OK".to_owned()));
    }
}
