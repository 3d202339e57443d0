//! A reference validator service for toolgate's `service` plugin, small enough to copy.
//!
//! It answers toolgate's envelope (`POST` any path, JSON in, JSON out) with two config params:
//! - `deny_substrings` (required): a list of strings; a tool call whose arguments contain one
//!   (case-insensitively) is denied, with one violation per call naming the substring.
//! - `remove_tools` (optional): tool names; in `pre_request`, any of them the client declared are
//!   removed from the request (a `modify` answer).
//!
//! A malformed envelope or config is answered with `error` set (seed 002's convention), which
//! toolgate treats as "could not decide" and hands to the instance's fail mode.
//!
//! # Layout
//! - [`decide`]: the check itself, envelope in, answer out (no I/O: test it directly).
//! - [`serve`]: the HTTP/1.1 server, run on a listener the caller binds, until `shutdown`.

use std::convert::Infallible;
use std::future::Future;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// The largest envelope accepted; toolgate's are far smaller.
const MAX_ENVELOPE_BYTES: usize = 4 * 1024 * 1024;

/// The parts of toolgate's envelope this service reads; the rest (`user`, `format`,
/// `declared_tools`' schemas, `context`) is there for checks that need it.
#[derive(Debug, Deserialize)]
struct Envelope {
    #[serde(default)]
    config: Value,
    stage: String,
    #[serde(default)]
    declared_tools: Vec<DeclaredTool>,
    #[serde(default)]
    tool_calls: Vec<ToolCall>,
}

#[derive(Debug, Deserialize)]
struct DeclaredTool {
    name: String,
}

#[derive(Debug, Deserialize)]
struct ToolCall {
    #[serde(default)]
    id: Option<String>,
    name: String,
    arguments: String,
}

/// The config this service declares (`config-params` in its descriptor).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    deny_substrings: Vec<String>,
    #[serde(default)]
    remove_tools: Vec<String>,
}

/// Answers one envelope (the JSON body toolgate POSTs).
pub fn decide(envelope: &[u8]) -> Value {
    let envelope: Envelope = match serde_json::from_slice(envelope) {
        Ok(envelope) => envelope,
        Err(error) => return error_answer("bad_envelope", &error.to_string()),
    };
    let config: Config = match serde_json::from_value(envelope.config) {
        Ok(config) => config,
        Err(error) => return error_answer("bad_config", &error.to_string()),
    };
    if envelope.stage == "pre_request" {
        let removed: Vec<&str> = envelope
            .declared_tools
            .iter()
            .map(|tool| tool.name.as_str())
            .filter(|name| config.remove_tools.iter().any(|removed| removed == name))
            .collect();
        return if removed.is_empty() {
            json!({"error": null, "decision": "allow", "violations": []})
        } else {
            json!({"error": null, "decision": "modify", "violations": [],
                   "patch": {"remove_tools": removed}})
        };
    }
    let violations: Vec<Value> = envelope
        .tool_calls
        .iter()
        .filter_map(|call| {
            let arguments = call.arguments.to_lowercase();
            let found = config
                .deny_substrings
                .iter()
                .find(|needle| !needle.is_empty() && arguments.contains(&needle.to_lowercase()))?;
            Some(json!({
                "code": "denied_substring",
                "message": format!("the arguments of '{}' contain '{found}'", call.name),
                "tool_call_id": call.id,
                "tool": call.name,
            }))
        })
        .collect();
    let decision = if violations.is_empty() {
        "allow"
    } else {
        "deny"
    };
    json!({"error": null, "decision": decision, "violations": violations})
}

fn error_answer(kind: &str, message: &str) -> Value {
    json!({"error": {"type": kind, "message": message}, "decision": null, "violations": []})
}

/// Serves the validator on `listener` until `shutdown` completes. Each connection runs in its
/// own task; a connection's failure never stops the server.
pub async fn serve(listener: TcpListener, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors and the like: try the next connection.
                Err(_) => continue,
            },
        };
        tokio::spawn(async move {
            let served = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service_fn(answer))
                .await;
            if let Err(error) = served {
                eprintln!("validator: connection failed: {error}");
            }
        });
    }
}

async fn answer(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if request.method() != Method::POST {
        return Ok(reply(
            StatusCode::METHOD_NOT_ALLOWED,
            error_answer("method_not_allowed", "POST the envelope"),
        ));
    }
    let body = match Limited::new(request.into_body(), MAX_ENVELOPE_BYTES)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(error) => {
            return Ok(reply(
                StatusCode::BAD_REQUEST,
                error_answer("bad_envelope", &error.to_string()),
            ));
        }
    };
    Ok(reply(StatusCode::OK, decide(&body)))
}

fn reply(status: StatusCode, answer: Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(answer.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(stage: &str, config: Value, calls: Value) -> Vec<u8> {
        json!({"user": null, "config": config, "stage": stage, "format": "chat_completions",
               "declared_tools": [{"name": "run_sql", "kind": "function"},
                                  {"name": "drop_db", "kind": "function"}],
               "tool_calls": calls, "context": {}})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn calls_with_a_denied_substring_are_denied_one_violation_each() {
        let answer = decide(&envelope(
            "pre_response",
            json!({"deny_substrings": ["drop table"]}),
            json!([{"id": "c1", "name": "run_sql", "arguments": "{\"q\":\"DROP TABLE users\"}"},
                   {"id": "c2", "name": "run_sql", "arguments": "{\"q\":\"select 1\"}"}]),
        ));
        assert_eq!(answer["decision"], "deny");
        assert_eq!(answer["violations"].as_array().map(Vec::len), Some(1));
        assert_eq!(answer["violations"][0]["tool_call_id"], "c1");
        assert_eq!(answer["violations"][0]["code"], "denied_substring");
    }

    #[test]
    fn clean_calls_are_allowed_and_listed_tools_removed_before_the_request() {
        let config = json!({"deny_substrings": ["rm -rf"], "remove_tools": ["drop_db"]});
        let answer = decide(&envelope(
            "pre_response",
            config.clone(),
            json!([{"id": "c1", "name": "run_sql", "arguments": "{}"}]),
        ));
        assert_eq!(answer["decision"], "allow");
        let answer = decide(&envelope("pre_request", config, json!([])));
        assert_eq!(answer["decision"], "modify");
        assert_eq!(answer["patch"]["remove_tools"], json!(["drop_db"]));
    }

    #[test]
    fn bad_config_and_bad_envelopes_are_errors() {
        let answer = decide(&envelope("pre_response", json!({}), json!([])));
        assert_eq!(answer["error"]["type"], "bad_config");
        assert_eq!(decide(b"not json")["error"]["type"], "bad_envelope");
    }
}
