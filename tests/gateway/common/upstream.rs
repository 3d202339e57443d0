//! A scripted upstream for end-to-end tests: a real hyper HTTP/1.1 server on 127.0.0.1 that stands
//! in for an LLM server. A test pushes [`Reply`]s (served first in, first out) and reads back every
//! request the server received. Also builders for realistic `chat.completion` bodies, their SSE
//! streams, and LLM-judge verdicts.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{StreamExt, stream};
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value, json};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

type ReplyBody = UnsyncBoxBody<Bytes, Infallible>;

/// The scripted LLM server. Dropping it stops the server and every open connection (stalled
/// streams included); [`ScriptedUpstream::shutdown`] does the same and waits until the port is closed.
pub struct ScriptedUpstream {
    addr: SocketAddr,
    state: Arc<State>,
    server: JoinHandle<()>,
}

#[derive(Default)]
struct State {
    script: Mutex<Script>,
    requests: Mutex<Vec<RecordedRequest>>,
    /// A header (name, value) every request must carry, as a provider requires its key.
    required_header: Mutex<Option<(String, String)>>,
}

#[derive(Default)]
struct Script {
    queue: VecDeque<Reply>,
    default: Option<Reply>,
}

impl ScriptedUpstream {
    /// Binds 127.0.0.1 on a free port and starts serving.
    pub async fn start() -> Self {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Binds `addr` and starts serving: for a server that comes up where a gateway already
    /// looks for it.
    pub async fn start_on(addr: SocketAddr) -> Self {
        // A test cannot run without its upstream, so failing to bind is the test's failure, named here.
        let listener = TcpListener::bind(addr)
            .await
            .expect("scripted upstream: bind its address");
        // Holds: a bound TCP listener always has a local address.
        let addr = listener
            .local_addr()
            .expect("scripted upstream: local address of a bound listener");
        let state = Arc::new(State::default());
        let server = tokio::spawn(accept_loop(listener, Arc::clone(&state)));
        ScriptedUpstream {
            addr,
            state,
            server,
        }
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues a reply; replies are served in the order they were pushed, one per request.
    pub fn push(&self, reply: Reply) {
        lock(&self.state.script).queue.push_back(reply);
    }

    /// The reply served (again and again) whenever the queue is empty. Without one, an empty queue
    /// answers 500 with a JSON error saying that no reply was scripted.
    pub fn set_default(&self, reply: Reply) {
        lock(&self.state.script).default = Some(reply);
    }

    /// Pushed replies not served yet (the default does not count).
    pub fn queued_replies(&self) -> usize {
        lock(&self.state.script).queue.len()
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state.requests).clone()
    }

    pub fn request_count(&self) -> usize {
        lock(&self.state.requests).len()
    }

    pub fn last_request(&self) -> Option<RecordedRequest> {
        lock(&self.state.requests).last().cloned()
    }

    /// The body of the last request received, as JSON: what the gateway forwarded.
    pub fn forwarded_json(&self) -> Value {
        self.last_request().expect("forwarded").json()
    }

    /// From now on, a request without header `name` set to `value` is refused with a 401 in
    /// Anthropic's error shape (recorded, but no scripted reply used): a provider checking its key.
    pub fn require_header(&self, name: &str, value: &str) {
        *lock(&self.state.required_header) = Some((name.to_owned(), value.to_owned()));
    }

    /// Stops the server and waits until its port is closed and its connections are dropped.
    pub async fn shutdown(mut self) {
        self.server.abort();
        // The only outcome is "cancelled" (the loop never returns), which is what was asked for.
        let _ = (&mut self.server).await;
    }
}

impl Drop for ScriptedUpstream {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// A request as the upstream received it, body read in full.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub path_and_query: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl RecordedRequest {
    /// The body as JSON; `Value::Null` when it is not JSON (an assertion on a field then fails
    /// with a readable diff instead of a panic inside the helper).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The body as text, invalid UTF-8 replaced.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The first value of a header, if present and visible ASCII.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)?.to_str().ok()
    }
}

