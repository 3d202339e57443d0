//! The tool_budget settings table: budgets (a tool pattern, its windows, the tenants it applies
//! to, what happens when it is spent), how calls are counted, and how long a counted call id is
//! remembered. Every error names its key, so the gateway can point at the file's line.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use toolgate_plugin::store::Window;
use toolgate_plugin::tool_removal::OnEmpty;
use toolgate_plugin::{SettingsError, ToolKey, ToolPattern};

/// What happens when a budget is spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Behaviour {
    /// 429 with `Retry-After` and `x-ratelimit-*` headers when the model calls a spent tool.
    Reject,
    /// Remove the spent tool from the request's declared tools, so the model cannot pick it.
    Strip,
    /// Count and report (log, metric), never change the exchange.
    Observe,
}

/// Which calls use up a budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Counting {
    /// Each tool result the client sends back in its history, once per `tool_call_id`.
    Executed,
    /// Each call the model proposes in a response, admitted atomically against the limits.
    Proposed,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSettings {
    #[serde(default)]
    behaviour: Option<Behaviour>,
    #[serde(default)]
    count: Option<Counting>,
    #[serde(default)]
    remember_calls_for: Option<String>,
    #[serde(default)]
    budgets: Vec<RawBudget>,
    /// What `strip` does when it removes every declared tool (the shared rule).
    #[serde(default)]
    on_empty: OnEmpty,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBudget {
    tools: String,
    limits: Vec<Value>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    tenants: Option<Vec<String>>,
    #[serde(default)]
    behaviour: Option<Behaviour>,
}

/// One budget: calls of tools matching `pattern`, per tenant, within every window.
#[derive(Debug, Clone)]
pub struct Budget {
    /// Names the counter, so renaming a limit keeps its count. The default is the pattern
    /// folded like tool names, so `Graph-Update` on one route and `graph-update` on another
    /// share one counter, as they are one tool.
    pub name: String,
    pub pattern: ToolPattern,
    pub windows: Vec<Window>,
    /// The tenants it applies to (each counted separately); `None` = every tenant and anonymous.
    pub tenants: Option<Vec<String>>,
    pub behaviour: Behaviour,
}

impl Budget {
    pub fn applies_to(&self, tenant: Option<&str>) -> bool {
        match (&self.tenants, tenant) {
            (None, _) => true,
            (Some(names), Some(tenant)) => names.iter().any(|name| name == tenant),
            (Some(_), None) => false,
        }
    }

    pub fn covers(&self, tool: &ToolKey) -> bool {
        self.pattern.matches_key(tool)
    }

    /// The items of `keyed`, each paired with its tool's key, whose tool this budget covers.
    pub fn covered<'a, T: Copy>(
        &'a self,
        keyed: &'a [(T, ToolKey)],
    ) -> impl Iterator<Item = T> + 'a {
        keyed
            .iter()
            .filter(|(_, key)| self.covers(key))
            .map(|(item, _)| *item)
    }
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub counting: Counting,
    /// What a `strip` that leaves no declared tool sends upstream (never `tools: []` unless
    /// `pass_through_empty` is asked for).
    pub on_empty: OnEmpty,
    pub remember_calls_for: Duration,
    pub budgets: Vec<Budget>,
}

const DAY: Duration = Duration::from_secs(86_400);

impl Settings {
    pub fn parse(settings: &Value) -> Result<Settings, SettingsError> {
        let raw: RawSettings = toolgate_plugin::parse_settings(settings)?;
        let default_behaviour = raw.behaviour.unwrap_or(Behaviour::Reject);
        let mut budgets = Vec::with_capacity(raw.budgets.len());
        for (index, budget) in raw.budgets.into_iter().enumerate() {
            let at = |key: &str| format!("budgets[{index}].{key}");
            let pattern = ToolPattern::new(&budget.tools)
                .map_err(|error| SettingsError::new(at("tools"), error))?;
            if budget.limits.is_empty() {
                return Err(SettingsError::new(
                    at("limits"),
                    "a budget needs at least one limit, e.g. \"10/minute\"",
                ));
            }
            let mut windows: Vec<Window> = Vec::with_capacity(budget.limits.len());
            for (position, limit) in budget.limits.iter().enumerate() {
                let path = format!("budgets[{index}].limits[{position}]");
                let window = parse_limit(limit, &path)?;
                if windows.iter().any(|seen| seen.length == window.length) {
                    return Err(SettingsError::new(
                        path,
                        "two limits over the same window: keep one",
                    ));
                }
                windows.push(window);
            }
            let name = budget.name.unwrap_or_else(|| pattern.folded().to_owned());
            if name.trim().is_empty() {
                return Err(SettingsError::new(
                    at("name"),
                    "a budget's name must not be empty",
                ));
            }
            budgets.push(Budget {
                name,
                pattern,
                windows,
                tenants: budget.tenants,
                behaviour: budget.behaviour.unwrap_or(default_behaviour),
            });
        }
        let longest = budgets
            .iter()
            .flat_map(|budget| budget.windows.iter().map(|window| window.length))
            .max()
            .unwrap_or(Duration::ZERO);
        let remember_calls_for = match raw.remember_calls_for {
            None => DAY.max(longest * 2),
            Some(text) => humantime::parse_duration(text.trim())
                .ok()
                .filter(|duration| !duration.is_zero())
                .ok_or_else(|| {
                    SettingsError::new(
                        "remember_calls_for",
                        format!("'{text}' is not a duration (write e.g. \"24h\" or \"7d\")"),
                    )
                })?,
        };
        Ok(Settings {
            counting: raw.count.unwrap_or(Counting::Executed),
            on_empty: raw.on_empty,
            remember_calls_for,
            budgets,
        })
    }
}

