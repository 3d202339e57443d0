//! The `Plugin` trait — one method per stage of an exchange — and the factory that builds a
//! plugin from its per-route settings.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::de::DeserializeOwned;

use crate::catalog::ToolCatalog;
use crate::exchange::{CompletedExchange, RequestExchange, ResponseExchange};
use crate::service::ServiceDescriptor;
use crate::store::{MemoryStore, StateStore, StoreFailMode};
use crate::tenant::Tenant;
use crate::verdict::{RequestEdit, ResponseEdit, Verdict, Violation};

/// What a stage a plugin may leave out did. The defaults answer `Nothing`, and so does a plugin
/// whose settings give it no work there: the gateway learns from the plugin itself which
/// plugins to call, rather than from a flag kept in step with the stage by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum StageWork {
    /// The stage did (or may do) work: keep calling it.
    Done,
    /// The plugin has no work in this stage, ever, with these settings: stop calling it.
    Nothing,
}

/// Which bodies a plugin reads. The gateway buffers and parses a body only when some plugin on
/// the route needs it; otherwise it streams through untouched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BodyNeeds {
    /// Whether the request body is read and parsed before `pre_request`.
    pub request: bool,
    /// Whether a 2xx answer is held and parsed before `pre_response`.
    pub response: bool,
}

impl BodyNeeds {
    /// The request alone: what request-side policies read.
    pub const REQUEST: BodyNeeds = BodyNeeds {
        request: true,
        response: false,
    };
    /// The answer alone: what checks of the calls made read.
    pub const RESPONSE: BodyNeeds = BodyNeeds {
        request: false,
        response: true,
    };
    /// Both bodies: a check of the calls against what the request declared.
    pub const BOTH: BodyNeeds = BodyNeeds {
        request: true,
        response: true,
    };
}

/// A guardrail. Nothing is required: every stage defaults to "continue". Its name is the
/// one its factory registers (the chain entry carries it), never restated here.
///
/// Stages run in priority order (lower first) across the route's chain. The first `Block` in
/// enforce mode ends the stage; in observe mode it is recorded and the chain goes on.
#[async_trait]
pub trait Plugin: Send + Sync + 'static {
    /// The bodies this plugin reads. Default: none, so the exchange streams untouched.
    fn body_needs(&self) -> BodyNeeds {
        BodyNeeds::default()
    }

    /// Runs before the request goes upstream. May block (answered without contacting the
    /// upstream) or modify the request (declared tools, headers): a [`RequestEdit`], so an edit
    /// of the response does not compile here. Default: continue.
    async fn pre_request(&self, _exchange: &RequestExchange<'_>) -> Verdict<RequestEdit> {
        Verdict::Continue
    }

    /// Runs on a successful (2xx) upstream answer before any of it reaches the client. For
    /// streams it runs each time a set of tool calls is complete. Non-2xx answers pass through
    /// without this stage. May block, or modify the answer with [`ResponseEdit`]s (a call's
    /// arguments, response headers). Default: continue.
    async fn pre_response(&self, _exchange: &ResponseExchange<'_>) -> Verdict<ResponseEdit> {
        Verdict::Continue
    }

    /// Runs when calls of a 2xx answer are released to the client — a whole answer just
    /// before it leaves, a stream's calls just before their events do — with those calls, as
    /// the checks' edits left them, in `exchange.response`. What it records is in place before
    /// the client can act on the calls (answer them in its next request); the answer waits for
    /// it, and it cannot change anything. Default: [`StageWork::Nothing`], and a plugin whose
    /// settings give it nothing to record says so too: the gateway then stops calling it.
    async fn on_delivery(&self, _exchange: &ResponseExchange<'_>) -> StageWork {
        StageWork::Nothing
    }

    /// Runs after the client got its answer, for accounting; it cannot change anything. The
    /// stage costs a task per exchange: a plugin with no accounting to do (the default, or by
    /// its settings) answers [`StageWork::Nothing`], and the gateway stops scheduling it.
    async fn post_response(&self, _exchange: &CompletedExchange<'_>) -> StageWork {
        StageWork::Nothing
    }

    /// Why this plugin would keep `tool` from a request like `query`, or `None` when it would
    /// not. Answers `GET /tools` (discovery) with the same rules the stages enforce.
    fn unavailability(&self, _query: &AvailabilityQuery, _tool: &str) -> Option<Violation> {
        None
    }

    /// The plugin's progressive tool disclosure, if it offers one: the gateway shows the model
    /// what it says and answers the model's discovery calls through it. At most one per chain.
    fn disclosure(&self) -> Option<&dyn crate::disclosure::ToolDisclosure> {
        None
    }

    /// `call`'s arguments as this plugin redacts them wherever they are kept (a captured
    /// answer), or `None` when it redacts nothing of them. A plugin that replaces secrets in the
    /// answers clients get answers here too, so what is kept holds no more than they do.
    fn redacted_arguments(&self, _call: &crate::ToolCall) -> Option<String> {
        None
    }

    /// Completes a `GET /tools` query with what this plugin keeps for it before the tools are
    /// judged: a plugin that keeps each conversation's workflow state sets `query.state` to the
    /// stored one when `query.conversation` names a conversation. `Err` says why it could not
    /// (the store did not answer). Default: the query as it is.
    async fn resolve_availability(&self, _query: &mut AvailabilityQuery) -> Result<(), String> {
        Ok(())
    }
}

