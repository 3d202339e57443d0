//! The tool_arguments plugin: every call of a covered tool is read once, each rule's pointer
//! visits the values it addresses, and offences either refuse the call (403) or replace the
//! value, after which the arguments are written again as JSON (always valid: they are
//! serialized, never spliced).

use std::sync::Arc;

use serde_json::Value;
use toolgate_plugin::{
    BodyNeeds, Check, Plugin, Rejection, ResponseEdit, ResponseExchange, ToolCall, ToolKind,
    Verdict, Violation, async_trait,
};

use crate::Metrics;
use crate::pointer::{Spot, walk};
use crate::settings::{Action, Rule};

pub const NAME: &str = "tool_arguments";

pub struct ToolArguments {
    pub(crate) rules: Arc<Vec<Rule>>,
    pub(crate) metrics: Metrics,
}

/// Why a value offends a rule. Never carries the value itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offence {
    /// Did not fully match the rule's regex.
    Pattern,
    /// Holds a denied substring.
    Denied,
    BelowMinimum,
    AboveMaximum,
    NotAllowed,
    /// Not of the type the check needs (a number for bounds, a string for a regex).
    WrongType,
    /// The pointer goes through a string that holds no JSON object or array.
    Unreadable,
}

impl Offence {
    pub fn code(self) -> &'static str {
        match self {
            Offence::Pattern => "pattern",
            Offence::Denied => "denied_substring",
            Offence::BelowMinimum => "below_minimum",
            Offence::AboveMaximum => "above_maximum",
            Offence::NotAllowed => "not_allowed",
            Offence::WrongType => "wrong_type",
            Offence::Unreadable => "unreadable",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Offence::Pattern => "the value does not match the rule's pattern",
            Offence::Denied => "the value contains a denied substring",
            Offence::BelowMinimum => "the value is below the minimum",
            Offence::AboveMaximum => "the value is above the maximum",
            Offence::NotAllowed => "the value is not one of the allowed values",
            Offence::WrongType => "the value is not of the type the rule checks",
            Offence::Unreadable => {
                "the pointer goes through a string that is not JSON, so the value cannot be read"
            }
        }
    }
}

impl Rule {
    /// The first offence of `value` against this rule, if any.
    pub fn offence(&self, value: &Value) -> Option<Offence> {
        if !self.deny.is_empty() {
            let text = match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            let text = if self.ignore_case {
                text.to_lowercase()
            } else {
                text
            };
            if self.deny.iter().any(|word| text.contains(word.as_str())) {
                return Some(Offence::Denied);
            }
        }
        if let Some(regex) = &self.matches {
            match value {
                Value::String(text) if regex.is_match(text) => {}
                Value::String(_) => return Some(Offence::Pattern),
                _ => return Some(Offence::WrongType),
            }
        }
        if self.minimum.is_some() || self.maximum.is_some() {
            let Some(number) = value.as_f64() else {
                return Some(Offence::WrongType);
            };
            if self.minimum.is_some_and(|minimum| number < minimum) {
                return Some(Offence::BelowMinimum);
            }
            if self.maximum.is_some_and(|maximum| number > maximum) {
                return Some(Offence::AboveMaximum);
            }
        }
        if let Some(allowed) = &self.allowed
            && !allowed.iter().any(|candidate| same_value(candidate, value))
        {
            return Some(Offence::NotAllowed);
        }
        None
    }
}

/// JSON equality, with numbers compared by value (`1` equals `1.0`).
fn same_value(left: &Value, right: &Value) -> bool {
    match (left.as_f64(), right.as_f64()) {
        (Some(left), Some(right)) if left.is_finite() => left == right,
        _ => left == right,
    }
}

/// A call's arguments as a value: custom tools' free text is a string; function arguments are
/// JSON (empty means `{}`), and text that is not JSON is kept as a string so a rule on the whole
/// arguments still sees it.
fn arguments_value(call: &ToolCall) -> Value {
    if call.kind == ToolKind::Custom {
        return Value::String(call.arguments.clone());
    }
    if call.arguments.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(&call.arguments).unwrap_or_else(|_| Value::String(call.arguments.clone()))
}

/// The arguments text a call gets back after redaction: custom tools keep free text.
fn arguments_text(call: &ToolCall, value: &Value) -> String {
    match (call.kind, value) {
        (ToolKind::Custom, Value::String(text)) => text.clone(),
        _ => value.to_string(),
    }
}

/// What the rules made of one call.
#[derive(Debug, Default)]
pub struct CallFindings {
    pub violations: Vec<Violation>,
    /// The new arguments, when a redaction changed them.
    pub redacted: Option<String>,
}

/// Runs every rule that covers the call's tool.
pub fn apply_rules(rules: &[Rule], call: &ToolCall, metrics: Option<&Metrics>) -> CallFindings {
    let mut findings = CallFindings::default();
    let key = call.key();
    let covering: Vec<&Rule> = rules
        .iter()
        .filter(|rule| rule.tools.matches_key(&key))
        .collect();
    if covering.is_empty() {
        return findings;
    }
    let mut value = arguments_value(call);
    let mut redacted = false;
    for rule in covering {
        let mut visit = |at: &str, spot: Spot<'_>| -> bool {
            let (target, offence) = match spot {
                Spot::Value(target) => {
                    let offence = rule.offence(target);
                    (target, offence)
                }
                Spot::Opaque(target) => (target, Some(Offence::Unreadable)),
            };
            let Some(offence) = offence else {
                return false;
            };
            if let Some(metrics) = metrics {
                metrics.record(&rule.name, rule.action);
            }
            match rule.action {
                Action::Redact => {
                    *target = rule.replacement.clone();
                    true
                }
                Action::Reject => {
                    let pointer = if at.is_empty() { "the arguments" } else { at };
                    let mut violation = Violation::on_call(
                        Check::Rule,
                        "argument_rule_violated",
                        call,
                        format!(
                            "rule '{}' refuses {pointer} of '{}': {}",
                            rule.name,
                            call.name,
                            offence.describe()
                        ),
                    );
                    violation.instance_path = Some(at.to_owned());
                    violation.keyword = Some(offence.code().to_owned());
                    findings.violations.push(violation);
                    false
                }
            }
        };
        redacted |= walk(&mut value, &rule.pointer.segments, "", &mut visit);
    }
    if redacted {
        findings.redacted = Some(arguments_text(call, &value));
    }
    findings
}

