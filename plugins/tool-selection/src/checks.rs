//! The deterministic checks on each tool call: membership (the tool was declared), arguments
//! (they are JSON when the tool has a schema) and schema (they satisfy it). Each check returns
//! violations; it never decides how they are enforced.

use jsonschema::ValidationError;
use jsonschema::error::ValidationErrorKind;
use toolgate_plugin::{Check, DeclaredTool, ToolCall, ToolRequest, Violation};

use crate::schema::SchemaCache;

/// Past this many schema errors on one call the rest add noise, not information.
pub const MAX_SCHEMA_VIOLATIONS_PER_CALL: usize = 16;
/// Messages quote argument values; a long value must not turn a 403 into a megabyte.
const MAX_MESSAGE_CHARS: usize = 512;

/// Every violation of every call, in call order. An empty result means all calls passed.
pub fn check_calls(
    request: &ToolRequest,
    calls: &[ToolCall],
    schemas: &SchemaCache,
) -> Vec<Violation> {
    let mut violations = Vec::new();
    for call in calls {
        match request.declared_tool(&call.name) {
            None => violations.push(Violation::on_call(
                Check::Membership,
                "undeclared_tool",
                call,
                format!("'{}' is not a declared tool", call.name),
            )),
            Some(tool) => check_arguments(tool, call, schemas, &mut violations),
        }
    }
    violations
}

/// Under `strict`, a request that declared nothing (or could not be read) allows no call.
pub fn no_tools_declared(calls: &[ToolCall]) -> Vec<Violation> {
    calls
        .iter()
        .map(|call| {
            Violation::on_call(
                Check::Membership,
                "no_tools_declared",
                call,
                format!(
                    "'{}' was called, but the request declared no tools",
                    call.name
                ),
            )
        })
        .collect()
}

/// Checks a call's arguments against the declared tool's schema, if it has one.
///
/// The call's kind is not consulted: a call that presents itself as a custom (free-text) tool
/// while naming a function tool with a schema must still satisfy that schema, or the kind
/// field would be a way around the check.
fn check_arguments(
    tool: &DeclaredTool,
    call: &ToolCall,
    schemas: &SchemaCache,
    violations: &mut Vec<Violation>,
) {
    let Some(schema_text) = tool.schema_text() else {
        return;
    };
    let validator = match schemas.get(schema_text) {
        Ok(validator) => validator,
        Err(error) => {
            // We cannot vouch for what we cannot check.
            violations.push(Violation::on_call(
                Check::Schema,
                "invalid_schema",
                call,
                truncate(format!(
                    "the declared schema of '{}' cannot be compiled: {error}",
                    tool.name
                )),
            ));
            return;
        }
    };
    // Models emit "" for a call without parameters; that means an empty object.
    let text = call.arguments.trim();
    let text = if text.is_empty() { "{}" } else { text };
    let arguments: serde_json::Value = match serde_json::from_str(text) {
        Ok(arguments) => arguments,
        Err(error) => {
            violations.push(Violation::on_call(
                Check::Arguments,
                "invalid_arguments",
                call,
                format!(
                    "the arguments of '{}' are not valid JSON: {error}",
                    call.name
                ),
            ));
            return;
        }
    };
    violations.extend(
        validator
            .iter_errors(&arguments)
            .take(MAX_SCHEMA_VIOLATIONS_PER_CALL)
            .map(|error| schema_violation(call, &error, Subject::Arguments)),
    );
}

/// What a schema was checked against: a call's arguments, or a tool's result.
#[derive(Debug, Clone, Copy)]
enum Subject {
    Arguments,
    Result,
}

impl Subject {
    fn describe(self, tool: &str) -> String {
        match self {
            Subject::Arguments => format!("the arguments of '{tool}'"),
            Subject::Result => format!("the result of '{tool}'"),
        }
    }

    fn code(self) -> &'static str {
        match self {
            Subject::Arguments => "schema_violation",
            Subject::Result => "output_schema_violation",
        }
    }
}

/// The schema checks for a caller outside a plugin chain — the MCP endpoint, which validates a
/// call's arguments against the backend tool's `inputSchema` and its structured result against
/// the `outputSchema` — with the same compiled-schema cache and the same violations as the
/// plugin, so there is one schema validation in toolgate.
#[derive(Clone)]
pub struct SchemaChecker {
    schemas: SchemaCache,
}

impl SchemaChecker {
    pub(crate) fn new(schemas: SchemaCache) -> Self {
        SchemaChecker { schemas }
    }

    /// A checker with its own cache whose compilations are counted nowhere (for a gateway
    /// built without the tool_selection factory, and for tests).
    pub fn standalone() -> Self {
        let metrics = crate::metrics::Metrics::register(
            &mut prometheus_client::registry::Registry::default(),
        );
        SchemaChecker::new(SchemaCache::new(metrics))
    }

    /// The arguments and schema checks of `call` against `tool` (the plugin's own checks).
    pub fn check_arguments(&self, tool: &DeclaredTool, call: &ToolCall) -> Vec<Violation> {
        let mut violations = Vec::new();
        check_arguments(tool, call, &self.schemas, &mut violations);
        violations
    }

