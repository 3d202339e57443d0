//! toolgate-formats: the wire formats, read the way a guard must read them.
//!
//! Every format toolgate speaks is one folder here — a request's declared tools, an answer's
//! tool calls, the same calls rebuilt from a stream, and the edits written back in the body's
//! own shape — and nothing outside this crate parses a body. Plugins see the results through
//! the plugin API (`toolgate-plugin`), which re-exports what they need.
//!
//! Design choices:
//! - Parsing types only what the checks use and skips the rest, so the cost is one scan of the
//!   body; an allowed body is forwarded as its original bytes, never re-serialized.
//! - A guard reads an answer by its own shape ([`answer`]), not by what the request or the
//!   route said, and refuses what it cannot read unambiguously when a forgiving client could
//!   still read a call from it ([`lenient`] is that client, and the property tests' oracle).
//!
//! # Layout
//! - [`tool`]: `DeclaredTool`, `ToolCall` and their kinds, the nouns of every check.
//! - [`identity`]: `ToolKey`, a tool name trimmed and case-folded.
//! - [`directives`]: the client's `toolgate` object and `x-toolgate-*` headers.
//! - [`format`](mod@format): `WireFormat`, `ToolRequest`, `ToolResponse`, `ParseError` and the
//!   format-neutral entry points; `adapter` holds the `Adapter` trait each format implements,
//!   `registry` maps a `WireFormat` to its adapter. Adding a format is its folder and one
//!   registry line.
//! - `chat/`, `responses/`, `anthropic/`: one folder per format, its `message` (request and
//!   answer bodies), its `stream` (the assembler of its events) and its `rewrite` (edits
//!   written back in its shape) side by side.
//! - `request_reader`: how every format's request is read, in one pass or with the
//!   declared tools from `tools_cache`: [`DeclaredToolsCache`], the declared tools of a `tools`
//!   array already read, keyed by its bytes, for a reader that sees the same array on every
//!   turn of an agent. `scan` is the cached reading's look at a body's top level, held to
//!   serde_json's reading of the same bytes; `string_blocks` is its skip of an escape-dense
//!   string, 64 bytes at a time.
//! - [`edits`]: body edits as the adapters apply them; `response_edits` and
//!   `stream::StreamRewriter` write them into answers and streams.
//! - [`answer`]: how a guard reads an answer — by its own shape, closed on doubt.
//! - [`lenient`]: the forgiving reader.
//! - [`on_block`]: what the formats write when a route recovers from a block: the retry
//!   request's feedback and the `message` answer (each folder's `on_block.rs` has its shapes).
//! - [`disclosure`]: progressive tool disclosure's edits of a request (each folder's
//!   `disclosure.rs` has its shapes).
//! - [`sse`]: an incremental Server-Sent Events parser that keeps each event's exact bytes.
//! - [`stream`]: what an event is to the guard, the assembler trait, whole-stream reading, and
//!   edits and usage written into a stream's events.
//! - `testing` (tests only): what the folders' unit tests share.

#![deny(missing_docs)]

mod adapter;
mod anthropic;
mod chat;
mod gemini;
mod raw_object;
mod registry;
mod request_reader;
mod response_edits;
mod responses;
mod scan;
mod string_blocks;
#[cfg(test)]
mod testing;
mod tool_entry;
mod tools_cache;

pub mod answer;
pub mod directives;
pub mod disclosure;
pub mod edits;
pub mod format;
pub mod identity;
pub mod lenient;
pub mod on_block;
pub mod sse;
pub mod stream;
pub mod tool;

pub use anthropic::AnthropicStreamAssembler;
pub use chat::ChatStreamAssembler;
#[doc(hidden)]
pub use chat::message::disagreement as chat_answer_scan_disagreement;
pub use directives::Directives;
pub use edits::Edit;
pub use format::{
    ErrorFacts, GenerationEndpoint, KeyHeader, ParseError, ParseErrorKind, ToolRequest,
    ToolResponse, WireFormat,
};
pub use gemini::GeminiStreamAssembler;
pub use identity::ToolKey;
pub use responses::ResponsesStreamAssembler;
#[doc(hidden)]
pub use scan::{scans_as_object, string_ends, string_text};
pub use tool::{CallOutcome, DeclaredTool, HistoryCall, ToolCall, ToolKind};
pub use tools_cache::DeclaredToolsCache;