impl Settings {
    /// Every tenant a budget names must be a `[tenants.NAME]`: a misspelt name would make a
    /// budget that never applies, silently.
    pub fn check_tenants(&self, is_tenant: impl Fn(&str) -> bool) -> Result<(), SettingsError> {
        let mut unknown = Vec::new();
        for (index, budget) in self.budgets.iter().enumerate() {
            for (position, name) in budget.tenants.iter().flatten().enumerate() {
                if !is_tenant(name) {
                    unknown.push(SettingsError::new(
                        format!("budgets[{index}].tenants[{position}]"),
                        format!("unknown tenant '{name}': no [tenants.{name}] is defined"),
                    ));
                }
            }
        }
        SettingsError::all(unknown).map_or(Ok(()), Err)
    }
}

/// `"10/minute"`, `"100/day"`, `"5/2s"`, or `{ calls = 10, window = "1m" }`.
fn parse_limit(value: &Value, path: &str) -> Result<Window, SettingsError> {
    match value {
        Value::String(text) => {
            let (calls, window) = text.split_once('/').ok_or_else(|| {
                SettingsError::new(
                    path,
                    format!("'{text}' is not a limit: write calls/window, e.g. \"10/minute\""),
                )
            })?;
            Ok(Window {
                limit: parse_calls(calls, path)?,
                length: parse_window(window, path)?,
            })
        }
        Value::Object(fields) => {
            if let Some(unknown) = fields
                .keys()
                .find(|key| *key != "calls" && *key != "window")
            {
                return Err(SettingsError::new(
                    format!("{path}.{unknown}"),
                    format!("unknown field `{unknown}`, expected `calls` or `window`"),
                ));
            }
            let (calls, calls_path) = required_field(fields, "calls", path)?;
            let calls = match calls {
                Value::Number(number) => number.as_u64().ok_or_else(|| {
                    SettingsError::new(
                        &calls_path,
                        format!("{number} is not a whole number of calls"),
                    )
                })?,
                Value::String(text) => parse_calls(text, &calls_path)?,
                other => {
                    return Err(SettingsError::new(
                        calls_path,
                        format!("{other} is not a number of calls"),
                    ));
                }
            };
            let (window, window_path) = required_field(fields, "window", path)?;
            let window = match window {
                Value::String(text) => parse_window(text, &window_path)?,
                other => {
                    return Err(SettingsError::new(
                        window_path,
                        format!("{other} is not a window: write e.g. \"1m\", \"day\""),
                    ));
                }
            };
            Ok(Window {
                limit: calls,
                length: window,
            })
        }
        other => Err(SettingsError::new(
            path,
            format!(
                "{other} is not a limit: write \"10/minute\" or {{ calls = 10, window = \"1m\" }}"
            ),
        )),
    }
}

/// A limit table's field `name` and its path, or the error that it is missing.
fn required_field<'v>(
    fields: &'v serde_json::Map<String, Value>,
    name: &str,
    path: &str,
) -> Result<(&'v Value, String), SettingsError> {
    match fields.get(name) {
        Some(value) => Ok((value, format!("{path}.{name}"))),
        None => Err(SettingsError::new(path, format!("missing field `{name}`"))),
    }
}

fn parse_calls(text: &str, path: &str) -> Result<u64, SettingsError> {
    text.trim().parse::<u64>().map_err(|_| {
        SettingsError::new(
            path,
            format!("'{}' is not a whole number of calls", text.trim()),
        )
    })
}

