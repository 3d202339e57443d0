//! Fuzzes the check of a call's arguments against its tool's schema, as tool_selection and the
//! MCP endpoint run it (`SchemaChecker::check_arguments`): a call is let through exactly when
//! serde_json's reading of its arguments is valid under jsonschema's `Value` validator of the
//! same schema, compiled with the same options. The checker answers most calls from a tape of
//! the arguments instead (`json_tape`), so this holds the tape's verdict, and every fallback
//! between the two readings, to the reference; a call the tape passes and the `Value` fails would
//! be let through unchecked. The input is a schema and the arguments, split at the first NUL.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use toolgate_plugin::schema::SchemaChecker;
use toolgate_plugin::{DeclaredTool, ToolCall};

fn checker() -> &'static SchemaChecker {
    static CHECKER: OnceLock<SchemaChecker> = OnceLock::new();
    CHECKER.get_or_init(SchemaChecker::standalone)
}

fuzz_target!(|data: &[u8]| {
    let Some(split) = data.iter().position(|byte| *byte == 0) else {
        return;
    };
    let (Ok(schema_text), Ok(arguments)) = (
        std::str::from_utf8(&data[..split]),
        std::str::from_utf8(&data[split + 1..]),
    ) else {
        return;
    };
    let Ok(schema) = serde_json::from_str::<serde_json::Value>(schema_text) else {
        return;
    };
    // The reference: the options the checker compiles with (drafts by `$schema`, nothing
    // fetched, patterns within their limits), a `Value` read by serde_json, and "" read as the
    // empty object models mean by it.
    let options = toolgate_plugin::schema::compile_options::<jsonschema::json::SerdeJson>();
    let Ok(reference) = options.build(&schema) else {
        return;
    };
    let text = arguments.trim();
    let text = if text.is_empty() { "{}" } else { text };
    let expected = serde_json::from_str::<serde_json::Value>(text)
        .is_ok_and(|arguments| reference.is_valid(&arguments));

    let tool = DeclaredTool::function("tool", Some(&schema));
    let call = ToolCall::function(Some("call".into()), "tool", arguments.to_owned());
    let violations = checker().check_arguments(&tool, &call);
    if violations
        .iter()
        .any(|violation| violation.code == "invalid_schema")
    {
        // Refused before compiling (more patterns than toolgate compiles in one schema).
        return;
    }
    assert_eq!(
        violations.is_empty(),
        expected,
        "schema: {schema}\narguments: {arguments}\nviolations: {violations:?}"
    );
});
