//! The deterministic checks on each tool call: membership (the tool was declared), arguments
//! (they are JSON when the tool has a schema) and schema (they satisfy it). Each check returns
//! violations; it never decides how they are enforced.

use toolgate_plugin::schema::SchemaChecker;
use toolgate_plugin::{Check, ToolCall, ToolKind, ToolRequest, Violation};

/// Every violation of every call, in call order. An empty result means all calls passed.
pub fn check_calls(
    request: &ToolRequest,
    calls: &[ToolCall],
    schemas: &SchemaChecker,
) -> Vec<Violation> {
    let mut violations = Vec::new();
    for call in calls {
        match request.declared_tool_for(call) {
            Some(tool) => violations.extend(schemas.check_arguments(tool, call)),
            None => violations.push(Violation::on_call(
                Check::Membership,
                "undeclared_tool",
                call,
                undeclared_message(request, call),
            )),
        }
    }
    violations
}

/// Why no declared tool answers `call`: its name is unknown, or it is declared under another
/// kind (say a custom tool called as a function), which a reader of a 403 could not otherwise
/// tell from a typo.
fn undeclared_message(request: &ToolRequest, call: &ToolCall) -> String {
    match request.declared_tool(&call.name) {
        Some(other) => format!(
            "'{}' is declared as {}, not {}",
            call.name,
            kind_noun(other.kind),
            kind_noun(call.kind)
        ),
        None => format!("'{}' is not a declared tool", call.name),
    }
}

