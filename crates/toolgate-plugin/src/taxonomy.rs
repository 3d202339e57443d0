//! The permission vocabulary of seed 003: tool categories, the `category:action` action types,
//! and the built-in access levels with the categories each one opens. The config loader checks
//! every name against these lists, so a typo is a load error and never a silent widening.

/// Tool categories, in snake_case as they are written in `gateway.toml`, in the order the
/// built-in access levels open them: each level opens a prefix of this list.
pub const CATEGORIES: &[&str] = &[
    "file_system",
    "code_execution",
    "version_control",
    "memory",
    // restricted
    "web",
    "analytics",
    "design",
    "browser",
    // standard
    "database",
    "terminal",
    "communication",
    "external_data",
    "desktop",
    "mcp",
    // elevated
    "deployment",
];

/// The built-in action types, `category:action`.
pub const ACTION_TYPES: &[&str] = &[
    "code:read",
    "code:write",
    "code:create",
    "code:delete",
    "code:refactor",
    "test:write",
    "test:run",
    "docs:write",
    "vcs:read",
    "vcs:commit",
    "vcs:push",
    "vcs:branch",
    "deploy:staging",
    "deploy:production",
    "comms:internal",
    "comms:external",
    "budget:spend",
    "budget:exceed",
    "org:hire",
    "org:fire",
    "org:promote",
    "db:query",
    "db:mutate",
    "db:admin",
    "arch:decide",
    "tool:create",
    "memory:read",
    "knowledge:ingest",
    "knowledge:reindex",
    "browser:navigate",
    "browser:screenshot",
    "browser:diff",
    "browser:accessibility_scan",
    "browser:spec",
    "external_data:request",
    "desktop:launch",
    "desktop:click",
    "desktop:type",
    "desktop:key",
    "desktop:screenshot",
    "desktop:scroll",
];

/// The built-in access levels, lowest first, with the categories each opens. Each level opens
/// what the one below it does and more; `custom` opens nothing until the config defines it.
pub const ACCESS_LEVELS: &[(&str, &[&str])] = &[
    ("sandboxed", CATEGORIES.split_at(4).0),
    ("restricted", CATEGORIES.split_at(8).0),
    ("standard", CATEGORIES.split_at(14).0),
    ("elevated", CATEGORIES),
    ("custom", &[]),
];

/// Whether `name` is one of [`CATEGORIES`].
pub fn is_category(name: &str) -> bool {
    CATEGORIES.contains(&name)
}

/// Whether `name` is one of [`ACTION_TYPES`].
pub fn is_action_type(name: &str) -> bool {
    ACTION_TYPES.contains(&name)
}

/// Whether `name` is an action category usable as a shortcut (`db` for every `db:*`).
pub fn is_action_category(name: &str) -> bool {
    ACTION_TYPES.iter().any(|action| {
        action
            .split_once(':')
            .is_some_and(|(category, _)| category == name)
    })
}

/// Whether an action-type entry (`db:query`, or the shortcut `db`) covers `action`.
pub fn action_matches(entry: &str, action: &str) -> bool {
    entry == action
        || action
            .split_once(':')
            .is_some_and(|(category, _)| category == entry)
}

/// The categories a built-in access level opens.
pub fn builtin_level(name: &str) -> Option<&'static [&'static str]> {
    ACCESS_LEVELS
        .iter()
        .find(|(level, _)| *level == name)
        .map(|(_, categories)| *categories)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_opens_only_known_categories_and_levels_nest() {
        let mut previous: &[&str] = &[];
        for (level, categories) in ACCESS_LEVELS.iter().filter(|(name, _)| *name != "custom") {
            assert!(categories.iter().all(|c| is_category(c)), "{level}");
            assert!(
                previous.iter().all(|c| categories.contains(c)),
                "{level} narrows"
            );
            previous = categories;
        }
        assert_eq!(ACTION_TYPES.len(), 41);
    }

    #[test]
    fn shortcuts_cover_their_category_only() {
        assert!(action_matches("db", "db:mutate"));
        assert!(action_matches("db:mutate", "db:mutate"));
        assert!(!action_matches("db:query", "db:mutate"));
        assert!(!action_matches("d", "db:mutate"));
        assert!(is_action_category("external_data"));
        assert!(!is_action_category("database"));
    }
}
