//! The one trait a wire format implements, in its own folder: how its request names tools,
//! where its answer carries calls, how its stream is rebuilt, and how edits are written back.

use bytes::Bytes;

use crate::answer::Reading;
use crate::format::{ErrorFacts, ParseError, ToolRequest, ToolResponse};
use crate::on_block::{BlockNotice, CallFeedback};
use crate::response_edits::Replacement;
use crate::stream::usage::UsageSlot;
use crate::stream::{StreamAssembler, StreamRewriter};
use crate::tool::HistoryCall;
use crate::tools_cache::DeclaredToolsCache;

/// One wire format, as its folder implements it: how its request names tools, where its answer
/// carries calls, and how its stream is rebuilt. A new format is a folder with one of these and
/// a line in `WireFormat::adapter` (the registry).
pub(crate) trait Adapter: Sync {
    /// The name used in configuration (`format = "…"`).
    fn name(&self) -> &'static str;
    /// Whether an endpoint path (without its query) speaks it: judged by its last segments
    /// (`/chat/completions`), or by the verb a Gemini path ends with.
    fn speaks_path(&self, path: &str) -> bool;
    /// Whether its API answers generations at this path (without its query).
    fn serves_generations_at(&self, path: &str) -> bool;
    /// Completes a request read from its body with what its path and query say (Gemini names
    /// the model and whether to stream there); `target` is the path with its query.
    fn read_target(&self, _request: &mut ToolRequest, _target: &str) {}
    /// Whether its requests' tools are read through the declared-tools cache (Gemini's entries
    /// hold lists of declarations, read whole each time).
    fn caches_declared_tools(&self) -> bool {
        true
    }
    /// The top-level request fields that steer which tool the model calls, which progressive
    /// disclosure keeps as the client sent them.
    fn choice_fields(&self) -> &'static [&'static str] {
        &["tool_choice", "parallel_tool_calls"]
    }
    /// The top-level fields where its answers report usage.
    fn usage_fields(&self) -> &'static [&'static str] {
        &["usage"]
    }
    /// Whether a request body has its shape (asked when the path names no format).
    fn claims(&self, body: &[u8]) -> crate::format::Claim;
    /// Where its API answers generations.
    fn generation_endpoints(&self) -> &'static [crate::format::GenerationEndpoint];
    /// toolgate's own error as a body its clients' SDKs read.
    fn error_body(&self, facts: &ErrorFacts<'_>) -> serde_json::Value;
    /// toolgate's own error as the stream event that ends a stream whose head was sent;
    /// `sequence_number` counts the events relayed before it.
    fn error_event(&self, facts: &ErrorFacts<'_>, sequence_number: u64) -> Bytes;
    /// How its API takes the caller's key: what an upstream that names no `auth` is sent.
    fn key_header(&self) -> crate::format::KeyHeader;
    /// The top-level request fields that declare or steer tools.
    fn tool_fields(&self) -> &'static [&'static str];
    /// The top-level answer field that carries its calls (`choices`, `output`, `content`).
    fn calls_field(&self) -> &'static str;
    /// Reads the declared tools and the stream flag of a request body, the tools from `cache`
    /// when it holds the reading of the same arrays.
    fn parse_request(
        &self,
        body: Bytes,
        cache: Option<&DeclaredToolsCache>,
    ) -> Result<ToolRequest, ParseError>;
    /// Reads the tool calls of a complete answer.
    fn parse_response(&self, body: &[u8]) -> Result<ToolResponse, ParseError> {
        self.read_response(body).map(|reading| reading.response)
    }

    /// [`Adapter::parse_response`], noting whether the answer has another format's calls field.
    fn read_response(&self, body: &[u8]) -> Result<Reading, ParseError>;
    /// A fresh assembler for one streamed answer.
    fn stream_assembler(&self) -> Box<dyn StreamAssembler>;
    /// Removes the tools named in `removed` (never empty) from a request body, and what would
    /// refer to them; `None` when nothing changed.
    fn remove_tools(&self, body: &[u8], removed: &[&str]) -> Result<Option<Bytes>, ParseError>;
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
    /// Where one of its stream events carries usage, if it does.
    fn event_usage<'v>(&self, event: &'v mut serde_json::Value) -> Option<UsageSlot<'v>>;
    /// The request continued with the model's blocked turn, each call answered by why it did
    /// not run, in the format's own shape (the `on_block = "retry"` request).
    fn retry_request(
        &self,
        body: &[u8],
        feedback: &[CallFeedback<'_>],
    ) -> Result<Bytes, ParseError>;
    /// A complete answer whose assistant text says what was blocked, without calls.
    fn block_message(&self, notice: &BlockNotice<'_>) -> Bytes;
    /// The function and custom tools the request declares, with their descriptions
    /// (progressive disclosure: what the model may load).
    fn tool_definitions(
        &self,
        body: &[u8],
    ) -> Result<Vec<crate::disclosure::ToolDefinition>, ParseError>;
    /// The tools the request forces the model to choose from (its `tool_choice`).
    fn forced_tools(&self, body: &[u8]) -> Vec<String>;
    /// The calls a forgiving client reads from one JSON document of this format's shapes (a
    /// whole answer, or one event's data), appended to `calls`.
    fn lenient_calls(
        &self,
        value: &serde_json::Value,
        calls: &mut Vec<crate::lenient::LenientCall>,
    );
    /// What one event of this format's shapes does to the calls a forgiving client is
    /// reassembling from a stream.
    fn lenient_stream_updates(
        &self,
        value: &serde_json::Value,
        updates: &mut Vec<(crate::lenient::FormatCallKey, crate::lenient::Update)>,
    );
    /// Keys whose presence in text that is not JSON may hide one of this format's calls.
    fn call_markers(&self) -> &'static [&'static str];
    /// A discovery tool's declaration in this format's shape.
    fn discovery_tool(&self, tool: &crate::disclosure::DiscoveryTool) -> serde_json::Value;
    /// The request with `text` added to its system prompt, after the client's own.
    fn add_instructions(&self, body: &[u8], text: &str) -> Result<Bytes, ParseError>;
    /// [`Adapter::block_message`] as a whole stream of the format's events, ending normally.
    fn block_message_stream(&self, notice: &BlockNotice<'_>) -> Bytes;
}

/// The [`Adapter`] methods every format folder answers alike, from its parts (`message`'s
/// parsers and edits, `stream`'s assembler, `rewrite`'s writers, `on_block`'s answers to a
/// block, `disclosure`'s and `lenient`'s shapes): expanded inside an adapter's `impl`, by
/// [`folder_adapter`] and by an adapter written out (Gemini's).
macro_rules! folder_parts {
    ($assembler:ident, $rewrite_event:ident) => {
        fn claims(&self, body: &[u8]) -> crate::format::Claim {
            message::claims(body)
        }

        fn error_body(&self, facts: &crate::format::ErrorFacts<'_>) -> serde_json::Value {
            on_block::error_body(facts)
        }

        fn error_event(
            &self,
            facts: &crate::format::ErrorFacts<'_>,
            sequence_number: u64,
        ) -> bytes::Bytes {
            on_block::error_event(facts, sequence_number)
        }

        fn read_response(
            &self,
            body: &[u8],
        ) -> Result<crate::answer::Reading, crate::format::ParseError> {
            message::read_response(body)
        }

        fn stream_assembler(&self) -> Box<dyn crate::stream::StreamAssembler> {
            Box::new($assembler::new())
        }

        fn remove_tools(
            &self,
            body: &[u8],
            removed: &[&str],
        ) -> Result<Option<bytes::Bytes>, crate::format::ParseError> {
            message::remove_tools(body, removed)
        }

        fn latest_user_text(&self, body: &[u8]) -> Option<String> {
            message::latest_user_text(body)
        }

        fn history(&self, body: &[u8]) -> Vec<crate::tool::HistoryCall> {
            message::history(body)
        }

        fn replace_arguments(
            &self,
            items: &mut [serde_json::Value],
            wanted: &[crate::response_edits::Replacement<'_>],
        ) -> Result<bool, crate::format::ParseError> {
            rewrite::replace_arguments(items, wanted)
        }

        fn rewrite_event(
            &self,
            rewriter: &mut crate::stream::StreamRewriter,
            event: &mut serde_json::Value,
        ) -> bool {
            rewriter.$rewrite_event(event)
        }

        fn event_usage<'v>(
            &self,
            event: &'v mut serde_json::Value,
        ) -> Option<crate::stream::usage::UsageSlot<'v>> {
            rewrite::event_usage(event)
        }

        fn retry_request(
            &self,
            body: &[u8],
            feedback: &[crate::on_block::CallFeedback<'_>],
        ) -> Result<bytes::Bytes, crate::format::ParseError> {
            on_block::retry_request(body, feedback)
        }

        fn block_message(&self, notice: &crate::on_block::BlockNotice<'_>) -> bytes::Bytes {
            on_block::block_message(notice)
        }

        fn tool_definitions(
            &self,
            body: &[u8],
        ) -> Result<Vec<crate::disclosure::ToolDefinition>, crate::format::ParseError> {
            disclosure::definitions(body)
        }

        fn lenient_calls(
            &self,
            value: &serde_json::Value,
            calls: &mut Vec<crate::lenient::LenientCall>,
        ) {
            lenient::calls(value, calls)
        }

        fn lenient_stream_updates(
            &self,
            value: &serde_json::Value,
            updates: &mut Vec<(crate::lenient::FormatCallKey, crate::lenient::Update)>,
        ) {
            lenient::stream_updates(value, updates)
        }

        fn call_markers(&self) -> &'static [&'static str] {
            lenient::MARKERS
        }

        fn discovery_tool(&self, tool: &crate::disclosure::DiscoveryTool) -> serde_json::Value {
            disclosure::discovery_tool(tool)
        }

        fn add_instructions(
            &self,
            body: &[u8],
            text: &str,
        ) -> Result<bytes::Bytes, crate::format::ParseError> {
            disclosure::add_instructions(body, text)
        }

        fn block_message_stream(&self, notice: &crate::on_block::BlockNotice<'_>) -> bytes::Bytes {
            on_block::block_message_stream(notice)
        }
    };
}

