//! Wire-format adapters: the one place where request and response bodies are parsed into
//! declared tools and tool calls, and where edits are written back in the body's own format.
//!
//! Parsing types only what the checks use (tools, calls, the stream flag, the reasoning summary)
//! and skips the rest, so the cost is one scan of the body. Edits rewrite only the fields they
//! touch; every other top-level field keeps its original bytes.

mod chat;
mod raw_object;

use bytes::Bytes;
use serde::Serialize;
use serde_json::value::RawValue;

use crate::stream::{ChatStreamAssembler, StreamAssembler};
use crate::tool::{DeclaredTool, ToolCall};
use crate::verdict::Edit;

/// The API shape of an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WireFormat {
    /// OpenAI `/v1/chat/completions` (and every server that speaks it).
    ChatCompletions,
}

impl WireFormat {
    /// Reads the declared tools and the stream flag of a request body.
    pub fn parse_request(self, body: Bytes) -> Result<ToolRequest, ParseError> {
        match self {
            WireFormat::ChatCompletions => chat::parse_request(body),
        }
    }

    /// Reads the tool calls of a complete (non-streamed) response body.
    pub fn parse_response(self, body: &[u8]) -> Result<ToolResponse, ParseError> {
        match self {
            WireFormat::ChatCompletions => chat::parse_response(body),
        }
    }

    /// A fresh assembler for one streamed response in this format.
    pub fn stream_assembler(self) -> Box<dyn StreamAssembler> {
        match self {
            WireFormat::ChatCompletions => Box::new(ChatStreamAssembler::new()),
        }
    }

    /// Applies request edits (removing declared tools) and returns the new body, or `None`
    /// when no edit changed anything, so an untouched body is forwarded as its original bytes.
    pub fn apply_request_edits(
        self,
        body: &[u8],
        edits: &[Edit],
    ) -> Result<Option<Bytes>, ParseError> {
        match self {
            WireFormat::ChatCompletions => chat::apply_request_edits(body, edits),
        }
    }
}

/// What the checks need from a request.
#[derive(Debug, Clone)]
pub struct ToolRequest {
    pub format: WireFormat,
    pub declared_tools: Vec<DeclaredTool>,
    /// The client asked for a streamed answer.
    pub stream: bool,
    pub model: Option<String>,
    /// The original body, kept so rarely needed parts (the conversation) are parsed on demand.
    body: Bytes,
}

impl ToolRequest {
    pub fn declares_tools(&self) -> bool {
        !self.declared_tools.is_empty()
    }

    /// The declared tool with this name, if any (names are exact and case-sensitive).
    pub fn declared_tool(&self, name: &str) -> Option<&DeclaredTool> {
        self.declared_tools.iter().find(|tool| tool.name == name)
    }

    /// The text of the latest user turn, for the judge. Parsed only when asked.
    pub fn user_request(&self) -> Option<String> {
        match self.format {
            WireFormat::ChatCompletions => chat::latest_user_text(&self.body),
        }
    }

    pub fn body(&self) -> &Bytes {
        &self.body
    }
}

/// What the checks need from a response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolResponse {
    /// Every call of every choice, in order.
    pub calls: Vec<ToolCall>,
    /// The model's reasoning summary, when it gave one.
    pub reasoning: Option<String>,
}

impl ToolResponse {
    pub fn has_calls(&self) -> bool {
        !self.calls.is_empty()
    }
}

/// A body that is not in the expected format. Opaque: the message says what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    message: String,
}

impl ParseError {
    pub fn new(message: impl Into<String>) -> Self {
        ParseError {
            message: message.into(),
        }
    }
}

impl From<serde_json::Error> for ParseError {
    fn from(error: serde_json::Error) -> Self {
        ParseError::new(format!("invalid JSON body: {error}"))
    }
}

/// A JSON value that may be a string holding JSON text (the OpenAI shape of `arguments`) or,
/// from lenient servers, the JSON value itself. Returns the text the model meant.
pub(crate) fn text_or_raw_json(value: &RawValue) -> String {
    match serde_json::from_str::<String>(value.get()) {
        Ok(text) => text,
        Err(_) => value.get().to_owned(),
    }
}
