//! Connections and limits, end to end over raw sockets: every phase of a connection has a
//! deadline (first byte, HTTP/2 handshake, idleness, a request body's whole arrival), sockets
//! that do no work never lock clients out at `max_connections`, the body limits hold on every
//! route, and an exchange cut by the shutdown grace still gets an answer in its format.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::answers::{assert_contains_all, config_errors};
use crate::common::upstream::chat_stream;
use crate::common::{PASS_THROUGH, Reply, ScriptedUpstream, TestGateway, guarded_chat};

/// Long enough for any loaded machine to do what a test waits for; a bound on a hang, not a
/// measure of speed.
const PATIENCE: Duration = Duration::from_secs(10);

const HTTP2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty SETTINGS frame: the client's half of the HTTP/2 handshake.
const HTTP2_EMPTY_SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];

/// One HTTP/1.1 answer read off a raw connection.
struct RawAnswer {
    status: u16,
    body: Vec<u8>,
}

impl RawAnswer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Reads one answer: its head, then a body framed by `content-length`, by chunks, or by the
/// connection's end.
async fn read_answer(stream: &mut TcpStream) -> RawAnswer {
    let read = async {
        let mut buffer = Vec::new();
        let mut chunk = [0u8; 8192];
        let head_end = loop {
            if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
                break end + 4;
            }
            let read = stream.read(&mut chunk).await.expect("reads");
            assert!(
                read > 0,
                "the connection closed before an answer: {:?}",
                String::from_utf8_lossy(&buffer)
            );
            buffer.extend_from_slice(&chunk[..read]);
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
        let mut body = buffer[head_end..].to_vec();
        let status = head[9..12].parse().expect("a status code");
        let length = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .map(|value| value.trim().parse::<usize>().expect("a length"));
        match length {
            Some(length) => {
                while body.len() < length {
                    let read = stream.read(&mut chunk).await.expect("reads");
                    assert!(read > 0, "the body was cut");
                    body.extend_from_slice(&chunk[..read]);
                }
            }
            None if head.contains("transfer-encoding: chunked") => {
                while !body.windows(5).any(|window| window == b"0\r\n\r\n") {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(read) => body.extend_from_slice(&chunk[..read]),
                    }
                }
                body = dechunk(&body);
            }
            None => {
                let _ = stream.read_to_end(&mut body).await;
            }
        }
        RawAnswer { status, body }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .expect("an answer came")
}

/// The data of a chunked body (as far as it goes).
fn dechunk(mut chunked: &[u8]) -> Vec<u8> {
    let mut data = Vec::new();
    while let Some(line_end) = chunked.windows(2).position(|window| window == b"\r\n") {
        let size = std::str::from_utf8(&chunked[..line_end])
            .ok()
            .and_then(|size| usize::from_str_radix(size.trim(), 16).ok())
            .unwrap_or(0);
        let start = line_end + 2;
        if size == 0 || chunked.len() < start + size {
            break;
        }
        data.extend_from_slice(&chunked[start..start + size]);
        chunked = chunked.get(start + size + 2..).unwrap_or_default();
    }
    data
}

/// Waits until the gateway closes `stream`, reading and dropping whatever it sends first.
async fn closed_by_gateway(stream: &mut TcpStream) -> bool {
    closed_within(stream, PATIENCE).await
}

/// Whether the gateway closed `stream` within `bound` (reading and dropping what it sends).
async fn closed_within(stream: &mut TcpStream, bound: Duration) -> bool {
    let mut sink = Vec::new();
    tokio::time::timeout(bound, stream.read_to_end(&mut sink))
        .await
        .is_ok()
}

/// Whether the gateway closed `stream` within a short look (it sends nothing unasked).
async fn closed_now(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(Duration::from_millis(500), stream.read(&mut byte)).await,
        Ok(Ok(0) | Err(_))
    )
}

async fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).await.expect("connects")
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nhost: gateway\r\n\r\n").into_bytes()
}

