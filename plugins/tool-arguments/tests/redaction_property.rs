//! Property: whatever the arguments (any JSON, JSON text inside strings, or text that is not
//! JSON at all) and whatever a redact rule addresses, the arguments the client receives are
//! valid JSON, and the rule's replacement stands where the offending value was.

use proptest::prelude::*;
use serde_json::{Value, json};
use toolgate_plugin::{ToolCall, ToolKind};
use toolgate_tool_arguments::{apply_rules, parse_rules};

/// Any JSON value, a few levels deep, with keys drawn from a small set so pointers hit.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e6f64..1e6).prop_map(|n| json!(n)),
        "[a-z\"\\\\/{}\\[\\] \u{e9}\u{1F600}]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("a".to_owned()),
                    Just("b".to_owned()),
                    Just("secret".to_owned()),
                    "[a-z]{1,4}"
                ],
                inner.clone(),
                0..5
            )
            .prop_map(|members| Value::Object(members.into_iter().collect())),
            // An object sent as JSON text, as models sometimes do.
            inner.prop_map(|value| Value::String(value.to_string())),
        ]
    })
}

fn any_pointer() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![Just("a"), Just("b"), Just("secret"), Just("*"), Just("0")],
        0..4,
    )
    .prop_map(|segments| {
        segments
            .iter()
            .map(|segment| format!("/{segment}"))
            .collect()
    })
}

fn call(arguments: String) -> ToolCall {
    ToolCall {
        choice: 0,
        id: Some("call_1".into()),
        name: "tool".into(),
        kind: ToolKind::Function,
        arguments,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn redaction_always_yields_valid_json(
        arguments in prop_oneof![any_json().prop_map(|value| value.to_string()), ".{0,40}"],
        pointer in any_pointer(),
        replacement in any_json(),
    ) {
        // `matches = "^$"` on everything: any non-empty or non-string value offends and is redacted.
        let rules = parse_rules(&json!({"rules": [{
            "tools": "tool", "pointer": pointer, "matches": "", "action": "redact",
            "replacement": replacement,
        }]})).expect("valid rule");
        let findings = apply_rules(&rules, &call(arguments.clone()), None);
        prop_assert!(findings.violations.is_empty());
        if let Some(redacted) = findings.redacted {
            let parsed: Result<Value, _> = serde_json::from_str(&redacted);
            prop_assert!(parsed.is_ok(), "not JSON: {redacted} (from {arguments})");
            // Redacting again finds nothing new to change but what the replacement itself offends.
            let again = apply_rules(&rules, &call(redacted.clone()), None);
            if let Some(twice) = again.redacted {
                prop_assert!(serde_json::from_str::<Value>(&twice).is_ok());
            }
        }
    }
}
