//! toolgate_tool_disclosure: the `tool_disclosure` plugin, progressive tool disclosure (seed
//! 003) for any client. Agents declare dozens to hundreds of tools on every request; on a route
//! with this plugin the model is shown an index of the permitted tools in its system prompt,
//! three discovery tools (`list_tools`, `load_tool`, `load_tool_resource`) and the full
//! definitions of the tools it loaded. The gateway answers the discovery calls itself, in the
//! exchange's rounds, so the client only ever sees text and calls to its own tools.
//!
//! The loaded tools of a conversation named by `x-toolgate-conversation` (or
//! `toolgate.conversation`) are kept in the state store; without one, the tools the history
//! already called count as loaded. docs/disclosure.md is the user's guide.

mod levels;
mod metrics;
mod session;
mod settings;

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use serde_json::json;
use toolgate_plugin::directives::CONVERSATION_HEADER;
use toolgate_plugin::{
    BodyNeeds, BuildContext, Check, DisclosureSession, DiscoveryLimits, DiscoveryTool,
    FactoryContext, Plugin, PluginFactory, Rejection, RequestExchange, SettingsError, StateStore,
    StoreFailMode, ToolCatalog, ToolDefinition, ToolDisclosure, ToolKey, Unavailable, Violation,
    async_trait, factory, parse_settings,
};

use crate::metrics::DisclosureMetrics;
use crate::session::{Kept, LIST_TOOLS, LOAD_TOOL, LOAD_TOOL_RESOURCE, Memory, Session};
use crate::settings::Settings;

/// The name users write in `[[plugins]] name = "…"`.
const NAME: &str = "tool_disclosure";
/// The check kind of this plugin's violations.
const CHECK: Check = Check::Custom("disclosure");

/// This crate's factories, for the gateway's registry. The priority only orders it among the
/// plugins for `toolgate routes`: the gateway opens the disclosure after every `pre_request`.
pub fn factories(context: &mut FactoryContext<'_>) -> Vec<Arc<dyn PluginFactory>> {
    let metrics = Arc::new(DisclosureMetrics::register(context.metrics));
    vec![factory(NAME, 900, move |settings, context| {
        build(settings, context, metrics.clone())
    })]
}

fn build(
    settings: &serde_json::Value,
    context: &BuildContext,
    metrics: Arc<DisclosureMetrics>,
) -> Result<Arc<dyn Plugin>, SettingsError> {
    let settings: Settings = parse_settings(settings)?;
    settings.check()?;
    if context.mcp_route {
        return Err(SettingsError::new(
            "",
            "tool_disclosure shows a model fewer tools; an MCP route has no model to show them to",
        ));
    }
    let discovery = discovery_tools();
    let discovery_bytes = discovery
        .iter()
        .map(|tool| tool.description.len() + tool.parameters.to_string().len() + tool.name.len())
        .sum();
    Ok(Arc::new(Disclosure {
        shared: Arc::new(Shared {
            settings,
            discovery,
            discovery_bytes,
            catalog: context.catalog.clone(),
            store: context.store.clone(),
            store_fail_mode: context.store_fail_mode,
            metrics,
        }),
    }))
}

/// What every exchange of one route's `tool_disclosure` shares.
pub(crate) struct Shared {
    pub settings: Settings,
    pub discovery: Vec<DiscoveryTool>,
    /// The discovery tools' size as sent, about: what each request carries for them.
    pub discovery_bytes: usize,
    pub catalog: Arc<ToolCatalog>,
    pub store: Arc<dyn StateStore>,
    pub store_fail_mode: StoreFailMode,
    pub metrics: Arc<DisclosureMetrics>,
}

/// The three discovery tools of seed 003.
fn discovery_tools() -> Vec<DiscoveryTool> {
    vec![
        DiscoveryTool {
            name: LIST_TOOLS.into(),
            description: "Lists the tools you can load, one line each (name, category, cost, what it does). Give a query to list only the tools whose line holds every word of it.".into(),
            parameters: json!({"type": "object", "properties": {
                "query": {"type": "string", "description": "Words the tool's line must hold (optional)."}},
                "additionalProperties": false}),
        },
        DiscoveryTool {
            name: LOAD_TOOL.into(),
            description: "Loads a tool's full definition (its description, parameters, examples and failure modes) so you can call it.".into(),
            parameters: json!({"type": "object", "properties": {
                "tool_name": {"type": "string", "description": "The tool's name, as listed."}},
                "required": ["tool_name"], "additionalProperties": false}),
        },
        DiscoveryTool {
            name: LOAD_TOOL_RESOURCE.into(),
            description: "Fetches one of a tool's resources (a guide, a code sample, an example trace) by the id its definition lists.".into(),
            parameters: json!({"type": "object", "properties": {
                "tool_name": {"type": "string"},
                "resource_id": {"type": "string"}},
                "required": ["tool_name", "resource_id"], "additionalProperties": false}),
        },
    ]
}

