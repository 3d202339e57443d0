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
    /// How many regular expressions the schema compiles (`pattern`, `patternProperties`): what
    /// most of a compiled schema's memory can be.
    patterns: usize,
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

/// The one set of compile options, for either representation; the argument checks fuzz target
/// compiles its reference with them too. The draft is the one `$schema` names, else 2020-12
/// (the library's default). `offline()`: a `$ref` to a URL or file is refused, never fetched —
/// the schema comes from the client, and the gateway must not fetch what a client points it
/// at. A pattern is compiled within [`REGEX_SIZE_LIMIT`] and matched with a lazy DFA of at most
/// [`REGEX_DFA_SIZE_LIMIT`] a thread, where the regex crate's defaults (10 MiB and 2 MiB) would
/// let a few bytes of a client's schema take megabytes of the gateway's memory.
pub fn compile_options<'i, F: jsonschema::json::Json>()
-> jsonschema::ValidationOptions<'i, Arc<dyn jsonschema::Retrieve>, F> {
    jsonschema::options_for::<F>()
        .offline()
        .with_pattern_options(
            jsonschema::PatternOptions::fancy_regex()
                .size_limit(REGEX_SIZE_LIMIT)
                .dfa_size_limit(REGEX_DFA_SIZE_LIMIT),
        )
}

/// The most memory one compiled pattern may take. Real patterns take a few to a hundred KiB
/// (an email or a date a few KiB, `^[A-Za-z0-9_]{1,256}$` under 64 KiB); a larger one (a Unicode
/// class counted a hundred times) makes the schema fail to compile, and calls against it are
/// blocked as unchecked.
pub const REGEX_SIZE_LIMIT: usize = 256 * 1024;
/// The most a pattern's lazy DFA may cache, per thread that matches with it.
pub const REGEX_DFA_SIZE_LIMIT: usize = 256 * 1024;
/// The most patterns one schema may compile: each may take up to [`REGEX_SIZE_LIMIT`] in each
/// of the schema's two validators, and a single schema of thousands would take gigabytes.
pub const MAX_PATTERNS_PER_SCHEMA: usize = 64;

/// How many distinct schemas the cache expects to hold (sizes its bookkeeping).
const ESTIMATED_SCHEMAS: usize = 4096;
/// The bound on the estimated memory of the schemas the cache keeps compiled (see
/// [`CompiledSizeWeighter`]): a client that declares thousands of distinct schemas cannot pin
/// more.
const CACHE_WEIGHT_BYTES: u64 = 256 * 1024 * 1024;
/// What a compiled schema takes besides its text and patterns: two validators (for a `Value`
/// and for the tape), each a tree of keyword nodes. Measured at 12–37 KiB for a one-property
/// schema; weighed on the high side, so the bound above holds.
const ENTRY_WEIGHT: u64 = 32 * 1024;
/// What a compiled pattern is weighed at: above what real patterns take in both validators,
/// below the worst case the limits allow (2 × ([`REGEX_SIZE_LIMIT`] + 2 threads ×
/// [`REGEX_DFA_SIZE_LIMIT`]) = 1.5 MiB), which would let few schemas with patterns stay cached.
const PATTERN_WEIGHT: u64 = 512 * 1024;

/// Weighs an entry by an estimate of its compiled size: a validator is hundreds of times its
/// text (37 KiB for an 80-byte schema), and a pattern can be much more. Weighing the text
/// alone let 64 MiB of small schemas pin tens of gigabytes.
#[derive(Debug, Clone, Copy)]
struct CompiledSizeWeighter;

impl Weighter<String, CompiledSchema> for CompiledSizeWeighter {
    fn weight(&self, text: &String, compiled: &CompiledSchema) -> u64 {
        let text = text.len() as u64;
        match compiled {
            Ok(compiled) => ENTRY_WEIGHT + 8 * text + PATTERN_WEIGHT * compiled.patterns as u64,
            // A failure keeps its text and message only. Never 0: quick_cache never evicts
            // zero-weight entries.
            Err(message) => text + message.len() as u64 + 1,
        }
    }
}

/// How many regular expressions `schema` asks for: each `pattern` string and each name of a
/// `patternProperties` object, wherever they are (a property named so counts too, which only
/// errs high).
fn count_patterns(schema: &serde_json::Value) -> usize {
    match schema {
        serde_json::Value::Object(members) => members
            .iter()
            .map(|(name, value)| {
                let own = match (name.as_str(), value) {
                    ("pattern", serde_json::Value::String(_)) => 1,
                    ("patternProperties", serde_json::Value::Object(patterns)) => patterns.len(),
                    _ => 0,
                };
                own + count_patterns(value)
            })
            .sum(),
        serde_json::Value::Array(items) => items.iter().map(count_patterns).sum(),
        _ => 0,
    }
}

/// Compiled schemas, shared by every clone. Keyed by a schema's exact text.
#[derive(Clone)]
struct SchemaCache {
    compiled: Arc<Cache<String, CompiledSchema, CompiledSizeWeighter>>,
    /// `toolgate_schema_compilations`.
    compilations: Counter,
}

