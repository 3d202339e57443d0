//! The soak's clients of `/svc`: exchanges with the misbehaving validator service on keep-alive
//! connections, each answer read by its own framing, so a forged length or encoding shows as a
//! desync.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use toolgate_bench::rogue_service::{Expect, SERVICE_FAULTS};

use crate::{CLIENT_DEADLINE, Random, SERVICE_EXCHANGES_PER_CONNECTION, Tally, clip, keep_example};

/// A client of `/svc`: a few exchanges on one keep-alive connection, each with a service fault
/// picked at random, each answer read by its own framing and checked against the fault. A
/// forged length or encoding would leave bytes between answers, or make the next one unreadable.
pub async fn service_session(gateway: SocketAddr, random: &mut Random, tally: &Tally) {
    let mut connection: Option<Connection> = None;
    for _ in 0..SERVICE_EXCHANGES_PER_CONNECTION {
        let (fault, expect) = SERVICE_FAULTS[random.below(SERVICE_FAULTS.len())];
        let stream = random.below(2) == 1;
        tally.sent.fetch_add(1, Ordering::Relaxed);
        tally.service_exchanges.fetch_add(1, Ordering::Relaxed);
        let attempt = async {
            // As a pooling client does, a connection the gateway closed while it sat idle is
            // not reused: a new one is opened.
            let kept = match connection.take() {
                Some(mut open) => match open.closed_by_gateway() {
                    false => Some(open),
                    true => {
                        tally.keep_alive_closed_idle.fetch_add(1, Ordering::Relaxed);
                        None
                    }
                },
                None => None,
            };
            let mut open = match kept {
                Some(open) => open,
                None => Connection::open(gateway).await?,
            };
            let answer = open.exchange(&service_request(fault, stream)).await?;
            Ok::<_, Broken>((open, answer))
        };
        let outcome = tokio::time::timeout(CLIENT_DEADLINE, attempt)
            .await
            .unwrap_or_else(|_| Err(Broken::Lost("no end within the deadline".to_owned())));
        let answer = match outcome {
            Ok((open, answer)) => {
                if !answer.close {
                    connection = Some(open);
                }
                answer
            }
            Err(Broken::Lost(why)) => {
                tally.lost.fetch_add(1, Ordering::Relaxed);
                keep_example(
                    &tally.lost_examples,
                    format!("service {fault} stream={stream}: {why}"),
                )
                .await;
                continue;
            }
            Err(Broken::Desync(why)) => {
                tally.desynced.fetch_add(1, Ordering::Relaxed);
                keep_example(
                    &tally.desync_examples,
                    format!("service {fault} stream={stream}: {why}"),
                )
                .await;
                continue;
            }
        };
        tally.answered.fetch_add(1, Ordering::Relaxed);
        let text = String::from_utf8_lossy(&answer.body);
        let ended_by_error = text.contains("\"error\"");
        let passed = answer.status == 200 && !ended_by_error;
        let blocked = answer.status == 403 || (answer.status == 200 && ended_by_error);
        let trouble =
            if (expect == Expect::Pass && !passed) || (expect == Expect::Block && !blocked) {
                Some(format!("{}, expected {expect:?}", answer.status))
            } else if text.contains("call_invented") || text.contains("wire_money") {
                Some("the service's invented call reached the client".to_owned())
            } else if answer.status == 403 && has_control_characters_in_message(&answer.body) {
                Some("a control character in the error message".to_owned())
            } else {
                None
            };
        if let Some(trouble) = trouble {
            tally.service_misanswered.fetch_add(1, Ordering::Relaxed);
            keep_example(
                &tally.service_misanswer_examples,
                format!("{fault} stream={stream}: {trouble}: {}", clip(&text)),
            )
            .await;
        }
        let mut outcomes = tally.service_outcomes.lock().await;
        let (pass_count, block_count) = outcomes.entry(fault).or_default();
        *if passed { pass_count } else { block_count } += 1;
        drop(outcomes);
        let status = match (answer.status, ended_by_error) {
            (200, true) => "200 (stream ended by an error event)".to_owned(),
            (status, _) => status.to_string(),
        };
        *tally.by_status.lock().await.entry(status).or_default() += 1;
    }
    // Nothing may follow the last answer: the client closes its side, the gateway its own.
    if let Some(open) = connection
        && let Err(Broken::Desync(why) | Broken::Lost(why)) = open.finish().await
    {
        tally.desynced.fetch_add(1, Ordering::Relaxed);
        keep_example(
            &tally.desync_examples,
            format!("service session end: {why}"),
        )
        .await;
    }
}

