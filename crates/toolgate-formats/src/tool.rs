//! The nouns of every check: the tools a client declared and the calls a model made,
//! independent of the wire format they arrived in.

use bytestring::ByteString;
use serde::Serialize;

use crate::identity::ToolKey;

/// How a tool was declared, or how a call names its tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// A function tool with an optional JSON Schema for its arguments.
    Function,
    /// A custom tool: free-form text input, no schema (name only).
    Custom,
    /// The legacy `functions[]` / `function_call` fields of chat completions.
    LegacyFunction,
    /// A tool the provider runs itself (Responses `web_search`, Anthropic server tools), declared
    /// by its type; its calls are named by that type too.
    Builtin,
}

impl ToolKind {
    /// Whether a call of this kind reaches a tool declared as `declared`, the way the client's
    /// SDK (or the provider, for its own tools) dispatches it. A name alone is not enough: an
    /// SDK routes a `function` call to its function handlers and a `custom` call to its
    /// free-text ones, and a provider runs only the built-ins it was given, so a call whose kind
    /// does not match the declaration was never offered to the model and is undeclared.
    /// The legacy `functions[]` / `function_call` pair is the same family as function tools:
    /// SDKs hand both the same JSON arguments and the same handlers.
    pub fn dispatches_to(self, declared: ToolKind) -> bool {
        // One arm per call kind, so a new kind has to decide its family here.
        match self {
            ToolKind::Function | ToolKind::LegacyFunction => {
                matches!(declared, ToolKind::Function | ToolKind::LegacyFunction)
            }
            ToolKind::Custom => declared == ToolKind::Custom,
            ToolKind::Builtin => declared == ToolKind::Builtin,
        }
    }
}

/// A tool the client declared in its request.
#[derive(Debug, Clone)]
pub struct DeclaredTool {
    /// The name as the client declared it (exact: membership compares it byte for byte).
    pub name: String,
    /// What kind of tool it is (function, custom, built-in): which calls may dispatch to it.
    pub kind: ToolKind,
    /// The JSON Schema of the arguments exactly as the client wrote it. Kept as raw text so a
    /// schema cache can key on its bytes without building a JSON tree on every request; read
    /// from a body, it shares the body's bytes rather than copying them.
    pub parameters: Option<ByteString>,
}

impl DeclaredTool {
    /// A function tool with an optional JSON Schema for its arguments (an MCP tool's
    /// `inputSchema`), for requests built without a wire body.
    pub fn function(name: impl Into<String>, schema: Option<&serde_json::Value>) -> Self {
        DeclaredTool {
            name: name.into(),
            kind: ToolKind::Function,
            parameters: schema.map(|schema| ByteString::from(schema.to_string())),
        }
    }

    /// The schema text, if the tool declares one.
    pub fn schema_text(&self) -> Option<&str> {
        self.parameters.as_deref()
    }

    /// The tool's identity for policy (never for membership: see [`ToolKey`]).
    pub fn key(&self) -> ToolKey {
        ToolKey::new(&self.name)
    }
}

impl ToolCall {
    /// A call of a function tool with JSON arguments, as an MCP client makes it: one call, in
    /// choice 0, with the JSON-RPC request id as its id.
    pub fn function(id: Option<String>, name: impl Into<String>, arguments: String) -> Self {
        ToolCall {
            choice: 0,
            id,
            name: name.into(),
            kind: ToolKind::Function,
            arguments,
        }
    }

    /// The called tool's identity for policy (never for membership: see [`ToolKey`]).
    pub fn key(&self) -> ToolKey {
        ToolKey::new(&self.name)
    }
}

/// A tool call the model made in its response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolCall {
    /// Index of the choice the call belongs to (0 for formats without choices).
    pub choice: u32,
    /// The call's id (`tool_calls[].id`); legacy `function_call` has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool's name as the model wrote it.
    pub name: String,
    /// The kind of call, which says which declared tools it may dispatch to.
    pub kind: ToolKind,
    /// The arguments as the model produced them: a JSON text for functions, free text for custom
    /// tools. Kept verbatim; checks parse it.
    pub arguments: String,
}

