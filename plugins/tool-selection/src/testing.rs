//! Test support: exchanges built from real chat-completion bodies through the vocabulary crate's
//! adapter, and a scripted OpenAI-compatible judge server on 127.0.0.1:0 that records what it
//! is asked.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use toolgate_plugin::{
    Check, Parsed, Plugin, PluginFactory, ResponseEdit, ToolRequest, ToolResponse, Verdict,
    Violation, WireFormat,
};

use crate::ToolSelectionFactory;
use crate::metrics::JudgeOutcome;

pub const USER_REQUEST: &str = "Email Bob the quarterly report";
pub const API_KEY: &str = "sk-test-4242";

/// A plugin built by its own factory, so tests can read the factory's metrics.
pub struct Harness {
    pub factory: ToolSelectionFactory,
    pub plugin: Arc<dyn Plugin>,
}

impl Harness {
    pub fn new(settings: Value) -> Self {
        let factory = ToolSelectionFactory::new(
            &mut Registry::default(),
            toolgate_plugin::schema::SchemaChecker::standalone(),
        );
        let plugin = match factory.build(&settings, &toolgate_plugin::BuildContext::default()) {
            Ok(plugin) => plugin,
            Err(error) => panic!("settings refused: {error}"),
        };
        Harness { factory, plugin }
    }

    /// Runs the plugin on a response to [`declared`].
    pub async fn run(&self, response: &Parsed<ToolResponse>) -> Verdict<ResponseEdit> {
        run(self.plugin.as_ref(), &declared(), response).await
    }

    pub fn outcomes(&self, outcome: JudgeOutcome) -> u64 {
        self.factory.metrics.judge_calls(outcome)
    }
}

/// A request declaring [`email_tools`].
pub fn declared() -> Parsed<ToolRequest> {
    Parsed::Parsed(parse_request(&request_with_tools(email_tools())))
}

/// A response calling `(name, arguments)` in order.
pub fn calling(calls: &[(&str, &str)]) -> Parsed<ToolResponse> {
    Parsed::Parsed(parse_response(&response_with_calls(calls)))
}

pub fn parse_request(body: &Value) -> ToolRequest {
    let body = Bytes::from(body.to_string());
    match WireFormat::ChatCompletions.parse_request(body) {
        Ok(request) => request,
        Err(error) => panic!("test request does not parse: {error}"),
    }
}

pub fn parse_response(body: &Value) -> ToolResponse {
    match WireFormat::ChatCompletions.parse_response(body.to_string().as_bytes()) {
        Ok(response) => response,
        Err(error) => panic!("test response does not parse: {error}"),
    }
}

/// A chat request declaring `tools`, with a conversation whose latest user turn is
/// [`USER_REQUEST`].
pub fn request_with_tools(tools: Value) -> Value {
    json!({
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are an office assistant."},
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "Hi! How can I help?"},
            {"role": "user", "content": [{"type": "text", "text": USER_REQUEST}]}
        ],
        "tools": tools
    })
}

pub fn email_tools() -> Value {
    json!([{
        "type": "function",
        "function": {
            "name": "send_email",
            "description": "Send an email",
            "parameters": {
                "type": "object",
                "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
                "required": ["to"],
                "additionalProperties": false
            }
        }
    }])
}

/// A one-choice response calling `(name, arguments)` in order, with ids `call_0`, `call_1`, …
pub fn response_with_calls(calls: &[(&str, &str)]) -> Value {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(index, (name, arguments))| {
            json!({"id": format!("call_{index}"), "type": "function",
                   "function": {"name": name, "arguments": arguments}})
        })
        .collect();
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": null, "tool_calls": tool_calls}}]
    })
}

/// Runs `plugin`'s `pre_response` on a non-streamed 200 exchange.
pub async fn run(
    plugin: &dyn Plugin,
    request: &Parsed<ToolRequest>,
    response: &Parsed<ToolResponse>,
) -> Verdict<ResponseEdit> {
    let meta = toolgate_plugin::testing::meta("/v1/chat/completions");
    let exchange = toolgate_plugin::testing::response_exchange(&meta, request, response);
    plugin.pre_response(&exchange).await
}