/// A `/svc` request whose latest user turn names the service's fault; the upstream answers with
/// a valid call of `get_weather`, so only the service decides.
fn service_request(fault: &str, stream: bool) -> Vec<u8> {
    let upstream_fault = if stream { "ok_sse" } else { "ok_json" };
    let body = format!(
        r#"{{"model":"m","stream":{stream},"messages":[{{"role":"user","content":"weather? soak-service:{fault}"}}],"tools":[{{"type":"function","function":{{"name":"get_weather","parameters":{{"type":"object","properties":{{"city":{{"type":"string"}}}},"required":["city"]}}}}}}]}}"#
    );
    format!(
        "POST /svc/v1/chat/completions HTTP/1.1\r\nhost: soak\r\ncontent-type: application/json\r\n\
         x-soak-fault: {upstream_fault}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Whether an error envelope's message holds a control character (they must be removed).
fn has_control_characters_in_message(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|value| value["error"]["message"].as_str().map(str::to_owned))
        .is_some_and(|message| message.chars().any(char::is_control))
}

/// Why an exchange on a keep-alive connection failed.
enum Broken {
    /// No answer at all (refused, closed before a head, or too late).
    Lost(String),
    /// Bytes that are not one whole, consistent HTTP answer.
    Desync(String),
}

/// An answer as read off the socket.
struct HttpAnswer {
    status: u16,
    body: Vec<u8>,
    /// The gateway closes the connection after this answer.
    close: bool,
}

/// A client's keep-alive connection and the bytes read off it not consumed yet.
struct Connection {
    socket: TcpStream,
    buffer: Vec<u8>,
    /// When its last answer was read whole: a request lost on a reused connection says how
    /// long the connection had been idle (the gateway closes it after `idle_timeout_ms`).
    idle_since: Option<std::time::Instant>,
}

impl Connection {
    async fn open(gateway: SocketAddr) -> Result<Connection, Broken> {
        let socket = TcpStream::connect(gateway)
            .await
            .map_err(|error| Broken::Lost(format!("connect: {error}")))?;
        Ok(Connection {
            socket,
            buffer: Vec::new(),
            idle_since: None,
        })
    }

    /// Whether the gateway has closed this idle connection (its end of the stream is here).
    /// A byte sent while it was idle is kept for the next exchange, which reports it.
    fn closed_by_gateway(&mut self) -> bool {
        let mut byte = [0u8; 1];
        match self.socket.try_read(&mut byte) {
            Ok(0) => true,
            Ok(read) => {
                self.buffer.extend_from_slice(&byte[..read]);
                false
            }
            Err(error) => error.kind() != std::io::ErrorKind::WouldBlock,
        }
    }

    /// Reads more bytes into the buffer; 0 at the end of the stream.
    async fn fill(&mut self) -> Result<usize, Broken> {
        let mut piece = [0u8; 16 * 1024];
        let read = self
            .socket
            .read(&mut piece)
            .await
            .map_err(|error| Broken::Desync(format!("read: {error}")))?;
        self.buffer.extend_from_slice(&piece[..read]);
        Ok(read)
    }

    /// Until the buffer holds `wanted` bytes; the stream ending first cuts the answer.
    async fn fill_to(&mut self, wanted: usize) -> Result<(), Broken> {
        while self.buffer.len() < wanted {
            if self.fill().await? == 0 {
                return Err(Broken::Desync(format!(
                    "the answer was cut: {} of {wanted} bytes",
                    self.buffer.len()
                )));
            }
        }
        Ok(())
    }

    /// Takes one `\r\n`-ended line off the buffer (without its end).
    async fn line(&mut self) -> Result<Vec<u8>, Broken> {
        loop {
            if let Some(at) = self.buffer.windows(2).position(|pair| pair == b"\r\n") {
                let line = self.buffer[..at].to_vec();
                self.buffer.drain(..at + 2);
                return Ok(line);
            }
            if self.buffer.len() > 64 * 1024 {
                return Err(Broken::Desync("a chunk line of over 64 KiB".to_owned()));
            }
            if self.fill().await? == 0 {
                return Err(Broken::Desync("cut inside a chunk line".to_owned()));
            }
        }
    }

    /// Sends `request` and reads its whole answer, which must be consistent and alone.
    async fn exchange(&mut self, request: &[u8]) -> Result<HttpAnswer, Broken> {
        self.socket
            .write_all(request)
            .await
            .map_err(|error| Broken::Lost(format!("write: {error}")))?;
        let (status, framing, close, content_type, head_length) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut response = httparse::Response::new(&mut headers);
            match response.parse(&self.buffer) {
                Ok(httparse::Status::Complete(head_length)) => {
                    let status = response.code.unwrap_or_default();
                    let (framing, close, content_type) = framing_of(response.headers)?;
                    break (status, framing, close, content_type, head_length);
                }
                Ok(httparse::Status::Partial) => {}
                Err(error) => {
                    return Err(Broken::Desync(format!(
                        "not an HTTP answer head ({error}): {:?}",
                        clip(&String::from_utf8_lossy(&self.buffer))
                    )));
                }
            }
            if self.fill().await? == 0 {
                let idle = self.idle_since.map_or_else(
                    || "on a new connection".to_owned(),
                    |since| format!("reused after {} ms idle", since.elapsed().as_millis()),
                );
                return Err(match self.buffer.is_empty() {
                    true => Broken::Lost(format!("closed before an answer ({idle})")),
                    false => Broken::Desync("closed inside an answer head".to_owned()),
                });
            }
        };
        self.buffer.drain(..head_length);
        let mut close = close;
        let body = match framing {
            Framing::Length(length) => {
                self.fill_to(length).await?;
                self.buffer.drain(..length).collect()
            }
            Framing::Chunked => self.chunked_body().await?,
            Framing::None if status == 204 || status == 304 || status < 200 => Vec::new(),
            Framing::None => {
                while self.fill().await? > 0 {}
                close = true;
                std::mem::take(&mut self.buffer)
            }
        };
        consistent_body(&content_type, &body)?;
        if !self.buffer.is_empty() {
            return Err(Broken::Desync(format!(
                "{} bytes after a {status} answer: {:?}",
                self.buffer.len(),
                clip(&String::from_utf8_lossy(&self.buffer))
            )));
        }
        self.idle_since = Some(std::time::Instant::now());
        Ok(HttpAnswer {
            status,
            body,
            close,
        })
    }

    async fn chunked_body(&mut self) -> Result<Vec<u8>, Broken> {
        let mut body = Vec::new();
        loop {
            let line = self.line().await?;
            let size_text = String::from_utf8_lossy(&line);
            let size_text = size_text.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| Broken::Desync(format!("not a chunk size: {size_text:?}")))?;
            if size == 0 {
                // Trailers, up to the empty line.
                while !self.line().await?.is_empty() {}
                return Ok(body);
            }
            self.fill_to(size + 2).await?;
            if &self.buffer[size..size + 2] != b"\r\n" {
                return Err(Broken::Desync("a chunk longer than its size".to_owned()));
            }
            body.extend(self.buffer.drain(..size));
            self.buffer.drain(..2);
        }
    }

    /// Closes the client's side; the gateway must close its own with nothing more sent.
    async fn finish(mut self) -> Result<(), Broken> {
        let _ = self.socket.shutdown().await;
        let ending = async {
            while self.fill().await? > 0 {}
            Ok::<_, Broken>(())
        };
        // A gateway slow to close is not a desync; bytes are.
        let _ = tokio::time::timeout(Duration::from_secs(2), ending).await;
        match self.buffer.is_empty() {
            true => Ok(()),
            false => Err(Broken::Desync(format!(
                "{} bytes after the last answer: {:?}",
                self.buffer.len(),
                clip(&String::from_utf8_lossy(&self.buffer))
            ))),
        }
    }
}

