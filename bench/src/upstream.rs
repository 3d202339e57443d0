//! The scripted upstream: answers `POST …/chat/completions` with a prepared `chat.completion`
//! carrying tool calls, or the same answer as an SSE stream, as fast as hyper can write it.
//! Request headers steer it (so a load generator can vary the answer without another server):
//!
//! | header | meaning | default |
//! |---|---|---|
//! | `x-bench-stream: 1` | answer with SSE (a body containing `"stream":true` does the same) | off |
//! | `x-bench-calls: N` | N tool calls (0..=32) | 2 |
//! | `x-bench-call-span: K` | the calls cycle over the first K realistic tools (1..=10) | 10 |
//! | `x-bench-undeclared: 1` | the first call names a tool no request declares | off |
//! | `x-bench-deltas: N` | stream N text deltas, each stamped with its send time (`bench_sent_ns`) | — |
//! | `x-bench-interval-us: U` | pause U µs before each stamped delta | 0 |
//!
//! A request it cannot serve gets a 4xx with a JSON error, never a panic.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::workload::{self, AnswerSpec};

/// The most tool calls an answer may carry.
pub const MAX_CALLS: usize = 32;
/// Request bodies above this are refused (the curves go to 1 MB of messages).
const MAX_REQUEST_BYTES: usize = 32 * 1024 * 1024;
const MAX_DELTAS: usize = 100_000;
const MAX_INTERVAL: Duration = Duration::from_secs(10);
const SPANS: usize = workload::REALISTIC_ARGUMENTS.len();

/// An answer rendered once, served many times.
struct Prepared {
    completion: Bytes,
    /// The stream, one event per element.
    stream: Vec<Bytes>,
    /// The stream after its text: the calls, the finish and `[DONE]` (for paced streams).
    calls_and_end: Vec<Bytes>,
}

/// Every answer the upstream can give, rendered on first use and never locked after.
pub struct Answers {
    prepared: Vec<OnceLock<Prepared>>,
    opening: Bytes,
}

impl Default for Answers {
    fn default() -> Self {
        Answers::new()
    }
}

impl Answers {
    pub fn new() -> Self {
        Answers {
            prepared: (0..(MAX_CALLS + 1) * SPANS * 2)
                .map(|_| OnceLock::new())
                .collect(),
            opening: workload::stream_opening(),
        }
    }

    fn get(&self, spec: AnswerSpec) -> &Prepared {
        let slot = (spec.calls * SPANS + (spec.span - 1)) * 2 + usize::from(spec.undeclared);
        self.prepared[slot].get_or_init(|| Prepared {
            completion: workload::completion(spec),
            stream: workload::stream_events(spec),
            calls_and_end: workload::stream_calls_and_end(spec),
        })
    }
}

/// What a request asked for, read from its headers and body.
struct Ask {
    answer: AnswerSpec,
    stream: bool,
    /// Stamped text deltas and the pause before each.
    paced: Option<(usize, Duration)>,
}

type AnswerBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// Serves connections from `listener` until `shutdown` completes. Each connection runs in its
/// own task; a failed connection is dropped without disturbing the others.
pub async fn run(listener: TcpListener, answers: Arc<Answers>, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // Out of file descriptors: wait for some to be freed rather than spin.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let answers = answers.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| {
                        let answers = answers.clone();
                        async move { Ok::<_, Infallible>(answer(&answers, request).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            () = &mut shutdown => break,
        }
    }
}

async fn answer(answers: &Answers, request: Request<Incoming>) -> Response<AnswerBody> {
    let (parts, body) = request.into_parts();
    if parts.method == Method::GET && parts.uri.path() == "/health" {
        return plain(StatusCode::OK, "text/plain", Bytes::from_static(b"ok\n"));
    }
    if parts.method != Method::POST || !parts.uri.path().ends_with("/chat/completions") {
        return error(
            StatusCode::NOT_FOUND,
            "only POST …/chat/completions is served",
        );
    }
    let body = match Limited::new(body, MAX_REQUEST_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(problem) if problem.is::<http_body_util::LengthLimitError>() => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the request body is too large",
            );
        }
        Err(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "the request body could not be read",
            );
        }
    };
    let ask = match read_ask(&parts.headers, &body) {
        Ok(ask) => ask,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message),
    };
    let prepared = answers.get(ask.answer);
    match (ask.stream, ask.paced) {
        (false, _) => plain(
            StatusCode::OK,
            "application/json",
            prepared.completion.clone(),
        ),
        (true, None) => {
            let frames = prepared
                .stream
                .clone()
                .into_iter()
                .map(|event| Ok::<_, Infallible>(Frame::data(event)));
            sse(StreamBody::new(futures_util::stream::iter(frames)).boxed())
        }
        (true, Some((deltas, interval))) => {
            let (sender, receiver) = mpsc::channel(4);
            let opening = answers.opening.clone();
            let tail = prepared.calls_and_end.clone();
            tokio::spawn(pace(sender, opening, deltas, interval, tail));
            sse(Paced { receiver }.boxed())
        }
    }
}