#[async_trait]
impl Plugin for ToolArguments {
    fn body_needs(&self) -> BodyNeeds {
        BodyNeeds::RESPONSE
    }

    fn redacted_arguments(&self, call: &ToolCall) -> Option<String> {
        apply_rules(&self.rules, call, None).redacted
    }

    async fn pre_response(&self, exchange: &ResponseExchange<'_>) -> Verdict<ResponseEdit> {
        let mut violations = Vec::new();
        let mut edits = Vec::new();
        for call in exchange.calls() {
            let findings = apply_rules(&self.rules, call, Some(&self.metrics));
            violations.extend(findings.violations);
            if let Some(arguments) = findings.redacted {
                edits.push(ResponseEdit::ReplaceArguments {
                    choice: call.choice,
                    call_id: call.id.clone(),
                    arguments,
                });
            }
        }
        if !violations.is_empty() {
            Verdict::Block(Rejection::forbidden(violations))
        } else if !edits.is_empty() {
            Verdict::Modify(edits)
        } else {
            Verdict::Continue
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(rules: Value) -> Vec<Rule> {
        crate::settings::parse(&json!({ "rules": rules })).expect("valid rules")
    }

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            choice: 0,
            id: Some("c1".into()),
            name: name.into(),
            kind: ToolKind::Function,
            arguments: arguments.into(),
        }
    }

    #[test]
    fn each_check_names_its_offence_without_the_value() {
        let rules = rules(json!([
            {"name": "select-only", "tools": "sql", "pointer": "/query", "matches": "(?i)select\\b.*"},
            {"name": "no-drop", "tools": "sql", "pointer": "/query", "deny": ["DROP"]},
            {"name": "small", "tools": "pay", "pointer": "/amount", "minimum": 1, "maximum": 100},
            {"name": "region", "tools": "deploy", "pointer": "/region", "allowed": ["eu", "us"]},
        ]));
        let findings = apply_rules(
            &rules,
            &call("sql", r#"{"query":"drop table users"}"#),
            None,
        );
        let kinds: Vec<_> = findings
            .violations
            .iter()
            .map(|v| v.keyword.clone().unwrap())
            .collect();
        assert_eq!(kinds, ["pattern", "denied_substring"]);
        assert!(!findings.violations[0].message.contains("users"));
        assert_eq!(
            findings.violations[0].instance_path.as_deref(),
            Some("/query")
        );
        assert!(findings.violations[0].message.contains("select-only"));
        let over = apply_rules(&rules, &call("pay", r#"{"amount":1000}"#), None);
        assert_eq!(over.violations[0].keyword.as_deref(), Some("above_maximum"));
        let text = apply_rules(&rules, &call("pay", r#"{"amount":"1000"}"#), None);
        assert_eq!(text.violations[0].keyword.as_deref(), Some("wrong_type"));
        let fine = apply_rules(&rules, &call("deploy", r#"{"region":"eu"}"#), None);
        assert!(fine.violations.is_empty() && fine.redacted.is_none());
        let variant = apply_rules(&rules, &call(" PAY", r#"{"amount":1000}"#), None);
        assert_eq!(
            variant.violations[0].keyword.as_deref(),
            Some("above_maximum"),
            "a case or space variant is the same tool"
        );
        let absent = apply_rules(&rules, &call("deploy", r#"{}"#), None);
        assert!(
            absent.violations.is_empty(),
            "a rule on an absent value does not apply"
        );
    }

    #[test]
    fn redaction_replaces_values_and_keeps_valid_json() {
        let rules = rules(json!([
            {"tools": "login", "pointer": "/auth/password", "matches": "", "action": "redact"},
            {"tools": "mail", "pointer": "/to/*", "matches": ".*@example\\.com", "action": "redact", "replacement": "blocked@example.com"},
            {"tools": "note", "pointer": "/text", "matches": "[a-z ]*", "action": "redact"},
        ]));
        let login = apply_rules(
            &rules,
            &call("login", r#"{"auth":"{\"password\":\"hunter2\"}"}"#),
            None,
        );
        let redacted = login.redacted.expect("changed");
        assert!(!redacted.contains("hunter2"), "{redacted}");
        let value: Value = serde_json::from_str(&redacted).unwrap();
        let inner: Value = serde_json::from_str(value["auth"].as_str().unwrap()).unwrap();
        assert_eq!(inner["password"], "[REDACTED]");

        let mail = apply_rules(
            &rules,
            &call("mail", r#"{"to":["a@example.com","x@evil.test"]}"#),
            None,
        );
        let value: Value = serde_json::from_str(&mail.redacted.unwrap()).unwrap();
        assert_eq!(value["to"], json!(["a@example.com", "blocked@example.com"]));

        // Arguments that are not JSON cannot be looked into: what the rule guards is redacted whole.
        let note = apply_rules(&rules, &call("note", "not json at all"), None);
        assert_eq!(note.redacted.as_deref(), Some("\"[REDACTED]\""));
    }
}