/// A kind as the documentation of each API names it, with its article.
fn kind_noun(kind: ToolKind) -> &'static str {
    match kind {
        ToolKind::Function => "a function",
        ToolKind::Custom => "a custom tool",
        ToolKind::LegacyFunction => "a legacy function",
        ToolKind::Builtin => "a built-in (server) tool",
    }
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use toolgate_plugin::WireFormat;
    use toolgate_plugin::testing::assert_contains;

    use super::*;
    use crate::testing::{parse_request, parse_response};
    use toolgate_plugin::schema::{MAX_MESSAGE_CHARS, MAX_SCHEMA_VIOLATIONS_PER_CALL, truncate};

    fn check(request: serde_json::Value, response: serde_json::Value) -> Vec<Violation> {
        let schemas = SchemaChecker::standalone();
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
        assert_contains(&violations[0].message, "'f'");
    }

    #[test]
    fn tools_without_a_schema_accept_any_arguments() {
        let request = crate::testing::request_with_tools(json!([
            {"type": "function", "function": {"name": "ping"}},
            {"type": "custom", "custom": {"name": "shell"}}
        ]));
        let response = json!({"choices": [{"index": 0, "message": {"role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ping", "arguments": "not json"}},
                {"id": "c2", "type": "custom", "custom": {"name": "shell", "input": "ls"}}]}}]});
        assert_eq!(check(request, response), vec![]);
    }

    /// A chat response with one call of `kind` ("function" or "custom") to `name`.
    fn call_of_kind(kind: &str, name: &str, text: &str) -> serde_json::Value {
        let payload = match kind {
            "custom" => json!({"name": name, "input": text}),
            _ => json!({"name": name, "arguments": text}),
        };
        json!({"choices": [{"index": 0, "message": {"role": "assistant",
            "tool_calls": [{"id": "c1", "type": kind, kind: payload}]}}]})
    }

    fn assert_undeclared(violations: &[Violation], message: &str) {
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert_eq!(
            (violations[0].check, violations[0].code.as_str()),
            (Check::Membership, "undeclared_tool")
        );
        assert_eq!(violations[0].message, message);
    }

    #[test]
    fn a_custom_call_to_a_function_tool_is_undeclared_not_a_way_around_its_schema() {
        let violations = check(
            email_request(),
            call_of_kind("custom", "send_email", "rm -rf /"),
        );
        assert_undeclared(
            &violations,
            "'send_email' is declared as a function, not a custom tool",
        );
    }

    #[test]
    fn a_function_call_to_a_custom_tool_is_undeclared() {
        let request = crate::testing::request_with_tools(json!([
            {"type": "custom", "custom": {"name": "shell"}}
        ]));
        let violations = check(request.clone(), call_of_kind("function", "shell", "{}"));
        assert_undeclared(
            &violations,
            "'shell' is declared as a custom tool, not a function",
        );
        assert_eq!(
            check(request, call_of_kind("custom", "shell", "ls")),
            vec![]
        );
    }

    #[test]
    fn a_name_declared_under_two_kinds_is_found_under_the_calls_kind() {
        let request = crate::testing::request_with_tools(json!([
            {"type": "custom", "custom": {"name": "sql"}},
            {"type": "function", "function": {"name": "sql", "parameters": {"required": ["q"]}}}
        ]));
        // The custom tool takes free text; the function's schema binds only function calls.
        let custom = check(request.clone(), call_of_kind("custom", "sql", "select 1"));
        assert_eq!(custom, vec![]);
        let function = check(request, call_of_kind("function", "sql", "{}"));
        assert_eq!(function.len(), 1, "{function:?}");
        assert_eq!(function[0].keyword.as_deref(), Some("required"));
    }

    #[test]
    fn legacy_functions_and_function_tools_answer_each_others_calls() {
        let legacy_call = json!({"choices": [{"index": 0, "message": {"role": "assistant",
            "function_call": {"name": "send_email", "arguments": "{}"}}}]});
        // Reached, so the tool's schema applies: `to` is missing.
        let violations = check(email_request(), legacy_call);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert_eq!(violations[0].keyword.as_deref(), Some("required"));

        let legacy_request = json!({"model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "functions": [{"name": "ping"}]});
        let function_call = call_of_kind("function", "ping", "{}");
        assert_eq!(check(legacy_request.clone(), function_call), vec![]);
        let custom_call = call_of_kind("custom", "ping", "x");
        assert_undeclared(
            &check(legacy_request, custom_call),
            "'ping' is declared as a legacy function, not a custom tool",
        );
    }

    /// Checks a response against a request, both read in `format`.
    fn check_in(format: WireFormat, request: &str, response: &str) -> Vec<Violation> {
        let schemas = SchemaChecker::standalone();
        let request = format
            .parse_request(bytes::Bytes::copy_from_slice(request.as_bytes()))
            .expect("the request parses");
        let response = format
            .parse_response(response.as_bytes())
            .expect("the response parses");
        check_calls(&request, &response.calls, &schemas)
    }

    #[test]
    fn an_anthropic_tool_use_cannot_call_a_server_tool() {
        let request = r#"{"model": "claude", "max_tokens": 100, "messages": [],
            "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]}"#;
        let block = |kind: &str| {
            format!(
                r#"{{"type": "message", "role": "assistant", "content": [
                {{"type": "{kind}", "id": "toolu_1", "name": "web_search", "input": {{"query": "rust"}}}}]}}"#
            )
        };
        let format = WireFormat::AnthropicMessages;
        assert_undeclared(
            &check_in(format, request, &block("tool_use")),
            "'web_search' is declared as a built-in (server) tool, not a function",
        );
        assert_eq!(check_in(format, request, &block("server_tool_use")), vec![]);
    }

    #[test]
    fn a_responses_function_call_cannot_call_a_built_in() {
        let request = r#"{"model": "gpt-5", "input": "news?", "tools": [{"type": "web_search"}]}"#;
        let function_call = r#"{"object": "response", "output": [{"type": "function_call",
            "call_id": "call_1", "name": "web_search", "arguments": "{}"}]}"#;
        assert_undeclared(
            &check_in(WireFormat::Responses, request, function_call),
            "'web_search' is declared as a built-in (server) tool, not a function",
        );
        let builtin_call = r#"{"object": "response", "output": [{"type": "web_search_call",
            "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "news"}}]}"#;
        assert_eq!(
            check_in(WireFormat::Responses, request, builtin_call),
            vec![]
        );
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
