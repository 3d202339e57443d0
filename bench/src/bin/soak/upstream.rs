//! The soak's faulty upstream: it reads a request head, then answers, misbehaves or attacks as
//! the request's `x-soak-fault` says (and `x-soak-size` for a big answer).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toolgate_bench::big_answers;

use crate::{BIG_MAX, BIG_MIN, HOSTILE_TOOL};

/// The faulty upstream: reads a request head, then misbehaves as `x-soak-fault` says.
pub async fn start_faulty_upstream() -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(serve_fault(socket));
        }
    });
    Ok(address)
}

const CALL_OK: &str = r#"{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}"#;

const CALL_BAD: &str =
    r#"{"id":"call_1","type":"function","function":{"name":"wipe_disk","arguments":"{}"}}"#;

fn completion(call: &str) -> String {
    format!(
        r#"{{"id":"chatcmpl-soak","object":"chat.completion","created":1,"model":"m","choices":[{{"index":0,"finish_reason":"tool_calls","message":{{"role":"assistant","content":null,"tool_calls":[{call}]}}}}]}}"#
    )
}

fn stream_events(with_done: bool) -> String {
    let chunk = |delta: &str, finish: &str| {
        format!(
            "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
        )
    };
    let mut text = chunk(r#"{"role":"assistant","content":""}"#, "null");
    text += &chunk(r#"{"content":"Checking."}"#, "null");
    text += &chunk(
        r#"{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}"#,
        "null",
    );
    text += &chunk(
        r#"{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}"#,
        "null",
    );
    text += &chunk(
        r#"{"tool_calls":[{"index":0,"function":{"arguments":"\"Oslo\"}"}}]}"#,
        "null",
    );
    text += &chunk("{}", "\"tool_calls\"");
    if with_done {
        text += "data: [DONE]\n\n";
    }
    text
}

async fn serve_fault(mut socket: TcpStream) {
    let mut head = Vec::new();
    let mut buffer = [0u8; 8192];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        match socket.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => head.extend_from_slice(&buffer[..read]),
        }
        if head.len() > 1 << 20 {
            return;
        }
    }
    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let fault = text
        .lines()
        .find_map(|line| line.strip_prefix("x-soak-fault:"))
        .map(str::trim)
        .unwrap_or("ok_json")
        .to_owned();
    let json = |status: &str, body: &str| {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let sse_head =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    let reply = match fault.as_str() {
        "refuse" => return,
        "ok_json" => json("200 OK", &completion(CALL_OK)),
        "bad_call" => json("200 OK", &completion(CALL_BAD)),
        "ok_sse" => format!("{sse_head}{}", stream_events(true)),
        "sse_cut" => format!("{sse_head}{}", stream_events(false)),
        "error_5xx" => json("503 Service Unavailable", r#"{"error":{"message":"overloaded"}}"#),
        "not_json" => "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 9\r\nconnection: close\r\n\r\nnot json!".to_owned(),
        "truncated_json" => json("200 OK", r#"{"choices":[{"index":0,"message":{"tool_calls":["#),
        "reset_mid_body" => {
            let partial = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 4000\r\n\r\n{\"choices\":[";
            let _ = socket.write_all(partial.as_bytes()).await;
            return;
        }
        "stall_mid_stream" => {
            let events = stream_events(true);
            let cut = events.find("Oslo").unwrap_or(events.len() / 2);
            let _ = socket.write_all(format!("{sse_head}{}", &events[..cut]).as_bytes()).await;
            tokio::time::sleep(Duration::from_secs(20)).await;
            return;
        }
        "slow_head" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            json("200 OK", &completion(CALL_OK))
        }
        "big_json" => json("200 OK", &big_answers::json_body(big_size(&text))),
        "big_sse" => format!("{sse_head}{}", big_answers::sse_body(big_size(&text))),
        hostile if hostile.starts_with("hostile_") => hostile_reply(hostile, sse_head, &json),
        _ => json("400 Bad Request", r#"{"error":{"message":"unknown fault"}}"#),
    };
    let _ = socket.write_all(reply.as_bytes()).await;
    let _ = socket.shutdown().await;
}

/// The text size a big answer's request asks for (`x-soak-size`, in a lowercased head).
fn big_size(head: &str) -> usize {
    head.lines()
        .find_map(|line| line.strip_prefix("x-soak-size:"))
        .and_then(|size| size.trim().parse().ok())
        .unwrap_or(BIG_MIN)
        .min(BIG_MAX)
}

/// A hostile answer: a call of `delete_user` hidden where a lenient client still reads it.
fn hostile_reply(fault: &str, sse_head: &str, json: &dyn Fn(&str, &str) -> String) -> String {
    let chunk = |delta: &str| {
        format!(
            "data: {{\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":null}}]}}\n\n"
        )
    };
    let call = format!(
        r#"{{"id":"call_9","type":"function","function":{{"name":"{HOSTILE_TOOL}","arguments":"{{}}"}}}}"#
    );
    match fault {
        "hostile_repeated_key" => json(
            "200 OK",
            &completion(&format!(
                r#"{{"id":"call_9","type":"function","function":{{"name":"get_weather","name":"{HOSTILE_TOOL}","arguments":"{{\"city\":\"Oslo\"}}"}}}}"#
            )),
        ),
        "hostile_string_index" => format!(
            "{sse_head}{}{}data: [DONE]\n\n",
            chunk(&format!(
                r#"{{"tool_calls":[{{"index":"0","id":"call_9","type":"function","function":{{"name":"{HOSTILE_TOOL}","arguments":"{{}}"}}}}]}}"#
            )),
            chunk("{}"),
        ),
        "hostile_foreign_event" => format!(
            "{sse_head}{}event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"tool_use\",\"id\":\"toolu_9\",\"name\":\"{HOSTILE_TOOL}\",\"input\":{{}}}}}}\n\ndata: [DONE]\n\n",
            chunk(r#"{"content":"Checking."}"#),
        ),
        "hostile_stream_as_json" => {
            let body = format!(
                "{}{}data: [DONE]\n\n",
                chunk(&format!(
                    r#"{{"tool_calls":[{}]}}"#,
                    call.replace("{\"id\"", "{\"index\":0,\"id\"")
                )),
                chunk("{}"),
            );
            json("200 OK", &body)
        }
        _ => format!("{sse_head}{}", completion(&call)),
    }
}
