//! The tool_arguments settings table: rules, each on the argument values a JSON Pointer
//! addresses in the calls of the tools a pattern covers, with what happens on an offence.
//! Everything that can be wrong is found at load and named by its key: a pattern that is not a
//! pattern, a regex that does not compile, a malformed pointer, bounds that are not numbers, and
//! a pointer that goes inside a value another rule of the same tools checks as a string or a
//! number (a string or number has no members).

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;
use toolgate_plugin::{SettingsError, ToolPattern};

use crate::pointer::Pointer;

/// What a rule does to a call whose value offends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// 403, `check: rule`.
    Reject,
    /// Replace the value and deliver the call with its arguments re-serialized.
    Redact,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSettings {
    #[serde(default)]
    rules: Vec<RawRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    #[serde(default)]
    name: Option<String>,
    tools: String,
    pointer: String,
    #[serde(default)]
    matches: Option<String>,
    #[serde(default)]
    deny: Option<Vec<String>>,
    #[serde(default = "default_ignore_case")]
    ignore_case: bool,
    #[serde(default)]
    minimum: Option<f64>,
    #[serde(default)]
    maximum: Option<f64>,
    #[serde(default)]
    allowed: Option<Vec<Value>>,
    #[serde(default)]
    action: Option<Action>,
    #[serde(default)]
    replacement: Option<Value>,
}

fn default_ignore_case() -> bool {
    true
}

/// One rule, compiled.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub tools: ToolPattern,
    pub pointer: Pointer,
    /// Anchored at both ends: the whole value must match.
    pub matches: Option<Regex>,
    /// Substrings refused anywhere in the value (its JSON text when it is not a string),
    /// lowercased when `ignore_case`.
    pub deny: Vec<String>,
    pub ignore_case: bool,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    pub allowed: Option<Vec<Value>>,
    pub action: Action,
    /// What a redacted value becomes.
    pub replacement: Value,
}

impl Rule {
    /// The type the rule's checks give the value, if they give one.
    fn typed_as(&self) -> Option<&'static str> {
        let allowed_kind = self.allowed.as_ref().and_then(|values| {
            if values.iter().all(Value::is_string) {
                Some("a string")
            } else if values.iter().all(Value::is_number) {
                Some("a number")
            } else {
                None
            }
        });
        if self.matches.is_some() {
            Some("a string")
        } else if self.minimum.is_some() || self.maximum.is_some() {
            Some("a number")
        } else {
            allowed_kind
        }
    }
}