/// Sends the opening, then `deltas` stamped text deltas `interval` apart, then the calls.
/// Stops as soon as the client is gone.
async fn pace(
    sender: mpsc::Sender<Bytes>,
    opening: Bytes,
    deltas: usize,
    interval: Duration,
    tail: Vec<Bytes>,
) {
    if sender.send(opening).await.is_err() {
        return;
    }
    for _ in 0..deltas {
        if !interval.is_zero() {
            tokio::time::sleep(interval).await;
        }
        let sent_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        if sender
            .send(workload::stamped_text_delta(" tok", sent_ns))
            .await
            .is_err()
        {
            return;
        }
    }
    for event in tail {
        if sender.send(event).await.is_err() {
            return;
        }
    }
}

/// A body fed event by event by [`pace`].
struct Paced {
    receiver: mpsc::Receiver<Bytes>,
}

impl Body for Paced {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.receiver
            .poll_recv(cx)
            .map(|event| event.map(|bytes| Ok(Frame::data(bytes))))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

fn read_ask(headers: &HeaderMap, body: &[u8]) -> Result<Ask, String> {
    let calls = number(headers, "x-bench-calls", 2, MAX_CALLS)?;
    let span = number(headers, "x-bench-call-span", SPANS, SPANS)?.max(1);
    let undeclared = flag(headers, "x-bench-undeclared");
    let stream = flag(headers, "x-bench-stream") || asks_for_stream(body);
    let paced = match headers.get("x-bench-deltas") {
        None => None,
        Some(_) => {
            let deltas = number(headers, "x-bench-deltas", 0, MAX_DELTAS)?;
            let micros = number(
                headers,
                "x-bench-interval-us",
                0,
                MAX_INTERVAL.as_micros() as usize,
            )?;
            Some((deltas, Duration::from_micros(micros as u64)))
        }
    };
    Ok(Ask {
        answer: AnswerSpec {
            calls,
            span,
            undeclared,
        },
        stream,
        paced,
    })
}

/// `"stream":true` anywhere in the body, with or without a space after the colon. A bench tool
/// does not parse the whole body: that would make the upstream the cost being measured.
fn asks_for_stream(body: &[u8]) -> bool {
    memchr::memmem::find(body, br#""stream":true"#).is_some()
        || memchr::memmem::find(body, br#""stream": true"#).is_some()
}

fn flag(headers: &HeaderMap, name: &str) -> bool {
    headers.get(name).is_some_and(|value| value == "1")
}

fn number(headers: &HeaderMap, name: &str, default: usize, max: usize) -> Result<usize, String> {
    let Some(value) = headers.get(name) else {
        return Ok(default);
    };
    value
        .to_str()
        .ok()
        .and_then(|text| text.trim().parse::<usize>().ok())
        .filter(|number| *number <= max)
        .ok_or_else(|| format!("{name} must be a whole number from 0 to {max}"))
}

fn plain(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<AnswerBody> {
    let mut response = Response::new(Full::new(body).boxed());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn sse(body: AnswerBody) -> Response<AnswerBody> {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // What real SSE servers send so that nginx relays each event as it comes.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

fn error(status: StatusCode, message: &str) -> Response<AnswerBody> {
    let body = serde_json::json!({"error": {"message": message, "type": "bench_upstream_error"}});
    plain(status, "application/json", Bytes::from(body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn the_stream_flag_is_found_in_the_body_or_a_header() {
        assert!(read_ask(&HeaderMap::new(), br#"{"stream":true}"#).is_ok_and(|ask| ask.stream));
        assert!(read_ask(&HeaderMap::new(), br#"{"stream": true}"#).is_ok_and(|ask| ask.stream));
        assert!(read_ask(&HeaderMap::new(), br#"{"stream":false}"#).is_ok_and(|ask| !ask.stream));
        let header = headers(&[("x-bench-stream", "1")]);
        assert!(read_ask(&header, b"{}").is_ok_and(|ask| ask.stream));
    }

    #[test]
    fn bad_steering_headers_are_refused_not_panicked_on() {
        let cases: [&[(&'static str, &'static str)]; 4] = [
            &[("x-bench-calls", "many")],
            &[("x-bench-calls", "33")],
            &[("x-bench-deltas", "-1")],
            &[
                ("x-bench-deltas", "1"),
                ("x-bench-interval-us", "99999999999"),
            ],
        ];
        for case in cases {
            assert!(read_ask(&headers(case), b"{}").is_err(), "{case:?}");
        }
    }

    #[test]
    fn every_answer_slot_is_reachable() {
        let answers = Answers::new();
        for calls in [0, 1, MAX_CALLS] {
            for span in [1, SPANS] {
                for undeclared in [false, true] {
                    let prepared = answers.get(AnswerSpec {
                        calls,
                        span,
                        undeclared,
                    });
                    assert!(!prepared.completion.is_empty());
                    assert!(prepared.stream.len() >= 2 + calls);
                }
            }
        }
    }
}