/// A would-be request, as `GET /tools` describes it.
#[derive(Debug, Clone, Default)]
pub struct AvailabilityQuery {
    /// The groups it would ask for (`None`: none named).
    pub groups: Option<Vec<String>>,
    /// The workflow state it would be in (`None`: the initial state).
    pub state: Option<String>,
    /// The tenant it would be sent as (`None`: no tenant, or tenants are not configured).
    pub tenant: Option<Arc<Tenant>>,
    /// The conversation it would continue, whose kept state (if a plugin keeps one) wins
    /// over `state`.
    pub conversation: Option<String>,
}

/// Builds a plugin from the `settings` table of one route's entry. Registered once per process;
/// `build` runs at every config load, so it must be cheap and must not do I/O.
pub trait PluginFactory: Send + Sync + 'static {
    /// The name users write in `[[plugins]] name = "…"`.
    fn name(&self) -> &'static str;

    /// Where the plugin runs in the chain when the config does not say (lower runs first).
    fn default_priority(&self) -> i32 {
        0
    }

    /// Validates `settings` and builds the plugin. Unknown keys must be refused. `context`
    /// carries what the config says outside the plugin's own table (the tool catalog, tenants).
    fn build(
        &self,
        settings: &serde_json::Value,
        context: &BuildContext,
    ) -> Result<Arc<dyn Plugin>, SettingsError>;

    /// The state of what this factory's plugins share and depend on (a validator service's
    /// circuit breaker, say), as one section of the admin `/health` detail: its key and a JSON
    /// value. Read on every `/health`, so it must be cheap and do no I/O. Default: nothing.
    fn health(&self) -> Option<(&'static str, serde_json::Value)> {
        None
    }
}

/// How a plugin is built from its settings: the body of [`PluginFactory::build`].
pub type BuildFn = dyn Fn(&serde_json::Value, &BuildContext) -> Result<Arc<dyn Plugin>, SettingsError>
    + Send
    + Sync;

/// A factory given as its name, default priority and build function: what a plugin crate
/// writes when its factory holds nothing the closure cannot capture (shared metrics, say).
pub fn factory(
    name: &'static str,
    default_priority: i32,
    build: impl Fn(&serde_json::Value, &BuildContext) -> Result<Arc<dyn Plugin>, SettingsError>
    + Send
    + Sync
    + 'static,
) -> Arc<dyn PluginFactory> {
    Arc::new(FnFactory {
        name,
        default_priority,
        build: Box::new(build),
    })
}

struct FnFactory {
    name: &'static str,
    default_priority: i32,
    build: Box<BuildFn>,
}

impl PluginFactory for FnFactory {
    fn name(&self) -> &'static str {
        self.name
    }

    fn default_priority(&self) -> i32 {
        self.default_priority
    }

    fn build(
        &self,
        settings: &serde_json::Value,
        context: &BuildContext,
    ) -> Result<Arc<dyn Plugin>, SettingsError> {
        (self.build)(settings, context)
    }
}

/// What a plugin crate's factories are made with, once per process: the registry their
/// metrics go into, and the schema checks every part of toolgate shares.
pub struct FactoryContext<'a> {
    /// The Prometheus registry of the process (`/metrics`).
    pub metrics: &'a mut prometheus_client::registry::Registry,
    /// The process's JSON Schema checks and compiled-schema cache.
    pub schemas: &'a crate::schema::SchemaChecker,
}