/// The violations of a blocking verdict; panics (failing the test) on any other verdict.
pub fn violations(verdict: &Verdict<ResponseEdit>) -> &[Violation] {
    match verdict {
        Verdict::Block(rejection) => &rejection.violations,
        other => panic!("expected a block, got {other:?}"),
    }
}

/// The one violation a block carries, after checking there is no other and which check and
/// code it has.
pub fn sole_violation<'v>(
    verdict: &'v Verdict<ResponseEdit>,
    check: Check,
    code: &str,
) -> &'v Violation {
    let found = violations(verdict);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].check, found[0].code.as_str()), (check, code));
    &found[0]
}

/// How the fake judge answers every request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// 200 with a chat.completion whose message content is this text.
    Content(String),
    /// This status and raw body.
    Raw(u16, String),
}

/// One request the fake judge received.
#[derive(Debug, Clone)]
pub struct Received {
    /// The request line and headers, lower-cased.
    pub head: String,
    pub body: Value,
}

#[derive(Default)]
struct Record {
    received: Mutex<Vec<Received>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

/// A scripted OpenAI-compatible server; stopped when dropped.
pub struct FakeJudge {
    pub base_url: String,
    record: Arc<Record>,
    server: JoinHandle<()>,
}

impl FakeJudge {
    pub async fn start(reply: Reply, delay: Duration) -> Self {
        let listener = match TcpListener::bind("127.0.0.1:0").await {
            Ok(listener) => listener,
            Err(error) => panic!("cannot bind the fake judge: {error}"),
        };
        let address = match listener.local_addr() {
            Ok(address) => address,
            Err(error) => panic!("the fake judge has no address: {error}"),
        };
        let record = Arc::new(Record::default());
        let server = tokio::spawn(serve(listener, reply, delay, record.clone()));
        FakeJudge {
            base_url: format!("http://{address}/v1"),
            record,
            server,
        }
    }

    /// A judge that answers at once with `{"decision": decision, "reason": reason}`.
    pub async fn deciding(decision: &str, reason: &str) -> Self {
        let verdict = json!({"decision": decision, "reason": reason}).to_string();
        FakeJudge::start(Reply::Content(verdict), Duration::ZERO).await
    }

    /// Plugin settings pointing at this judge, merged with `extra`.
    pub fn settings(&self, extra: Value) -> Value {
        let mut settings = json!({"openai_api_key": API_KEY, "base_url": self.base_url,
                                  "model": "judge-model"});
        if let (Some(settings), Value::Object(extra)) = (settings.as_object_mut(), extra) {
            settings.extend(extra);
        }
        settings
    }

    pub fn received(&self) -> Vec<Received> {
        match self.record.received.lock() {
            Ok(received) => received.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub fn max_in_flight(&self) -> usize {
        self.record.max_in_flight.load(Ordering::SeqCst)
    }
}

impl Drop for FakeJudge {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn serve(listener: TcpListener, reply: Reply, delay: Duration, record: Arc<Record>) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(answer(stream, reply.clone(), delay, record.clone()));
    }
}

async fn answer(mut stream: TcpStream, reply: Reply, delay: Duration, record: Arc<Record>) {
    let Some((head, body)) = read_request(&mut stream).await else {
        return;
    };
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if let Ok(mut received) = record.received.lock() {
        received.push(Received { head, body });
    }
    let now = record.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    record.max_in_flight.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(delay).await;

    let (status, body) = match reply {
        Reply::Content(content) => (200, completion(&content)),
        Reply::Raw(status, body) => (status, body),
    };
    let response = format!(
        "HTTP/1.1 {status} Scripted\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
    record.in_flight.fetch_sub(1, Ordering::SeqCst);
}

fn completion(content: &str) -> String {
    json!({
        "id": "chatcmpl-judge", "object": "chat.completion", "created": 1, "model": "judge-model",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}]
    })
    .to_string()
}

/// Reads one HTTP/1.1 request with a Content-Length body: (head, body).
async fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0_u8; 8192];
    loop {
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or(0);
            let start = end + 4;
            while buffer.len() < start + length {
                let read = stream.read(&mut chunk).await.ok()?;
                if read == 0 {
                    return None;
                }
                buffer.extend_from_slice(&chunk[..read]);
            }
            return Some((head, buffer[start..start + length].to_vec()));
        }
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
}