pub fn parse(settings: &Value) -> Result<Vec<Rule>, SettingsError> {
    let raw: RawSettings = toolgate_plugin::parse_settings(settings)?;
    let mut rules: Vec<Rule> = Vec::with_capacity(raw.rules.len());
    for (index, rule) in raw.rules.into_iter().enumerate() {
        let at = |key: &str| format!("rules[{index}].{key}");
        let tools = ToolPattern::new(&rule.tools)
            .map_err(|error| SettingsError::new(at("tools"), error))?;
        let pointer = Pointer::parse(&rule.pointer)
            .map_err(|error| SettingsError::new(at("pointer"), error))?;
        let matches = match &rule.matches {
            None => None,
            Some(pattern) => Some(Regex::new(&format!("^(?:{pattern})$")).map_err(|error| {
                SettingsError::new(
                    at("matches"),
                    format!("the regex does not compile: {error}"),
                )
            })?),
        };
        if let (Some(minimum), Some(maximum)) = (rule.minimum, rule.maximum)
            && minimum > maximum
        {
            return Err(SettingsError::new(
                at("maximum"),
                format!("maximum {maximum} is below minimum {minimum}"),
            ));
        }
        if matches.is_some() && (rule.minimum.is_some() || rule.maximum.is_some()) {
            return Err(SettingsError::new(
                at("matches"),
                "a value cannot be both a string (matches) and a number (minimum/maximum): write two rules",
            ));
        }
        let deny: Vec<String> = rule
            .deny
            .unwrap_or_default()
            .into_iter()
            .map(|word| {
                if rule.ignore_case {
                    word.to_lowercase()
                } else {
                    word
                }
            })
            .collect();
        if deny.iter().any(String::is_empty) {
            return Err(SettingsError::new(
                at("deny"),
                "an empty substring would refuse everything",
            ));
        }
        if matches.is_none()
            && deny.is_empty()
            && rule.minimum.is_none()
            && rule.maximum.is_none()
            && rule.allowed.is_none()
        {
            return Err(SettingsError::new(
                format!("rules[{index}]"),
                "a rule needs a check: matches, deny, minimum, maximum or allowed",
            ));
        }
        let built = Rule {
            name: rule.name.unwrap_or_else(|| format!("rules[{index}]")),
            tools,
            pointer,
            matches,
            deny,
            ignore_case: rule.ignore_case,
            minimum: rule.minimum,
            maximum: rule.maximum,
            allowed: rule.allowed,
            action: rule.action.unwrap_or(Action::Reject),
            replacement: rule
                .replacement
                .unwrap_or_else(|| Value::String("[REDACTED]".into())),
        };
        // A pointer into a value that another rule of the same tools types as a scalar. The
        // same tools: the same pattern once folded, as `SQL` and `sql` select the same calls.
        for other in &rules {
            if other.tools.folded() != built.tools.folded() {
                continue;
            }
            for (outer, inner) in [(other, &built), (&built, other)] {
                if !inner.pointer.is_inside(&outer.pointer) {
                    continue;
                }
                if let Some(kind) = outer.typed_as() {
                    return Err(SettingsError::new(
                        at("pointer"),
                        format!(
                            "'{}' points inside '{}', which rule '{}' checks as {kind}: {kind} has no members",
                            inner.pointer.text, outer.pointer.text, outer.name
                        ),
                    ));
                }
            }
        }
        rules.push(built);
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error(rules: Value) -> SettingsError {
        parse(&json!({ "rules": rules })).expect_err("invalid")
    }

    #[test]
    fn rules_compile() {
        let rules = parse(&json!({"rules": [
            {"name": "region", "tools": "deploy*", "pointer": "/region", "allowed": ["eu", "us"]},
            {"tools": "pay", "pointer": "/amount", "minimum": 0, "maximum": 500, "action": "redact", "replacement": 0},
        ]}))
        .expect("valid");
        assert_eq!(rules[0].name, "region");
        assert_eq!(rules[1].name, "rules[1]");
        assert_eq!(rules[1].action, Action::Redact);
        assert_eq!(rules[1].replacement, json!(0));
    }

    #[test]
    fn load_errors_are_located() {
        let bad_regex = error(json!([{"tools": "a", "pointer": "/q", "matches": "(unclosed"}]));
        assert_eq!(bad_regex.path, "rules[0].matches");
        assert!(
            bad_regex.message.contains("does not compile"),
            "{}",
            bad_regex.message
        );
        let bad_pointer = error(json!([{"tools": "a", "pointer": "q", "deny": ["x"]}]));
        assert_eq!(bad_pointer.path, "rules[0].pointer");
        let bad_bound = error(json!([{"tools": "a", "pointer": "/n", "minimum": "ten"}]));
        assert_eq!(bad_bound.path, "rules[0].minimum");
        let no_check = error(json!([{"tools": "a", "pointer": "/n"}]));
        assert_eq!(no_check.path, "rules[0]");
        let into_string = error(json!([
            {"tools": "sql", "pointer": "/query", "matches": "select .*"},
            {"tools": "sql", "pointer": "/query/text", "deny": ["drop"]},
        ]));
        assert_eq!(into_string.path, "rules[1].pointer");
        assert!(
            into_string.message.contains("checks as a string"),
            "{}",
            into_string.message
        );
        let outer_later = error(json!([
            {"tools": "pay", "pointer": "/amount/value", "deny": ["x"]},
            {"tools": "pay", "pointer": "/amount", "maximum": 5},
        ]));
        assert_eq!(outer_later.path, "rules[1].pointer");
        let other_spelling = error(json!([
            {"tools": "sql", "pointer": "/query", "matches": "select .*"},
            {"tools": " SQL", "pointer": "/query/text", "deny": ["drop"]},
        ]));
        assert_eq!(
            other_spelling.path, "rules[1].pointer",
            "`SQL` and `sql` are the same tools"
        );
    }
}
