//! Catalog and permission settings as an operator writes them: typos are located load errors,
//! and two catalog entries that name one tool (by case or spaces) are refused.

use crate::common::answers::{assert_contains_all, config_errors};

#[test]
fn catalog_and_permission_typos_are_located_load_errors() {
    let plugins = toolgate::PluginRegistry::builtin(&mut Default::default());
    let text = "[upstreams.llm]\nurl = \"http://127.0.0.1:1\"\n\n\
                [tools.a]\ncategory = \"databse\"\naction = \"db:drop\"\ngrups = [\"x\"]\n\n\
                [tenants.t]\napi_keys = [\"k\"]\naccess_level = \"root\"\n\n\
                [access_levels.ops]\ncategories = [\"deploy\"]\n\n\
                [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n\
                [[routes.plugins]]\nname = \"tool_permission\"\n[routes.plugins.settings]\ndeny_actions = [\"db:drop\"]\n";
    let errors = config_errors(text, "g.toml", &plugins);
    // An unknown key stops the parse first, with its location.
    assert!(
        errors.contains("g.toml:7:1") && errors.contains("grups"),
        "{errors}"
    );

    let text = text.replace("grups = [\"x\"]\n", "");
    assert_contains_all(
        &config_errors(&text, "g.toml", &plugins),
        [
            "g.toml:5:1: tools.a.category: unknown category 'databse'",
            "g.toml:6:1: tools.a.action: unknown action type 'db:drop'",
            "tenants.t.access_level: unknown access level 'root'",
            "access_levels.ops.categories[0]: unknown category 'deploy'",
            "routes[0].plugins[0].settings.deny_actions[0]: unknown action type 'db:drop'",
        ],
    );
}

#[test]
fn two_catalog_entries_that_are_one_tool_are_a_load_error() {
    let plugins = toolgate::PluginRegistry::builtin(&mut Default::default());
    let text = "[upstreams.llm]\nurl = \"http://127.0.0.1:1\"\n\n\
                [tools.\"Graph-Update\"]\ngroups = [\"admin\"]\n\n\
                [tools.\"graph-update \"]\ngroups = [\"basic\"]\n\n\
                [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n\
                [[routes.plugins]]\nname = \"tool_groups\"\n";
    let errors = config_errors(text, "g.toml", &plugins);
    assert!(
        errors.contains(r#"[tools."Graph-Update"] and [tools."graph-update "] are the same tool"#),
        "{errors}"
    );
    // One entry per tool loads.
    let single = text.replace("[tools.\"graph-update \"]\ngroups = [\"basic\"]\n\n", "");
    assert!(toolgate::Config::from_toml(&single, "g.toml", &plugins).is_ok());
}