/// An HTTP/2 connection that finished its handshake: the server's first frame (its SETTINGS)
/// has arrived, so the gateway has accepted and is serving it.
async fn http2_handshaken(addr: SocketAddr, send_settings: bool) -> TcpStream {
    let mut stream = connect(addr).await;
    stream.write_all(HTTP2_PREFACE).await.expect("writes");
    if send_settings {
        stream
            .write_all(HTTP2_EMPTY_SETTINGS)
            .await
            .expect("writes");
    }
    let frame_type = tokio::time::timeout(PATIENCE, read_http2_frame(&mut stream))
        .await
        .expect("the server's first frame came");
    assert_eq!(frame_type, Some(4), "the server opens with its SETTINGS");
    stream
}

/// The type of the next HTTP/2 frame (its payload skipped); `None` at the connection's end.
async fn read_http2_frame(stream: &mut TcpStream) -> Option<u8> {
    let mut header = [0u8; 9];
    stream.read_exact(&mut header).await.ok()?;
    let length = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
    let mut payload = vec![0u8; length];
    stream.read_exact(&mut payload).await.ok()?;
    Some(header[3])
}

#[tokio::test]
async fn silent_and_preface_only_connections_are_closed_at_their_phase_deadlines() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start_tuned(
        &upstream,
        "first_byte_timeout_ms = 200\nhandshake_timeout_ms = 400",
        PASS_THROUGH,
    )
    .await;
    // Closed by the configured deadlines (200 and 400 ms), not the defaults (10 s and 30 s):
    // within 5 s, a bound far above the first and far below the second.
    let by_the_configured_deadline = Duration::from_secs(5);
    let mut silent = connect(gateway.addr).await;
    assert!(
        closed_within(&mut silent, by_the_configured_deadline).await,
        "a socket that sends nothing"
    );
    let mut half_preface = connect(gateway.addr).await;
    half_preface
        .write_all(&HTTP2_PREFACE[..10])
        .await
        .expect("writes");
    assert!(
        closed_within(&mut half_preface, by_the_configured_deadline).await,
        "a socket stuck in protocol detection"
    );
    let mut preface_only = http2_handshaken(gateway.addr, false).await;
    assert!(
        closed_within(&mut preface_only, by_the_configured_deadline).await,
        "an HTTP/2 preface without the client's settings"
    );
    let mut no_request = http2_handshaken(gateway.addr, true).await;
    assert!(
        closed_within(&mut no_request, by_the_configured_deadline).await,
        "an HTTP/2 handshake with no request after it"
    );
    // A client that does send its request in time is served as ever.
    upstream.set_default(Reply::json(200, json!({"ok": true})));
    let mut client = connect(gateway.addr).await;
    client.write_all(&get("/v1/models")).await.expect("writes");
    assert_eq!(read_answer(&mut client).await.status, 200);
}

#[tokio::test]
async fn a_slowloris_flood_at_the_cap_does_not_lock_out_a_client() {
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::json(200, json!({"ok": true})));
    // Phase deadlines far beyond the test's patience: only reclaiming can let the client in.
    let gateway = TestGateway::start_tuned(
        &upstream,
        "max_connections = 4\nfirst_byte_timeout_ms = 60000\nhandshake_timeout_ms = 60000",
        PASS_THROUGH,
    )
    .await;
    let mut flood = Vec::new();
    // Two silent sockets first (the oldest idle), then two HTTP/2 prefaces, which the gateway
    // answers: by then it has accepted all four, in order, and every slot is taken.
    flood.push(connect(gateway.addr).await);
    tokio::time::sleep(Duration::from_millis(20)).await;
    flood.push(connect(gateway.addr).await);
    flood.push(http2_handshaken(gateway.addr, false).await);
    flood.push(http2_handshaken(gateway.addr, true).await);

    let response = tokio::time::timeout(
        PATIENCE,
        crate::common::http()
            .get(format!("{}/v1/models", gateway.url()))
            .send(),
    )
    .await
    .expect("the client was let in")
    .expect("answered");
    assert_eq!(response.status(), 200);
    assert!(
        closed_now(&mut flood[0]).await,
        "the socket idle the longest made room"
    );
    assert!(
        !closed_now(&mut flood[3]).await,
        "one reclaimed socket was enough"
    );
}

