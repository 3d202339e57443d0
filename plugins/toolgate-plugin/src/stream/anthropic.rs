//! The Anthropic stream assembler. (Interface; filled in by the formats work.)

use super::{StreamAssembler, StreamStep};
use crate::sse::SseEvent;
use crate::tool::ToolCall;

#[derive(Debug, Default)]
pub struct AnthropicStreamAssembler;

impl AnthropicStreamAssembler {
    pub fn new() -> Self {
        AnthropicStreamAssembler
    }
}

impl StreamAssembler for AnthropicStreamAssembler {
    fn observe(&mut self, _event: &SseEvent) -> StreamStep {
        StreamStep::Unrecognized
    }
    fn calls_ready(&self) -> bool {
        false
    }
    fn take_calls(&mut self) -> Vec<ToolCall> {
        Vec::new()
    }
    fn reasoning(&self) -> Option<&str> {
        None
    }
}
