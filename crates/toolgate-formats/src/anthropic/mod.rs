//! Anthropic Messages: tools (`input_schema`, server tools) in a request, calls from a
//! message's `tool_use` and `server_tool_use` blocks (`message`), and the same blocks rebuilt
//! from `content_block_*` events (`stream`).

pub(crate) mod message;
pub(crate) mod stream;

pub(crate) use message::{
    apply_request_edits, history, latest_user_text, parse_request, parse_response,
};
pub use stream::AnthropicStreamAssembler;
