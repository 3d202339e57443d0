//! The one rule for a plugin that removes declared tools before the request goes upstream:
//! remove them by name, and when none is left, do what `on_empty` says — never send
//! `"tools": []` unless asked to, since most upstreams (OpenAI's among them) refuse it.
//! tool_groups, tool_permission and tool_budget's `strip` decide through [`verdict`]; a
//! validator service's `remove_tools` through [`removal`], with the default `on_empty`.

use serde::Deserialize;

use crate::tool::DeclaredTool;
use crate::verdict::{Check, Rejection, RequestEdit, Verdict, Violation};

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

/// The verdict for a request declaring `declared` of which `removed` (names as the body spells
/// them) may not be seen; `edits` (annotations, headers) are kept whatever happens.
pub fn verdict(
    declared: &[DeclaredTool],
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
    let named = removed.join(", ");
    let names = declared.iter().map(|tool| tool.name.as_str());
    match removal(names, removed, on_empty) {
        Some(edit) => {
            edits.push(edit);
            Verdict::Modify(edits)
        }
        None => Verdict::Block(Rejection::forbidden(vec![Violation::new(
            check,
            "no_tools_permitted",
            format!(
                "none of the {} declared tools may be used by this request: {named}",
                declared.len(),
            ),
        )])),
    }
}

/// The edit that removes `removed` (non-empty) from a request declaring `declared`: the removal
/// itself, or what `on_empty` says when it leaves nothing; `None` when that is to refuse.
pub fn removal<'a>(
    declared: impl IntoIterator<Item = &'a str>,
    removed: Vec<String>,
    on_empty: OnEmpty,
) -> Option<RequestEdit> {
    // Compared by name, not by count: a name declared twice goes with one removal. A request
    // that declares nothing has nothing to empty.
    let mut declared = declared.into_iter().peekable();
    let empties =
        declared.peek().is_some() && declared.all(|name| removed.iter().any(|gone| gone == name));
    if !empties {
        return Some(RequestEdit::RemoveDeclaredTools(removed));
    }
    match on_empty {
        OnEmpty::Reject => None,
        OnEmpty::StripToolsField => Some(RequestEdit::StripToolFields),
        OnEmpty::PassThroughEmpty => Some(RequestEdit::RemoveDeclaredTools(removed)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| (*name).to_owned()).collect()
    }

    /// The edits of a `Modify`, `None` for any other verdict.
    fn edits(verdict: Verdict<RequestEdit>) -> Option<Vec<RequestEdit>> {
        match verdict {
            Verdict::Modify(edits) => Some(edits),
            _ => None,
        }
    }

    #[test]
    fn emptying_the_list_follows_on_empty_and_a_partial_removal_removes() {
        let declared = ["pay", "search", "pay"].map(|name| DeclaredTool::function(name, None));
        let all = || names(&["search", "pay"]);
        let with = |removed, on_empty| verdict(&declared, removed, on_empty, Check::Budget, vec![]);
        assert_eq!(
            edits(with(all(), OnEmpty::StripToolsField)),
            Some(vec![RequestEdit::StripToolFields])
        );
        assert_eq!(
            edits(with(all(), OnEmpty::PassThroughEmpty)),
            Some(vec![RequestEdit::RemoveDeclaredTools(all())])
        );
        assert!(matches!(with(all(), OnEmpty::Reject), Verdict::Block(_)));
        assert_eq!(
            edits(with(names(&["pay"]), OnEmpty::Reject)),
            Some(vec![RequestEdit::RemoveDeclaredTools(names(&["pay"]))])
        );
        assert!(matches!(with(vec![], OnEmpty::Reject), Verdict::Continue));
    }
}
