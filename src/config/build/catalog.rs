//! `[tools.NAME]`: the tool catalog (groups, states, categories, action types, schemas).

use toolgate_plugin::{CatalogTool, ToolCatalog, ToolDocs, ToolResource};
use toolgate_plugin::{directives, taxonomy};

use super::super::source::{ConfigError, KeyPath, Source};
use super::super::{RawConfig, RawTool};

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
        tool.docs = tool_docs(entry, &tool_path, source, errors);
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

/// The longest index line a tool may give itself: the index must stay short for every tool.
const MAX_SHORT_DESCRIPTION: usize = 200;

/// What progressive disclosure adds to the tool: its index line, the extras of its body and
/// its resources, each resource's file read now (a missing file is a config error, not a
/// model's failed lookup later).
fn tool_docs(
    entry: &RawTool,
    tool_path: &KeyPath,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) -> ToolDocs {
    if let Some(short) = &entry.short_description
        && short.chars().count() > MAX_SHORT_DESCRIPTION
    {
        errors.push(source.error_at_key(
            &tool_path.clone().key("short_description"),
            format!("a short description is at most {MAX_SHORT_DESCRIPTION} characters"),
        ));
    }
    let mut resources: Vec<ToolResource> = Vec::new();
    for (index, resource) in entry.resources.iter().enumerate() {
        let path = tool_path.clone().key("resources").index(index);
        if resources.iter().any(|known| known.id == resource.id) || resource.id.is_empty() {
            errors.push(source.error_at_key(
                &path.clone().key("id"),
                format!("resource id '{}' is empty or used twice", resource.id),
            ));
            continue;
        }
        let file = source.relative_path(&resource.file);
        match std::fs::read_to_string(&file) {
            Ok(content) => resources.push(ToolResource {
                id: resource.id.clone(),
                content_type: resource
                    .content_type
                    .clone()
                    .unwrap_or_else(|| content_type_of(&resource.file).to_owned()),
                content,
            }),
            Err(error) => errors.push(source.error_at_key(
                &path.key("file"),
                format!("cannot read '{}': {error}", file.display()),
            )),
        }
    }
    ToolDocs {
        short_description: entry.short_description.clone(),
        cost_tier: entry.cost_tier,
        examples: entry
            .examples
            .iter()
            .filter_map(|example| serde_json::to_value(example).ok())
            .collect(),
        failure_modes: entry.failure_modes.clone(),
        resources,
    }
}

/// A resource's media type by its file's extension.
fn content_type_of(file: &str) -> &'static str {
    let extension = file.rsplit_once('.').map(|(_, extension)| extension);
    match extension.map(str::to_ascii_lowercase).as_deref() {
        Some("md" | "markdown") => "text/markdown",
        Some("json") => "application/json",
        Some("jsonl") => "application/jsonl",
        Some("py") => "text/x-python",
        Some("rs") => "text/x-rust",
        Some("js" | "mjs") => "text/javascript",
        Some("ts") => "text/typescript",
        Some("sh") => "text/x-shellscript",
        Some("yaml" | "yml") => "application/yaml",
        Some("toml") => "application/toml",
        _ => "text/plain",
    }
}
