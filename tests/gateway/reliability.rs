//! Reliability end to end: hot reload (file change, invalid file refused, in-flight requests on
//! their old config), limits and timeouts (slow clients, stalled upstreams; the connection cap is in `connections`),
//! upstream faults answered well-formed, ambiguous JSON refused, and request smuggling refused.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::common::answers::{assert_refusal, json_with_status};
use crate::common::upstream::chat_stream;
use crate::common::{
    PASS_THROUGH, Reply, ScriptedUpstream, TestGateway, config_text, guarded_chat, start_guarded,
    temp_audit_path,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toolgate::{Config, Gateway, GatewayState, Runtime};

/// A gateway started from a config file, with the file watcher polling every 50 ms.
struct FileGateway {
    addr: SocketAddr,
    path: PathBuf,
    state: Arc<GatewayState>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl FileGateway {
    async fn start(text: &str) -> FileGateway {
        let path = temp_audit_path().with_extension("toml");
        std::fs::write(&path, text).expect("writes the config");
        let runtime = Runtime::new();
        let config = Config::from_file(&path, &runtime.plugins).expect("loads");
        let gateway = Gateway::bind(config, runtime).await.expect("binds");
        let addr = gateway.local_addr().expect("bound");
        let state = gateway.state();
        toolgate::watch(state.clone(), path.clone(), Duration::from_millis(50));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(gateway.run(async {
            let _ = stopped.await;
        }));
        FileGateway {
            addr,
            path,
            state,
            _stop: stop,
        }
    }

    /// Waits (bounded) until `toolgate_config_reloads_total{result}` reaches `count`.
    async fn until_reloads(&self, result: &str, count: u64) -> bool {
        let series = format!("toolgate_config_reloads_total{{result=\"{result}\"}} ");
        for _ in 0..200 {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &self.state.registry)
                .expect("encodes");
            let seen = (text.lines())
                .find_map(|line| line.strip_prefix(series.as_str()))
                .and_then(|value| value.trim().parse::<u64>().ok());
            if seen.is_some_and(|seen| seen >= count) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        false
    }

    async fn status_of(&self, path: &str) -> u16 {
        crate::common::http()
            .post(format!("http://{}{path}", self.addr))
            .json(&json!({"model": "m", "messages": []}))
            .send()
            .await
            .map(|response| response.status().as_u16())
            .unwrap_or(0)
    }

    /// Waits (bounded) until `path` answers `status`.
    async fn until_status(&self, path: &str, status: u16) -> bool {
        for _ in 0..100 {
            if self.status_of(path).await == status {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        false
    }
}

/// A gateway from a file with one route, `/v1`, to an upstream that answers text: the
/// upstream (held for the test's length), the file's text, the gateway.
async fn serving_v1() -> (ScriptedUpstream, String, FileGateway) {
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::chat_text("ok"));
    let text = config_text(
        &upstream.url(),
        &temp_audit_path(),
        "[[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n",
    );
    let gateway = FileGateway::start(&text).await;
    (upstream, text, gateway)
}

#[tokio::test]
async fn a_changed_file_is_reloaded_and_an_invalid_one_is_refused() {
    let (_upstream, first, gateway) = serving_v1().await;
    assert_eq!(gateway.status_of("/v2/chat/completions").await, 404);

    let second = format!("{first}\n[[routes]]\npath = \"/v2\"\nupstream = \"llm\"\n");
    std::fs::write(&gateway.path, &second).expect("rewrites");
    assert!(
        gateway.until_status("/v2/chat/completions", 200).await,
        "the new route is served"
    );

    std::fs::write(
        &gateway.path,
        format!("{second}\n[[routes]]\npath = \"/v3\"\nupstream = \"nowhere\"\n"),
    )
    .expect("rewrites");
    assert!(
        gateway.until_reloads("error", 1).await,
        "the watcher tried the invalid file"
    );
    assert_eq!(
        gateway.status_of("/v2/chat/completions").await,
        200,
        "the old config stays"
    );
    assert_eq!(
        gateway.status_of("/v3/x").await,
        404,
        "nothing of the invalid file applies"
    );
    assert!(
        toolgate::reload(&gateway.state, &gateway.path)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn an_emptied_file_is_refused_and_the_routes_stay() {
    let (_upstream, _, gateway) = serving_v1().await;
    // What `>` or an in-place rewrite leaves for a moment; held here until the watcher saw it.
    std::fs::write(&gateway.path, "\n").expect("truncates");
    assert!(
        gateway.until_reloads("error", 1).await,
        "the watcher refused the empty file"
    );
    let refused = toolgate::reload(&gateway.state, &gateway.path)
        .await
        .expect_err("an empty file is not a configuration to reload to");
    assert!(refused.to_string().contains("empty"), "{refused}");
    assert_eq!(
        gateway.status_of("/v1/chat/completions").await,
        200,
        "the running routes stay"
    );
}

#[tokio::test]
async fn an_exchange_in_flight_finishes_on_the_config_it_started_with() {
    let upstream = ScriptedUpstream::start().await;
    let audit = temp_audit_path();
    let guarded = config_text(&upstream.url(), &audit, &guarded_chat(""));
    let gateway = FileGateway::start(&guarded).await;
    upstream.push(
        Reply::chat_calls(&[("call_1", "undeclared", "{}")]).with_delay(Duration::from_millis(400)),
    );
    let url = format!("http://{}/v1/chat/completions", gateway.addr);
    let request = json!({"model": "m", "messages": [], "tools": [{"type": "function", "function": {"name": "declared"}}]});
    let in_flight =
        tokio::spawn(async move { crate::common::http().post(url).json(&request).send().await });
    // Wait until the exchange is really in flight (the upstream holds it), however busy the
    // machine is.
    for _ in 0..200 {
        if upstream.request_count() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Swap to a config without any plugin while the exchange waits for the upstream.
    let unguarded = config_text(
        &upstream.url(),
        &audit,
        "[[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n",
    );
    std::fs::write(&gateway.path, &unguarded).expect("rewrites");
    toolgate::reload(&gateway.state, &gateway.path)
        .await
        .expect("the new config is valid");
    let response = in_flight.await.expect("joins").expect("answered");
    assert_eq!(
        response.status(),
        403,
        "checked by the config it started with"
    );
}

/// An upstream that writes `script` after reading a request head, then does `after`.
async fn raw_upstream(script: &'static [u8], then_close: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buffer = [0u8; 4096];
                while !head.windows(4).any(|window| window == b"\r\n\r\n") {
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(read) => head.extend_from_slice(&buffer[..read]),
                    }
                }
                let _ = stream.write_all(script).await;
                if then_close {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(30)).await;
            });
        }
    });
    format!("http://{addr}")
}