    /// Checks what `call` returned against the tool's output schema (`schema_text`). A schema
    /// that does not compile fails the result: what cannot be checked is not vouched for.
    pub fn check_result(
        &self,
        call: &ToolCall,
        schema_text: &str,
        result: &serde_json::Value,
    ) -> Vec<Violation> {
        let validator = match self.schemas.get(schema_text) {
            Ok(validator) => validator,
            Err(error) => {
                return vec![Violation::on_call(
                    Check::Schema,
                    "invalid_schema",
                    call,
                    truncate(format!(
                        "the output schema of '{}' cannot be compiled: {error}",
                        call.name
                    )),
                )];
            }
        };
        validator
            .iter_errors(result)
            .take(MAX_SCHEMA_VIOLATIONS_PER_CALL)
            .map(|error| schema_violation(call, &error, Subject::Result))
            .collect()
    }
}

fn schema_violation(call: &ToolCall, error: &ValidationError<'_>, subject: Subject) -> Violation {
    let mut path = error.instance_path().as_str().to_owned();
    // A missing property is located where it should be (`/to`), as the 403 contract shows, not
    // at the object that lacks it: that is the place a person or a program must fill.
    if let ValidationErrorKind::Required { property } = error.kind()
        && let Some(name) = property.as_str()
    {
        path.push('/');
        path.push_str(&name.replace('~', "~0").replace('/', "~1"));
    }
    let location = if path.is_empty() {
        subject.describe(&call.name)
    } else {
        format!("{} at {path}", subject.describe(&call.name))
    };
    Violation {
        instance_path: Some(path),
        keyword: Some(error.kind().keyword().to_owned()),
        ..Violation::on_call(
            Check::Schema,
            subject.code(),
            call,
            truncate(format!("{location}: {error}")),
        )
    }
}

/// Cuts a message to `MAX_MESSAGE_CHARS` characters on a character boundary.
pub fn truncate(mut message: String) -> String {
    if let Some((cut, _)) = message.char_indices().nth(MAX_MESSAGE_CHARS) {
        message.truncate(cut);
        message.push('…');
    }
    message
}

#[cfg(test)]
mod tests {
    use prometheus_client::registry::Registry;
    use serde_json::json;

    use super::*;
    use crate::metrics::Metrics;
    use crate::testing::{parse_request, parse_response};

    fn check(request: serde_json::Value, response: serde_json::Value) -> Vec<Violation> {
        let schemas = SchemaCache::new(Metrics::register(&mut Registry::default()));
        let request = parse_request(&request);
        let response = parse_response(&response);
        check_calls(&request, &response.calls, &schemas)
    }

    fn email_request() -> serde_json::Value {
        crate::testing::request_with_tools(json!([{
            "type": "function",
            "function": {"name": "send_email", "parameters": {
                "type": "object",
                "properties": {"to": {"type": "string"}, "priority": {"enum": ["low", "high"]}},
                "required": ["to"],
                "additionalProperties": false
            }}
        }]))
    }

    fn call(name: &str, arguments: &str) -> serde_json::Value {
        crate::testing::response_with_calls(&[(name, arguments)])
    }