/// One scripted answer. Build it with [`Reply::json`], [`Reply::raw`], [`Reply::sse`] and friends,
/// then adjust it with the `with_*` methods. A reply built from invalid input (a status of 1000, a
/// header name with a space) does not panic: it is served as a 500 whose JSON error says what is wrong.
#[derive(Debug, Clone)]
pub struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    content: Content,
    delay: Duration,
    pace: Pace,
    problems: Vec<String>,
}

#[derive(Debug, Clone)]
enum Content {
    Full(Bytes),
    /// Each chunk is one HTTP body frame; `stall` keeps the body open forever after the last one.
    Chunks {
        chunks: Vec<Bytes>,
        stall: bool,
    },
    CloseConnection,
}

/// What happens between two chunks of a streamed body.
#[derive(Debug, Clone, Copy)]
enum Pace {
    /// Give the runtime one turn: the body is pending once, so hyper flushes the previous frame.
    Yield,
    Delay(Duration),
}

impl Pace {
    async fn wait(self) {
        match self {
            Pace::Yield => tokio::task::yield_now().await,
            Pace::Delay(delay) => tokio::time::sleep(delay).await,
        }
    }
}

/// The body of [`Reply::json`]: text and bytes are served exactly as given, a `Value` compactly
/// serialized.
#[derive(Debug, Clone)]
pub struct JsonBody(Bytes);

impl From<&str> for JsonBody {
    fn from(text: &str) -> Self {
        JsonBody(Bytes::copy_from_slice(text.as_bytes()))
    }
}

impl From<String> for JsonBody {
    fn from(text: String) -> Self {
        JsonBody(Bytes::from(text))
    }
}

impl From<Vec<u8>> for JsonBody {
    fn from(bytes: Vec<u8>) -> Self {
        JsonBody(Bytes::from(bytes))
    }
}

impl From<Bytes> for JsonBody {
    fn from(bytes: Bytes) -> Self {
        JsonBody(bytes)
    }
}

impl From<Value> for JsonBody {
    fn from(value: Value) -> Self {
        JsonBody(Bytes::from(value.to_string()))
    }
}

impl From<&Value> for JsonBody {
    fn from(value: &Value) -> Self {
        JsonBody(Bytes::from(value.to_string()))
    }
}

impl Reply {
    fn new(status: u16, content_type: Option<&str>, content: Content) -> Reply {
        let reply = Reply {
            status: StatusCode::OK,
            headers: HeaderMap::new(),
            content,
            delay: Duration::ZERO,
            pace: Pace::Yield,
            problems: Vec::new(),
        }
        .with_status(status);
        match content_type {
            Some(content_type) => reply.with_header(header::CONTENT_TYPE, content_type),
            None => reply,
        }
    }

    /// A complete JSON body with `content-type: application/json`; text is kept byte for byte.
    pub fn json(status: u16, body: impl Into<JsonBody>) -> Reply {
        Reply::new(
            status,
            Some("application/json"),
            Content::Full(body.into().0),
        )
    }

    /// A 200 `chat.completion` whose message makes `tool_calls` (`(id, name, arguments)`), no text.
    pub fn chat_calls(tool_calls: &[(&str, &str, &str)]) -> Reply {
        Reply::json(200, chat_completion(tool_calls, None))
    }

    /// A 200 `chat.completion` whose message is only `content`, no call.
    pub fn chat_text(content: &str) -> Reply {
        Reply::json(200, chat_completion(&[], Some(content)))
    }

    /// A 200 answer of an LLM judge with this verdict ([`judge_verdict`]).
    pub fn judge(decision: &str, reason: &str) -> Reply {
        Reply::json(200, judge_verdict(decision, reason))
    }

    /// A complete body with any content type.
    pub fn raw(status: u16, content_type: &str, body: impl Into<Bytes>) -> Reply {
        Reply::new(status, Some(content_type), Content::Full(body.into()))
    }