#[tokio::test]
async fn idle_keep_alive_connections_at_the_cap_do_not_lock_out_a_new_client() {
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::json(200, json!({"ok": true})));
    let gateway = TestGateway::start_tuned(&upstream, "max_connections = 2", PASS_THROUGH).await;
    let mut older = connect(gateway.addr).await;
    older.write_all(&get("/v1/a")).await.expect("writes");
    assert_eq!(read_answer(&mut older).await.status, 200);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut newer = connect(gateway.addr).await;
    newer.write_all(&get("/v1/b")).await.expect("writes");
    assert_eq!(read_answer(&mut newer).await.status, 200);

    // Both slots hold idle keep-alive connections; a third client gets in.
    let mut third = connect(gateway.addr).await;
    third.write_all(&get("/v1/c")).await.expect("writes");
    assert_eq!(read_answer(&mut third).await.status, 200);
    assert!(
        closed_now(&mut older).await,
        "the connection idle the longest was closed for it"
    );
    newer.write_all(&get("/v1/d")).await.expect("writes");
    assert_eq!(
        read_answer(&mut newer).await.status,
        200,
        "the other keeps serving"
    );
}

/// A request's head begun on a kept-alive connection is the client's next exchange, not
/// idleness: reclaiming at the cap passes over it (only its head's own deadline holds) for a
/// connection truly idle, though the one with the head begun has been idle longer.
#[tokio::test]
async fn a_request_begun_on_a_kept_alive_connection_is_not_reclaimed_at_the_cap() {
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::json(200, json!({"ok": true})));
    let gateway = TestGateway::start_tuned(
        &upstream,
        "max_connections = 2\nheader_read_timeout_ms = 5000",
        PASS_THROUGH,
    )
    .await;
    let mut begun = connect(gateway.addr).await;
    begun.write_all(&get("/v1/a")).await.expect("writes");
    assert_eq!(read_answer(&mut begun).await.status, 200);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut idle = connect(gateway.addr).await;
    idle.write_all(&get("/v1/b")).await.expect("writes");
    assert_eq!(read_answer(&mut idle).await.status, 200);

    // Half a head, and both connections long enough without an exchange to be reclaimable.
    begun
        .write_all(b"GET /v1/c HTTP/1.1\r\nhost: ga")
        .await
        .expect("writes");
    tokio::time::sleep(Duration::from_millis(700)).await;
    let mut third = connect(gateway.addr).await;
    third.write_all(&get("/v1/d")).await.expect("writes");
    assert_eq!(read_answer(&mut third).await.status, 200);
    assert!(
        closed_by_gateway(&mut idle).await,
        "the idle connection made room"
    );
    begun.write_all(b"teway\r\n\r\n").await.expect("writes");
    assert_eq!(
        read_answer(&mut begun).await.status,
        200,
        "the request begun was served"
    );
    assert!(
        upstream
            .requests()
            .iter()
            .any(|request| request.path_and_query == "/v1/c")
    );
}

/// Nor does the idle deadline close a connection whose next head has begun.
#[tokio::test]
async fn a_head_begun_before_the_idle_deadline_is_served_after_it() {
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::json(200, json!({"ok": true})));
    let gateway = TestGateway::start_tuned(
        &upstream,
        "idle_timeout_ms = 300\nheader_read_timeout_ms = 5000",
        PASS_THROUGH,
    )
    .await;
    let mut stream = connect(gateway.addr).await;
    stream.write_all(&get("/v1/a")).await.expect("writes");
    assert_eq!(read_answer(&mut stream).await.status, 200);
    tokio::time::sleep(Duration::from_millis(100)).await;
    stream
        .write_all(b"GET /v1/b HTTP/1.1\r\nhost: ga")
        .await
        .expect("writes");
    tokio::time::sleep(Duration::from_millis(700)).await;
    stream.write_all(b"teway\r\n\r\n").await.expect("writes");
    assert_eq!(read_answer(&mut stream).await.status, 200);
    assert_eq!(upstream.request_count(), 2);
}