enum Framing {
    Length(usize),
    Chunked,
    None,
}

/// An answer's framing, whether it closes the connection, and its content type. Two framings,
/// or two lengths, are a desync in the making.
fn framing_of(headers: &[httparse::Header]) -> Result<(Framing, bool, String), Broken> {
    let value = |name: &str| -> Vec<String> {
        headers
            .iter()
            .filter(|header| header.name.eq_ignore_ascii_case(name))
            .map(|header| {
                String::from_utf8_lossy(header.value)
                    .trim()
                    .to_ascii_lowercase()
            })
            .collect()
    };
    let lengths = value("content-length");
    let encodings = value("transfer-encoding");
    let close = value("connection")
        .iter()
        .any(|token| token.contains("close"));
    let content_type = value("content-type").into_iter().next().unwrap_or_default();
    let framing = match (lengths.as_slice(), encodings.as_slice()) {
        ([], []) => Framing::None,
        ([length], []) => Framing::Length(
            length
                .parse()
                .map_err(|_| Broken::Desync(format!("content-length {length:?}")))?,
        ),
        ([], [encoding]) if encoding == "chunked" => Framing::Chunked,
        _ => {
            return Err(Broken::Desync(format!(
                "framing headers content-length {lengths:?}, transfer-encoding {encodings:?}"
            )));
        }
    };
    Ok((framing, close, content_type))
}

