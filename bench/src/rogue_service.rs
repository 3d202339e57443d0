//! The soak's misbehaving validator service (issue 22, points 5 and 6): an HTTP service that
//! answers toolgate's `service` plugin as the request's latest user turn says (`soak-service:
//! FAULT`, which the soak's clients pick at random): a plain allow or deny, header patches that
//! would reframe the client's answer, violations on calls it was not sent, bad codes, control
//! characters, answers past the timeout, garbage, broken HTTP. Each fault says whether the
//! exchange must pass or be blocked, so the soak can check every answer.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the gateway must do with an exchange whose service answered a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// The upstream's answer reaches the client.
    Pass,
    /// The exchange is refused (403, or an error event once a stream's head was sent).
    Block,
}

/// Every fault, with what it must lead to. A valid answer is obeyed; anything invalid, late or
/// broken is an outage, and the soak's instance fails closed.
pub const SERVICE_FAULTS: [(&str, Expect); 15] = [
    ("allow", Expect::Pass),
    ("patch_safe_header", Expect::Pass),
    ("deny", Expect::Block),
    ("patch_content_length", Expect::Block),
    ("patch_transfer_encoding", Expect::Block),
    ("patch_connection", Expect::Block),
    ("invented_call_id", Expect::Block),
    ("bad_code", Expect::Block),
    ("control_characters", Expect::Block),
    ("slow", Expect::Block),
    ("not_json", Expect::Block),
    ("not_http", Expect::Block),
    ("status_500", Expect::Block),
    ("lying_length", Expect::Block),
    ("hang_up", Expect::Block),
];

/// The service's timeout in the soak's config; `slow` answers well past it.
pub const SERVICE_TIMEOUT_MS: u64 = 500;
const SLOW_ANSWER: Duration = Duration::from_millis(SERVICE_TIMEOUT_MS * 3);

/// Serves on a free loopback port until the process ends; returns its address.
pub async fn start() -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(serve(socket));
        }
    });
    Ok(address)
}

/// One call per connection (each answer says `connection: close`): a broken answer never
/// leaves a connection behind for the next call.
async fn serve(mut socket: TcpStream) {
    let Some(envelope) = read_envelope(&mut socket).await else {
        return;
    };
    let user_request = envelope["context"]["user_request"]
        .as_str()
        .unwrap_or_default();
    let fault = user_request
        .split_whitespace()
        .find_map(|word| word.strip_prefix("soak-service:"))
        .unwrap_or("allow");
    let call_id = envelope["tool_calls"][0]["id"].as_str();
    let json_answer = |status: &str, body: Value| {
        let body = body.to_string();
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let patch = |header: &str, value: &str| {
        json_answer(
            "200 OK",
            json!({"decision": "modify", "patch": {"response_headers": {header: value}}}),
        )
    };
    // A deny names the call it was sent when there is one (pre_response), else none.
    let violation = |code: &str, message: &str| match call_id {
        Some(id) => json!({"code": code, "message": message, "tool_call_id": id}),
        None => json!({"code": code, "message": message}),
    };
    let deny = |violation: Value| {
        json_answer(
            "200 OK",
            json!({"decision": "deny", "violations": [violation]}),
        )
    };
    let answer = match fault {
        "patch_safe_header" => patch("x-soak-checked", "yes"),
        "deny" => deny(violation("soak.denied", "not today")),
        "patch_content_length" => patch("content-length", "3"),
        "patch_transfer_encoding" => patch("transfer-encoding", "chunked"),
        "patch_connection" => patch("connection", "close"),
        "invented_call_id" => deny(json!({"code": "evil", "tool_call_id": "call_invented",
            "tool": "wire_money", "choice": 7})),
        "bad_code" => deny(violation("Not A Code\r\nx-forged: 1", "bad code")),
        "control_characters" => deny(violation(
            "soak.control",
            "drops\r\nx-forged: 1\u{1b}[2J\u{0}a table",
        )),
        "slow" => {
            tokio::time::sleep(SLOW_ANSWER).await;
            json_answer("200 OK", json!({"decision": "allow"}))
        }
        "not_json" => "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 9\r\n\
                       connection: close\r\n\r\nnot json!"
            .to_owned(),
        "not_http" => "\u{0}\u{1}garbage, not an HTTP answer\r\n\r\n".to_owned(),
        "status_500" => json_answer("500 Internal Server Error", json!({"decision": "allow"})),
        "lying_length" => {
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 4000\r\n\
             connection: close\r\n\r\n{\"decision\":\"allow\""
                .to_owned()
        }
        "hang_up" => return,
        _ => json_answer("200 OK", json!({"decision": "allow"})),
    };
    let _ = socket.write_all(answer.as_bytes()).await;
    let _ = socket.shutdown().await;
}

/// Reads one request (head, then a `content-length` body) and parses its body as JSON.
async fn read_envelope(socket: &mut TcpStream) -> Option<Value> {
    let mut buffer = Vec::new();
    let mut piece = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break at + 4;
        }
        if buffer.len() > 64 * 1024 {
            return None;
        }
        match socket.read(&mut piece).await {
            Ok(0) | Err(_) => return None,
            Ok(read) => buffer.extend_from_slice(&piece[..read]),
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse().ok())?;
    while buffer.len() < head_end + length {
        match socket.read(&mut piece).await {
            Ok(0) | Err(_) => return None,
            Ok(read) => buffer.extend_from_slice(&piece[..read]),
        }
    }
    serde_json::from_slice(&buffer[head_end..head_end + length]).ok()
}
