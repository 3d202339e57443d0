//! A tool's identity for policy: the one key every policy plugin resolves a tool name to before
//! it looks the tool up in the catalog, matches it against a permission list, a group or state
//! entry, a budget, an argument rule or a service's scope. Built in one place, so `Graph-Update`,
//! `graph-update` and ` graph-update ` are one tool in every plugin, and a denied or budgeted
//! tool cannot be walked around by changing its case or padding its name.

use std::fmt;

/// A tool name trimmed and case-folded: what policy compares, counts and looks up.
///
/// tool_selection's membership check deliberately compares exact names instead, because a
/// client SDK dispatches a call by the exact name it declared: a call to `Graph-Update` when
/// `graph-update` was declared is undeclared there, even though policy treats both as one tool.
///
/// There is no `Borrow<str>` impl on purpose: a map keyed by `ToolKey` cannot be probed with a
/// raw name by accident, so every lookup goes through [`ToolKey::new`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolKey(String);

impl ToolKey {
    /// The key of `name`: surrounding whitespace removed, then lowercased (Unicode-aware, the
    /// same folding the plugin API's `ToolPattern` applies to its patterns).
    pub fn new(name: &str) -> ToolKey {
        ToolKey(name.trim().to_lowercase())
    }

    /// The folded name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ToolKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_and_surrounding_whitespace_do_not_change_the_key() {
        let key = ToolKey::new("graph-update");
        for variant in [
            "Graph-Update",
            " graph-update",
            "GRAPH-UPDATE\t",
            "\n gRaPh-UpDaTe  ",
        ] {
            assert_eq!(ToolKey::new(variant), key, "{variant:?}");
        }
        assert_eq!(key.as_str(), "graph-update");
        assert_eq!(key.to_string(), "graph-update");
    }

    #[test]
    fn different_tools_keep_different_keys() {
        // Inner characters are the name: only the edges are trimmed, and `-` is not `_`.
        assert_ne!(ToolKey::new("graph-update"), ToolKey::new("graph_update"));
        assert_ne!(ToolKey::new("graph update"), ToolKey::new("graphupdate"));
        assert_ne!(ToolKey::new("graph-update"), ToolKey::new("graph-update2"));
    }

    #[test]
    fn folding_is_unicode_aware() {
        assert_eq!(ToolKey::new("ÜBERSETZEN"), ToolKey::new("übersetzen"));
        // Non-breaking and ideographic spaces are whitespace too.
        assert_eq!(ToolKey::new("\u{a0}pay\u{3000}"), ToolKey::new("pay"));
    }
}