/// One route's `tool_disclosure`.
struct Disclosure {
    shared: Arc<Shared>,
}

#[async_trait]
impl Plugin for Disclosure {
    fn body_needs(&self) -> BodyNeeds {
        BodyNeeds::BOTH
    }

    fn disclosure(&self) -> Option<&dyn ToolDisclosure> {
        Some(self)
    }
}

#[async_trait]
impl ToolDisclosure for Disclosure {
    fn discovery_tools(&self) -> &[DiscoveryTool] {
        &self.shared.discovery
    }

    fn limits(&self) -> DiscoveryLimits {
        DiscoveryLimits {
            max_rounds: self.shared.settings.max_rounds,
            deadline: Duration::from_millis(self.shared.settings.round_deadline_ms),
        }
    }

    async fn open(
        &self,
        exchange: &RequestExchange<'_>,
        permitted: Vec<ToolDefinition>,
    ) -> Result<Option<Box<dyn DisclosureSession>>, Rejection> {
        if let Some(taken) = exchange.declared_tools().iter().find(|tool| {
            let key = ToolKey::new(&tool.name);
            (self.shared.discovery.iter()).any(|discovery| ToolKey::new(&discovery.name) == key)
        }) {
            return Err(*bad_request(
                "discovery_name_taken",
                format!(
                    "the request declares a tool named '{}', which tool_disclosure gives the model to discover the others: rename the tool, or take this route's tool_disclosure off",
                    taken.name
                ),
            ));
        }
        if permitted.len() < self.shared.settings.min_tools {
            return Ok(None);
        }
        let memory = self
            .memory(exchange)
            .await
            .map_err(|rejection| *rejection)?;
        let mut loaded = memory
            .as_ref()
            .and_then(|memory| memory.stored.as_deref())
            .and_then(|stored| serde_json::from_str::<Kept>(stored).ok())
            .map(|kept| kept.loaded)
            .unwrap_or_default();
        // The tools the conversation already called are known to the model: loaded.
        if let Some(request) = exchange.request.as_parsed() {
            loaded.extend(request.history().into_iter().map(|call| call.name));
        }
        let mut session = Session::new(self.shared.clone(), permitted, loaded, memory);
        session.count_request();
        Ok(Some(Box::new(session)))
    }
}

impl Disclosure {
    /// Where the conversation the request names keeps its loaded tools, read now; `None`
    /// when it names none (or the store cannot answer and the store's fail mode allows).
    async fn memory(
        &self,
        exchange: &RequestExchange<'_>,
    ) -> Result<Option<Memory>, Box<Rejection>> {
        let Some(conversation) = conversation(exchange)? else {
            return Ok(None);
        };
        let tenant = exchange
            .meta
            .tenant
            .as_ref()
            .map_or("", |tenant| &tenant.name);
        let key = format!(
            "toolgate:disclosure:{}:{tenant}:{conversation}",
            tenant.len()
        );
        match self.shared.store.read_record(&key).await {
            Ok(stored) => Ok(Some(Memory { key, stored })),
            Err(error) => {
                tracing::warn!(request_id = %exchange.meta.request_id, %error, "a conversation's loaded tools could not be read");
                match self.shared.store_fail_mode {
                    StoreFailMode::Allow => Ok(None),
                    StoreFailMode::Block => Err(Box::new(Unavailable::Store.rejection(vec![
                        Unavailable::Store.violation(
                            CHECK,
                            "the conversation's loaded tools cannot be read right now: the state store did not answer",
                        ),
                    ]))),
                }
            }
        }
    }
}

/// The conversation a request names by header or in its `toolgate` object, if any.
fn conversation(exchange: &RequestExchange<'_>) -> Result<Option<String>, Box<Rejection>> {
    let header = match exchange.headers.get(CONVERSATION_HEADER) {
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| {
                    bad_request(
                        "invalid_conversation",
                        format!("the {CONVERSATION_HEADER} header is not visible ASCII"),
                    )
                })?
                .trim()
                .to_owned(),
        ),
        None => None,
    };
    let named = exchange
        .request
        .as_parsed()
        .and_then(|request| request.directives().ok().flatten())
        .and_then(|directives| directives.conversation);
    let Some(name) = header.or(named) else {
        return Ok(None);
    };
    if !toolgate_plugin::directives::is_valid_conversation(&name) {
        return Err(bad_request(
            "invalid_conversation",
            toolgate_plugin::directives::invalid_conversation_message(&name),
        ));
    }
    Ok(Some(name))
}

fn bad_request(code: &str, message: String) -> Box<Rejection> {
    Box::new(
        Rejection::forbidden(vec![Violation::new(CHECK, code, message)])
            .with_status(StatusCode::BAD_REQUEST, "invalid_request_error"),
    )
}
