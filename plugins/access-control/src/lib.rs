//! toolgate's access-control plugins.
//!
//! - `tool_groups` (seed 000): tools belong to groups and are available in workflow states; a
//!   request names its groups and state (`x-toolgate-group` / `x-toolgate-state`, or a
//!   top-level `toolgate` object), a tenant may name only groups it holds, and the state moves
//!   with every completed call in the conversation whose tool has a `state` transition: derived
//!   from the history the client sends (`state_source = "client"`), or kept by toolgate per
//!   conversation in the state store (`"store"`, recommended: the client cannot forge it).
//! - `tool_permission` (seed 003): allow and deny lists, action types and access levels mapped
//!   to tool categories; denied > allowed > access-level categories > deny.
//!
//! Both read the tool catalog (`[tools.NAME]`) and tenants from the gateway's [`BuildContext`],
//! remove what the model may not see before the request, block calls to it before the response,
//! and answer `GET /tools` (discovery) with the same rules.

mod groups;
mod metrics;
mod permission;
mod selection;
mod workflow;

use std::sync::Arc;

use toolgate_plugin::{FactoryContext, PluginFactory, SettingsError, ToolCatalog, factory};

pub use selection::{CallRef, Selection, Transition};
pub use toolgate_plugin::tool_removal::OnEmpty;

use crate::metrics::AccessMetrics;

/// Both factories, sharing one set of metrics, for the gateway's registry. `tool_groups` runs
/// first in a chain (10): what a request may not see is removed before anything else looks at
/// it; `tool_permission` (20) next.
pub fn factories(context: &mut FactoryContext<'_>) -> Vec<Arc<dyn PluginFactory>> {
    let metrics = Arc::new(AccessMetrics::register(context.metrics));
    let groups_metrics = metrics.clone();
    vec![
        factory(groups::PLUGIN_NAME, 10, move |settings, context| {
            let settings: groups::GroupsSettings = toolgate_plugin::parse_settings(settings)?;
            sound(&context.catalog)?;
            groups_metrics.describe_catalog(&context.catalog);
            Ok(Arc::new(groups::ToolGroups {
                settings,
                catalog: context.catalog.clone(),
                metrics: groups_metrics.clone(),
                store: context.store.clone(),
                store_fail_mode: context.store_fail_mode,
            }))
        }),
        factory(permission::PLUGIN_NAME, 20, move |settings, context| {
            sound(&context.catalog)?;
            Ok(Arc::new(permission::ToolPermission {
                settings: permission::PermissionSettings::parse(settings, context)?,
                catalog: context.catalog.clone(),
                metrics: metrics.clone(),
            }))
        }),
    ]
}

/// Refuses a catalog in which two entries are one tool: which entry's groups, states or
/// category apply would depend on how the model spelled the call. The gateway's loader does not
/// check this itself yet, so both plugins that read the catalog do, and the config fails to load.
fn sound(catalog: &ToolCatalog) -> Result<(), SettingsError> {
    match catalog.collisions() {
        [] => Ok(()),
        collisions => Err(SettingsError::new(
            "",
            collisions
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        )),
    }
}