async fn gateway_for(upstream_url: &str, routes: &str) -> TestGateway {
    // TestGateway needs a ScriptedUpstream only for its URL; point the route at another one.
    let placeholder = ScriptedUpstream::start().await;
    let routes = format!(
        "[upstreams.faulty]\nurl = \"{upstream_url}\"\nresponse_timeout_ms = 500\nread_timeout_ms = 300\n\n{}",
        routes.replace("upstream = \"llm\"", "upstream = \"faulty\"")
    );
    TestGateway::start(&placeholder, &routes).await
}

fn tools_request(stream: bool) -> Value {
    json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}],
           "tools": [{"type": "function", "function": {"name": "get_weather",
                      "parameters": {"type": "object", "required": ["city"]}}}]})
}

#[tokio::test]
async fn a_body_cut_short_is_a_502_and_a_stalled_body_a_504() {
    let cut = raw_upstream(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n{\"choices\":[", true).await;
    let gateway = gateway_for(&cut, &guarded_chat("")).await;
    let response = gateway.post_chat(&tools_request(false)).await;
    let body = json_with_status(response, 502).await;
    assert_eq!(body["error"]["type"], "upstream_error");

    let stalled = raw_upstream(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n{\"choices\":[", false).await;
    let gateway = gateway_for(&stalled, &guarded_chat("")).await;
    let response = gateway.post_chat(&tools_request(false)).await;
    assert_eq!(response.status(), 504);
}

#[tokio::test]
async fn an_upstream_that_answers_garbage_or_5xx_gets_a_well_formed_answer() {
    let garbage = raw_upstream(b"SPDY/9 what\r\n\r\n", true).await;
    let gateway = gateway_for(&garbage, &guarded_chat("")).await;
    let response = gateway.post_chat(&tools_request(false)).await;
    assert_eq!(response.status(), 502);
    assert!(response.json::<Value>().await.expect("envelope")["error"]["message"].is_string());

    let (upstream, gateway) = start_guarded("strict = true").await;
    upstream.push(Reply::raw(503, "text/html", b"<h1>down</h1>".to_vec()));
    let response = gateway.post_chat(&tools_request(false)).await;
    assert_eq!(response.status(), 503, "upstream errors pass through");
    assert_eq!(response.text().await.expect("body"), "<h1>down</h1>");
}

#[tokio::test]
async fn a_stream_that_stalls_mid_call_ends_with_an_error_and_never_releases_the_call() {
    let upstream = ScriptedUpstream::start().await;
    let routes = format!(
        "[upstreams.slow]\nurl = \"{}\"\nread_timeout_ms = 300\n\n{}",
        upstream.url(),
        guarded_chat("").replace("upstream = \"llm\"", "upstream = \"slow\"")
    );
    let gateway = TestGateway::start(&upstream, &routes).await;
    let stream = chat_stream(
        &[("call_1", "get_weather", r#"{"city":"Paris"}"#)],
        Some("Looking."),
    );
    let cut = stream.find("Par").expect("arguments present");
    upstream.push(Reply::stall_after([stream[..cut].to_owned()]));
    let response = gateway.post_chat(&tools_request(true)).await;
    assert_eq!(response.status(), 200, "text had already been sent");
    let body = tokio::time::timeout(Duration::from_secs(5), response.text())
        .await
        .expect("not a hang")
        .expect("body");
    assert!(
        !body.contains("get_weather"),
        "the held call was never released: {body}"
    );
    assert!(body.contains("upstream_timeout"), "{body}");
    assert!(!body.contains("[DONE]"));
}

#[tokio::test]
async fn an_unguarded_body_that_stalls_is_cut_rather_than_pinned() {
    let upstream = ScriptedUpstream::start().await;
    let routes = format!(
        "[upstreams.slow]\nurl = \"{}\"\nread_timeout_ms = 300\n\n[[routes]]\npath = \"/v1\"\nupstream = \"slow\"\n",
        upstream.url()
    );
    let gateway = TestGateway::start(&upstream, &routes).await;
    upstream.push(Reply::stall_after(["data: {\"partial\": true}\n\n"]));
    let response = gateway.post("/v1/anything", &json!({})).await;
    assert_eq!(response.status(), 200);
    let body = tokio::time::timeout(Duration::from_secs(5), response.bytes())
        .await
        .expect("not a hang");
    assert!(
        body.is_err(),
        "the client sees an aborted body, not a clean end"
    );
}

#[tokio::test]
async fn repeated_keys_are_refused_not_guessed() {
    let (upstream, gateway) = start_guarded("").await;
    let client = crate::common::http();
    let url = format!("{}/v1/chat/completions", gateway.url());
    let request = r#"{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"a"}}],"tools":[]}"#;
    let response = client
        .post(&url)
        .body(request)
        .send()
        .await
        .expect("answers");
    let body = json_with_status(response, 400).await;
    assert_eq!(body["error"]["code"], "ambiguous_request");
    assert_eq!(upstream.request_count(), 0);

    let answer = r#"{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"get_weather","name":"wipe_disk","arguments":"{\"city\":\"x\"}"}}]}}]}"#;
    upstream.push(Reply::raw(
        200,
        "application/json",
        answer.as_bytes().to_vec(),
    ));
    let response = gateway.post_chat(&tools_request(false)).await;
    assert_eq!(response.status(), 403, "refused as a block");
    let body: Value = response.json().await.expect("envelope");
    assert_refusal(&body, "ambiguous_response", "parse");
}

async fn raw_exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connects");
    stream.write_all(request).await.expect("writes");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(3), stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn conflicting_length_headers_cannot_smuggle_a_request() {
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::json(200, json!({"ok": true})));
    let gateway = TestGateway::start(
        &upstream,
        "[[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n",
    )
    .await;
    let smuggle = b"POST /v1/a HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /v1/smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
    let answer = raw_exchange(gateway.addr, smuggle).await;
    // Transfer-Encoding wins over Content-Length (RFC 9112 §6.3) and the connection is closed
    // after the answer, so the trailing bytes are never read as a second request.
    assert_eq!(answer.matches("HTTP/1.1 ").count(), 1, "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let requests = upstream.requests();
    assert_eq!(
        requests.len(),
        1,
        "only the client's own request went upstream"
    );
    assert_eq!(requests[0].path_and_query, "/v1/a");
    assert!(
        requests[0].header("content-length").is_none(),
        "never both length headers upstream"
    );
}

#[tokio::test]
async fn a_client_that_never_finishes_its_head_is_disconnected() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start_tuned(
        &upstream,
        "header_read_timeout_ms = 200\nrequest_body_timeout_ms = 200",
        PASS_THROUGH,
    )
    .await;
    let addr = gateway.addr;

    let mut slow = TcpStream::connect(addr).await.expect("connects");
    slow.write_all(b"POST /v1/x HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("writes");
    let mut buffer = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(3), slow.read_to_end(&mut buffer)).await;
    assert!(closed.is_ok(), "the connection was closed by the gateway");

    // So is a keep-alive connection whose next head stops halfway, long before idle_timeout.
    upstream.set_default(Reply::json(200, json!({})));
    let mut kept = TcpStream::connect(addr).await.expect("connects");
    kept.write_all(b"POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        .await
        .expect("writes");
    let mut first_answer = Vec::new();
    while !first_answer.ends_with(b"\r\n\r\n{}") {
        let mut chunk = [0; 1024];
        let read = tokio::time::timeout(Duration::from_secs(3), kept.read(&mut chunk))
            .await
            .expect("the first exchange is answered")
            .expect("reads");
        assert!(read > 0, "closed before the first answer");
        first_answer.extend_from_slice(&chunk[..read]);
    }
    kept.write_all(b"POST /v1/x HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("writes");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(3), kept.read_to_end(&mut rest)).await;
    assert!(
        closed.is_ok(),
        "the keep-alive connection was closed by the gateway"
    );

    // HTTP/2 has no heads to bound that way: an idle HTTP/2 connection stays open past it.
    let mut http2 = TcpStream::connect(addr).await.expect("connects");
    http2
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .expect("writes the preface and empty settings");
    let mut frames = Vec::new();
    let waited = tokio::time::timeout(Duration::from_millis(800), http2.read_to_end(&mut frames));
    assert!(
        waited.await.is_err(),
        "an idle HTTP/2 connection was closed at header_read_timeout_ms"
    );

    // A body that stops halfway is cut too.
    let answer = raw_exchange(
        addr,
        b"POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"partial\"",
    )
    .await;
    assert!(!answer.contains("200 OK"), "{answer}");
}

#[tokio::test]
async fn answers_the_guard_cannot_read_as_the_client_will_are_refused_by_their_head() {
    let (upstream, gateway) = start_guarded("").await;
    // Compressed although toolgate asked for it plain: the client would decompress and read a
    // call the guard only saw as noise.
    upstream.push(
        Reply::raw(
            200,
            "application/json",
            vec![0x1f, 0x8b, 0x08, 0x00, 0x01, 0x02],
        )
        .with_header("content-encoding", "gzip"),
    );
    let response = gateway.post_chat(&tools_request(false)).await;
    let body = json_with_status(response, 403).await;
    assert_eq!(body["error"]["code"], "unparsable_response");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("compressed (gzip)")),
        "{body}"
    );
    // A redirect would send the client past the guard for its answer.
    upstream.push(
        Reply::raw(307, "text/plain", Vec::new())
            .with_header("location", "http://127.0.0.1:9/v1/chat/completions"),
    );
    let response = gateway.post_chat(&tools_request(false)).await;
    assert_eq!(response.status(), 403);
    assert!(response.headers().get("location").is_none());
    // An error status passes through as before.
    upstream.push(Reply::raw(
        429,
        "application/json",
        br#"{"error":{"message":"slow down"}}"#.to_vec(),
    ));
    let response = gateway.post_chat(&tools_request(false)).await;
    assert_eq!(response.status(), 429);
}

#[tokio::test]
async fn a_call_named_by_a_value_that_is_not_a_string_is_refused_streamed_or_not() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_chat("")).await;
    // JavaScript would read the name ["get_weather"] as the key get_weather.
    let answer = r#"{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":["get_weather"],"arguments":"{\"city\":\"x\"}"}}]}}]}"#;
    upstream.push(Reply::raw(
        200,
        "application/json",
        answer.as_bytes().to_vec(),
    ));
    let response = gateway
        .post("/v1/chat/completions", &tools_request(false))
        .await;
    assert_eq!(response.status(), 403);
    let body: Value = response.json().await.expect("envelope");
    assert_eq!(body["error"]["code"], "unparsable_response", "{body}");
    let stream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":[\"get_weather\"],\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
    upstream.push(Reply::sse_chunked(stream, 7));
    let response = gateway
        .post("/v1/chat/completions", &tools_request(true))
        .await;
    assert_eq!(response.status(), 403);
    let body: Value = response.json().await.expect("envelope");
    assert_eq!(body["error"]["code"], "unparsable_response", "{body}");
}

/// A fault while an answer is checked (here a plugin's panic; a library's would be the same)
/// reaches the client as the 500 envelope its SDK raises, or, in a stream already under way,
/// as a stream cut off; never as the answer being checked. The gateway goes on serving.
#[tokio::test]
async fn a_panic_while_checking_is_an_internal_error_and_the_answer_stays_held() {
    use crate::common::answers::{sdk_api_error, sdk_chat_request};
    use crate::common::faulty::PanicsOnCallFactory;
    use futures_util::StreamExt;

    let runtime = Runtime::with_plugins(|registry| {
        toolgate::PluginRegistry::builtin(registry).with(Arc::new(PanicsOnCallFactory))
    });
    let upstream = ScriptedUpstream::start().await;
    let routes = "[[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n\
        [[routes.plugins]]\nname = \"panics_on_call\"\n\
        [routes.plugins.settings]\ntool = \"delete_user\"\n";
    let gateway = TestGateway::start_with(&upstream, routes, runtime).await;
    let request = sdk_chat_request(json!({
        "model": "m",
        "messages": [{"role": "user", "content": "go"}],
        "tools": [{"type": "function", "function": {"name": "delete_user"}}]
    }));

    // The SDK retries a 500, as it should a server's fault: each attempt is checked again.
    upstream.set_default(Reply::chat_calls(&[("call_1", "delete_user", "{}")]));
    let refused = gateway.openai().chat().create(request.clone()).await;
    let Err(error) = refused else {
        panic!("the answer being checked reached the client: {refused:?}");
    };
    let (status, error) = sdk_api_error(error);
    assert_eq!(status, 500, "{error}");
    // async-openai gives a 5xx's body, after its retries, as the error's message, unread.
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains(r#""code":"internal_error""#), "{error}");
    assert!(message.contains("internal fault"), "{error}");
    assert!(
        !message.contains("delete_user"),
        "the fault's detail is the log's: {error}"
    );
    // Each attempt is counted, so a dashboard's 5xx rate shows the fault, and audited as a
    // failed exchange, though the exchange that would have written its line is what panicked.
    let attempts = upstream.request_count();
    gateway
        .assert_metrics_contain(&[format!(
            r#"toolgate_requests_total{{route="/v1",status="500"}} {attempts}"#
        )])
        .await;
    let failed_lines = |streamed: bool| {
        (gateway.audit_lines().into_iter())
            .filter(|line| {
                line["status"] == 500
                    && line["verdict"] == "error"
                    && line["streamed"] == streamed
                    && line["route"] == "/v1"
                    && line["path"] == "/v1/chat/completions"
                    && line["plugins"] == json!(["panics_on_call"])
            })
            .count()
    };
    for _ in 0..200 {
        if failed_lines(false) == attempts {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(failed_lines(false), attempts, "{:?}", gateway.audit_lines());

    // Streamed, after text went out: the stream is cut off with an error, the call held back.
    // Events 20 ms apart, so the text leaves before the call comes.
    upstream.push(
        Reply::sse_events(&chat_stream(
            &[("call_2", "delete_user", "{}")],
            Some("On it."),
        ))
        .with_chunk_delay(Duration::from_millis(20)),
    );
    let mut streamed = request.clone();
    streamed.stream = Some(true);
    let events: Vec<_> = gateway
        .openai()
        .chat()
        .create_stream(streamed)
        .await
        .expect("opens")
        .collect()
        .await;
    assert!(
        events.first().is_some_and(Result::is_ok),
        "the text before the call was sent: {events:?}"
    );
    assert!(
        events.last().is_some_and(Result::is_err),
        "the stream ends in an error, not as if whole: {events:?}"
    );
    let released_calls = (events.iter().flatten())
        .flat_map(|chunk| &chunk.choices)
        .filter(|choice| choice.delta.tool_calls.is_some())
        .count();
    assert_eq!(released_calls, 0, "{events:?}");
    // The relay that panicked could not close its exchange either: it is closed in its place.
    for _ in 0..200 {
        if failed_lines(true) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(failed_lines(true), 1, "{:?}", gateway.audit_lines());
    gateway
        .assert_metrics_contain(&[format!(
            r#"toolgate_requests_total{{route="/v1",status="500"}} {}"#,
            attempts + 1
        )])
        .await;

    upstream.set_default(Reply::chat_text("fine"));
    let answer = gateway
        .openai()
        .chat()
        .create(request)
        .await
        .expect("the next exchange is served");
    assert_eq!(answer.choices[0].message.content.as_deref(), Some("fine"));
}