/// The head begun on a kept-alive connection still has a deadline: header_read_timeout_ms,
/// counted from its first byte.
#[tokio::test]
async fn a_head_begun_after_an_exchange_is_bounded_by_its_own_deadline() {
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::json(200, json!({"ok": true})));
    let gateway = TestGateway::start_tuned(
        &upstream,
        "idle_timeout_ms = 60000\nheader_read_timeout_ms = 300",
        PASS_THROUGH,
    )
    .await;
    let mut stream = connect(gateway.addr).await;
    stream.write_all(&get("/v1/a")).await.expect("writes");
    assert_eq!(read_answer(&mut stream).await.status, 200);
    stream
        .write_all(b"GET /v1/b HTTP/1.1\r\n")
        .await
        .expect("writes");
    assert!(
        closed_by_gateway(&mut stream).await,
        "a head that never ends is closed"
    );
    assert_eq!(upstream.request_count(), 1);
}

#[tokio::test]
async fn a_connection_with_an_exchange_in_flight_keeps_its_slot() {
    let upstream = ScriptedUpstream::start().await;
    upstream.push(Reply::json(200, json!({"first": true})).with_delay(Duration::from_millis(500)));
    upstream.set_default(Reply::json(200, json!({"second": true})));
    let gateway = TestGateway::start_tuned(&upstream, "max_connections = 1", PASS_THROUGH).await;
    let mut busy = connect(gateway.addr).await;
    busy.write_all(&get("/v1/slow")).await.expect("writes");
    for _ in 0..200 {
        if upstream.request_count() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let waiting = tokio::spawn(async move {
        let mut stream = connect(gateway.addr).await;
        stream
            .write_all(b"GET /v1/next HTTP/1.1\r\nhost: gateway\r\nconnection: close\r\n\r\n")
            .await
            .expect("writes");
        (read_answer(&mut stream).await, gateway)
    });
    let first = read_answer(&mut busy).await;
    assert_eq!(first.status, 200, "the exchange in flight was not cut");
    assert_eq!(first.json()["first"], true);
    let (second, _gateway) = waiting.await.expect("joins");
    assert_eq!(second.status, 200, "served once the slot went idle");
    assert_eq!(second.json()["second"], true);
    assert_eq!(upstream.requests()[1].path_and_query, "/v1/next");
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_and_an_http2_one_pinged() {
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::json(200, json!({"ok": true})));
    let gateway = TestGateway::start_tuned(
        &upstream,
        "idle_timeout_ms = 300\nhttp2_keep_alive_interval_ms = 100",
        PASS_THROUGH,
    )
    .await;
    let mut kept_alive = connect(gateway.addr).await;
    kept_alive.write_all(&get("/v1/a")).await.expect("writes");
    assert_eq!(read_answer(&mut kept_alive).await.status, 200);
    assert!(closed_by_gateway(&mut kept_alive).await);

    // An HTTP/2 client is pinged (frame type 6) while it holds its connection.
    let mut http2 = http2_handshaken(gateway.addr, true).await;
    let pinged = tokio::time::timeout(PATIENCE, async {
        while let Some(frame_type) = read_http2_frame(&mut http2).await {
            if frame_type == 6 {
                return true;
            }
        }
        false
    })
    .await
    .expect("a frame or the end came");
    assert!(pinged, "the gateway sent a PING");
}

/// Sends a request head announcing `length` bytes, then one byte every 100 ms until the gateway
/// answers; returns its answer.
async fn trickle(addr: SocketAddr, path: &str, length: usize) -> RawAnswer {
    let mut stream = connect(addr).await;
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\n\
         content-length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("writes");
    let (mut reader, mut writer) = stream.into_split();
    let trickling = tokio::spawn(async move {
        for _ in 0..length {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if writer.write_all(b" ").await.is_err() {
                break;
            }
        }
        writer
    });
    let mut received = Vec::new();
    let _ = tokio::time::timeout(PATIENCE, reader.read_to_end(&mut received)).await;
    trickling.abort();
    let text = String::from_utf8_lossy(&received).into_owned();
    let head_end = text.find("\r\n\r\n").map_or(text.len(), |end| end + 4);
    RawAnswer {
        status: text
            .get(9..12)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0),
        body: dechunk_or_plain(&received[head_end..], &text[..head_end]),
    }
}

fn dechunk_or_plain(body: &[u8], head: &str) -> Vec<u8> {
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_vec()
    }
}

