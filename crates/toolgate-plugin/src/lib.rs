//! toolgate-plugin: the vocabulary every toolgate plugin speaks.
//!
//! A plugin sees an exchange (request, then response) through format-neutral views —
//! [`DeclaredTool`]s and [`ToolCall`]s — and answers with a [`Verdict`]. It never touches sockets,
//! never parses a wire format itself, and never decides how its verdict is enforced: the gateway
//! applies the route's mode (enforce / observe) in one place.
//!
//! Design choices:
//! - Wire formats are parsed in exactly one place, [`format`](mod@format), so a new format is one
//!   adapter and every plugin sees it. Parsing types only the fields the checks use; everything
//!   else is skipped, and an allowed body is forwarded as the original bytes, never re-serialized.
//! - Blocking is a verdict, not an error: [`Verdict::Block`] carries [`Violation`]s that the gateway
//!   turns into the OpenAI error envelope.
//! - Plugins are built by a [`PluginFactory`] from their per-route settings, once per config load.
//!
//! # A plugin, whole
//! A plugin that refuses every call to a `delete_*` tool, and the one function its crate exports
//! for the gateway's registry (docs/writing-a-plugin.md walks through the same steps):
//!
//! ```
//! use std::sync::Arc;
//!
//! use toolgate_plugin::{
//!     BodyNeeds, Check, FactoryContext, Plugin, PluginFactory, Rejection, ResponseEdit,
//!     ResponseExchange, Verdict, Violation, async_trait, factory,
//! };
//!
//! struct NoDelete;
//!
//! #[async_trait]
//! impl Plugin for NoDelete {
//!     // Only the answer is read: the gateway buffers nothing else for this plugin.
//!     fn body_needs(&self) -> BodyNeeds {
//!         BodyNeeds::RESPONSE
//!     }
//!
//!     async fn pre_response(&self, exchange: &ResponseExchange<'_>) -> Verdict<ResponseEdit> {
//!         // No calls when the answer could not be read: such an answer passes this plugin.
//!         let refused: Vec<Violation> = (exchange.calls().iter())
//!             .filter(|call| call.name.starts_with("delete_"))
//!             .map(|call| {
//!                 let reason = format!("'{}' deletes; this route does not", call.name);
//!                 Violation::on_call(Check::Custom("no_delete"), "delete_refused", call, reason)
//!             })
//!             .collect();
//!         if refused.is_empty() {
//!             Verdict::Continue
//!         } else {
//!             Verdict::Block(Rejection::forbidden(refused))
//!         }
//!     }
//! }
//!
//! /// One line in the gateway's `src/plugins.rs` names this function.
//! pub fn factories(_context: &mut FactoryContext<'_>) -> Vec<Arc<dyn PluginFactory>> {
//!     vec![factory("no_delete", 50, |_settings, _context| Ok(Arc::new(NoDelete)))]
//! }
//! # let mut registry = toolgate_plugin::prometheus_client::registry::Registry::default();
//! # let schemas = toolgate_plugin::schema::SchemaChecker::standalone();
//! # let mut context = FactoryContext { metrics: &mut registry, schemas: &schemas };
//! # let built = factories(&mut context)[0].build(&serde_json::json!({}), &Default::default());
//! # assert_eq!(built.map(|plugin| plugin.body_needs()).ok(), Some(BodyNeeds::RESPONSE));
//! ```
//!
//! # Layout
//! - [`tool`]: `DeclaredTool`, `ToolCall` and their kinds, the nouns of every check.
//! - [`identity`]: `ToolKey`, a tool name trimmed and case-folded: the one identity every policy
//!   plugin compares, counts and looks tools up by (membership alone stays exact).
//! - [`exchange`]: what a plugin sees at each stage (`RequestExchange`, `ResponseExchange`, …).
//! - [`verdict`]: `Verdict`, `Rejection`, `Violation`, `Check`, the stage edits (`RequestEdit`,
//!   `ResponseEdit`) and the body `Edit` the adapters apply.
//! - [`unavailable`]: `Unavailable`, the one table of what a client is answered when the judge,
//!   a validator service, the state store or the upstream cannot answer.
//! - [`schema`]: the JSON Schema checks of arguments and results, with the process-wide cache
//!   of compiled schemas that tool_selection and the MCP endpoint share.
//! - [`plugin`]: the `Plugin` trait (one method per stage), `PluginFactory` and `BuildContext`.
//! - [`catalog`]: the tool catalog (groups, workflow states, categories, action types), indexed
//!   by `ToolKey`.
//! - [`directives`]: the client's `toolgate` object and `x-toolgate-*` headers.
//! - [`disclosure`]: progressive tool disclosure: `ToolDisclosure`, the plugin's side of it.
//! - [`header_rules`]: the hop-by-hop headers no proxy forwards, and the connection and framing
//!   headers no plugin edit may set.
//! - [`pattern`]: tool-name patterns (`search_*`), matched against a name's `ToolKey`.
//! - [`taxonomy`]: tool categories, action types and access levels (seed 003).
//! - [`tool_removal`]: `OnEmpty` and the one rule for removing declared tools, shared by every
//!   plugin that removes them.
//! - [`tenant`]: the tenant an exchange was authenticated as.
//! - [`service`]: validator service descriptors (`[services.NAME]`) handed to plugin factories.
//! - [`directives`]: the vocabulary of a request's directives (group, state, conversation and
//!   agent headers, the `toolgate` object), from `toolgate-formats`, where the wire formats are
//!   read, one folder per format. Its nouns (`ToolCall`, `ToolRequest`, `WireFormat`, …) are
//!   re-exported at this crate's root; how answers and streams are read is the gateway's.
//! - [`metrics`]: `registered`, a metric made and put in `/metrics` in one call.
//! - [`store`]: the shared state store (fixed-window counters, once-only markers) and its
//!   in-memory implementation.

