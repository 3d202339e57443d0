//! The tool_permission plugin (seed 003): a tool may be used when no deny rule names it and an
//! allow rule does, or, failing both, when its category is open to the access level. Denied
//! beats allowed beats access level beats the default, deny. A tool is decided by its
//! [`ToolKey`] (trimmed, case-folded): its catalog entry and every list see one identity. Before the request the model is shown only permitted tools; before the
//! response a call to any other tool is blocked with the reason in words.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use toolgate_plugin::{
    AvailabilityQuery, BodyNeeds, BuildContext, Check, Plugin, Rejection, RequestEdit,
    RequestExchange, ResponseEdit, ResponseExchange, SettingsError, Tenant, ToolCatalog, ToolKey,
    ToolPattern, Verdict, Violation, taxonomy,
};

use crate::metrics::{AccessMetrics, DenialLabels};
use toolgate_plugin::tool_removal::{self, OnEmpty};

pub const PLUGIN_NAME: &str = "tool_permission";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSettings {
    /// The level for requests whose tenant names none (or that have no tenant).
    #[serde(default)]
    access_level: Option<String>,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    /// Action types (`db:query`) or their category shortcuts (`db`).
    #[serde(default)]
    allow_actions: Vec<String>,
    #[serde(default)]
    deny_actions: Vec<String>,
    #[serde(default)]
    on_empty: OnEmpty,
}

/// The route's rules, compiled.
pub(crate) struct PermissionSettings {
    access_level: Option<String>,
    allow: Vec<ToolPattern>,
    deny: Vec<ToolPattern>,
    allow_actions: Vec<String>,
    deny_actions: Vec<String>,
    on_empty: OnEmpty,
    /// Each tenant's own lists, compiled once per load.
    tenants: BTreeMap<String, TenantRules>,
}

#[derive(Default)]
struct TenantRules {
    allow: Vec<ToolPattern>,
    deny: Vec<ToolPattern>,
}

impl PermissionSettings {
    pub fn parse(
        settings: &serde_json::Value,
        context: &BuildContext,
    ) -> Result<Self, SettingsError> {
        let raw: RawSettings = toolgate_plugin::parse_settings(settings)?;
        if let Some(level) = &raw.access_level
            && context.catalog.access_level(level).is_none()
        {
            return Err(SettingsError::new(
                "access_level",
                format!(
                    "unknown access level '{level}' (one of: {})",
                    context
                        .catalog
                        .access_levels()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        let patterns = |key: &str, texts: &[String]| {
            ToolPattern::list(texts)
                .map_err(|(index, message)| SettingsError::new(format!("{key}[{index}]"), message))
        };
        let actions = |key: &str, texts: &[String]| -> Result<Vec<String>, SettingsError> {
            for (index, text) in texts.iter().enumerate() {
                if !taxonomy::is_action_type(text) && !taxonomy::is_action_category(text) {
                    return Err(SettingsError::new(
                        format!("{key}[{index}]"),
                        format!(
                            "unknown action type '{text}' (write category:action like db:query, or a category like db)"
                        ),
                    ));
                }
            }
            Ok(texts.to_vec())
        };
        let mut tenants = BTreeMap::new();
        for (name, tenant) in context.tenants.iter() {
            let compile = |key: &str, texts: &[String]| {
                ToolPattern::list(texts).map_err(|(index, message)| {
                    SettingsError::new("", format!("tenant '{name}': {key}[{index}]: {message}"))
                })
            };
            tenants.insert(
                name.clone(),
                TenantRules {
                    allow: compile("allowed_tools", &tenant.allowed_tools)?,
                    deny: compile("denied_tools", &tenant.denied_tools)?,
                },
            );
        }
        Ok(PermissionSettings {
            access_level: raw.access_level,
            allow: patterns("allow", &raw.allow)?,
            deny: patterns("deny", &raw.deny)?,
            allow_actions: actions("allow_actions", &raw.allow_actions)?,
            deny_actions: actions("deny_actions", &raw.deny_actions)?,
            on_empty: raw.on_empty,
            tenants,
        })
    }
}

/// The first pattern, of the route's list and then the tenant's, that names the tool `key`.
fn named_by<'p>(
    route: &'p [ToolPattern],
    tenant: &'p [ToolPattern],
    key: &ToolKey,
) -> Option<&'p ToolPattern> {
    route
        .iter()
        .chain(tenant)
        .find(|pattern| pattern.matches_key(key))
}

/// The first action-type entry (`db:query`, or the shortcut `db`) that covers `action`.
fn covering<'e>(entries: &'e [String], action: &str) -> Option<&'e String> {
    entries
        .iter()
        .find(|entry| taxonomy::action_matches(entry, action))
}

/// The decision on one tool, with the rule that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    Permitted(String),
    Denied(String),
}

