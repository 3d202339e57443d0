//! The JSON Schema checks every part of toolgate shares: a call's arguments against its
//! tool's declared schema (tool_selection, the MCP endpoint), a tool's result against its output
//! schema (the MCP endpoint), and the process-wide cache of compiled schemas, keyed by a
//! schema's exact text, so a tool declared on every request of an agent is compiled once.

use std::convert::Infallible;
use std::sync::{Arc, OnceLock};

use jsonschema::error::ValidationErrorKind;
use jsonschema::{ValidationError, Validator};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use quick_cache::Weighter;
use quick_cache::sync::Cache;

use crate::json_tape::{Tape, Taped};
use crate::tool::{DeclaredTool, ToolCall};
use crate::verdict::{Check, Violation};

/// Past this many schema errors on one call the rest add noise, not information.
pub const MAX_SCHEMA_VIOLATIONS_PER_CALL: usize = 16;
/// Messages quote argument values; a long value must not turn a 403 into a megabyte.
pub const MAX_MESSAGE_CHARS: usize = 512;

/// A compiled schema, or why it could not be compiled. Failures are cached too: a schema that
/// does not compile will not compile on the next request either.
type CompiledSchema = Result<Arc<Compiled>, Arc<str>>;

/// One schema's validators: for a `Value` (error details, results) and, compiled on the first
/// call checked against the schema, for the tape a call's arguments are read onto. Compiled
/// apart, so a schema only results are checked against (an MCP tool's `outputSchema`) never
/// costs the second.
struct Compiled {
    values: Validator,
    /// `None` if the tape's validator could not be built; the `Value` one then checks alone.
    tape: OnceLock<Option<Validator<Tape>>>,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Compiled").finish_non_exhaustive()
    }
}

impl Compiled {
    /// The tape's validator of the schema `text` (this entry's key), compiled on first use.
    fn tape(&self, text: &str) -> Option<&Validator<Tape>> {
        self.tape
            .get_or_init(|| {
                let schema: serde_json::Value = serde_json::from_str(text).ok()?;
                compile_options::<Tape>().build(&schema).ok()
            })
            .as_ref()
    }
}

/// The one set of compile options, for either representation. The draft is the one `$schema`
/// names, else 2020-12 (the library's default). `offline()`: a `$ref` to a URL or file is
/// refused, never fetched — the schema comes from the client, and the gateway must not fetch
/// what a client points it at.
fn compile_options<'i, F: jsonschema::json::Json>()
-> jsonschema::ValidationOptions<'i, Arc<dyn jsonschema::Retrieve>, F> {
    jsonschema::options_for::<F>().offline()
}

/// How many distinct schemas the cache expects to hold (sizes its bookkeeping).
const ESTIMATED_SCHEMAS: usize = 4096;
/// The bound on the total schema text the cache keeps alive. Bounding bytes rather than entries
/// keeps a client that declares thousands of huge schemas from pinning gigabytes of validators.
const CACHE_TEXT_BYTES: u64 = 64 * 1024 * 1024;

/// Weighs an entry by its schema text, a proxy for the size of the compiled validator.
#[derive(Debug, Clone, Copy)]
struct SchemaTextWeighter;

impl Weighter<String, CompiledSchema> for SchemaTextWeighter {
    fn weight(&self, text: &String, _compiled: &CompiledSchema) -> u64 {
        // Never 0: quick_cache never evicts zero-weight entries.
        text.len() as u64 + 1
    }
}

/// Compiled schemas, shared by every clone. Keyed by a schema's exact text.
#[derive(Clone)]
struct SchemaCache {
    compiled: Arc<Cache<String, CompiledSchema, SchemaTextWeighter>>,
    /// `toolgate_schema_compilations`.
    compilations: Counter,
}

impl SchemaCache {
    fn new(compilations: Counter) -> Self {
        SchemaCache {
            compiled: Arc::new(Cache::with_weighter(
                ESTIMATED_SCHEMAS,
                CACHE_TEXT_BYTES,
                SchemaTextWeighter,
            )),
            compilations,
        }
    }

    /// The compiled form of `text`, compiling it on first sight. Concurrent first sights of one
    /// text wait for a single compilation instead of racing to do the same work.
    fn get(&self, text: &str) -> CompiledSchema {
        let Ok(compiled) = self
            .compiled
            .get_or_insert_with(text, || Ok::<_, Infallible>(self.compile(text)));
        compiled
    }

