//! `[tools.NAME]`: the tool catalog (groups, states, categories, action types, schemas).

use toolgate_plugin::{CatalogTool, ToolCatalog};
use toolgate_plugin::{directives, taxonomy};

use super::super::RawConfig;
use super::super::source::{ConfigError, KeyPath, Source};

/// The error for a category the taxonomy does not know, naming the ones it does.
fn unknown_category(category: &str) -> String {
    format!(
        "unknown category '{category}' (one of: {})",
        taxonomy::CATEGORIES.join(", ")
    )
}

/// `[tools.NAME]` into the catalog. Names, groups and states are exact and case-sensitive, so
/// only what could never match (an empty string) is refused here.
pub(super) fn build_catalog(
    raw: &RawConfig,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) -> ToolCatalog {
    let mut tools = Vec::new();
    for (name, entry) in &raw.tools {
        let tool_path = KeyPath::default().key("tools").key(name);
        let mut tool = CatalogTool::new(name.clone());
        if let Some(groups) = &entry.groups {
            tool.groups = if groups.is_empty() {
                vec![toolgate_plugin::catalog::DEFAULT_GROUP.to_owned()]
            } else {
                groups.clone()
            };
        }
        if let Some(states) = &entry.available_in_states {
            tool.available_in_states = states.clone();
        }
        tool.transition = entry.state.clone();
        tool.category = entry.category.clone();
        tool.action = entry.action.clone();
        tool.description = entry.description.clone();
        // A name no request could carry in a header (or that a comma would split) would make
        // the tool unreachable by group or state: refused here rather than never matched.
        let transition = tool.transition.iter().cloned().collect::<Vec<_>>();
        for (key, values, wildcard_allowed) in [
            ("groups", &tool.groups, false),
            ("available_in_states", &tool.available_in_states, true),
            ("state", &transition, false),
        ] {
            let unnamable = values.iter().find(|value| {
                let wildcard = value.as_str() == toolgate_plugin::catalog::WILDCARD;
                (wildcard && !wildcard_allowed) || !directives::is_valid_name(value)
            });
            if let Some(name) = unnamable {
                errors.push(source.error_at_key(
                    &tool_path.clone().key(key),
                    format!(
                        "'{}' is not a name a request can give: use 1-64 of A-Z a-z 0-9 _ . : -{}",
                        name.escape_debug(),
                        if wildcard_allowed { " (or *)" } else { "" }
                    ),
                ));
            }
        }
        if let Some(category) = &tool.category
            && !taxonomy::is_category(category)
        {
            let category_path = tool_path.clone().key("category");
            errors.push(source.error_at_key(&category_path, unknown_category(category)));
        }
        if let Some(action) = &tool.action
            && !taxonomy::is_action_type(action)
        {
            errors.push(source.error_at_key(
                &tool_path.clone().key("action"),
                format!(
                    "unknown action type '{action}' (write category:action, one of: {})",
                    taxonomy::ACTION_TYPES.join(", ")
                ),
            ));
        }
        tools.push(tool);
    }
    let mut catalog = ToolCatalog::new(tools);
    // Every plugin means a tool by its trimmed, case-folded key: two entries with one key would
    // be one tool with two policies, whichever plugin runs.
    for collision in catalog.collisions() {
        let path = KeyPath::default().key("tools").key(&collision.dropped);
        errors.push(source.error_at_key(&path, collision.to_string()));
    }
    for (level, entry) in &raw.access_levels {
        for (index, category) in entry.categories.iter().enumerate() {
            if !taxonomy::is_category(category) {
                let path = KeyPath::default()
                    .key("access_levels")
                    .key(level)
                    .key("categories")
                    .index(index);
                errors.push(source.error_at_key(&path, unknown_category(category)));
            }
        }
        catalog = catalog.with_access_level(level.clone(), entry.categories.clone());
    }
    for (name, tenant) in &raw.tenants {
        // A group no tool is in (nor `default`, nor `*`) is a typo: the tenant could never be
        // offered a tool through it.
        for (index, group) in tenant.groups.iter().enumerate() {
            if !catalog.knows_group(group) {
                let path = KeyPath::default()
                    .key("tenants")
                    .key(name)
                    .key("groups")
                    .index(index);
                errors.push(source.error_at_key(
                    &path,
                    format!("unknown group '{group}': no [tools.NAME] is in it (groups are named by the tools' `groups`; `default` and `*` always exist)"),
                ));
            }
        }
        if let Some(level) = &tenant.access_level
            && catalog.access_level(level).is_none()
        {
            let path = KeyPath::default()
                .key("tenants")
                .key(name)
                .key("access_level");
            errors.push(source.error_at_key(
                &path,
                format!(
                    "unknown access level '{level}' (one of: {}; define more in [access_levels.NAME])",
                    catalog.access_levels().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    catalog
}
