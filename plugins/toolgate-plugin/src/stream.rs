//! Stream assemblers: rebuild tool calls from streamed fragments, one event at a time, and tell
//! the gateway what each event is so it can pass text through and hold tool calls back.
//! (Interface; the chat-completions assembler is filled in by the streaming work.)

use crate::sse::SseEvent;
use crate::tool::ToolCall;

/// What an event is, as far as holding back goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamStep {
    /// Shows the client nothing yet (a role-only or empty delta, a comment, a keep-alive):
    /// may be held until the first visible event, so a stream that opens with a bad call can
    /// still be answered with a real 403.
    Preamble,
    /// Visible to the client (text, refusal, usage, finish without calls): pass it on.
    Content,
    /// Part of a tool call: hold it until the calls it belongs to are validated.
    ToolFragment,
    /// The end-of-stream marker (`data: [DONE]`).
    Done,
    /// Not an event of this format (not JSON, wrong shape).
    Unrecognized,
}

/// Rebuilds tool calls from one streamed response.
pub trait StreamAssembler: Send {
    /// Reads one event and classifies it.
    fn observe(&mut self, event: &SseEvent) -> StreamStep;

    /// True when calls are pending and all of them are complete (each choice that holds call
    /// fragments has finished, or the end marker was seen).
    fn calls_ready(&self) -> bool;

    /// Takes the pending calls (complete or not) for validation, leaving none pending.
    fn take_calls(&mut self) -> Vec<ToolCall>;

    /// The reasoning summary streamed so far, if any.
    fn reasoning(&self) -> Option<&str>;
}

pub struct ChatStreamAssembler;

impl ChatStreamAssembler {
    pub fn new() -> Self {
        ChatStreamAssembler
    }
}

impl Default for ChatStreamAssembler {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamAssembler for ChatStreamAssembler {
    fn observe(&mut self, _event: &SseEvent) -> StreamStep {
        StreamStep::Content
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
