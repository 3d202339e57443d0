//! toolgate_tool_selection: the `tool_selection` plugin (seed 001). Before a response reaches
//! the client it checks every tool call of every choice against the tools the client declared.
//!
//! Checks run from cheapest to dearest, and a later check runs only if the earlier ones passed:
//! 1. membership — the call names a declared tool, exactly and case-sensitively;
//! 2. arguments — if that tool has a JSON Schema, the arguments are JSON (empty means `{}`);
//! 3. schema — they satisfy the schema, every error reported with its path and keyword;
//! 4. the semantic judge (optional, on when `openai_api_key` is set) — an OpenAI-compatible
//!    model asked whether each call is appropriate and safe for the user's request.
//!
//! Design choices:
//! - All violations of all calls are returned, not the first, so one 403 says everything.
//! - Compiled schemas live in one process-wide cache owned by the factory and keyed by the
//!   schema's exact text: agents resend the same tools on every turn, and every route and
//!   config reload shares the work. Compile failures are cached too, and block their calls.
//! - Schema `$ref`s are resolved only inside the schema: jsonschema is built without its HTTP
//!   and file resolvers and set offline, so a client's schema cannot make the gateway fetch a
//!   URL (SSRF) or read a file.
//! - The judge fails closed (`semantic_unavailable`) unless `semantic_fail_mode = "allow"`; its
//!   verdict cache stores only real answers, so an outage is never remembered as an "allow".
//! - The plugin evaluates; the gateway enforces (enforce / observe) in one place.
//!
//! # Settings (all optional; unknown keys are refused)
//! - `strict` (false): block calls when the request declared no tools or could not be read,
//!   and block responses that cannot be parsed.
//! - `openai_api_key`: turns the judge on when non-empty. `model` ("gpt-4o-mini"), `base_url`
//!   (`https://api.openai.com/v1`, any OpenAI-compatible server).
//! - `judge_timeout_ms` (5000, permit wait included), `judge_concurrency` (16 requests in
//!   flight per plugin), `judge_cache_size` (10000 verdicts, 0 = off), `judge_max_tokens`
//!   (no cap), `semantic_fail_mode` ("block" | "allow").
//!
//! # Layout
//! - `settings`: the settings table, its defaults and validation.
//! - `plugin`: the `Plugin` impl — the order of the checks and the `strict` rules.
//! - `checks`: membership, then the arguments and schema checks of the plugin API's shared
//!   `SchemaChecker` (the MCP endpoint uses the same one), turned into violations.
//! - `judge`: the semantic judge — concurrency, timeout, verdict cache, fail mode.
//! - `judge_client`: how the judge is asked (client, prompt, response format) and how its
//!   answer is read.
//! - [`judge_eval`]: `toolgate judge-eval` — the judge scored on a labelled set of calls.
//! - `metrics`: the Prometheus series the plugin exports.

mod checks;
mod judge;
mod judge_client;
pub mod judge_eval;
mod metrics;
mod plugin;
mod settings;
#[cfg(test)]
mod testing;

use std::sync::Arc;

use prometheus_client::registry::Registry;
use toolgate_plugin::schema::SchemaChecker;
use toolgate_plugin::{BuildContext, FactoryContext, Plugin, PluginFactory, SettingsError};

use crate::metrics::Metrics;
use crate::plugin::ToolSelection;
use crate::settings::Settings;

/// The name users write in `[[plugins]] name = "…"`.
const PLUGIN_NAME: &str = "tool_selection";

/// Builds `tool_selection` plugins. Create one per process: it registers the plugin's metrics
/// and hands every plugin it builds the process's shared schema checker.
pub struct ToolSelectionFactory {
    schemas: SchemaChecker,
    metrics: Metrics,
}

impl ToolSelectionFactory {
    /// Registers `toolgate_judge_calls_total{outcome}` and `toolgate_judge_latency_seconds` in
    /// `registry`; the plugins it builds check schemas with `schemas`, the process's shared cache.
    pub fn new(registry: &mut Registry, schemas: SchemaChecker) -> Self {
        ToolSelectionFactory {
            schemas,
            metrics: Metrics::register(registry),
        }
    }
}

/// This crate's factories, for the gateway's registry.
pub fn factories(context: &mut FactoryContext<'_>) -> Vec<Arc<dyn PluginFactory>> {
    vec![Arc::new(ToolSelectionFactory::new(
        context.metrics,
        context.schemas.clone(),
    ))]
}

impl PluginFactory for ToolSelectionFactory {
    fn name(&self) -> &'static str {
        PLUGIN_NAME
    }

    /// Late in the chain: cheaper policy plugins (permissions, groups) decide first, and the
    /// judge, which costs a model call, runs only on what they let through.
    fn default_priority(&self) -> i32 {
        100
    }

    /// Validates the settings and builds a plugin. Cheap and without I/O: the judge's HTTP
    /// client is created on its first use.
    fn build(
        &self,
        settings: &serde_json::Value,
        _context: &BuildContext,
    ) -> Result<Arc<dyn Plugin>, SettingsError> {
        let settings = Settings::parse(settings)?;
        Ok(Arc::new(ToolSelection::new(
            settings,
            self.schemas.clone(),
            self.metrics.clone(),
        )))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::testing::{
        email_tools, parse_request, request_with_tools, response_with_calls, run,
    };
    use toolgate_plugin::{BodyNeeds, Parsed, Verdict};

    #[test]
    fn the_factory_names_the_plugin_and_its_place_in_the_chain() {
        let factory =
            ToolSelectionFactory::new(&mut Registry::default(), SchemaChecker::standalone());
        assert_eq!(factory.name(), "tool_selection");
        assert_eq!(factory.default_priority(), 100);
        let plugin = factory
            .build(&json!({"strict": true}), &BuildContext::default())
            .expect("valid settings");
        assert_eq!(plugin.body_needs(), BodyNeeds::BOTH);
    }

    #[test]
    fn build_refuses_bad_settings_with_their_path() {
        let factory =
            ToolSelectionFactory::new(&mut Registry::default(), SchemaChecker::standalone());
        let error = factory
            .build(&json!({"judge_concurrency": 0}), &BuildContext::default())
            .err()
            .expect("concurrency 0 is refused");
        assert_eq!(error.path, "judge_concurrency");
        let error = factory
            .build(&json!({"stict": true}), &BuildContext::default())
            .err()
            .expect("a typo is refused");
        assert!(error.message.contains("stict"), "{}", error.message);
    }

    #[tokio::test]
    async fn plugins_of_one_factory_share_compiled_schemas() {
        let factory =
            ToolSelectionFactory::new(&mut Registry::default(), SchemaChecker::standalone());
        let first = factory
            .build(&json!({}), &BuildContext::default())
            .expect("valid");
        let second = factory
            .build(&json!({"strict": true}), &BuildContext::default())
            .expect("valid");
        let response = Parsed::Parsed(crate::testing::parse_response(&response_with_calls(&[(
            "send_email",
            r#"{"to":"a@b.c"}"#,
        )])));
        for plugin in [&first, &second, &first] {
            // A fresh parse each time: the cache keys on the text, not on a parsed object.
            let request = Parsed::Parsed(parse_request(&request_with_tools(email_tools())));
            let verdict = run(plugin.as_ref(), &request, &response).await;
            assert!(matches!(verdict, Verdict::Continue), "{verdict:?}");
        }
        assert_eq!(factory.schemas.compilations(), 1);
    }
}