    /// A 200 `text/event-stream` whose chunks are written as separate body frames, with a yield
    /// (or [`Reply::with_chunk_delay`]) between them. Chunks are sent as given: no SSE framing is added.
    pub fn sse<C: Into<Bytes>>(chunks: impl IntoIterator<Item = C>) -> Reply {
        Reply::streamed(chunks, false)
    }

    /// [`Reply::sse`] with the stream text cut into one chunk per event (after each `\n\n`).
    pub fn sse_events(stream_text: &str) -> Reply {
        let events: Vec<Bytes> = stream_text
            .split_inclusive("\n\n")
            .map(|event| Bytes::copy_from_slice(event.as_bytes()))
            .collect();
        Reply::sse(events)
    }

    /// [`Reply::sse`] with the stream text cut every `chunk_size` bytes, regardless of event or
    /// UTF-8 boundaries (a `chunk_size` of 0 counts as 1).
    pub fn sse_chunked(stream_text: &str, chunk_size: usize) -> Reply {
        let chunks: Vec<Bytes> = stream_text
            .as_bytes()
            .chunks(chunk_size.max(1))
            .map(Bytes::copy_from_slice)
            .collect();
        Reply::sse(chunks)
    }

    /// A 200 `text/event-stream` that sends these chunks and then neither sends nor finishes
    /// (for idle timeouts). The connection stays open until the client or the upstream goes away.
    pub fn stall_after<C: Into<Bytes>>(chunks: impl IntoIterator<Item = C>) -> Reply {
        Reply::streamed(chunks, true)
    }

    /// Reads the request, then drops the connection without answering (the proxy sees a reset or an
    /// early close: a 502 for its client). Honours [`Reply::with_delay`] before closing.
    pub fn close_connection() -> Reply {
        Reply::new(200, None, Content::CloseConnection)
    }

    fn streamed<C: Into<Bytes>>(chunks: impl IntoIterator<Item = C>, stall: bool) -> Reply {
        let chunks = chunks.into_iter().map(Into::into).collect();
        Reply::new(
            200,
            Some("text/event-stream"),
            Content::Chunks { chunks, stall },
        )
        .with_header(header::CACHE_CONTROL, "no-cache")
    }

    /// Waits this long before the response head is sent (for upstream timeouts).
    pub fn with_delay(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }

    /// Waits this long between two chunks of a streamed reply instead of only yielding.
    pub fn with_chunk_delay(mut self, delay: Duration) -> Reply {
        self.pace = Pace::Delay(delay);
        self
    }

    /// Replaces the status (e.g. an SSE body with a 4xx).
    pub fn with_status(mut self, status: u16) -> Reply {
        match StatusCode::from_u16(status) {
            Ok(status) => self.status = status,
            Err(_) => self
                .problems
                .push(format!("{status} is not a valid HTTP status code")),
        }
        self
    }

    /// Sets a response header, replacing any earlier value of it (`content-type` included).
    pub fn with_header<K, V>(mut self, name: K, value: V) -> Reply
    where
        K: TryInto<HeaderName>,
        K::Error: std::fmt::Display,
        V: TryInto<HeaderValue>,
        V::Error: std::fmt::Display,
    {
        match (name.try_into(), value.try_into()) {
            (Ok(name), Ok(value)) => {
                self.headers.insert(name, value);
            }
            (Err(error), _) => self.problems.push(format!("invalid header name: {error}")),
            (_, Err(error)) => self.problems.push(format!("invalid header value: {error}")),
        }
        self
    }

    async fn into_response(self) -> Result<Response<ReplyBody>, ScriptedClose> {
        if !self.problems.is_empty() {
            let message = format!("invalid scripted reply: {}", self.problems.join("; "));
            return Ok(scripted_error("invalid_scripted_reply", message));
        }
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        let body = match self.content {
            Content::Full(bytes) => Full::new(bytes).boxed_unsync(),
            Content::Chunks { chunks, stall } => chunk_body(chunks, self.pace, stall),
            Content::CloseConnection => return Err(ScriptedClose),
        };
        let mut response = Response::new(body);
        *response.status_mut() = self.status;
        *response.headers_mut() = self.headers;
        Ok(response)
    }
}