impl SchemaCache {
    fn new(compilations: Counter) -> Self {
        SchemaCache {
            compiled: Arc::new(Cache::with_weighter(
                ESTIMATED_SCHEMAS,
                CACHE_WEIGHT_BYTES,
                CompiledSizeWeighter,
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
        let patterns = count_patterns(&schema);
        if patterns > MAX_PATTERNS_PER_SCHEMA {
            return Err(Arc::from(format!(
                "the schema has {patterns} regular expressions; toolgate compiles at most \
                 {MAX_PATTERNS_PER_SCHEMA} per schema"
            )));
        }
        let values = compile_options::<jsonschema::json::SerdeJson>()
            .build(&schema)
            .map_err(|error| match error.kind() {
                // jsonschema says only that the pattern "is not a regex": say what may be why.
                ValidationErrorKind::Format { format } if format == "regex" => Arc::from(format!(
                    "{error} (or it takes more than the {} KiB toolgate compiles a pattern within)",
                    REGEX_SIZE_LIMIT / 1024
                )),
                _ => Arc::from(error.to_string()),
            })?;
        Ok(Arc::new(Compiled {
            values,
            patterns,
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

    /// A pattern whose compiled form would pass the size limit makes its schema fail to
    /// compile, and a call against it is blocked as unchecked, with the reason; the patterns
    /// real schemas carry compile and check as before.
    #[test]
    fn a_pattern_past_the_size_limit_blocks_its_calls_and_real_patterns_compile() {
        let checker = SchemaChecker::standalone();
        let tool = |pattern: &str| {
            DeclaredTool::function(
                "send",
                Some(
                    &json!({"type": "object", "properties": {"to": {"type": "string", "pattern": pattern}}}),
                ),
            )
        };
        let call = |to: &str| ToolCall::function(None, "send", json!({ "to": to }).to_string());
        let huge = checker.check_arguments(&tool(r"^\p{L}{1,100}$"), &call("ann"));
        assert_eq!(huge.len(), 1, "{huge:?}");
        assert_eq!(huge[0].code, "invalid_schema", "{huge:?}");
        assert!(huge[0].message.contains("256 KiB"), "{huge:?}");
        for (pattern, valid, invalid) in [
            (r"^[\w.+-]+@[\w-]+\.\w{2,}$", "ann@example.com", "ann"),
            (r"^\d{4}-\d{2}-\d{2}$", "2026-11-27", "27.11.2026"),
            (r"^[A-Za-z0-9_]{1,256}$", "user_1", "user 1"),
            (r"(?i)^[a-z ]{1,200}$", "Ann Lee", "Ann-Lee"),
        ] {
            assert!(
                checker
                    .check_arguments(&tool(pattern), &call(valid))
                    .is_empty(),
                "{pattern}"
            );
            let blocked = checker.check_arguments(&tool(pattern), &call(invalid));
            assert_eq!(
                blocked.first().map(|violation| violation.code.as_str()),
                Some("schema_violation"),
                "{pattern}: {blocked:?}"
            );
        }
    }

    /// Each pattern may take up to the size limit in each validator: a schema past the count is
    /// refused before any is compiled.
    #[test]
    fn a_schema_with_more_patterns_than_the_limit_is_refused() {
        let (cache, metrics) = cache();
        let schema = |count: usize| {
            let patterns: serde_json::Map<String, serde_json::Value> = (0..count)
                .map(|index| (format!("^k{index}_"), json!({"type": "integer"})))
                .collect();
            json!({"type": "object", "patternProperties": patterns}).to_string()
        };
        assert!(cache.get(&schema(MAX_PATTERNS_PER_SCHEMA)).is_ok());
        let Err(error) = cache.get(&schema(MAX_PATTERNS_PER_SCHEMA + 1)) else {
            panic!(
                "a schema of {} patterns compiled",
                MAX_PATTERNS_PER_SCHEMA + 1
            );
        };
        assert!(error.contains("at most 64"), "{error}");
        assert_eq!(metrics.get(), 2);
    }

    #[test]
    fn patterns_are_counted_wherever_they_are() {
        let schema = json!({
            "properties": {
                "a": {"type": "string", "pattern": "^a"},
                "b": {"items": [{"pattern": "^b"}, {"patternProperties": {"^c": {}, "^d": {"pattern": "e"}}}]},
                "pattern": {"type": "string"}
            },
            "anyOf": [{"pattern": "^f"}],
            "description": "a pattern: not counted"
        });
        assert_eq!(count_patterns(&schema), 6);
    }

    /// The cache's bound is on what its entries take compiled, not on their text: an entry of
    /// a small schema weighs what two validators take, and each pattern more.
    #[test]
    fn entries_are_weighed_by_their_compiled_size() {
        let (cache, _) = cache();
        let plain = r#"{"type":"object","properties":{"to":{"type":"string"}}}"#;
        let with_patterns = r#"{"type":"object","properties":{"to":{"type":"string","pattern":"^a"},"cc":{"pattern":"^b"}}}"#;
        let weight = |text: &str| CompiledSizeWeighter.weight(&text.to_owned(), &cache.get(text));
        assert!(weight(plain) >= ENTRY_WEIGHT);
        assert!(weight(with_patterns) >= ENTRY_WEIGHT + 2 * PATTERN_WEIGHT);
        // So the cache keeps at most this many small schemas compiled, whatever their texts.
        assert!(CACHE_WEIGHT_BYTES / weight(plain) <= 8 * 1024);
        let failed = "{not json";
        assert!(weight(failed) < 1024);
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
