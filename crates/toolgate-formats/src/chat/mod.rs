//! OpenAI Chat Completions: `tools[]` and legacy `functions[]` in a request, calls from every
//! choice's `message.tool_calls[]` and legacy `function_call` in an answer (`message`), and the
//! same calls rebuilt from `delta` fragments in a stream (`stream`).

pub(crate) mod message;
pub(crate) mod stream;

pub(crate) use message::{
    apply_request_edits, history, latest_user_text, parse_request, parse_response,
};
pub use stream::ChatStreamAssembler;