/// A tool call from the conversation so far (the request's history), with what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryCall {
    /// The call's id, which its result refers to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool's name as the model wrote it; empty for a result whose call the request does
    /// not hold (a Responses output answering a stored response's call).
    pub name: String,
    /// The arguments as the model wrote them (empty when the call is not in the request).
    pub arguments: String,
    /// Whether the call ran, failed or has no result yet.
    pub outcome: CallOutcome,
    /// Which of the model's turns in the conversation made the call, counting from 0: every
    /// answer of the model is one turn, whether it called tools or not.
    pub turn: usize,
    /// Whether the call is in the model's latest turn: the answer to the previous request of
    /// the conversation, so its results are the ones new to this request.
    pub latest_turn: bool,
}

/// Marks the calls of the latest model turn, `latest` (none when the model has not answered).
pub(crate) fn mark_latest_turn(calls: &mut [HistoryCall], latest: Option<usize>) {
    for call in calls {
        call.latest_turn = Some(call.turn) == latest;
    }
}

impl HistoryCall {
    /// `call`, made in the model's `turn` of the conversation, with no result read yet.
    pub(crate) fn pending(call: ToolCall, turn: usize) -> Self {
        HistoryCall {
            id: call.id,
            name: call.name,
            arguments: call.arguments,
            outcome: CallOutcome::Pending,
            turn,
            latest_turn: false,
        }
    }

    /// The called tool's identity for policy.
    pub fn key(&self) -> ToolKey {
        ToolKey::new(&self.name)
    }
}

/// Whether the client sent a call's result back, and whether it reported a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// No result for this call is in the history (yet).
    Pending,
    /// A result came back.
    Completed,
    /// A result came back flagged as an error (Anthropic `is_error`, Responses `status: failed`).
    Failed,
}

impl CallOutcome {
    /// A result that came back, flagged as an error or not.
    pub(crate) fn answered(failed: bool) -> Self {
        if failed {
            CallOutcome::Failed
        } else {
            CallOutcome::Completed
        }
    }
}

/// The tool a built-in type belongs to, for a declared tool's type and a call item's type alike,
/// so a `web_search_call` matches a declared `web_search_preview_2025_03_11`: the `_call` of an
/// item, a `_YYYY_MM_DD` version and a `_preview` stage are dropped, and the computer tool's
/// names (`computer_use_preview`, `computer`) meet at `computer`.
pub(crate) fn builtin_tool_name(kind: &str) -> &str {
    let base = kind.strip_suffix("_call").unwrap_or(kind);
    let base = without_date(base);
    match base.strip_suffix("_preview").unwrap_or(base) {
        "computer_use" => "computer",
        "mcp_approval_request" => "mcp",
        name => name,
    }
}

fn without_date(kind: &str) -> &str {
    let split = kind.len().saturating_sub(11);
    let dated = kind.len() > 11
        && (kind.bytes().skip(split).enumerate()).all(|(at, byte)| match at {
            0 | 5 | 8 => byte == b'_',
            _ => byte.is_ascii_digit(),
        });
    kind.get(..split).filter(|_| dated).unwrap_or(kind)
}

#[cfg(test)]
mod tests {
    use super::ToolKind::{self, Builtin, Custom, Function, LegacyFunction};

    #[test]
    fn a_call_reaches_only_declarations_of_its_dispatch_family() {
        // (call kind, declared kind, dispatched): every pair, so a change to any is seen.
        let table: [(ToolKind, ToolKind, bool); 16] = [
            (Function, Function, true),
            (Function, LegacyFunction, true),
            (Function, Custom, false),
            (Function, Builtin, false),
            (LegacyFunction, Function, true),
            (LegacyFunction, LegacyFunction, true),
            (LegacyFunction, Custom, false),
            (LegacyFunction, Builtin, false),
            (Custom, Function, false),
            (Custom, LegacyFunction, false),
            (Custom, Custom, true),
            (Custom, Builtin, false),
            (Builtin, Function, false),
            (Builtin, LegacyFunction, false),
            (Builtin, Custom, false),
            (Builtin, Builtin, true),
        ];
        for (call, declared, expected) in table {
            assert_eq!(
                call.dispatches_to(declared),
                expected,
                "{call:?} call to a {declared:?} declaration"
            );
        }
    }
}
