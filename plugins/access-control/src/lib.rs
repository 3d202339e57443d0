//! toolgate's access-control plugins.
//!
//! - `tool_groups` (seed 000): tools belong to groups and are available in workflow states; a
//!   request names its groups and state (`x-toolgate-group` / `x-toolgate-state`, or a
//!   top-level `toolgate` object), a tenant may name only groups it holds, and the state moves
//!   with every completed call in the conversation whose tool has a `state` transition.
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

use std::sync::Arc;

use toolgate_plugin::{
    BuildContext, FactoryContext, Plugin, PluginFactory, SettingsError, ToolCatalog,
};

pub use toolgate_plugin::tool_removal::OnEmpty;
pub use selection::{Selection, Transition};

use crate::metrics::AccessMetrics;

/// Builds `tool_groups` plugins. Runs first in a chain: what a request may not see is removed
/// before anything else looks at it.
pub struct ToolGroupsFactory {
    metrics: Arc<AccessMetrics>,
}

/// Builds `tool_permission` plugins.
pub struct ToolPermissionFactory {
    metrics: Arc<AccessMetrics>,
}

/// Both factories, sharing one set of metrics, for the gateway's registry.
pub fn factories(context: &mut FactoryContext<'_>) -> Vec<Arc<dyn PluginFactory>> {
    let metrics = Arc::new(AccessMetrics::register(context.metrics));
    vec![
        Arc::new(ToolGroupsFactory {
            metrics: metrics.clone(),
        }),
        Arc::new(ToolPermissionFactory { metrics }),
    ]
}

impl PluginFactory for ToolGroupsFactory {
    fn name(&self) -> &'static str {
        groups::PLUGIN_NAME
    }

    fn default_priority(&self) -> i32 {
        10
    }

    fn build(
        &self,
        settings: &serde_json::Value,
        context: &BuildContext,
    ) -> Result<Arc<dyn Plugin>, SettingsError> {
        let settings: groups::GroupsSettings = toolgate_plugin::parse_settings(settings)?;
        sound(&context.catalog)?;
        self.metrics.describe_catalog(&context.catalog);
        Ok(Arc::new(groups::ToolGroups {
            settings,
            catalog: context.catalog.clone(),
            metrics: self.metrics.clone(),
        }))
    }
}

impl PluginFactory for ToolPermissionFactory {
    fn name(&self) -> &'static str {
        permission::PLUGIN_NAME
    }

    fn default_priority(&self) -> i32 {
        20
    }

    fn build(
        &self,
        settings: &serde_json::Value,
        context: &BuildContext,
    ) -> Result<Arc<dyn Plugin>, SettingsError> {
        sound(&context.catalog)?;
        Ok(Arc::new(permission::ToolPermission {
            settings: permission::PermissionSettings::parse(settings, context)?,
            catalog: context.catalog.clone(),
            metrics: self.metrics.clone(),
        }))
    }
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