/// The [`Adapter`] of a format folder whose path and request read as the OpenAI-style formats'
/// do: its constants, and [`folder_parts`] (`chat/mod.rs` shows one).
macro_rules! folder_adapter {
    (
        $adapter:ident, $assembler:ident, $rewrite_event:ident,
        name: $name:literal, path: $path:literal, generations: $generations:expr, key: $key:expr,
        tool_fields: $fields:expr, calls: $calls:literal $(,)?
    ) => {
        /// This format's [`Adapter`](crate::adapter::Adapter).
        pub(crate) struct $adapter;

        impl crate::adapter::Adapter for $adapter {
            fn name(&self) -> &'static str {
                $name
            }

            fn speaks_path(&self, path: &str) -> bool {
                crate::format::path_ends_with(path, $path)
            }

            fn serves_generations_at(&self, path: &str) -> bool {
                crate::format::GenerationEndpoint::any_serves($generations, path)
            }

            fn generation_endpoints(&self) -> &'static [crate::format::GenerationEndpoint] {
                $generations
            }

            fn key_header(&self) -> crate::format::KeyHeader {
                $key
            }

            fn tool_fields(&self) -> &'static [&'static str] {
                $fields
            }

            fn calls_field(&self) -> &'static str {
                $calls
            }

            fn parse_request(
                &self,
                body: bytes::Bytes,
                cache: Option<&crate::tools_cache::DeclaredToolsCache>,
            ) -> Result<crate::format::ToolRequest, crate::format::ParseError> {
                crate::request_reader::read_request::<$adapter>(body, cache)
            }

            fn forced_tools(&self, body: &[u8]) -> Vec<String> {
                crate::disclosure::tool_choices(body)
                    .iter()
                    .flat_map(disclosure::forced_tools)
                    .collect()
            }

            crate::adapter::folder_parts!($assembler, $rewrite_event);
        }
    };
}

pub(crate) use folder_adapter;
pub(crate) use folder_parts;
