//! The OpenAI Responses API: tools of every kind in a request, calls from the `output[]` items
//! of a response (`message`), and the same items rebuilt from `response.*` events (`stream`).

pub(crate) mod disclosure;
pub(crate) mod lenient;
pub(crate) mod message;
pub(crate) mod on_block;
pub(crate) mod rewrite;
pub(crate) mod stream;

pub use stream::ResponsesStreamAssembler;

crate::adapter::folder_adapter!(
    Responses,
    ResponsesStreamAssembler,
    responses,
    name: "responses",
    path: "/responses",
    generations: &[crate::format::GenerationEndpoint {
        segments: &["responses"],
        except: &["input_tokens"],
        documented: &["/v1/responses", "/v1/responses/{id}"],
    }],
    key: crate::format::KeyHeader::Bearer,
    tool_fields: &["tools", "tool_choice", "parallel_tool_calls"],
    calls: "output",
);
