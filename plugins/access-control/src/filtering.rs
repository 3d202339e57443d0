//! What both plugins do with the tools a request may not see: remove them from the declared
//! list, and decide what happens when none is left.

use serde::Deserialize;
use toolgate_plugin::{Check, Rejection, RequestEdit, Verdict, Violation};

/// What to send upstream when every declared tool was removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnEmpty {
    /// Refuse the request (403): the client declared tools and may use none of them.
    Reject,
    /// Forward `tools: []` (some servers accept it; OpenAI does not).
    PassThroughEmpty,
    /// Forward without the tool fields, so the model answers in text. The default.
    #[default]
    StripToolsField,
}

/// The verdict for a request whose declared tools `removed` may not be seen, out of `declared`.
/// `annotations` are kept whatever happens.
pub(crate) fn verdict(
    declared: usize,
    removed: Vec<String>,
    on_empty: OnEmpty,
    check: Check,
    mut edits: Vec<RequestEdit>,
) -> Verdict<RequestEdit> {
    if removed.is_empty() {
        return if edits.is_empty() {
            Verdict::Continue
        } else {
            Verdict::Modify(edits)
        };
    }
    if removed.len() == declared {
        match on_empty {
            OnEmpty::Reject => {
                return Verdict::Block(Rejection::forbidden(vec![Violation::new(
                    check,
                    "no_tools_permitted",
                    format!(
                        "none of the {declared} declared tools may be used by this request: {}",
                        removed.join(", ")
                    ),
                )]));
            }
            OnEmpty::StripToolsField => edits.push(RequestEdit::StripToolFields),
            OnEmpty::PassThroughEmpty => edits.push(RequestEdit::RemoveDeclaredTools(removed)),
        }
    } else {
        edits.push(RequestEdit::RemoveDeclaredTools(removed));
    }
    Verdict::Modify(edits)
}
