//! The plugin crates built into toolgate, one line each. A crate of plugins joins by exporting
//! `factories` (a [`CrateFactories`]) and taking a line here; its dependency line in the root
//! `Cargo.toml` is the other half (docs/writing-a-plugin.md).

use toolgate_plugin::CrateFactories;

/// Every built-in plugin crate, by its `factories` function.
pub(crate) const BUILTIN: &[CrateFactories] = &[
    toolgate_tool_selection::factories,
    toolgate_access_control::factories,
    toolgate_tool_budget::factories,
    toolgate_tool_arguments::factories,
    toolgate_service::factories,
    toolgate_call_limit::factories,
    toolgate_tool_disclosure::factories,
];