/// Returned by the service to make hyper drop the connection without writing a response.
#[derive(Debug)]
struct ScriptedClose;

impl std::fmt::Display for ScriptedClose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("scripted reply: close the connection without answering")
    }
}

impl std::error::Error for ScriptedClose {}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while these locks are held; a poisoned lock would still hold consistent data.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    // Connections live in this set so that aborting the loop (the upstream is dropped) aborts
    // them too, stalled streams included.
    let mut connections = JoinSet::new();
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of file descriptors or a connection reset before accept: try again shortly.
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        };
        while connections.try_join_next().is_some() {}
        // Small SSE frames must leave at once, not wait for Nagle's algorithm.
        let _ = stream.set_nodelay(true);
        let state = Arc::clone(&state);
        connections.spawn(async move {
            let service = service_fn(move |request| answer(Arc::clone(&state), request));
            // A failed connection (the client went away, a scripted close) ends only itself.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn answer(
    state: Arc<State>,
    request: Request<Incoming>,
) -> Result<Response<ReplyBody>, ScriptedClose> {
    let (parts, body) = request.into_parts();
    // A request body that breaks off mid-way gets no answer: the client is gone or lying.
    let body = body.collect().await.map_err(|_| ScriptedClose)?.to_bytes();
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_owned(), ToString::to_string);
    let recorded = RecordedRequest {
        method: parts.method.to_string(),
        path_and_query: path_and_query.clone(),
        headers: parts.headers,
        body,
    };
    let refused_key = lock(&state.required_header)
        .as_ref()
        .filter(|(name, value)| {
            recorded
                .headers
                .get(name.as_str())
                .and_then(|v| v.to_str().ok())
                != Some(value)
        })
        .map(|(name, _)| name.clone());
    if let Some(name) = refused_key {
        lock(&state.requests).push(recorded);
        return Reply::json(
            401,
            json!({"type": "error", "error": {"type": "authentication_error",
                   "message": format!("scripted upstream: a valid {name} header is required")}}),
        )
        .into_response()
        .await;
    }
    // Both locks at once, so request numbers and FIFO order agree under concurrent requests.
    let (number, reply) = {
        let mut requests = lock(&state.requests);
        requests.push(recorded);
        let mut script = lock(&state.script);
        let reply = script.queue.pop_front().or_else(|| script.default.clone());
        (requests.len(), reply)
    };
    match reply {
        Some(reply) => reply.into_response().await,
        None => Ok(scripted_error(
            "no_scripted_reply",
            format!(
                "scripted upstream: no reply was scripted for request #{number} ({} {path_and_query}); \
                 push() a Reply or set_default() one",
                parts.method
            ),
        )),
    }
}

fn chunk_body(chunks: Vec<Bytes>, pace: Pace, stall: bool) -> ReplyBody {
    let frames = stream::iter(chunks)
        .enumerate()
        .then(move |(position, chunk)| async move {
            if position > 0 {
                pace.wait().await;
            }
            Ok::<_, Infallible>(Frame::data(chunk))
        });
    let frames = if stall {
        frames.chain(stream::pending()).boxed()
    } else {
        frames.boxed()
    };
    StreamBody::new(frames).boxed_unsync()
}

/// A 500 in the OpenAI error envelope, for mistakes in the script itself.
fn scripted_error(code: &str, message: String) -> Response<ReplyBody> {
    let body = json!({"error": {
        "message": message,
        "type": "scripted_upstream_error",
        "param": null,
        "code": code,
    }});
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed_unsync());
    *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

const COMPLETION_ID: &str = "chatcmpl-BX7qTz3kLwV9mNc2Rp5sYe8HdJ1aF";
const CREATED: u64 = 1_747_200_000;
const MODEL: &str = "gpt-4o-mini-2024-07-18";
const SYSTEM_FINGERPRINT: &str = "fp_7a53abb7a2";