    #[test]
    fn a_valid_call_passes() {
        let violations = check(email_request(), call("send_email", r#"{"to":"a@b.c"}"#));
        assert_eq!(violations, vec![]);
    }

    #[test]
    fn names_are_exact_and_case_sensitive() {
        let violations = check(email_request(), call("Send_Email", r#"{"to":"a@b.c"}"#));
        assert_eq!(violations.len(), 1);
        let violation = &violations[0];
        assert_eq!(violation.check, Check::Membership);
        assert_eq!(violation.code, "undeclared_tool");
        assert_eq!(violation.tool.as_deref(), Some("Send_Email"));
        assert_eq!(violation.tool_call_id.as_deref(), Some("call_0"));
        assert_eq!(violation.message, "'Send_Email' is not a declared tool");
    }

    #[test]
    fn every_schema_error_is_reported_with_path_and_keyword() {
        let violations = check(
            email_request(),
            call("send_email", r#"{"priority":"urgent","bcc":"x@y.z"}"#),
        );
        let mut found: Vec<(String, String)> = violations
            .iter()
            .map(|v| {
                assert_eq!(
                    (v.check, v.code.as_str()),
                    (Check::Schema, "schema_violation")
                );
                (
                    v.instance_path.clone().unwrap_or_default(),
                    v.keyword.clone().unwrap_or_default(),
                )
            })
            .collect();
        found.sort();
        let expected = [
            ("", "additionalProperties"),
            ("/priority", "enum"),
            ("/to", "required"),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(p, k)| (p.to_string(), k.to_string()))
            .collect();
        assert_eq!(found, expected);
        let required = violations
            .iter()
            .find(|v| v.keyword.as_deref() == Some("required"));
        let message = &required.expect("a required violation").message;
        assert!(
            message.contains("\"to\" is a required property"),
            "{message}"
        );
        assert!(
            message.starts_with("the arguments of 'send_email'"),
            "{message}"
        );
    }

    #[test]
    fn arguments_that_are_not_json_are_a_violation() {
        let violations = check(email_request(), call("send_email", "to: a@b.c"));
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].check, Check::Arguments);
        assert_eq!(violations[0].code, "invalid_arguments");
    }

    #[test]
    fn empty_arguments_mean_an_empty_object() {
        // Against the email schema, {} misses "to": a schema violation, not invalid JSON.
        let violations = check(email_request(), call("send_email", "  "));
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].keyword.as_deref(), Some("required"));
    }

    #[test]
    fn schema_errors_are_capped_per_call() {
        let request = crate::testing::request_with_tools(json!([{
            "type": "function",
            "function": {"name": "f", "parameters": {"additionalProperties": {"type": "integer"}}}
        }]));
        let arguments: serde_json::Map<String, serde_json::Value> = (0..40)
            .map(|i| (format!("k{i}"), json!("not a number")))
            .collect();
        let arguments = serde_json::Value::Object(arguments).to_string();
        let violations = check(request, call("f", &arguments));
        assert_eq!(violations.len(), MAX_SCHEMA_VIOLATIONS_PER_CALL);
    }

    #[test]
    fn a_schema_that_does_not_compile_blocks_its_calls() {
        let request = crate::testing::request_with_tools(json!([{
            "type": "function",
            "function": {"name": "f", "parameters": {"type": "integr"}}
        }]));
        let violations = check(request, call("f", "{}"));
        assert_eq!(violations.len(), 1);
        assert_eq!(
            (violations[0].check, violations[0].code.as_str()),
            (Check::Schema, "invalid_schema")
        );
        assert!(
            violations[0].message.contains("'f'"),
            "{}",
            violations[0].message
        );
    }

    #[test]
    fn tools_without_a_schema_accept_any_arguments() {
        let request = crate::testing::request_with_tools(json!([
            {"type": "function", "function": {"name": "ping"}},
            {"type": "custom", "custom": {"name": "shell"}}
        ]));
        let response =
            crate::testing::response_with_calls(&[("ping", "not json"), ("shell", "ls")]);
        assert_eq!(check(request, response), vec![]);
    }

    #[test]
    fn a_custom_call_cannot_dodge_a_function_tools_schema() {
        let response = json!({"choices": [{"index": 0, "message": {"role": "assistant",
            "tool_calls": [{"id": "c1", "type": "custom",
                            "custom": {"name": "send_email", "input": "rm -rf /"}}]}}]});
        let violations = check(email_request(), response);
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].code, "invalid_arguments");
    }

    #[test]
    fn calls_of_every_choice_and_legacy_function_calls_are_checked() {
        let response = json!({"choices": [
            {"index": 0, "message": {"role": "assistant", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "send_email", "arguments": "{\"to\":\"x\"}"}}]}},
            {"index": 1, "message": {"role": "assistant",
                "function_call": {"name": "delete_user", "arguments": "{}"}}}
        ]});
        let violations = check(email_request(), response);
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].choice, Some(1));
        assert_eq!(violations[0].tool.as_deref(), Some("delete_user"));
        assert_eq!(violations[0].tool_call_id, None);
    }

    #[test]
    fn long_messages_are_cut() {
        let message = truncate("é".repeat(2_000));
        assert_eq!(message.chars().count(), MAX_MESSAGE_CHARS + 1);
        assert!(message.ends_with('…'));
        assert_eq!(truncate("short".to_owned()), "short");
    }

    #[test]
    fn the_schema_checker_checks_results_like_arguments() {
        let checker = SchemaChecker::standalone();
        let call = ToolCall::function(Some("7".into()), "weather__get", "{}".into());
        let schema = r#"{"type":"object","properties":{"temperature":{"type":"number"}},"required":["temperature"]}"#;
        assert!(
            checker
                .check_result(&call, schema, &json!({"temperature": 3}))
                .is_empty()
        );
        let violations = checker.check_result(&call, schema, &json!({"temperature": "hot"}));
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert_eq!(violations[0].code, "output_schema_violation");
        assert_eq!(violations[0].instance_path.as_deref(), Some("/temperature"));
        assert!(
            violations[0]
                .message
                .starts_with("the result of 'weather__get' at /temperature")
        );
        assert_eq!(violations[0].tool_call_id.as_deref(), Some("7"));
        let missing = checker.check_result(&call, schema, &json!({}));
        assert_eq!(missing[0].instance_path.as_deref(), Some("/temperature"));
        let broken = checker.check_result(&call, r#"{"type":"nope"}"#, &json!({}));
        assert_eq!(broken[0].code, "invalid_schema");

        let tool = toolgate_plugin::DeclaredTool::function(
            "weather__get",
            Some(&serde_json::from_str(schema).expect("JSON")),
        );
        let bad = ToolCall::function(None, "weather__get", r#"{"temperature":"hot"}"#.into());
        assert_eq!(
            checker.check_arguments(&tool, &bad)[0].code,
            "schema_violation"
        );
    }
}
