//! Anthropic Messages: tools (`input_schema`, server tools) in a request, calls from a
//! message's `tool_use` and `server_tool_use` blocks (`message`), and the same blocks rebuilt
//! from `content_block_*` events (`stream`).

pub(crate) mod message;
pub(crate) mod on_block;
pub(crate) mod rewrite;
pub(crate) mod stream;

pub use stream::AnthropicStreamAssembler;

crate::adapter::folder_adapter!(
    Anthropic,
    AnthropicStreamAssembler,
    anthropic,
    name: "anthropic_messages",
    path: "/messages",
    errors: crate::format::ErrorShape::Anthropic,
    tool_fields: &["tools", "tool_choice"],
    calls: "content",
);
