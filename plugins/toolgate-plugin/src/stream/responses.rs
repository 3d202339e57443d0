//! The Responses stream assembler. (Interface; filled in by the formats work.)

use super::{StreamAssembler, StreamStep};
use crate::sse::SseEvent;
use crate::tool::ToolCall;

#[derive(Debug, Default)]
pub struct ResponsesStreamAssembler;

impl ResponsesStreamAssembler {
    pub fn new() -> Self {
        ResponsesStreamAssembler
    }
}

impl StreamAssembler for ResponsesStreamAssembler {
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