#![deny(missing_docs)]

pub mod catalog;
pub mod disclosure;
// The wire formats live in `toolgate-formats`; the nouns they yield are part of the plugin API
// (re-exported below, so a plugin depends on this crate alone), and so is the vocabulary of a
// request's directives. How answers, streams and retries are read and written is the
// gateway's, which uses `toolgate-formats` itself.
pub use toolgate_formats::directives;
use toolgate_formats::{edits, format, identity, tool};
pub mod exchange;
pub mod header_rules;
mod json_tape;
pub mod metrics;
pub mod pattern;
pub mod plugin;
pub mod schema;
pub mod service;
pub mod store;
pub mod taxonomy;
pub mod tenant;
pub mod testing;
pub mod tool_removal;
pub mod unavailable;
pub mod verdict;

/// The text type of a declared schema (`DeclaredTool::parameters`), for plugins that build one.
pub use bytestring::ByteString;
pub use catalog::{CatalogTool, CostTier, KeyCollision, ToolCatalog, ToolDocs, ToolResource};
pub use directives::Directives;
pub use disclosure::{
    DisclosedView, DisclosureSession, DiscoveryLimits, DiscoveryTool, ToolDefinition,
    ToolDisclosure,
};
pub use edits::Edit;
pub use exchange::{CompletedExchange, ExchangeMeta, Parsed, RequestExchange, ResponseExchange};
pub use format::{ErrorFacts, ParseError, ParseErrorKind, ToolRequest, ToolResponse, WireFormat};
pub use identity::ToolKey;
pub use metrics::{registered, registered_seconds};
pub use pattern::ToolPattern;
pub use plugin::{
    AvailabilityQuery, BodyNeeds, BuildContext, BuildFn, CrateFactories, FactoryContext, Plugin,
    PluginFactory, SettingsError, StageWork, factory, parse_settings,
};
pub use service::{BreakerSettings, ConfigParam, ServiceDescriptor};
pub use store::{MemoryStore, StateStore, StoreError, StoreFailMode};
pub use tenant::Tenant;
pub use tool::{CallOutcome, DeclaredTool, HistoryCall, ToolCall, ToolKind};
pub use toolgate_formats::DeclaredToolsCache;
pub use unavailable::{FailureStatus, Unavailable};
pub use verdict::{Check, Rejection, RequestEdit, ResponseEdit, Verdict, Violation};

/// Re-exported so plugins register metrics against the same registry type as the gateway.
pub use prometheus_client;

/// Re-exported so a plugin crate needs only this crate to implement [`Plugin`].
pub use async_trait::async_trait;
