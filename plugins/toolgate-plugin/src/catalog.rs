//! The tool catalog: what `gateway.toml` says about each tool beyond its schema (groups, the
//! workflow states it is available in, the state it moves to, its category and action type).
//! Plugins that decide access read it; the gateway builds it once per config load.

use std::collections::{BTreeMap, BTreeSet};

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
    /// Indexes built once per load, so a request never scans the catalog: names trimmed and
    /// case-folded to their exact form, and every group and state the catalog names.
    folded_names: BTreeMap<String, String>,
    groups: BTreeSet<String>,
    states: BTreeSet<String>,
}

impl Default for ToolCatalog {
    fn default() -> Self {
        ToolCatalog::new(Vec::new())
    }
}

impl ToolCatalog {
    /// A catalog of `tools` with the built-in access levels.
    pub fn new(tools: impl IntoIterator<Item = CatalogTool>) -> Self {
        let tools: BTreeMap<String, CatalogTool> = tools
            .into_iter()
            .map(|tool| (tool.name.clone(), tool))
            .collect();
        let folded_names = tools
            .keys()
            .map(|name| (fold(name), name.clone()))
            .collect();
        let groups = tools
            .values()
            .flat_map(|tool| tool.groups.iter().cloned())
            .chain([DEFAULT_GROUP.to_owned(), WILDCARD.to_owned()])
            .collect();
        let states = tools
            .values()
            .flat_map(|tool| {
                tool.available_in_states
                    .iter()
                    .chain(tool.transition.as_ref())
                    .cloned()
            })
            .filter(|state| state != WILDCARD)
            .chain([INITIAL_STATE.to_owned()])
            .collect();
        ToolCatalog {
            tools,
            folded_names,
            groups,
            states,
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

    /// The tool's entry by its exact name, else by its name trimmed and case-folded (how
    /// permission lists match names).
    pub fn get_folded(&self, name: &str) -> Option<&CatalogTool> {
        self.get(name).or_else(|| {
            self.folded_names
                .get(&fold(name))
                .and_then(|exact| self.tools.get(exact))
        })
    }

    /// Whether some tool is in `group` (or it is `default` or `*`).
    pub fn knows_group(&self, group: &str) -> bool {
        self.groups.contains(group)
    }

    /// Whether some tool names `state` (or it is the initial state).
    pub fn knows_state(&self, state: &str) -> bool {
        self.states.contains(state)
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    pub fn tools(&self) -> impl Iterator<Item = &CatalogTool> {
        self.tools.values()
    }
}

fn fold(name: &str) -> String {
    name.trim().to_lowercase()
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
    fn names_groups_and_states_are_indexed_once() {
        let mut tool = CatalogTool::new("Read_File");
        tool.groups = vec!["read".into()];
        tool.transition = Some("analysis".into());
        let catalog = ToolCatalog::new([tool]);
        assert_eq!(
            catalog.get_folded(" read_file ").map(|t| t.name.as_str()),
            Some("Read_File")
        );
        assert!(catalog.knows_group("read") && catalog.knows_group("default"));
        assert!(!catalog.knows_group("admin"));
        assert!(catalog.knows_state("analysis") && catalog.knows_state("undefined"));
        assert!(!catalog.knows_state("*"));
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
