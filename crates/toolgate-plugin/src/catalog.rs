//! The tool catalog: what `gateway.toml` says about each tool beyond its schema (groups, the
//! workflow states it is available in, the state it moves to, its category and action type).
//! Plugins that decide access read it; the gateway builds it once per config load. Entries are
//! indexed by their [`ToolKey`], so a call is resolved to its entry however it is cased or padded.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::identity::ToolKey;

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
    /// The name as the config spells it (`[tools.NAME]`).
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
    /// A description for people (the discovery listing shows it).
    pub description: Option<String>,
    /// What progressive disclosure tells the model about the tool besides its declaration.
    pub docs: ToolDocs,
}

/// How costly a call of a tool is, in progressive disclosure's index (seed 003).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CostTier {
    /// Quick and free, or nearly.
    Cheap,
    /// Worth a thought before calling.
    Medium,
    /// Slow, costly or hard to undo: call only when needed.
    Expensive,
}

/// A document about a tool the model fetches by id (seed 003's L3 resource: a guide, a code
/// sample, an example trace), read from a file when the config loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResource {
    /// The id the model asks for it by.
    pub id: String,
    /// Its media type (`text/markdown`, …).
    pub content_type: String,
    /// Its text.
    pub content: String,
}

/// What the catalog adds to a declared tool under progressive disclosure: its index line
/// (`short_description`, `cost_tier`; the category is the tool's own), the extras of its full
/// body (`examples`, `failure_modes`) and its resources.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolDocs {
    /// The index line's description, in place of the declared description's first sentence.
    pub short_description: Option<String>,
    /// The index line's cost tier.
    pub cost_tier: Option<CostTier>,
    /// Example calls or uses, shown with the full body.
    pub examples: Vec<serde_json::Value>,
    /// How calls of the tool fail and what to do then, shown with the full body.
    pub failure_modes: Vec<String>,
    /// The documents the model may fetch.
    pub resources: Vec<ToolResource>,
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
            docs: ToolDocs::default(),
        }
    }

    /// The entry's identity: what calls are resolved to it by.
    pub fn key(&self) -> ToolKey {
        ToolKey::new(&self.name)
    }

    /// Whether the tool may be called in `state` (exact, case-sensitive; `*` matches any).
    pub fn available_in(&self, state: &str) -> bool {
        self.available_in_states
            .iter()
            .any(|allowed| allowed == WILDCARD || allowed == state)
    }
}

/// Two `[tools.NAME]` entries whose names have one key: they would be one tool to every
/// plugin, with two contradicting descriptions, so a config that holds them is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyCollision {
    /// The key both names share.
    pub key: ToolKey,
    /// The entry the catalog kept (the first given).
    pub kept: String,
    /// The entry it dropped.
    pub dropped: String,
}

impl fmt::Display for KeyCollision {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "[tools.{:?}] and [tools.{:?}] are the same tool: tool names are matched trimmed \
             and case-folded (both are '{}'); merge them into one entry",
            self.kept, self.dropped, self.key
        )
    }
}

/// Every tool the config describes, by [`ToolKey`], and the access levels that open their
/// categories (the built-in ones, as `[access_levels.NAME]` overrides or extends them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCatalog {
    tools: BTreeMap<ToolKey, CatalogTool>,
    /// Entries dropped because an earlier one had their key; a loader refuses the config
    /// when this is not empty.
    collisions: Vec<KeyCollision>,
    access_levels: BTreeMap<String, Vec<String>>,
    /// Every group and state the catalog names, indexed once per load so a request never
    /// scans the catalog.
    groups: BTreeSet<String>,
    states: BTreeSet<String>,
}

impl Default for ToolCatalog {
    fn default() -> Self {
        ToolCatalog::new(Vec::new())
    }
}

