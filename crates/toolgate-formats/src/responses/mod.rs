//! The OpenAI Responses API: tools of every kind in a request, calls from the `output[]` items
//! of a response (`message`), and the same items rebuilt from `response.*` events (`stream`).

pub(crate) mod message;
pub(crate) mod rewrite;
pub(crate) mod stream;

pub use stream::ResponsesStreamAssembler;

use bytes::Bytes;

use crate::adapter::Adapter;
use crate::edits::Edit;
use crate::format::{ErrorShape, ParseError, ToolRequest, ToolResponse};
use crate::response_edits::Replacement;
use crate::stream::{StreamAssembler, StreamRewriter};
use crate::tool::HistoryCall;

/// This format's [`Adapter`].
pub(crate) struct Responses;

impl Adapter for Responses {
    fn name(&self) -> &'static str {
        "responses"
    }

    fn path_suffix(&self) -> &'static str {
        "/responses"
    }

    fn error_shape(&self) -> ErrorShape {
        ErrorShape::OpenAi
    }

    fn tool_fields(&self) -> &'static [&'static str] {
        &["tools", "tool_choice", "parallel_tool_calls"]
    }

    fn calls_field(&self) -> &'static str {
        "output"
    }

    fn parse_request(&self, body: Bytes) -> Result<ToolRequest, ParseError> {
        message::parse_request(body)
    }

    fn parse_response(&self, body: &[u8]) -> Result<ToolResponse, ParseError> {
        message::parse_response(body)
    }

    fn stream_assembler(&self) -> Box<dyn StreamAssembler> {
        Box::new(ResponsesStreamAssembler::new())
    }

    fn apply_request_edits(
        &self,
        body: &[u8],
        edits: &[Edit],
    ) -> Result<Option<Bytes>, ParseError> {
        message::apply_request_edits(body, edits)
    }

    fn latest_user_text(&self, body: &[u8]) -> Option<String> {
        message::latest_user_text(body)
    }

    fn history(&self, body: &[u8]) -> Vec<HistoryCall> {
        message::history(body)
    }

    fn replace_arguments(
        &self,
        items: &mut [serde_json::Value],
        wanted: &[Replacement<'_>],
    ) -> Result<bool, ParseError> {
        rewrite::replace_arguments(items, wanted)
    }

    fn rewrite_event(&self, rewriter: &mut StreamRewriter, event: &mut serde_json::Value) -> bool {
        rewriter.responses(event)
    }
}