#[tokio::test]
async fn a_body_trickled_past_its_deadline_is_cut_with_a_408_on_every_route() {
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::json(200, json!({"ok": true})));
    // Never silent for 2 s, but 200 bytes at 10 a second take 20 s: the 1 s deadline cuts it.
    let gateway = TestGateway::start_tuned(
        &upstream,
        "request_body_timeout_ms = 2000\nrequest_body_deadline_ms = 1000",
        &guarded_chat(""),
    )
    .await;
    for path in ["/v1/embeddings", "/v1/chat/completions"] {
        let answer = trickle(gateway.addr, path, 200).await;
        assert_eq!(answer.status, 408, "{path}: {}", answer.text());
        let body = answer.json();
        assert_eq!(body["error"]["code"], "request_timeout", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|message| message.contains("deadline")),
            "{body}"
        );
    }
    assert_eq!(upstream.request_count(), 0, "no trickled body went whole");
}

#[tokio::test]
async fn an_oversize_body_is_a_413_on_a_pass_through_route_with_a_length_or_chunked() {
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::json(200, json!({"ok": true})));
    let gateway =
        TestGateway::start_tuned(&upstream, "max_request_body_bytes = 1048576", PASS_THROUGH).await;
    let two_megabytes = vec![b'x'; 2 * 1024 * 1024];
    let with_length = gateway
        .post_bytes("/v1/files", &[], two_megabytes.clone())
        .await;
    assert_eq!(with_length.status(), 413);
    let body: Value = with_length.json().await.expect("an envelope");
    assert_eq!(body["error"]["code"], "request_too_large", "{body}");

    let chunks = futures_util::stream::iter(
        two_megabytes
            .chunks(64 * 1024)
            .map(|chunk| Ok::<_, std::io::Error>(bytes::Bytes::copy_from_slice(chunk)))
            .collect::<Vec<_>>(),
    );
    let chunked = gateway
        .post_bytes("/v1/files", &[], reqwest::Body::wrap_stream(chunks))
        .await;
    assert_eq!(chunked.status(), 413);
    let body: Value = chunked.json().await.expect("an envelope");
    assert_eq!(body["error"]["code"], "request_too_large", "{body}");
    assert_eq!(upstream.request_count(), 0, "no oversize body went whole");

    // Under the cap, a chunked body passes as before.
    let small = futures_util::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from_static(
        b"{\"small\": true}",
    ))]);
    let response = gateway
        .post_bytes("/v1/files", &[], reqwest::Body::wrap_stream(small))
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(upstream.requests()[0].text(), "{\"small\": true}");
}

