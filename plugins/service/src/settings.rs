//! The settings of one `service` instance (the second tier of seed 002's model), checked against
//! the descriptor it names: the service exists, every required config param is set, and no param
//! the service does not declare is.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};
use toolgate_plugin::{
    BuildContext, ServiceDescriptor, SettingsError, ToolKey, ToolPattern, parse_settings,
};

/// The stages an instance may run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Before the request goes upstream: the service sees the declared tools.
    PreRequest,
    /// Before the response reaches the client: the service sees the tool calls.
    PreResponse,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::PreRequest => "pre_request",
            Stage::PreResponse => "pre_response",
        }
    }
}

/// What happens when the service cannot answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailMode {
    /// Block with `service_unavailable` (fail closed).
    #[default]
    Block,
    /// Let the exchange through, logged and counted (fail open).
    Allow,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSettings {
    service: String,
    #[serde(default)]
    config: Map<String, Value>,
    #[serde(default = "default_stages")]
    stages: Vec<Stage>,
    #[serde(default = "default_tools")]
    tools: Vec<String>,
    #[serde(default)]
    fail_mode: FailMode,
}

fn default_stages() -> Vec<Stage> {
    vec![Stage::PreResponse]
}

fn default_tools() -> Vec<String> {
    vec!["*".to_owned()]
}

/// Names for an error message, comma separated, or `none` when there are none to offer.
fn listed<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

/// One instance's validated settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub service: Arc<ServiceDescriptor>,
    /// The instance's values of the service's config params, sent as the envelope's `config`.
    pub config: Map<String, Value>,
    pub pre_request: bool,
    pub pre_response: bool,
    pub tools: ToolPatterns,
    pub fail_mode: FailMode,
}

impl Settings {
    pub fn parse(settings: &Value, context: &BuildContext) -> Result<Settings, SettingsError> {
        let raw: RawSettings = parse_settings(settings)?;
        let Some(service) = context.services.get(&raw.service) else {
            return Err(SettingsError::new(
                "service",
                format!(
                    "unknown service '{}' (defined in [services.NAME]: {})",
                    raw.service,
                    listed(context.services.keys().map(String::as_str))
                ),
            ));
        };
        for name in raw.config.keys() {
            if service.config_param(name).is_none() {
                let declared = service
                    .config_params
                    .iter()
                    .map(|param| param.name.as_str());
                return Err(SettingsError::new(
                    format!("config.{name}"),
                    format!(
                        "service '{}' has no config param '{name}' (its params: {})",
                        service.name,
                        listed(declared)
                    ),
                ));
            }
        }
        if let Some(missing) = service
            .config_params
            .iter()
            .find(|param| param.required && !raw.config.contains_key(&param.name))
        {
            return Err(SettingsError::new(
                "config",
                format!(
                    "service '{}' requires config param '{}'",
                    service.name, missing.name
                ),
            ));
        }
        if raw.stages.is_empty() {
            return Err(SettingsError::new(
                "stages",
                "name at least one stage: pre_request, pre_response",
            ));
        }
        let tools = ToolPattern::list(&raw.tools)
            .map_err(|(index, message)| SettingsError::new(format!("tools[{index}]"), message))?;
        Ok(Settings {
            service: service.clone(),
            config: raw.config,
            pre_request: raw.stages.contains(&Stage::PreRequest),
            pre_response: raw.stages.contains(&Stage::PreResponse),
            tools: ToolPatterns(tools),
            fail_mode: raw.fail_mode,
        })
    }
}

/// The tools an instance applies to (the vocabulary's patterns: `*`, `?`, `[…]`, trimmed and
/// case-folded, as every plugin matches tool names).
#[derive(Debug, Clone)]
pub struct ToolPatterns(Vec<ToolPattern>);

impl ToolPatterns {
    /// Whether a tool with this key is in scope (the key is built once per tool, not per
    /// pattern).
    pub fn matches(&self, tool: &ToolKey) -> bool {
        self.0.iter().any(|pattern| pattern.matches_key(tool))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use serde_json::json;
    use toolgate_plugin::{BreakerSettings, ConfigParam};

    use super::*;

    pub fn context() -> BuildContext {
        let descriptor = ServiceDescriptor {
            name: "argcheck".into(),
            url: "http://127.0.0.1:1/validate".into(),
            timeout: Duration::from_millis(100),
            config_params: vec![
                ConfigParam {
                    name: "deny_substrings".into(),
                    required: true,
                },
                ConfigParam {
                    name: "note".into(),
                    required: false,
                },
            ],
            headers: Default::default(),
            breaker: BreakerSettings::default(),
        };
        let mut context = BuildContext::default();
        context.services = Arc::new(BTreeMap::from([(
            "argcheck".to_owned(),
            Arc::new(descriptor),
        )]));
        context
    }

    fn error(settings: Value) -> SettingsError {
        Settings::parse(&settings, &context()).expect_err("refused")
    }

    #[test]
    fn defaults_run_on_responses_for_every_tool_and_fail_closed() {
        let settings = Settings::parse(
            &json!({"service": "argcheck", "config": {"deny_substrings": ["x"]}}),
            &context(),
        )
        .expect("valid");
        assert!(settings.pre_response && !settings.pre_request);
        assert!(settings.tools.matches(&ToolKey::new("anything")));
        assert_eq!(settings.fail_mode, FailMode::Block);
        assert_eq!(settings.config["deny_substrings"], json!(["x"]));
    }

    #[test]
    fn the_descriptor_decides_which_config_is_valid() {
        let missing_reference = error(json!({"config": {}}));
        assert!(
            missing_reference
                .message
                .contains("missing field `service`")
        );
        let unknown = error(json!({"service": "nope"}));
        assert_eq!(unknown.path, "service");
        assert!(
            unknown.message.contains("unknown service 'nope'"),
            "{}",
            unknown.message
        );
        assert!(unknown.message.contains("argcheck"), "{}", unknown.message);
        let missing = error(json!({"service": "argcheck", "config": {"note": "n"}}));
        assert_eq!(missing.path, "config");
        assert!(
            missing
                .message
                .contains("requires config param 'deny_substrings'")
        );
        let extra = error(json!({"service": "argcheck",
            "config": {"deny_substrings": [], "colour": "red"}}));
        assert_eq!(extra.path, "config.colour");
        assert!(
            extra.message.contains("no config param 'colour'"),
            "{}",
            extra.message
        );
        let stages = error(
            json!({"service": "argcheck", "config": {"deny_substrings": []},
            "stages": []}),
        );
        assert_eq!(stages.path, "stages");
        let typo = error(
            json!({"service": "argcheck", "config": {"deny_substrings": []},
            "stages": ["pre_reponse"]}),
        );
        assert!(typo.path.starts_with("stages"), "{}", typo.path);
    }

    #[test]
    fn tools_are_matched_with_the_vocabularys_patterns() {
        let settings = Settings::parse(
            &json!({"service": "argcheck", "config": {"deny_substrings": []},
                    "tools": ["run_sql", "fs_*"]}),
            &context(),
        )
        .expect("valid");
        assert!(settings.tools.matches(&ToolKey::new("run_sql")));
        assert!(
            settings.tools.matches(&ToolKey::new("Run_SQL ")),
            "trimmed and case-folded"
        );
        assert!(!settings.tools.matches(&ToolKey::new("run_sql2")));
        assert!(settings.tools.matches(&ToolKey::new("fs_write")));
        let empty = error(
            json!({"service": "argcheck", "config": {"deny_substrings": []},
            "tools": ["ok", " "]}),
        );
        assert_eq!(empty.path, "tools[1]");
    }
}
