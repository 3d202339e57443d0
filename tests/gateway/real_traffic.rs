//! Every write bounded and every read timed by its silences (issue 42), over raw sockets: an
//! answer a client reads slowly is never cut as idle, a client that stops reading is let go
//! (its connection closed, its stream's exchange audited `client_stalled`, its slot freed at
//! `max_connections`), an early answer reaches a client still sending its body, and
//! `read_timeout_ms` is the longest silence of an upstream answer, not its whole length.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::upstream::chat_completion;
use crate::common::{PASS_THROUGH, Reply, ScriptedUpstream, TestGateway, guarded_chat};

/// A bound on a hang, not a measure of speed.
const PATIENCE: Duration = Duration::from_secs(20);

fn chat_request(stream: bool) -> String {
    json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]})
    .to_string()
}

/// Sends one POST on a new raw connection and returns the socket, the answer unread.
async fn post_raw(gateway: &TestGateway, path: &str, body: &str) -> TcpStream {
    let mut stream = TcpStream::connect(gateway.addr).await.expect("connects");
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    stream
        .write_all([head.as_bytes(), body.as_bytes()].concat().as_slice())
        .await
        .expect("sends");
    stream
}

/// Reads until the connection ends or `PATIENCE` passes, `chunk` bytes at a time with `pause`
/// between reads; returns what was read.
async fn read_paced(stream: &mut TcpStream, chunk: usize, pause: Duration) -> Vec<u8> {
    let mut read = Vec::new();
    let mut buffer = vec![0u8; chunk];
    let reading = async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(count) => read.extend_from_slice(&buffer[..count]),
            }
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
        }
    };
    let _ = tokio::time::timeout(PATIENCE, reading).await;
    read
}

/// The body's length an answer's head announces.
fn content_length(answer: &[u8]) -> Option<usize> {
    let text = String::from_utf8_lossy(&answer[..answer.len().min(4096)]).to_ascii_lowercase();
    let line = text
        .lines()
        .find(|line| line.starts_with("content-length:"))?;
    line["content-length:".len()..].trim().parse().ok()
}

fn head_length(answer: &[u8]) -> usize {
    answer
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .map_or(0, |at| at + 4)
}

#[tokio::test]
async fn an_answer_read_slowly_is_never_cut_as_idle() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start_tuned(
        &upstream,
        "idle_timeout_ms = 300\nwrite_timeout_ms = 5000",
        &guarded_chat(""),
    )
    .await;
    // 8 MiB of text, read at about 4 MiB/s: two seconds of writing after the exchange ended
    // for hyper, many times the idle timeout.
    let text = "x".repeat(8 * 1024 * 1024);
    upstream.push(Reply::json(200, chat_completion(&[], Some(&text))));
    let mut stream = post_raw(&gateway, "/v1/chat/completions", &chat_request(false)).await;
    let answer = read_paced(&mut stream, 64 * 1024, Duration::from_millis(15)).await;
    let announced = content_length(&answer).expect("a content-length");
    assert_eq!(
        answer.len() - head_length(&answer),
        announced,
        "the whole answer arrived"
    );
    assert!(announced > 8 * 1024 * 1024);
}

#[tokio::test]
async fn a_slow_but_steady_reader_is_not_taken_for_a_stalled_one() {
    let upstream = ScriptedUpstream::start().await;
    // A write waits until a third of the socket's (megabytes) send buffer is free: at ~1 MB/s
    // that is longer than this write timeout, though the client never stops reading.
    let gateway = TestGateway::start_tuned(
        &upstream,
        "idle_timeout_ms = 300
write_timeout_ms = 300",
        &guarded_chat(""),
    )
    .await;
    let text = "s".repeat(8 * 1024 * 1024);
    upstream.push(Reply::json(200, chat_completion(&[], Some(&text))));
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .set_recv_buffer_size(64 * 1024)
        .expect("a small window");
    let mut stream = socket.connect(gateway.addr).await.expect("connects");
    let body = chat_request(false);
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    stream
        .write_all([head.as_bytes(), body.as_bytes()].concat().as_slice())
        .await
        .expect("sends");
    let answer = read_paced(&mut stream, 64 * 1024, Duration::from_millis(60)).await;
    let announced = content_length(&answer).expect("a content-length");
    assert_eq!(
        answer.len() - head_length(&answer),
        announced,
        "the whole answer arrived, read at about 1 MB/s"
    );
}