/// A body is what its content type says: JSON parses, every SSE `data:` is JSON or `[DONE]`.
fn consistent_body(content_type: &str, body: &[u8]) -> Result<(), Broken> {
    if content_type.contains("json") {
        serde_json::from_slice::<serde_json::Value>(body).map_err(|error| {
            Broken::Desync(format!(
                "a JSON answer that does not parse ({error}): {:?}",
                clip(&String::from_utf8_lossy(body))
            ))
        })?;
    } else if content_type.contains("event-stream") {
        let text = String::from_utf8_lossy(body);
        for data in text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(str::trim)
        {
            if data != "[DONE]" && serde_json::from_str::<serde_json::Value>(data).is_err() {
                return Err(Broken::Desync(format!(
                    "an event that is not JSON: {data:?}"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// Reads the answers a scripted server sends as one block of bytes, as a soak client does.
    async fn answers_of(bytes: &'static [u8], requests: usize) -> Vec<Result<u16, String>> {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let address = listener.local_addr().expect("bound");
        tokio::spawn(async move {
            if let Ok((mut socket, _)) = listener.accept().await {
                let mut sink = [0u8; 4096];
                let _ = socket.read(&mut sink).await;
                let _ = socket.write_all(bytes).await;
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        let Ok(mut connection) = Connection::open(address).await else {
            panic!("connects to the scripted server");
        };
        let mut results = Vec::new();
        for _ in 0..requests {
            results.push(match connection.exchange(b"GET / HTTP/1.1\r\n\r\n").await {
                Ok(answer) => Ok(answer.status),
                Err(Broken::Desync(why)) => Err(format!("desync: {why}")),
                Err(Broken::Lost(why)) => Err(format!("lost: {why}")),
            });
        }
        results
    }

    #[tokio::test]
    async fn a_chunked_json_answer_is_read_whole() {
        let answer = b"HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\n\
                       transfer-encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n";
        assert_eq!(answers_of(answer, 1).await, vec![Ok(403)]);
    }

    #[tokio::test]
    async fn a_forged_length_is_a_desync() {
        // What a service's `content-length: 3` patch did before issue 22: the rest of the body
        // is read as the next answer.
        let answer =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 3\r\n\r\n\
                       {\"a\":1}";
        let results = answers_of(answer, 1).await;
        assert!(
            matches!(&results[0], Err(why) if why.starts_with("desync")),
            "{results:?}"
        );
    }

    #[tokio::test]
    async fn two_framings_or_an_event_that_is_not_json_are_desyncs() {
        let both = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n{}";
        assert!(matches!(&answers_of(both, 1).await[0], Err(why) if why.starts_with("desync")));
        let events =
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 14\r\n\
                       \r\ndata: {\"a\":1\n\n";
        assert!(matches!(&answers_of(events, 1).await[0], Err(why) if why.starts_with("desync")));
    }

    #[tokio::test]
    async fn a_connection_closed_before_an_answer_is_lost() {
        let results = answers_of(b"", 1).await;
        assert!(
            matches!(&results[0], Err(why) if why.starts_with("lost")),
            "{results:?}"
        );
    }
}
