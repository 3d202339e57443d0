//! The soak's MCP side: the reference Streamable HTTP server (`server-everything`, installed by
//! `.ci/mcp-servers.sh`) as a child process, and a client of toolgate's MCP route that speaks
//! JSON-RPC over raw HTTP/1.1 (one connection per message, read to its end under a deadline), so
//! a call that hangs is seen as such and not retried behind the soak's back.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::procs::Process;
use crate::raw_http::{self, Ending, RawAnswer};

/// `server-everything`'s entry point under the workspace at `root`, when installed.
pub fn everything_script(root: &Path) -> Option<PathBuf> {
    let script = root
        .join(".ci/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    script.exists().then_some(script)
}

/// Starts `server-everything` over Streamable HTTP on `port` (`http://127.0.0.1:PORT/mcp`),
/// its output in `dir/NAME.log`. Call from the driver's main thread (see [`Process::start`]).
pub fn start_everything(
    script: &Path,
    port: u16,
    name: &str,
    dir: &Path,
) -> std::io::Result<Process> {
    let mut command = Command::new("node");
    command
        .arg(script)
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    Process::start(name, command, dir)
}

/// Why an MCP exchange failed.
#[derive(Debug, Clone)]
pub enum McpError {
    /// A JSON-RPC error answer (toolgate's or the backend's).
    Rpc { code: i64, message: String },
    /// An HTTP answer that carries no JSON-RPC answer (its status and the start of its body).
    Http(u16, String),
    /// No whole answer: refused, reset, cut, or the deadline passed (`hung` then).
    Transport { why: String, hung: bool },
}

impl std::fmt::Display for McpError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            McpError::Rpc { code, message } => write!(formatter, "JSON-RPC {code}: {message}"),
            McpError::Http(status, body) => write!(formatter, "HTTP {status}: {body}"),
            McpError::Transport { why, .. } => write!(formatter, "{why}"),
        }
    }
}

/// A session with an MCP route of the gateway.
pub struct McpSession {
    gateway: SocketAddr,
    path: String,
    session: String,
    protocol: String,
    next_id: u64,
}

/// The protocol version the client asks for.
const PROTOCOL: &str = "2025-06-18";

impl McpSession {
    /// `initialize` and `notifications/initialized` on `path`, each before `deadline`.
    pub async fn open(
        gateway: SocketAddr,
        path: &str,
        deadline: Instant,
    ) -> Result<McpSession, McpError> {
        let mut session = McpSession {
            gateway,
            path: path.to_owned(),
            session: String::new(),
            protocol: PROTOCOL.to_owned(),
            next_id: 1,
        };
        let initialize = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "toolgate-soak", "version": "1"}
            }
        });
        let answer = session.post("POST", Some(&initialize), deadline).await?;
        let result = rpc_answer(&answer, 0)?;
        session.session = answer
            .header("mcp-session-id")
            .ok_or_else(|| McpError::Http(answer.status, "no mcp-session-id".to_owned()))?
            .to_owned();
        if let Some(version) = result["protocolVersion"].as_str() {
            session.protocol = version.to_owned();
        }
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let answer = session.post("POST", Some(&initialized), deadline).await?;
        match answer.status {
            200..=299 => Ok(session),
            status => Err(McpError::Http(status, clip(&answer.body))),
        }
    }

    /// `tools/call` of `tool` with `arguments`; its result, or why there is none by `deadline`.
    pub async fn call(
        &mut self,
        tool: &str,
        arguments: Value,
        deadline: Instant,
    ) -> Result<Value, McpError> {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}
        });
        let answer = self.post("POST", Some(&request), deadline).await?;
        rpc_answer(&answer, id)
    }

    /// Ends the session (`DELETE`); how it went does not matter to the caller.
    pub async fn close(self, deadline: Instant) {
        let _ = self.post("DELETE", None, deadline).await;
    }

    async fn post(
        &self,
        method: &str,
        message: Option<&Value>,
        deadline: Instant,
    ) -> Result<RawAnswer, McpError> {
        let body = message.map(Value::to_string).unwrap_or_default();
        let mut head = format!(
            "{method} {} HTTP/1.1\r\nhost: soak\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\nconnection: close\r\n\
             content-length: {}\r\n",
            self.path,
            body.len()
        );
        if !self.session.is_empty() {
            head += &format!(
                "mcp-session-id: {}\r\nmcp-protocol-version: {}\r\n",
                self.session, self.protocol
            );
        }
        let transport = |why: String| McpError::Transport { why, hung: false };
        let exchange = async {
            let mut socket = TcpStream::connect(self.gateway)
                .await
                .map_err(|error| transport(format!("connect: {error}")))?;
            socket
                .write_all(format!("{head}\r\n{body}").as_bytes())
                .await
                .map_err(|error| transport(format!("write: {error}")))?;
            let (bytes, ending) = raw_http::read_paced(
                &mut socket,
                64 * 1024,
                || std::time::Duration::ZERO,
                deadline,
            )
            .await;
            let answer = raw_http::parse(&bytes).map_err(|why| McpError::Transport {
                why: format!("{why} (ended: {ending:?})"),
                hung: ending == Ending::Deadline,
            })?;
            if !answer.whole || ending == Ending::Deadline {
                return Err(McpError::Transport {
                    why: format!(
                        "an answer {} cut after {} bytes of body ({ending:?})",
                        answer.status,
                        answer.body.len()
                    ),
                    hung: ending == Ending::Deadline,
                });
            }
            Ok(answer)
        };
        match tokio::time::timeout_at(deadline, exchange).await {
            Ok(result) => result,
            Err(_) => Err(McpError::Transport {
                why: "no answer by the deadline".to_owned(),
                hung: true,
            }),
        }
    }
}