#[tokio::test]
async fn a_malformed_chunked_body_is_a_400_not_a_502() {
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::json(200, json!({"ok": true})));
    let gateway = TestGateway::start(&upstream, &guarded_chat("")).await;
    for path in ["/v1/embeddings", "/v1/chat/completions"] {
        let mut stream = connect(gateway.addr).await;
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: gateway\r\ntransfer-encoding: chunked\r\n\r\n\
             5\r\n{{\"a\":\r\nzz\r\nnot a chunk\r\n0\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.expect("writes");
        let answer = read_answer(&mut stream).await;
        assert_eq!(answer.status, 400, "{path}: {}", answer.text());
        let body = answer.json();
        assert_eq!(body["error"]["code"], "invalid_request", "{body}");
        assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    }
    assert_eq!(upstream.request_count(), 0);
}

/// Waits (bounded) until the upstream has seen `count` requests.
async fn until_upstream_saw(upstream: &ScriptedUpstream, count: usize) {
    for _ in 0..500 {
        if upstream.request_count() >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the upstream saw {} requests", upstream.request_count());
}

#[tokio::test]
async fn exchanges_cut_by_the_shutdown_grace_get_an_error_answer_in_their_format() {
    let upstream = ScriptedUpstream::start().await;
    let routes = format!(
        "{}\n[[routes]]\npath = \"/open\"\nupstream = \"llm\"\n",
        guarded_chat("")
    );
    let gateway = TestGateway::start_tuned(&upstream, "shutdown_grace_ms = 300", &routes).await;
    let addr = gateway.addr;
    // 1. An answer whose head has not come: a 503 envelope, over HTTP/1.1 and over HTTP/2
    //    (whose exchanges run as tasks of their own, not in their connection's).
    upstream.push(Reply::chat_text("late").with_delay(Duration::from_secs(30)));
    upstream.push(Reply::chat_text("late").with_delay(Duration::from_secs(30)));
    // 2. An event stream passed through, started and then silent.
    upstream.push(Reply::stall_after([
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n",
    ]));
    // 3. A guarded stream, started and then silent.
    let stream = chat_stream(&[], Some("Hello there"));
    let text_at = stream.find("\"Hel").expect("the text's first event");
    let text_event_end = text_at + stream[text_at..].find("\n\n").expect("its end") + 2;
    upstream.push(Reply::stall_after([stream[..text_event_end].to_owned()]));

    let waiting = tokio::spawn(async move {
        let mut stream = connect(addr).await;
        let body = r#"{"model":"m","messages":[]}"#;
        let request = format!(
            "POST /open/v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.expect("writes");
        read_answer(&mut stream).await
    });
    until_upstream_saw(&upstream, 1).await;
    let waiting_on_http2 = tokio::spawn(async move {
        let client = crate::common::http_builder()
            .http2_prior_knowledge()
            .build()
            .expect("client");
        let response = client
            .post(format!("http://{addr}/open/v1/chat/completions"))
            .json(&serde_json::json!({"model": "m", "messages": []}))
            .send()
            .await
            .expect("answered");
        assert_eq!(response.version(), reqwest::Version::HTTP_2);
        let status = response.status();
        (status, response.json::<Value>().await.expect("an envelope"))
    });
    until_upstream_saw(&upstream, 2).await;
    let mut streams = Vec::new();
    for path in ["/open/v1/chat/completions", "/v1/chat/completions"] {
        let mut stream = connect(addr).await;
        let body = r#"{"model":"m","stream":true,"messages":[]}"#;
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.expect("writes");
        // The head and the first event are out before the shutdown starts.
        let mut seen = Vec::new();
        let mut chunk = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains("Hel") {
            let read = tokio::time::timeout(PATIENCE, stream.read(&mut chunk))
                .await
                .expect("the stream started")
                .expect("reads");
            assert!(read > 0, "{}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&chunk[..read]);
        }
        streams.push((stream, seen));
    }
    gateway.stop().await;

    let waited = waiting.await.expect("joins");
    assert_eq!(waited.status, 503, "{}", waited.text());
    assert_eq!(waited.json()["error"]["code"], "shutting_down");
    let (status, envelope) = waiting_on_http2.await.expect("joins");
    assert_eq!(status, 503, "{envelope}");
    assert_eq!(envelope["error"]["code"], "shutting_down");
    for (mut stream, mut seen) in streams {
        let _ = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut seen)).await;
        let text = String::from_utf8_lossy(&seen).into_owned();
        let head_end = text.find("\r\n\r\n").expect("a head") + 4;
        let events =
            String::from_utf8_lossy(&dechunk_or_plain(&seen[head_end..], &text[..head_end]))
                .into_owned();
        let last = events
            .trim_end()
            .rsplit("\n\n")
            .next()
            .unwrap_or_default()
            .to_owned();
        let error: Value = serde_json::from_str(last.trim_start_matches("data: "))
            .unwrap_or_else(|_| panic!("the stream ends with an error event: {events}"));
        assert_eq!(error["error"]["code"], "shutting_down", "{events}");
        assert!(!events.contains("[DONE]"), "{events}");
    }
}

#[test]
fn connection_settings_are_checked_at_load() {
    let runtime = toolgate::Runtime::new();
    let text = "[server]\nlisten = \"127.0.0.1:0\"\nidle_timeout_ms = 0\nmax_connections = 0\n\
                first_byte_timeout_ms = 5000\nhandshake_timeout_ms = 1000\n\
                request_body_deadline_ms = 0\n";
    let errors = config_errors(text, "t.toml", &runtime.plugins);
    assert_contains_all(
        &errors,
        [
            "t.toml:3:1: server.idle_timeout_ms: must be greater than 0 (milliseconds)",
            "t.toml:4:1: server.max_connections: must be greater than 0",
            "t.toml:6:1: server.handshake_timeout_ms: must be at least first_byte_timeout_ms (5000 ms)",
        ],
    );
    assert!(
        !errors.contains("request_body_deadline_ms"),
        "0 turns the body deadline off: {errors}"
    );
}
