//! The one trait a wire format implements, in its own folder: how its request names tools,
//! where its answer carries calls, how its stream is rebuilt, and how edits are written back.

use bytes::Bytes;

use crate::edits::Edit;
use crate::format::{ErrorShape, ParseError, ToolRequest, ToolResponse};
use crate::response_edits::Replacement;
use crate::stream::{StreamAssembler, StreamRewriter};
use crate::tool::HistoryCall;

/// One wire format, as its folder implements it: how its request names tools, where its answer
/// carries calls, and how its stream is rebuilt. A new format is a folder with one of these and
/// a line in `WireFormat::adapter` (the registry).
pub(crate) trait Adapter: Sync {
    /// The name used in configuration (`format = "…"`).
    fn name(&self) -> &'static str;
    /// The last segments of the endpoint path that speaks it (`/chat/completions`).
    fn path_suffix(&self) -> &'static str;
    /// How toolgate's own errors are shaped for its clients.
    fn error_shape(&self) -> ErrorShape;
    /// The top-level request fields that declare or steer tools.
    fn tool_fields(&self) -> &'static [&'static str];
    /// The top-level answer field that carries its calls (`choices`, `output`, `content`).
    fn calls_field(&self) -> &'static str;
    /// Reads the declared tools and the stream flag of a request body.
    fn parse_request(&self, body: Bytes) -> Result<ToolRequest, ParseError>;
    /// Reads the tool calls of a complete answer.
    fn parse_response(&self, body: &[u8]) -> Result<ToolResponse, ParseError>;
    /// A fresh assembler for one streamed answer.
    fn stream_assembler(&self) -> Box<dyn StreamAssembler>;
    /// Removes declared tools from a request body; `None` when nothing changed.
    fn apply_request_edits(&self, body: &[u8], edits: &[Edit])
    -> Result<Option<Bytes>, ParseError>;
    /// The text of the latest user turn.
    fn latest_user_text(&self, body: &[u8]) -> Option<String>;
    /// The tool calls of the conversation so far.
    fn history(&self, body: &[u8]) -> Vec<HistoryCall>;
    /// Writes the edited calls' new arguments into the items of an answer's calls field.
    fn replace_arguments(
        &self,
        items: &mut [serde_json::Value],
        wanted: &[Replacement<'_>],
    ) -> Result<bool, ParseError>;
    /// Rewrites one stream event for the edits `rewriter` holds; true when it changed.
    fn rewrite_event(&self, rewriter: &mut StreamRewriter, event: &mut serde_json::Value) -> bool;
}