/// A non-streamed `chat.completion` as OpenAI returns it: one choice whose message carries the
/// given text and tool calls `(id, name, arguments)`; arguments are kept as given, valid JSON or not.
/// `finish_reason` is `tool_calls` when there are calls, else `stop`.
pub fn chat_completion(tool_calls: &[(&str, &str, &str)], content: Option<&str>) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert("content".into(), json!(content));
    if !tool_calls.is_empty() {
        let calls = tool_calls
            .iter()
            .map(|(id, name, arguments)| {
                json!({"id": id, "type": "function",
                       "function": {"name": name, "arguments": arguments}})
            })
            .collect();
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    message.insert("refusal".into(), Value::Null);
    message.insert("annotations".into(), json!([]));
    let completion_tokens = estimated_tokens(tool_calls, content);
    json!({
        "id": COMPLETION_ID,
        "object": "chat.completion",
        "created": CREATED,
        "model": MODEL,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason(tool_calls),
        }],
        "usage": {
            "prompt_tokens": 142,
            "completion_tokens": completion_tokens,
            "total_tokens": 142 + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0, "audio_tokens": 0,
                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": SYSTEM_FINGERPRINT,
    })
}

/// The streamed equivalent of [`chat_completion`], as raw SSE text: a role-only first chunk, the
/// text in several deltas, each tool call as a header fragment (index, id, name) followed by its
/// arguments in several fragments, a finish chunk, and `data: [DONE]`.
pub fn chat_stream(tool_calls: &[(&str, &str, &str)], content: Option<&str>) -> String {
    let mut deltas = vec![json!({
        "role": "assistant",
        "content": content.map(|_| ""),
        "refusal": null,
    })];
    for piece in split_pieces(content.unwrap_or_default(), 4) {
        deltas.push(json!({"content": piece}));
    }
    for (index, (id, name, arguments)) in tool_calls.iter().enumerate() {
        deltas.push(json!({"tool_calls": [{
            "index": index, "id": id, "type": "function",
            "function": {"name": name, "arguments": ""},
        }]}));
        for piece in split_pieces(arguments, 4) {
            deltas
                .push(json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}));
        }
    }
    let mut text = String::new();
    for delta in deltas {
        text.push_str(&stream_chunk(delta, Value::Null));
    }
    text.push_str(&stream_chunk(json!({}), json!(finish_reason(tool_calls))));
    text.push_str("data: [DONE]\n\n");
    text
}

/// A `chat.completion` from an LLM judge: its message content is the JSON text
/// `{"decision": decision, "reason": reason}`.
pub fn judge_verdict(decision: &str, reason: &str) -> Value {
    let verdict = json!({"decision": decision, "reason": reason}).to_string();
    chat_completion(&[], Some(&verdict))
}

fn stream_chunk(delta: Value, finish_reason: Value) -> String {
    let chunk = json!({
        "id": COMPLETION_ID,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
        "service_tier": "default",
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
    });
    format!("data: {chunk}\n\n")
}

fn finish_reason(tool_calls: &[(&str, &str, &str)]) -> &'static str {
    if tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

/// About a token per four characters, plus a few per call, as a plausible `completion_tokens`.
fn estimated_tokens(tool_calls: &[(&str, &str, &str)], content: Option<&str>) -> usize {
    let characters: usize = content.map_or(0, str::len)
        + tool_calls
            .iter()
            .map(|(_, name, arguments)| name.len() + arguments.len())
            .sum::<usize>();
    characters.div_ceil(4) + 7 * tool_calls.len() + 1
}

/// Cuts `text` into at most `pieces` parts of about equal length, on character boundaries.
fn split_pieces(text: &str, pieces: usize) -> Vec<&str> {
    let per_piece = text.chars().count().div_ceil(pieces.max(1)).max(1);
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let cut = rest
            .char_indices()
            .nth(per_piece)
            .map_or(rest.len(), |(at, _)| at);
        let (part, tail) = rest.split_at(cut);
        parts.push(part);
        rest = tail;
    }
    parts
}
