//! The scripted model of the disclosure measurement (`bin/disclosure.rs`): an OpenAI-compatible
//! upstream that plays a model behind `tool_disclosure`, and counts what it receives.
//!
//! It answers every `POST …/chat/completions` with tool calls, deciding from the request alone
//! (no state, so any number of exchanges may run at once):
//!
//! | header | meaning |
//! |---|---|
//! | `x-script-load: a,b` | each of these tools the request does not declare yet is loaded first (`load_tool`) |
//! | `x-script-together: 1` | every missing tool is loaded in one turn, not one a turn |
//! | `x-script-call: c` | once the tools to load are declared, the model calls `c` with valid arguments |
//!
//! Under disclosure the gateway declares only the loaded tools, so the model loads `a`, then
//! `b`, then calls `c`: two discovery rounds. On a route without disclosure every tool is
//! declared and the model calls `c` at once. The model counts requests and their bytes (body,
//! and the request line with headers), and keeps the bodies while [`Model::record`] is on.

use std::borrow::Cow;
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::catalog::{MODEL, Tool};

/// The tools to load, comma-separated, in order.
pub const LOAD_HEADER: &str = "x-script-load";
/// `1`: load every missing tool in one turn.
pub const TOGETHER_HEADER: &str = "x-script-together";
/// The tool to call once the others are loaded.
pub const CALL_HEADER: &str = "x-script-call";
/// tool_disclosure's discovery tool that loads a definition.
pub const LOAD_TOOL: &str = "load_tool";

const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;

/// What the model has received since it started (or since [`Model::reset`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Received {
    pub requests: u64,
    pub body_bytes: u64,
    /// The request line and the headers, as HTTP/1.1 writes them.
    pub head_bytes: u64,
}

/// The scripted model: the arguments it calls each tool with, and its counters.
pub struct Model {
    arguments: HashMap<String, String>,
    requests: AtomicU64,
    body_bytes: AtomicU64,
    head_bytes: AtomicU64,
    recorded: Mutex<Option<Vec<Bytes>>>,
}

impl Model {
    /// A model that calls the tools of `tools` with their valid arguments.
    pub fn new(tools: &[Tool]) -> Model {
        Model {
            arguments: (tools.iter())
                .map(|tool| (tool.name.clone(), tool.arguments.clone()))
                .collect(),
            requests: AtomicU64::new(0),
            body_bytes: AtomicU64::new(0),
            head_bytes: AtomicU64::new(0),
            recorded: Mutex::new(None),
        }
    }

    /// The counters so far.
    pub fn received(&self) -> Received {
        Received {
            requests: self.requests.load(Ordering::SeqCst),
            body_bytes: self.body_bytes.load(Ordering::SeqCst),
            head_bytes: self.head_bytes.load(Ordering::SeqCst),
        }
    }

    /// Zeroes the counters.
    pub fn reset(&self) {
        self.requests.store(0, Ordering::SeqCst);
        self.body_bytes.store(0, Ordering::SeqCst);
        self.head_bytes.store(0, Ordering::SeqCst);
    }

    /// Keeps every request body from now on, until [`Model::take_recorded`].
    pub fn record(&self) {
        if let Ok(mut recorded) = self.recorded.lock() {
            *recorded = Some(Vec::new());
        }
    }

    /// The bodies kept since [`Model::record`], in arrival order; recording stops.
    pub fn take_recorded(&self) -> Vec<Bytes> {
        self.recorded
            .lock()
            .ok()
            .and_then(|mut recorded| recorded.take())
            .unwrap_or_default()
    }

    fn count(&self, head: u64, body: &Bytes) {
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.head_bytes.fetch_add(head, Ordering::SeqCst);
        self.body_bytes
            .fetch_add(body.len() as u64, Ordering::SeqCst);
        if let Ok(mut recorded) = self.recorded.lock()
            && let Some(bodies) = recorded.as_mut()
        {
            bodies.push(body.clone());
        }
    }
}

/// Serves connections from `listener` until `shutdown` completes.
pub async fn serve(listener: TcpListener, model: Arc<Model>, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let model = model.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| {
                        let model = model.clone();
                        async move { Ok::<_, Infallible>(answer(&model, request).await) }
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

async fn answer(model: &Model, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    if parts.method != Method::POST || !parts.uri.path().ends_with("/chat/completions") {
        return error(
            StatusCode::NOT_FOUND,
            "only POST …/chat/completions is served",
        );
    }
    let Ok(body) = Limited::new(body, MAX_REQUEST_BYTES).collect().await else {
        return error(StatusCode::BAD_REQUEST, "the body could not be read");
    };
    let body = body.to_bytes();
    model.count(head_bytes(&parts), &body);
    match turn(model, &parts.headers, &body) {
        Ok(calls) => json_response(StatusCode::OK, completion(&calls, body.len())),
        Err(message) => error(StatusCode::BAD_REQUEST, &message),
    }
}

/// The request line and headers as HTTP/1.1 sends them.
fn head_bytes(parts: &http::request::Parts) -> u64 {
    let line =
        parts.method.as_str().len() + 1 + parts.uri.to_string().len() + " HTTP/1.1\r\n".len();
    let headers: usize = (parts.headers.iter())
        .map(|(name, value)| name.as_str().len() + 2 + value.len() + 2)
        .sum();
    (line + headers + 2) as u64
}

/// Only the declared tools' names are read: the rest of the body is skipped.
#[derive(Deserialize)]
struct Declared<'a> {
    #[serde(default, borrow)]
    tools: Vec<DeclaredTool<'a>>,
}

#[derive(Deserialize)]
struct DeclaredTool<'a> {
    #[serde(default, borrow)]
    function: Option<FunctionName<'a>>,
}