#[tokio::test]
async fn a_client_that_stops_reading_is_let_go_and_its_stream_audited() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start_tuned(
        &upstream,
        "write_timeout_ms = 400\nmax_connections = 2",
        &guarded_chat(""),
    )
    .await;
    // A stream far larger than the socket buffers between the gateway and the client.
    let event = format!(
        "data: {}\n\n",
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {"content": "y".repeat(16 * 1024)}, "finish_reason": null}]})
    );
    let events: Vec<String> = std::iter::repeat_n(event, 4096).collect();
    upstream.push(Reply::sse(events.clone()));
    // And a whole answer as large.
    let text = "z".repeat(64 * 1024 * 1024 - 4096);
    upstream.push(Reply::json(200, chat_completion(&[], Some(&text))));
    let mut streamed = post_raw(&gateway, "/v1/chat/completions", &chat_request(true)).await;
    let mut whole = post_raw(&gateway, "/v1/chat/completions", &chat_request(false)).await;

    // Both slots are held by clients that read nothing; a new client still gets in.
    tokio::time::sleep(Duration::from_millis(300)).await;
    upstream.push(Reply::chat_text("served"));
    let status = tokio::time::timeout(
        PATIENCE,
        gateway.post_status(
            "/v1/chat/completions",
            &json!({"model": "m", "messages": []}),
        ),
    )
    .await
    .expect("a new client is served while two stalled ones hold the slots");
    assert_eq!(status, 200);

    // Each stalled connection was closed once its write deadline passed: what it can still
    // read is short of the answer.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for (name, stream, full) in [
        ("streamed", &mut streamed, 4096 * 16 * 1024),
        ("whole", &mut whole, 64 * 1024 * 1024),
    ] {
        let read = read_paced(stream, 1024 * 1024, Duration::ZERO).await;
        assert!(read.len() < full, "{name}: {} bytes arrived", read.len());
    }
    let stalled = gateway
        .audit_lines_until(|lines| lines.iter().any(|line| line["streamed"] == true))
        .await
        .into_iter()
        .find(|line| line["streamed"] == true)
        .expect("the stream's audit line");
    assert_eq!(stalled["outcome"], "client_stalled", "{stalled}");
}

/// Sends a 24 MiB body (more than the kernel's buffers take in for a socket nobody reads)
/// whole before reading, as most clients do, and returns the answer.
async fn send_a_large_body(gateway: &TestGateway, extra_head: &str) -> String {
    let body = format!("{{\"pad\": \"{}\"}}", "p".repeat(24 * 1024 * 1024));
    let mut stream = TcpStream::connect(gateway.addr).await.expect("connects");
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\n{extra_head}\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .await
        .expect("sends the head");
    stream
        .write_all(body.as_bytes())
        .await
        .expect("the gateway takes the whole body, not a reset");
    let answer = read_paced(&mut stream, 64 * 1024, Duration::ZERO).await;
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn an_early_answer_reaches_a_client_still_sending_its_body() {
    let upstream = ScriptedUpstream::start().await;
    let gateway =
        TestGateway::start_tuned(&upstream, "max_request_body_bytes = 1048576", PASS_THROUGH).await;
    for _ in 0..3 {
        let text = send_a_large_body(&gateway, "").await;
        assert!(text.starts_with("HTTP/1.1 413"), "{text}");
        assert!(text.contains("request_too_large"), "{text}");
    }
    // A 401 before the body is read, on a route that requires a tenant's key, the same.
    let tenants = TestGateway::start(
        &upstream,
        &format!("[tenants.acme]\napi_keys = [\"sk-acme\"]\n\n{PASS_THROUGH}"),
    )
    .await;
    let text = send_a_large_body(&tenants, "authorization: Bearer sk-wrong\r\n").await;
    assert!(text.starts_with("HTTP/1.1 401"), "{text}");
    assert_eq!(upstream.request_count(), 0);
}

#[tokio::test]
async fn read_timeout_is_the_longest_silence_of_an_answer_not_its_length() {
    let upstream = ScriptedUpstream::start().await;
    let audit = crate::common::temp_audit_path();
    let text = crate::common::config_text(&upstream.url(), &audit, &guarded_chat(""))
        .replace("read_timeout_ms = 3000", "read_timeout_ms = 1000");
    let gateway = TestGateway::start_text(&text, audit, toolgate::Runtime::new()).await;
    let answer = chat_completion(&[], Some("slow but steady")).to_string();
    let pieces: Vec<String> = answer
        .as_bytes()
        .chunks(answer.len() / 5 + 1)
        .map(|piece| String::from_utf8_lossy(piece).into_owned())
        .collect();
    // Five pieces 400 ms apart: two seconds in all, no silence of a second.
    upstream.push(
        Reply::sse(pieces)
            .with_chunk_delay(Duration::from_millis(400))
            .with_header("content-type", "application/json"),
    );
    let response = gateway
        .post(
            "/v1/chat/completions",
            &serde_json::from_str(&chat_request(false)).expect("json"),
        )
        .await;
    assert_eq!(response.status(), 200);
    // A silence longer than the timeout is still a 504.
    upstream.push(
        Reply::sse(vec!["{\"choices\":".to_owned(), "[]}".to_owned()])
            .with_chunk_delay(Duration::from_millis(1500))
            .with_header("content-type", "application/json"),
    );
    let response = gateway
        .post(
            "/v1/chat/completions",
            &serde_json::from_str(&chat_request(false)).expect("json"),
        )
        .await;
    assert_eq!(response.status(), 504);
}