/// The JSON-RPC answer to `id` in an HTTP answer (a JSON body, or an event of an SSE body).
fn rpc_answer(answer: &RawAnswer, id: u64) -> Result<Value, McpError> {
    let content_type = answer.header("content-type").unwrap_or_default();
    let messages: Vec<Value> = if content_type.contains("event-stream") {
        String::from_utf8_lossy(&answer.body)
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect()
    } else {
        serde_json::from_slice(&answer.body).into_iter().collect()
    };
    let message = messages
        .into_iter()
        .filter(|message| message.get("result").is_some() || message.get("error").is_some())
        .find(|message| message["id"] == json!(id) || message["id"].is_null())
        .ok_or_else(|| McpError::Http(answer.status, clip(&answer.body)))?;
    if let Some(error) = message.get("error") {
        return Err(McpError::Rpc {
            code: error["code"].as_i64().unwrap_or_default(),
            message: error["message"].as_str().unwrap_or_default().to_owned(),
        });
    }
    Ok(message["result"].clone())
}

/// `GET path` on `address` as JSON (the admin listener's `/health`), before `deadline`.
pub async fn get_json(address: SocketAddr, path: &str, deadline: Instant) -> Result<Value, String> {
    let exchange = async {
        let mut socket = TcpStream::connect(address)
            .await
            .map_err(|error| format!("connect: {error}"))?;
        socket
            .write_all(
                format!("GET {path} HTTP/1.1\r\nhost: soak\r\nconnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await
            .map_err(|error| format!("write: {error}"))?;
        let (bytes, _) = raw_http::read_paced(
            &mut socket,
            64 * 1024,
            || std::time::Duration::ZERO,
            deadline,
        )
        .await;
        let answer = raw_http::parse(&bytes)?;
        serde_json::from_slice(&answer.body).map_err(|error| {
            format!(
                "{path} answered {} that is not JSON: {error}",
                answer.status
            )
        })
    };
    tokio::time::timeout_at(deadline, exchange)
        .await
        .unwrap_or_else(|_| Err(format!("{path}: no answer by the deadline")))
}

fn clip(body: &[u8]) -> String {
    String::from_utf8_lossy(body).chars().take(200).collect()
}