/// The one function a plugin crate exports for the gateway's registry: its factories, made
/// once per process. A crate of plugins is built in by one line naming this function.
pub type CrateFactories = fn(&mut FactoryContext<'_>) -> Vec<Arc<dyn PluginFactory>>;

/// The gateway-wide sections of one config load that a plugin may read while it is built.
/// The gateway fills it in; a test or a tool builds one with `Default` and sets what it needs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BuildContext {
    /// The route the plugin is built for (its path prefix); empty outside a route.
    pub route: String,
    /// Whether that route is an MCP route, where toolgate executes each call itself: a plugin
    /// refuses a setting that cannot take effect there (there is no model answer to rewrite).
    pub mcp_route: bool,
    /// `[tools.NAME]`: groups, states, categories and action types.
    pub catalog: Arc<ToolCatalog>,
    /// `[tenants.NAME]`, by name.
    pub tenants: Arc<BTreeMap<String, Arc<Tenant>>>,
    /// `[store]`: the shared state store (one per process and store URL, kept across reloads).
    pub store: Arc<dyn StateStore>,
    /// `[store] fail_mode`: what a plugin does when the store cannot answer.
    pub store_fail_mode: StoreFailMode,
    /// `[services.NAME]`: the validator services plugins may call, by name.
    pub services: Arc<BTreeMap<String, Arc<ServiceDescriptor>>>,
}

impl Default for BuildContext {
    /// An empty context with a fresh in-memory store.
    fn default() -> Self {
        BuildContext {
            route: "".into(),
            mcp_route: false,
            catalog: Arc::default(),
            tenants: Arc::default(),
            store: Arc::new(MemoryStore::default()),
            store_fail_mode: StoreFailMode::default(),
            services: Arc::default(),
        }
    }
}

/// A settings error, located by the key path inside the plugin's `settings` table so the gateway
/// can point at the file, line and column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SettingsError {
    /// Dotted key path inside `settings` (`judge.timeout_ms`), empty for the table itself.
    pub path: String,
    /// What is wrong with the value, for people.
    pub message: String,
    /// Further errors of the same settings, so `toolgate check` names them all in one run.
    pub more: Vec<SettingsError>,
}

impl SettingsError {
    /// An error at `path` (dotted, inside `settings`).
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        SettingsError {
            path: path.into(),
            message: message.into(),
            more: Vec::new(),
        }
    }

    /// One error carrying all of `errors` (the first, then the others in `more`), or `None`
    /// when there are none: for a plugin that checks every entry before answering.
    pub fn all(errors: Vec<SettingsError>) -> Option<SettingsError> {
        let mut errors = errors.into_iter();
        let mut first = errors.next()?;
        first.more.extend(errors);
        Some(first)
    }

    /// This error and every one in `more`, flattened.
    pub fn each(mut self) -> Vec<SettingsError> {
        let more = std::mem::take(&mut self.more);
        let mut flat = vec![self];
        flat.extend(more.into_iter().flat_map(SettingsError::each));
        flat
    }
}

/// Deserializes a settings table into `T`, reporting the failing key's path.
pub fn parse_settings<T: DeserializeOwned>(
    settings: &serde_json::Value,
) -> Result<T, SettingsError> {
    serde_path_to_error::deserialize(settings).map_err(|error| {
        let path = error.path().to_string();
        let path = if path == "." { String::new() } else { path };
        SettingsError::new(path, error.into_inner().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Example {
        timeout_ms: u64,
    }

    #[test]
    fn settings_errors_name_the_key() {
        let error = parse_settings::<Example>(&serde_json::json!({"timeout_ms": "soon"}))
            .expect_err("a string is not a number");
        assert_eq!(error.path, "timeout_ms");
        assert!(error.message.contains("invalid type"), "{}", error.message);
    }

    #[test]
    fn several_errors_travel_as_one_and_come_apart_in_order() {
        assert!(SettingsError::all(Vec::new()).is_none());
        let all = SettingsError::all(vec![
            SettingsError::new("a", "first"),
            SettingsError::new("b", "second"),
            SettingsError::new("c", "third"),
        ])
        .expect("three errors");
        assert_eq!(all.path, "a");
        let paths: Vec<String> = all.each().into_iter().map(|error| error.path).collect();
        assert_eq!(paths, ["a", "b", "c"]);
    }

    #[test]
    fn unknown_keys_are_refused() {
        let error = parse_settings::<Example>(&serde_json::json!({"timeout_ms": 1, "colour": 2}))
            .expect_err("unknown key");
        assert!(error.message.contains("colour"), "{}", error.message);
    }
}