pub(crate) struct ToolPermission {
    pub settings: PermissionSettings,
    pub catalog: Arc<ToolCatalog>,
    pub metrics: Arc<AccessMetrics>,
}

impl ToolPermission {
    /// Resolves one tool for a tenant: denied > allowed > access-level categories > deny.
    pub(crate) fn decide(&self, tool: &str, tenant: Option<&Tenant>) -> Decision {
        let key = ToolKey::new(tool);
        let entry = self.catalog.get(&key);
        let action = entry.and_then(|entry| entry.action.as_deref());
        let no_rules = TenantRules::default();
        let tenant_rules = tenant
            .and_then(|tenant| self.settings.tenants.get(&tenant.name))
            .unwrap_or(&no_rules);

        if let Some(pattern) = named_by(&self.settings.deny, &tenant_rules.deny, &key) {
            return Decision::Denied(format!(
                "'{tool}' is on the deny list ('{}')",
                pattern.as_str()
            ));
        }
        if let Some(action) = action
            && let Some(entry) = covering(&self.settings.deny_actions, action)
        {
            return Decision::Denied(format!("its action type '{action}' is denied ('{entry}')"));
        }
        if let Some(pattern) = named_by(&self.settings.allow, &tenant_rules.allow, &key) {
            return Decision::Permitted(format!("allowed by '{}'", pattern.as_str()));
        }
        if let Some(action) = action
            && let Some(entry) = covering(&self.settings.allow_actions, action)
        {
            return Decision::Permitted(format!(
                "its action type '{action}' is allowed ('{entry}')"
            ));
        }
        let level = tenant
            .and_then(|tenant| tenant.access_level.as_deref())
            .or(self.settings.access_level.as_deref());
        let category = entry.and_then(|entry| entry.category.as_deref());
        match (level, category) {
            (Some(level), Some(category)) => {
                let open = self
                    .catalog
                    .access_level(level)
                    .is_some_and(|categories| categories.iter().any(|c| c == category));
                if open {
                    Decision::Permitted(format!(
                        "category '{category}' is open to access level '{level}'"
                    ))
                } else {
                    Decision::Denied(format!(
                        "'{tool}' is in category '{category}', which access level '{level}' does not open"
                    ))
                }
            }
            (None, _) => Decision::Denied(format!(
                "'{tool}' is not on an allow list and no access level applies"
            )),
            (Some(level), None) => Decision::Denied(format!(
                "'{tool}' is not on an allow list and has no category for access level '{level}' to open"
            )),
        }
    }

    fn count_denials(&self, tenant: Option<&Tenant>, stage: &'static str, count: usize) {
        if count == 0 {
            return;
        }
        self.metrics
            .permission_denied
            .get_or_create(&DenialLabels {
                tenant: tenant.map(|tenant| tenant.name.clone()).unwrap_or_default(),
                stage,
            })
            .inc_by(count as u64);
    }
}

#[async_trait]
impl Plugin for ToolPermission {
    fn body_needs(&self) -> BodyNeeds {
        BodyNeeds::BOTH
    }

    async fn pre_request(&self, exchange: &RequestExchange<'_>) -> Verdict<RequestEdit> {
        let tenant = exchange.meta.tenant.as_deref();
        let mut removed = Vec::new();
        let mut reasons = serde_json::Map::new();
        for tool in exchange.declared_tools() {
            if let Decision::Denied(reason) = self.decide(&tool.name, tenant) {
                reasons.insert(tool.name.clone(), json!(reason));
                removed.push(tool.name.clone());
            }
        }
        self.count_denials(tenant, "request", removed.len());
        let edits = if removed.is_empty() {
            Vec::new()
        } else {
            vec![RequestEdit::Annotate(
                "filtered_by_permission".into(),
                serde_json::Value::Object(reasons),
            )]
        };
        // Untouched when nothing is removed: the body goes upstream as its original bytes.
        tool_removal::verdict(
            exchange.declared_tools(),
            removed,
            self.settings.on_empty,
            Check::Permission,
            edits,
        )
    }

    async fn pre_response(&self, exchange: &ResponseExchange<'_>) -> Verdict<ResponseEdit> {
        let tenant = exchange.meta.tenant.as_deref();
        let violations: Vec<Violation> = (exchange.calls().iter())
            .filter_map(|call| match self.decide(&call.name, tenant) {
                Decision::Permitted(_) => None,
                Decision::Denied(reason) => Some(Violation::on_call(
                    Check::Permission,
                    "tool_not_permitted",
                    call,
                    format!("'{}' is not permitted: {reason}", call.name),
                )),
            })
            .collect();
        self.count_denials(tenant, "response", violations.len());
        if violations.is_empty() {
            Verdict::Continue
        } else {
            Verdict::Block(Rejection::forbidden(violations))
        }
    }

