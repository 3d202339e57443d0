//! An incremental Server-Sent Events parser that keeps each event's exact bytes, so released
//! events reach the client byte for byte. (Interface; filled in by the streaming work.)

use bytes::Bytes;

/// One event: its fields as parsed, and the exact bytes it occupied in the stream, including
/// the blank line that ended it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`; `None` for an event without data (comments only).
    pub data: Option<String>,
    pub raw: Bytes,
}

/// Splits a byte stream into events, however the bytes are chunked.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
}

impl SseParser {
    pub fn new() -> Self {
        SseParser::default()
    }

    /// Feeds a chunk; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buffer.extend_from_slice(chunk);
        Vec::new()
    }

    /// At end of input: the trailing bytes that did not end with a blank line, as an event.
    pub fn finish(&mut self) -> Option<SseEvent> {
        None
    }

    /// Bytes held that do not yet form a complete event (for the body-size cap).
    pub fn buffered_len(&self) -> usize {
        self.buffer.len()
    }
}
