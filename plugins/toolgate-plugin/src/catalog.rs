//! The tool catalog: what `gateway.toml` says about each tool beyond its schema (groups, the
//! workflow states it is available in, the state it moves to, its category and action type).
//! Plugins that decide access read it; the gateway builds it once per config load.

use std::collections::BTreeMap;

/// The group a tool belongs to when the catalog names none, and the group a request asks for
/// when it names none (seed 000).
pub const DEFAULT_GROUP: &str = "default";

/// The state a conversation starts in when the request names none (seed 000).
pub const INITIAL_STATE: &str = "undefined";

/// Matches every group (in a request) or every state (in a tool's list).
pub const WILDCARD: &str = "*";

/// One tool's entry, `[tools.NAME]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogTool {
    pub name: String,
    /// Never empty: a tool the config puts in no group is in [`DEFAULT_GROUP`].
    pub groups: Vec<String>,
    /// The states the tool may be called in; `["*"]` when the config names none.
    pub available_in_states: Vec<String>,
    /// The state a successful call moves the conversation to.
    pub transition: Option<String>,
    /// The permission category (`file_system`, `database`, …), validated at load.
    pub category: Option<String>,
    /// The action type, `category:action`, validated at load.
    pub action: Option<String>,
    pub description: Option<String>,
}

impl CatalogTool {
    /// An entry with the defaults the seeds give a tool the config says nothing about.
    pub fn new(name: impl Into<String>) -> Self {
        CatalogTool {
            name: name.into(),
            groups: vec![DEFAULT_GROUP.to_owned()],
            available_in_states: vec![WILDCARD.to_owned()],
            transition: None,
            category: None,
            action: None,
            description: None,
        }
    }

    /// Whether the tool may be called in `state` (exact, case-sensitive; `*` matches any).
    pub fn available_in(&self, state: &str) -> bool {
        self.available_in_states
            .iter()
            .any(|allowed| allowed == WILDCARD || allowed == state)
    }
}

/// Every tool the config describes, by exact name, and the access levels that open their
/// categories (the built-in ones, as `[access_levels.NAME]` overrides or extends them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCatalog {
    tools: BTreeMap<String, CatalogTool>,
    access_levels: BTreeMap<String, Vec<String>>,
}

impl Default for ToolCatalog {
    fn default() -> Self {
        ToolCatalog::new(Vec::new())
    }
}

impl ToolCatalog {
    /// A catalog of `tools` with the built-in access levels.
    pub fn new(tools: impl IntoIterator<Item = CatalogTool>) -> Self {
        ToolCatalog {
            tools: tools
                .into_iter()
                .map(|tool| (tool.name.clone(), tool))
                .collect(),
            access_levels: crate::taxonomy::ACCESS_LEVELS
                .iter()
                .map(|(level, categories)| {
                    (
                        (*level).to_owned(),
                        categories.iter().map(|c| (*c).to_owned()).collect(),
                    )
                })
                .collect(),
        }
    }

    /// Defines or redefines an access level.
    pub fn with_access_level(mut self, level: impl Into<String>, categories: Vec<String>) -> Self {
        self.access_levels.insert(level.into(), categories);
        self
    }

    /// The categories an access level opens; `None` for a level nobody defined.
    pub fn access_level(&self, level: &str) -> Option<&[String]> {
        self.access_levels.get(level).map(Vec::as_slice)
    }

    pub fn access_levels(&self) -> impl Iterator<Item = &str> {
        self.access_levels.keys().map(String::as_str)
    }

    /// The tool's entry, if the config describes it.
    pub fn get(&self, name: &str) -> Option<&CatalogTool> {
        self.tools.get(name)
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    pub fn tools(&self) -> impl Iterator<Item = &CatalogTool> {
        self.tools.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_the_config_is_silent_about_is_in_the_default_group_and_every_state() {
        let tool = CatalogTool::new("search");
        assert_eq!(tool.groups, ["default"]);
        assert!(tool.available_in("undefined"));
        assert!(tool.available_in("analysis"));
    }

    #[test]
    fn states_match_exactly() {
        let mut tool = CatalogTool::new("report");
        tool.available_in_states = vec!["results".into()];
        assert!(tool.available_in("results"));
        assert!(!tool.available_in("Results"));
        assert!(!tool.available_in("undefined"));
    }
}
