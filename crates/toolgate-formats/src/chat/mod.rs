//! OpenAI Chat Completions: `tools[]` and legacy `functions[]` in a request, calls from every
//! choice's `message.tool_calls[]` and legacy `function_call` in an answer (`message`), and the
//! same calls rebuilt from `delta` fragments in a stream (`stream`).

pub(crate) mod answer_wire;
pub(crate) mod disclosure;
pub(crate) mod lenient;
pub(crate) mod message;
pub(crate) mod on_block;
pub(crate) mod rewrite;
pub(crate) mod scanned;
pub(crate) mod stream;

pub use stream::ChatStreamAssembler;

crate::adapter::folder_adapter!(
    Chat,
    ChatStreamAssembler,
    chat,
    name: "chat_completions",
    path: "/chat/completions",
    generations: &[
        crate::format::GenerationEndpoint {
            segments: &["chat", "completions"],
            except: &[],
            documented: &["/v1/chat/completions"],
        },
        // The legacy completions API: OpenAI's too, and its answers are read as chat's.
        crate::format::GenerationEndpoint {
            segments: &["completions"],
            except: &[],
            documented: &["/v1/completions"],
        },
    ],
    key: crate::format::KeyHeader::Bearer,
    tool_fields: &[
        "tools",
        "functions",
        "tool_choice",
        "function_call",
        "parallel_tool_calls",
    ],
    calls: "choices",
);
