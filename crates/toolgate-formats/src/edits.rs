//! Body edits as the format adapters apply them: what remains of a stage's verdicts once the
//! gateway has taken the header and audit edits out. Plugins return typed stage edits
//! (`RequestEdit`, `ResponseEdit` in the plugin API); the adapters only see these.

use crate::tool::ToolCall;

/// A body edit as the format adapters apply it: the body part of a `RequestEdit` or a
/// `ResponseEdit`, which the gateway hands over once a stage's verdicts are in. Plugins do
/// not return it; request and response variants share one type only because the adapters
/// read it so (until the formats split, issue 27).
#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    /// `RequestEdit::RemoveDeclaredTools`.
    RemoveDeclaredTools(Vec<String>),
    /// `RequestEdit::StripToolFields`.
    StripToolFields,
    /// `ResponseEdit::ReplaceArguments`.
    ReplaceArguments {
        /// The choice (or output) the call is in.
        choice: u32,
        /// The call's id, `None` for a legacy `function_call`.
        call_id: Option<String>,
        /// The new arguments.
        arguments: String,
    },
}

/// Applies the `ReplaceArguments` edits among `edits` to `calls` (what the client receives),
/// so the audit and `post_response` see the arguments that were delivered.
pub fn replace_arguments(calls: &mut [ToolCall], edits: &[Edit]) {
    for edit in edits {
        if let Edit::ReplaceArguments {
            choice,
            call_id,
            arguments,
        } = edit
        {
            for call in calls
                .iter_mut()
                .filter(|call| call.choice == *choice && call.id == *call_id)
            {
                call.arguments.clone_from(arguments);
            }
        }
    }
}
