//! Tool-name patterns, the one matcher every plugin uses for "the tools this applies to":
//! `*` and `?` wildcards and `[…]` classes, matched against a name's [`ToolKey`] (trimmed and
//! case-folded), so `Delete_*` in a config catches a model's `delete_user ` as seed 003 asks.

use std::fmt;

use glob::{MatchOptions, Pattern};

use crate::identity::ToolKey;

/// A compiled tool-name pattern.
#[derive(Clone)]
pub struct ToolPattern {
    text: String,
    /// The text folded the way tool names are, so two spellings of one pattern compare equal.
    folded: ToolKey,
    pattern: Pattern,
}

const OPTIONS: MatchOptions = MatchOptions {
    case_sensitive: false,
    require_literal_separator: false,
    require_literal_leading_dot: false,
};

impl ToolPattern {
    /// Compiles a pattern; the error says what is wrong with it.
    pub fn new(text: &str) -> Result<ToolPattern, String> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err("a tool pattern must not be empty".to_owned());
        }
        // Folded with the tool names' own function, so a literal pattern matches exactly the
        // names whose key it is.
        let folded = ToolKey::new(trimmed);
        let pattern = Pattern::new(folded.as_str())
            .map_err(|error| format!("'{trimmed}' is not a valid tool pattern: {error}"))?;
        Ok(ToolPattern {
            text: trimmed.to_owned(),
            folded,
            pattern,
        })
    }

    /// Compiles a list, reporting the index of the first bad entry.
    pub fn list(texts: &[String]) -> Result<Vec<ToolPattern>, (usize, String)> {
        texts
            .iter()
            .enumerate()
            .map(|(index, text)| ToolPattern::new(text).map_err(|error| (index, error)))
            .collect()
    }

    /// Whether `name`'s key matches. A plugin that matches one name against several patterns
    /// builds the key once and calls [`ToolPattern::matches_key`].
    pub fn matches(&self, name: &str) -> bool {
        self.matches_key(&ToolKey::new(name))
    }

    /// Whether a tool with this key matches.
    pub fn matches_key(&self, key: &ToolKey) -> bool {
        self.pattern.matches_with(key.as_str(), OPTIONS)
    }

    /// The pattern as written (trimmed), for messages.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The pattern trimmed and case-folded: two patterns with the same folded text cover the
    /// same tools, whatever case they were written in.
    pub fn folded(&self) -> &str {
        self.folded.as_str()
    }
}

impl fmt::Debug for ToolPattern {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "ToolPattern({:?})", self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_matched_trimmed_and_case_folded() {
        let pattern = ToolPattern::new(" Delete_* ").expect("valid");
        assert!(pattern.matches("delete_user"));
        assert!(pattern.matches("  DELETE_USER "));
        assert!(!pattern.matches("undelete_user"));
        assert_eq!(pattern.as_str(), "Delete_*");
        assert_eq!(pattern.folded(), "delete_*");
        assert!(pattern.matches_key(&ToolKey::new("Delete_Account")));
    }

    #[test]
    fn wildcards_cover_separators_and_single_characters() {
        let pattern = ToolPattern::new("fs/read?").expect("valid");
        assert!(pattern.matches("fs/reads"));
        assert!(!pattern.matches("fs/read"));
        assert!(
            ToolPattern::new("*")
                .expect("valid")
                .matches("server__tool.name")
        );
    }

    #[test]
    fn bad_patterns_are_refused_with_their_index() {
        assert!(ToolPattern::new("  ").is_err());
        let error = ToolPattern::list(&["ok".into(), "[unclosed".into()]).expect_err("bad");
        assert_eq!(error.0, 1);
        assert!(error.1.contains("[unclosed"), "{}", error.1);
    }
}
