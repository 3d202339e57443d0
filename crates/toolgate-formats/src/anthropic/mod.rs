//! Anthropic Messages: tools (`input_schema`, server tools) in a request, calls from a
//! message's `tool_use` and `server_tool_use` blocks (`message`), and the same blocks rebuilt
//! from `content_block_*` events (`stream`); both read a block as the one `PartWire` here.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::format::{name_text, text_or_raw_json};
use crate::tool::ToolCall;

pub(crate) mod disclosure;
pub(crate) mod lenient;
pub(crate) mod message;
pub(crate) mod on_block;
pub(crate) mod rewrite;
pub(crate) mod stream;

pub use stream::AnthropicStreamAssembler;

/// A content block (as an answer or the conversation holds it, or as `content_block_start` or
/// `message_start` carries it), a delta, or the opening message: one reading for the stream and
/// for `message`, so both give the same calls. Ids, names and texts are read leniently (a
/// number is kept as its JSON text): an SDK does not check their types, so a call must not slip
/// through for a wrong one, and one odd field does not hide a whole message.
#[derive(Deserialize)]
struct PartWire<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    text: Option<&'a RawValue>,
    #[serde(borrow, default)]
    thinking: Option<&'a RawValue>,
    #[serde(borrow, default)]
    partial_json: Option<&'a RawValue>,
    /// A `tool_result` block's call.
    #[serde(borrow, default)]
    tool_use_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    is_error: Option<&'a RawValue>,
    /// The opening message's blocks, or a result block's content; raw, as that may be anything.
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

impl PartWire<'_> {
    /// The call this block is, if it is a `tool_use` or `server_tool_use`. A call without a
    /// name keeps an empty one: no tool has it, so the call is blocked, not waved through.
    fn call(&self) -> Option<ToolCall> {
        let kind = AnthropicStreamAssembler::call_kind(self.kind.as_deref()?)?;
        Some(ToolCall {
            choice: 0,
            id: self.id.map(text_or_raw_json),
            name: self.name.map(name_text).unwrap_or_default(),
            kind,
            arguments: AnthropicStreamAssembler::arguments(self.input.map_or("{}", RawValue::get)),
        })
    }
}

crate::adapter::folder_adapter!(
    Anthropic,
    AnthropicStreamAssembler,
    anthropic,
    name: "anthropic_messages",
    path: "/messages",
    generations: &[crate::format::GenerationEndpoint {
        segments: &["messages"],
        except: &["count_tokens", "batches"],
        documented: &["/v1/messages"],
    }],
    key: crate::format::KeyHeader::Named("x-api-key"),
    tool_fields: &["tools", "tool_choice"],
    calls: "content",
);