    fn unavailability(&self, query: &AvailabilityQuery, tool: &str) -> Option<Violation> {
        match self.decide(tool, query.tenant.as_deref()) {
            Decision::Permitted(_) => None,
            Decision::Denied(reason) => Some(Violation::new(
                Check::Permission,
                "tool_not_permitted",
                reason,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;
    use toolgate_plugin::CatalogTool;

    fn plugin(settings: serde_json::Value) -> ToolPermission {
        plugin_for(settings, &[])
    }

    fn plugin_for(settings: serde_json::Value, tenants: &[Tenant]) -> ToolPermission {
        let tool = |name: &str, category: Option<&str>, action: Option<&str>| {
            let mut tool = CatalogTool::new(name);
            tool.category = category.map(str::to_owned);
            tool.action = action.map(str::to_owned);
            tool
        };
        let catalog = Arc::new(ToolCatalog::new([
            tool("read_file", Some("file_system"), Some("code:read")),
            tool("run_query", Some("database"), Some("db:query")),
            tool("drop_table", Some("database"), Some("db:admin")),
            tool("deploy_prod", Some("deployment"), Some("deploy:production")),
        ]));
        let mut context = BuildContext::default();
        context.catalog = catalog.clone();
        context.tenants = Arc::new(
            tenants
                .iter()
                .map(|tenant| (tenant.name.clone(), Arc::new(tenant.clone())))
                .collect(),
        );
        ToolPermission {
            settings: PermissionSettings::parse(&settings, &context).expect("valid settings"),
            catalog,
            metrics: Arc::new(AccessMetrics::register(&mut Registry::default())),
        }
    }

    fn permitted(plugin: &ToolPermission, tool: &str, tenant: Option<&Tenant>) -> bool {
        matches!(plugin.decide(tool, tenant), Decision::Permitted(_))
    }

    #[test]
    fn deny_beats_allow_beats_level_beats_default() {
        let plugin = plugin(json!({
            "access_level": "standard",
            "allow": ["deploy_*"],
            "deny": ["DEPLOY_PROD", "drop_*"],
        }));
        assert!(
            !permitted(&plugin, "deploy_prod", None),
            "denied although allowed"
        );
        assert!(
            permitted(&plugin, "run_query", None),
            "database is open to standard"
        );
        assert!(!permitted(&plugin, "drop_table", None));
        assert!(!permitted(&plugin, "unknown_tool", None), "no rule: deny");
    }

    #[test]
    fn names_are_trimmed_and_case_folded() {
        let plugin = plugin(json!({"deny": [" Read_File "]}));
        assert!(!permitted(&plugin, "read_file", None));
        assert!(!permitted(&plugin, " READ_FILE", None));
        // The catalog entry is found by key too: a variant spelling keeps the action type.
        let plugin = plugin_with_shortcut();
        assert!(permitted(&plugin, " Run_Query ", None));
        assert!(!permitted(&plugin, "READ_FILE", None));
    }

    #[test]
    fn action_types_and_their_shortcuts() {
        let plugin = plugin(
            json!({"access_level": "elevated", "deny_actions": ["db:admin"], "allow_actions": []}),
        );
        assert!(permitted(&plugin, "run_query", None));
        assert!(!permitted(&plugin, "drop_table", None));
        let plugin = plugin_with_shortcut();
        assert!(permitted(&plugin, "run_query", None));
        assert!(permitted(&plugin, "drop_table", None));
        assert!(!permitted(&plugin, "read_file", None));
    }

    fn plugin_with_shortcut() -> ToolPermission {
        plugin(json!({"allow_actions": ["db"]}))
    }

    #[test]
    fn the_tenant_level_and_lists_apply() {
        let sandboxed = Tenant {
            name: "t".into(),
            access_level: Some("sandboxed".into()),
            denied_tools: vec!["read_*".into()],
            ..Tenant::default()
        };
        let plugin = plugin_for(
            json!({"access_level": "elevated"}),
            std::slice::from_ref(&sandboxed),
        );
        assert!(
            !permitted(&plugin, "run_query", Some(&sandboxed)),
            "the tenant's level wins"
        );
        assert!(
            !permitted(&plugin, "read_file", Some(&sandboxed)),
            "the tenant's deny list"
        );
        assert!(
            permitted(&plugin, "deploy_prod", None),
            "the route's level without a tenant"
        );
    }

    #[test]
    fn bad_settings_are_located() {
        let context = BuildContext::default();
        let error = |settings| {
            PermissionSettings::parse(&settings, &context)
                .err()
                .expect("refused")
        };
        assert_eq!(error(json!({"access_level": "root"})).path, "access_level");
        assert_eq!(
            error(json!({"deny_actions": ["db:drop"]})).path,
            "deny_actions[0]"
        );
        assert_eq!(error(json!({"allow": ["ok", "[x"]})).path, "allow[1]");
        assert!(
            error(json!({"on_empty": "explode"}))
                .message
                .contains("unknown variant")
        );
    }
}
