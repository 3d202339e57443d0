//! The process-wide cache of compiled JSON Schemas, keyed by the schema's exact text, so a
//! tool declared on every request of an agent is compiled once, not once per request.

use std::convert::Infallible;
use std::sync::Arc;

use jsonschema::Validator;
use quick_cache::Weighter;
use quick_cache::sync::Cache;

use crate::metrics::Metrics;

/// A compiled schema, or why it could not be compiled. Failures are cached too: a schema that
/// does not compile will not compile on the next request either.
pub type CompiledSchema = Result<Arc<Validator>, Arc<str>>;

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

/// Compiled schemas shared by every plugin instance of one factory. Cloning shares the cache.
#[derive(Clone)]
pub struct SchemaCache {
    compiled: Arc<Cache<String, CompiledSchema, SchemaTextWeighter>>,
    metrics: Metrics,
}

impl SchemaCache {
    pub fn new(metrics: Metrics) -> Self {
        SchemaCache {
            compiled: Arc::new(Cache::with_weighter(
                ESTIMATED_SCHEMAS,
                CACHE_TEXT_BYTES,
                SchemaTextWeighter,
            )),
            metrics,
        }
    }

    /// The compiled form of `text`, compiling it on first sight. Concurrent first sights of one
    /// text wait for a single compilation instead of racing to do the same work.
    pub fn get(&self, text: &str) -> CompiledSchema {
        let Ok(compiled) = self
            .compiled
            .get_or_insert_with(text, || Ok::<_, Infallible>(self.compile(text)));
        compiled
    }

    fn compile(&self, text: &str) -> CompiledSchema {
        self.metrics.schema_compiled();
        let schema: serde_json::Value = serde_json::from_str(text)
            .map_err(|error| Arc::from(format!("the schema is not JSON: {error}")))?;
        // The draft is the one `$schema` names, else 2020-12 (the library's default).
        // `offline()`: a `$ref` to a URL or file is refused, never fetched — the schema comes
        // from the client, and the gateway must not fetch what a client points it at.
        jsonschema::options()
            .offline()
            .build(&schema)
            .map(Arc::new)
            .map_err(|error| Arc::from(error.to_string()))
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.compiled.len()
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::registry::Registry;
    use serde_json::json;

    use super::*;

    fn cache() -> (SchemaCache, Metrics) {
        let metrics = Metrics::register(&mut Registry::default());
        (SchemaCache::new(metrics.clone()), metrics)
    }

    fn validator(cache: &SchemaCache, text: &str) -> Arc<Validator> {
        match cache.get(text) {
            Ok(validator) => validator,
            Err(error) => panic!("{text} should compile: {error}"),
        }
    }

    #[test]
    fn the_same_text_is_compiled_once() {
        let (cache, metrics) = cache();
        let text = r#"{"type":"object","required":["to"]}"#;
        let first = validator(&cache, text);
        let second = validator(&cache, text);
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(metrics.schema_compilations(), 1);
        assert_eq!(cache.len(), 1);

        // Keyed by exact text: the same schema spelled differently is a different entry.
        validator(&cache, r#"{"required":["to"],"type":"object"}"#);
        assert_eq!(metrics.schema_compilations(), 2);
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
        assert_eq!(metrics.schema_compilations(), 1);
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
        let validator = validator(&cache, &local.to_string());
        assert!(!validator.is_valid(&json!({"to": 5})));
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
        let draft7 = validator(&cache, &draft7.to_string());
        let default = validator(&cache, &keywords.to_string());

        // prefixItems and dependentRequired do not exist in draft-07: ignored there.
        for instance in [json!({"pair": ["x"]}), json!({"cc": "a@b.c"})] {
            assert!(draft7.is_valid(&instance), "{instance}");
            assert!(!default.is_valid(&instance), "{instance}");
        }
    }
}