    fn compile(&self, text: &str) -> CompiledSchema {
        self.compilations.inc();
        let schema: serde_json::Value = serde_json::from_str(text)
            .map_err(|error| Arc::from(format!("the schema is not JSON: {error}")))?;
        let values = compile_options::<jsonschema::json::SerdeJson>()
            .build(&schema)
            .map_err(|error| Arc::from(error.to_string()))?;
        Ok(Arc::new(Compiled {
            values,
            tape: OnceLock::new(),
        }))
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.compiled.len()
    }
}

/// Checks a call's arguments against the declared tool's schema, if it has one.
///
/// The call's kind is not consulted here: membership has already paired the call with a tool
/// it dispatches to (a custom call never reaches a function's schema, it is undeclared), and a
/// tool's schema binds every call that reaches it, whatever the call says it is.
fn check_arguments(
    tool: &DeclaredTool,
    call: &ToolCall,
    schemas: &SchemaCache,
    violations: &mut Vec<Violation>,
) {
    let Some(schema_text) = tool.schema_text() else {
        return;
    };
    let compiled = match schemas.get(schema_text) {
        Ok(compiled) => compiled,
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
    // Almost every call is valid: the tape answers that without building a `Value`, and the
    // boolean walk stops at the first failure and builds no error paths. Only a call that
    // will be blocked, or text the tape does not take, is read again below.
    let taped_verdict = compiled
        .tape(schema_text)
        .zip(Taped::read(text))
        .map(|(validator, taped)| validator.is_valid(taped.root()));
    if taped_verdict == Some(true) {
        return;
    }
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
    let validator = &compiled.values;
    if taped_verdict.is_none() && validator.is_valid(&arguments) {
        return;
    }
    let found = violations.len();
    violations.extend(
        validator
            .iter_errors(&arguments)
            .take(MAX_SCHEMA_VIOLATIONS_PER_CALL)
            .map(|error| schema_violation(call, &error, Subject::Arguments)),
    );
    if violations.len() == found {
        // The tape found the call invalid and the `Value` reading finds nothing to say: the
        // two readings are held equal by tests, but a call is never let through on the
        // weaker of two verdicts.
        violations.push(Violation::on_call(
            Check::Schema,
            "schema_violation",
            call,
            format!("the arguments of '{}' do not match its schema", call.name),
        ));
    }
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
    /// A checker with its own process-wide cache, its compilations counted in `metrics`
    /// (`toolgate_schema_compilations`).
    pub fn new(metrics: &mut Registry) -> Self {
        let compilations = Counter::default();
        metrics.register(
            "toolgate_schema_compilations",
            "JSON Schemas compiled (each distinct schema text once while it stays cached)",
            compilations.clone(),
        );
        SchemaChecker {
            schemas: SchemaCache::new(compilations),
        }
    }

    /// A checker whose compilations are counted nowhere (for tests).
    pub fn standalone() -> Self {
        SchemaChecker::new(&mut Registry::default())
    }

    /// How many schemas this checker compiled (for tests of the cache).
    pub fn compilations(&self) -> u64 {
        self.schemas.compilations.get()
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
        let compiled = match self.schemas.get(schema_text) {
            Ok(compiled) => compiled,
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
        compiled
            .values
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
    use serde_json::json;

    use super::*;

    fn cache() -> (SchemaCache, Counter) {
        let compilations = Counter::default();
        (SchemaCache::new(compilations.clone()), compilations)
    }

    fn validator(cache: &SchemaCache, text: &str) -> Arc<Compiled> {
        match cache.get(text) {
            Ok(validator) => validator,
            Err(error) => panic!("{text} should compile: {error}"),
        }
    }

    /// The verdict of the schema `schema` on `instance`, read both ways, which must agree.
    fn is_valid(cache: &SchemaCache, schema: &str, instance: &serde_json::Value) -> bool {
        let compiled = validator(cache, schema);
        let text = instance.to_string();
        let Some(taped) = Taped::read(&text) else {
            panic!("{text} should tape");
        };
        let Some(tape) = compiled.tape(schema) else {
            panic!("the tape validator should compile");
        };
        let verdict = compiled.values.is_valid(instance);
        assert_eq!(tape.is_valid(taped.root()), verdict, "{text}");
        verdict
    }

    #[test]
    fn the_same_text_is_compiled_once() {
        let (cache, metrics) = cache();
        let text = r#"{"type":"object","required":["to"]}"#;
        let first = validator(&cache, text);
        let second = validator(&cache, text);
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(metrics.get(), 1);
        assert_eq!(cache.len(), 1);

        // Keyed by exact text: the same schema spelled differently is a different entry.
        validator(&cache, r#"{"required":["to"],"type":"object"}"#);
        assert_eq!(metrics.get(), 2);
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn compile_errors_are_cached_and_readable() {
        let (cache, metrics) = cache();
        for _ in 0..2 {
            let error = cache
                .get(r#"{"type": "integr"}"#)
                .expect_err("not a JSON type");
            assert!(error.contains("integr"), "{error}");
        }
        assert_eq!(metrics.get(), 1);
        let error = cache.get("{not json").expect_err("not JSON");
        assert!(error.contains("not JSON"), "{error}");
    }

    #[test]
    fn remote_references_are_refused_not_fetched() {
        let (cache, _) = cache();
        for reference in ["http://127.0.0.1:9/schema.json", "file:///etc/passwd"] {
            let text = json!({"$ref": reference}).to_string();
            let error = cache.get(&text).expect_err("remote $ref");
            assert!(!error.is_empty());
        }
        // Local references still work.
        let local = json!({
            "$defs": {"email": {"type": "string"}},
            "properties": {"to": {"$ref": "#/$defs/email"}}
        });
        assert!(!is_valid(&cache, &local.to_string(), &json!({"to": 5})));
    }

    /// The verdicts and details a call's arguments get, whichever reading gave them: the tape
    /// for most, the `Value` for the details of a failure and for a repeated member name
    /// (which serde_json, like the clients' JSON readers, resolves to the last).
    #[test]
    fn arguments_get_the_values_verdict_and_details_however_they_are_read() {
        let checker = SchemaChecker::standalone();
        let schema = json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "maximum": 14}},
            "required": ["city"],
            "additionalProperties": false
        });
        let tool = DeclaredTool::function("get_weather", Some(&schema));
        let codes = |arguments: &str| -> Vec<(String, Option<String>)> {
            let call = ToolCall::function(None, "get_weather", arguments.to_owned());
            checker
                .check_arguments(&tool, &call)
                .into_iter()
                .map(|violation| (violation.code.to_owned(), violation.instance_path))
                .collect()
        };
        assert_eq!(codes(r#"{"city":"Paris","days":3}"#), []);
        assert_eq!(codes(r#" {"city" : "Par\u0069s"} "#), []);
        assert_eq!(codes(r#"{"city":5,"city":"Paris"}"#), []);
        let schema_violation = |path: &str| ("schema_violation".to_owned(), Some(path.to_owned()));
        assert_eq!(
            codes(r#"{"city":"Paris","city":5}"#),
            [schema_violation("/city")]
        );
        assert_eq!(
            codes(r#"{"days":15,"zone":"utc"}"#),
            [
                schema_violation("/days"),
                schema_violation(""),
                schema_violation("/city")
            ]
        );
        assert_eq!(
            codes(r#"{"city":"Paris",}"#),
            [("invalid_arguments".to_owned(), None)]
        );
    }

    #[test]
    fn the_draft_is_the_one_named_by_dollar_schema_else_2020_12() {
        let (cache, _) = cache();
        let keywords = json!({
            "type": "object",
            "properties": {"pair": {"prefixItems": [{"type": "integer"}]}},
            "dependentRequired": {"cc": ["to"]}
        });
        let mut draft7 = keywords.clone();
        draft7["$schema"] = json!("http://json-schema.org/draft-07/schema#");
        let (draft7, default) = (draft7.to_string(), keywords.to_string());

        // prefixItems and dependentRequired do not exist in draft-07: ignored there.
        for instance in [json!({"pair": ["x"]}), json!({"cc": "a@b.c"})] {
            assert!(is_valid(&cache, &draft7, &instance), "{instance}");
            assert!(!is_valid(&cache, &default, &instance), "{instance}");
        }
    }
}