#[derive(Deserialize)]
struct FunctionName<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
}

/// The names of the tools a chat request declares.
pub fn declared_names(body: &[u8]) -> Result<Vec<String>, String> {
    let declared: Declared =
        serde_json::from_slice(body).map_err(|error| format!("not a chat request: {error}"))?;
    Ok(declared
        .tools
        .into_iter()
        .filter_map(|tool| tool.function.map(|function| function.name.into_owned()))
        .collect())
}

/// The model's turn: `(id, name, arguments)` of each call.
fn turn(
    model: &Model,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Vec<(String, String, String)>, String> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
    };
    let call = header(CALL_HEADER);
    if call.is_empty() {
        return Err(format!("{CALL_HEADER} names no tool"));
    }
    let declared = declared_names(body)?;
    let missing: Vec<&str> = (header(LOAD_HEADER).split(','))
        .map(str::trim)
        .filter(|name| !name.is_empty() && !declared.iter().any(|declared| declared == name))
        .collect();
    if !missing.is_empty() {
        let loading = if header(TOGETHER_HEADER) == "1" {
            missing.len()
        } else {
            1
        };
        return Ok(missing[..loading]
            .iter()
            .map(|name| {
                (
                    format!("call_load_{name}"),
                    LOAD_TOOL.to_owned(),
                    json!({"tool_name": name}).to_string(),
                )
            })
            .collect());
    }
    let arguments = model
        .arguments
        .get(call)
        .ok_or_else(|| format!("'{call}' is not a tool of the catalog"))?;
    Ok(vec![(
        format!("call_{call}"),
        call.to_owned(),
        arguments.clone(),
    )])
}

/// A `chat.completion` with `calls`, billing a token per four bytes of the request.
fn completion(calls: &[(String, String, String)], request_bytes: usize) -> Bytes {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, arguments)| {
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
        })
        .collect();
    let prompt = request_bytes.div_ceil(4);
    let body = json!({
        "id": "chatcmpl-ScriptedDisclosure", "object": "chat.completion",
        "created": 1_735_689_600u64, "model": MODEL, "system_fingerprint": "fp_f7d56a8a2c",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
            "refusal": null, "tool_calls": tool_calls}, "logprobs": null, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": 24, "total_tokens": prompt + 24}
    });
    Bytes::from(body.to_string())
}

fn json_response(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let body = json!({"error": {"message": message, "type": "scripted_model_error"}});
    json_response(status, Bytes::from(body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    fn names(calls: &[(String, String, String)]) -> Vec<String> {
        calls.iter().map(|(_, name, _)| name.clone()).collect()
    }

    #[test]
    fn the_model_loads_what_is_not_declared_then_calls() {
        let tools = catalog::catalog();
        let model = Model::new(&tools);
        let script = headers(&[
            (LOAD_HEADER, "github_create_issue,slack_post_message"),
            (CALL_HEADER, "github_create_issue"),
        ]);
        let none = br#"{"tools":[{"type":"function","function":{"name":"load_tool"}}]}"#;
        let first = turn(&model, &script, none).expect("a turn");
        assert_eq!(names(&first), ["load_tool"]);
        assert_eq!(first[0].2, r#"{"tool_name":"github_create_issue"}"#);
        let one = br#"{"tools":[{"type":"function","function":{"name":"github_create_issue"}}]}"#;
        let second = turn(&model, &script, one).expect("a turn");
        assert_eq!(second[0].2, r#"{"tool_name":"slack_post_message"}"#);
        let everything = catalog::request_body(&tools);
        let last = turn(&model, &script, &everything).expect("a turn");
        assert_eq!(names(&last), ["github_create_issue"]);

        let together = headers(&[
            (LOAD_HEADER, "github_create_issue,slack_post_message"),
            (TOGETHER_HEADER, "1"),
            (CALL_HEADER, "github_create_issue"),
        ]);
        let both = turn(&model, &together, none).expect("a turn");
        assert_eq!(names(&both), ["load_tool", "load_tool"]);
    }

    #[test]
    fn a_bad_script_is_refused_not_panicked_on() {
        let model = Model::new(&catalog::catalog());
        assert!(turn(&model, &HeaderMap::new(), b"{}").is_err());
        let unknown = headers(&[(CALL_HEADER, "no_such_tool")]);
        assert!(turn(&model, &unknown, b"{}").is_err());
        let call = headers(&[(CALL_HEADER, "get_weather")]);
        assert!(turn(&model, &call, b"not json").is_err());
    }
}