impl ToolCatalog {
    /// A catalog of `tools` with the built-in access levels. When two entries have one key
    /// the first is kept and the pair is recorded in [`ToolCatalog::collisions`]: a loader
    /// must refuse such a config rather than guess which description was meant.
    pub fn new(tools: impl IntoIterator<Item = CatalogTool>) -> Self {
        let mut indexed: BTreeMap<ToolKey, CatalogTool> = BTreeMap::new();
        let mut collisions = Vec::new();
        for tool in tools {
            match indexed.entry(tool.key()) {
                std::collections::btree_map::Entry::Vacant(slot) => {
                    slot.insert(tool);
                }
                std::collections::btree_map::Entry::Occupied(seen) => {
                    collisions.push(KeyCollision {
                        key: seen.key().clone(),
                        kept: seen.get().name.clone(),
                        dropped: tool.name,
                    });
                }
            }
        }
        let tools = indexed;
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
            collisions,
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

    /// The access levels the config defines (built-in and custom), in name order.
    pub fn access_levels(&self) -> impl Iterator<Item = &str> {
        self.access_levels.keys().map(String::as_str)
    }

    /// The entry of the tool with this key, if the config describes it.
    pub fn get(&self, key: &ToolKey) -> Option<&CatalogTool> {
        self.tools.get(key)
    }

    /// The entry `name` resolves to: the one whose key is `name`'s key.
    pub fn resolve(&self, name: &str) -> Option<&CatalogTool> {
        self.get(&ToolKey::new(name))
    }

    /// Pairs of entries that had one key (see [`ToolCatalog::new`]); empty for a sound catalog.
    pub fn collisions(&self) -> &[KeyCollision] {
        &self.collisions
    }

    /// Whether some tool is in `group` (or it is `default` or `*`).
    pub fn knows_group(&self, group: &str) -> bool {
        self.groups.contains(group)
    }

    /// Whether some tool names `state` (or it is the initial state).
    pub fn knows_state(&self, state: &str) -> bool {
        self.states.contains(state)
    }

    /// Whether the config describes no tool at all.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The entries, in key order.
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
    fn names_groups_and_states_are_indexed_once() {
        let mut tool = CatalogTool::new("Read_File");
        tool.groups = vec!["read".into()];
        tool.transition = Some("analysis".into());
        let catalog = ToolCatalog::new([tool]);
        for spelling in ["Read_File", " read_file ", "READ_FILE"] {
            assert_eq!(
                catalog.resolve(spelling).map(|t| t.name.as_str()),
                Some("Read_File"),
                "{spelling:?}"
            );
        }
        assert!(catalog.resolve("read-file").is_none());
        assert!(catalog.collisions().is_empty());
        assert!(catalog.knows_group("read") && catalog.knows_group("default"));
        assert!(!catalog.knows_group("admin"));
        assert!(catalog.knows_state("analysis") && catalog.knows_state("undefined"));
        assert!(!catalog.knows_state("*"));
    }

    #[test]
    fn two_entries_with_one_key_are_a_recorded_collision() {
        let mut admin = CatalogTool::new("Graph-Update");
        admin.groups = vec!["admin".into()];
        let catalog = ToolCatalog::new([
            admin,
            CatalogTool::new("graph-update "),
            CatalogTool::new("search"),
        ]);
        assert_eq!(catalog.tools().count(), 2);
        assert_eq!(
            catalog.resolve("graph-update").map(|t| t.groups.as_slice()),
            Some(&["admin".to_owned()][..]),
            "the first entry is kept"
        );
        let [collision] = catalog.collisions() else {
            panic!("one collision: {:?}", catalog.collisions());
        };
        assert_eq!(collision.key, ToolKey::new("GRAPH-UPDATE"));
        assert_eq!(
            (collision.kept.as_str(), collision.dropped.as_str()),
            ("Graph-Update", "graph-update ")
        );
        let message = collision.to_string();
        assert!(
            message.contains(r#"[tools."Graph-Update"] and [tools."graph-update "]"#)
                && message.contains("same tool"),
            "{message}"
        );
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