/// `minute`, `day`, `2s`, `30m`, `1h`: a unit alone means one of it.
fn parse_window(text: &str, path: &str) -> Result<Duration, SettingsError> {
    let text = text.trim();
    let spelled = if text.starts_with(|c: char| c.is_ascii_digit()) {
        text.to_owned()
    } else {
        format!("1{text}")
    };
    let length = humantime::parse_duration(&spelled).map_err(|_| {
        SettingsError::new(
            path,
            format!("'{text}' is not a window: write second, minute, hour, day or a duration like \"2s\""),
        )
    })?;
    if length < Duration::from_millis(100) {
        return Err(SettingsError::new(
            path,
            format!("a window of '{text}' is too short (at least 100ms)"),
        ));
    }
    Ok(length)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn limits_read_in_words_durations_and_tables() {
        let settings = Settings::parse(&json!({"budgets": [{
            "tools": "pay_*",
            "limits": ["10/minute", "100/day", "5/2s", {"calls": 3, "window": "1h"}],
        }]}))
        .expect("valid");
        let windows = &settings.budgets[0].windows;
        assert_eq!(
            windows[0],
            Window {
                limit: 10,
                length: Duration::from_secs(60)
            }
        );
        assert_eq!(windows[1].length, DAY);
        assert_eq!(
            windows[2],
            Window {
                limit: 5,
                length: Duration::from_secs(2)
            }
        );
        assert_eq!(
            windows[3],
            Window {
                limit: 3,
                length: Duration::from_secs(3600)
            }
        );
        assert!(settings.budgets[0].covers(&ToolKey::new("pay_invoice")));
        assert!(!settings.budgets[0].covers(&ToolKey::new("search")));
        assert_eq!(settings.counting, Counting::Executed);
        assert_eq!(settings.remember_calls_for, DAY * 2);
    }

    #[test]
    fn bad_limits_are_located() {
        let cases = [
            (
                json!(["ten/minute"]),
                "budgets[0].limits[0]",
                "not a whole number",
            ),
            (
                json!(["10/minute", "10/fortnight"]),
                "budgets[0].limits[1]",
                "not a window",
            ),
            (json!(["10"]), "budgets[0].limits[0]", "calls/window"),
            (
                json!([{"calls": "x", "window": "1m"}]),
                "budgets[0].limits[0].calls",
                "not a whole number",
            ),
            (
                json!([{"calls": 1, "window": 60}]),
                "budgets[0].limits[0].window",
                "not a window",
            ),
            (
                json!([{"calls": 1, "per": "1m"}]),
                "budgets[0].limits[0].per",
                "unknown field",
            ),
            (json!([]), "budgets[0].limits", "at least one"),
        ];
        for (limits, path, message) in cases {
            let error = Settings::parse(&json!({"budgets": [{"tools": "a", "limits": limits}]}))
                .expect_err("invalid");
            assert_eq!(error.path, path, "{limits}");
            assert!(error.message.contains(message), "{}", error.message);
        }
        let error = Settings::parse(&json!({"budgets": [{"tools": "a[", "limits": ["1/s"]}]}))
            .expect_err("bad glob");
        assert_eq!(error.path, "budgets[0].tools");
        let error = Settings::parse(&json!({"budgets": [], "count": "sometimes"}))
            .expect_err("bad counting");
        assert_eq!(error.path, "count");
    }

    #[test]
    fn an_unnamed_budget_is_named_by_its_folded_pattern() {
        let settings = Settings::parse(&json!({"budgets": [
            {"tools": " Graph-Update ", "limits": ["1/s"]},
            {"tools": "graph-update", "limits": ["1/s"]},
            {"tools": "Graph-*", "name": "Graphs", "limits": ["1/s"]},
        ]}))
        .expect("valid");
        assert_eq!(settings.budgets[0].name, "graph-update");
        assert_eq!(settings.budgets[0].name, settings.budgets[1].name);
        assert_eq!(settings.budgets[2].name, "Graphs", "a given name is kept");
        assert!(settings.budgets[0].covers(&ToolKey::new("GRAPH-UPDATE ")));
    }

    #[test]
    fn budgets_apply_to_their_tenants() {
        let settings = Settings::parse(&json!({"budgets": [
            {"tools": "*", "limits": ["1/s"], "tenants": ["acme"]},
            {"tools": "*", "limits": ["1/s"]},
        ]}))
        .expect("valid");
        assert!(settings.budgets[0].applies_to(Some("acme")));
        assert!(!settings.budgets[0].applies_to(Some("other")));
        assert!(!settings.budgets[0].applies_to(None));
        assert!(settings.budgets[1].applies_to(None));
        assert!(settings.check_tenants(|name| name == "acme").is_ok());
        let unknown = settings
            .check_tenants(|name| name == "other")
            .expect_err("acme is not a tenant");
        assert_eq!(unknown.path, "budgets[0].tenants[0]");
        assert!(unknown.more.is_empty());
    }
}
