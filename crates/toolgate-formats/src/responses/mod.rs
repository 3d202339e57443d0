//! The OpenAI Responses API: tools of every kind in a request, calls from the `output[]` items
//! of a response (`message`), and the same items rebuilt from `response.*` events (`stream`).

pub(crate) mod message;
pub(crate) mod stream;

pub(crate) use message::{
    apply_request_edits, history, latest_user_text, parse_request, parse_response,
};
pub use stream::ResponsesStreamAssembler;
