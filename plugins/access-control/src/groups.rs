//! The tool_groups plugin: before the request, the declared tools are cut down to those of
//! the requested groups that are available in the conversation's state, so the model only sees
//! those; before the response, a call to any other tool is blocked (defence in depth).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http::HeaderValue;
use serde::Deserialize;
use serde_json::json;
use toolgate_plugin::directives::STATE_HEADER;
use toolgate_plugin::{
    AvailabilityQuery, BodyNeeds, Check, ExchangeMeta, Plugin, RequestEdit, RequestExchange,
    ResponseEdit, ResponseExchange, StageWork, StateStore, StoreFailMode, ToolCatalog, Unavailable,
    Verdict, Violation,
};

use crate::metrics::{AccessMetrics, GroupLabel, TenantLabel, TransitionLabels, known_or_other};
use crate::selection::{self, Refusal, Selection, entry_of};
use crate::workflow::{self, Applied, OnInvalidTransition};
use toolgate_plugin::tool_removal::{self, OnEmpty};

pub const PLUGIN_NAME: &str = "tool_groups";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GroupsSettings {
    #[serde(default)]
    pub on_empty: OnEmpty,
    /// Where the workflow state comes from.
    #[serde(default)]
    pub state_source: StateSource,
    /// `store` mode: what a latest-turn call to a tool its state did not offer gets.
    #[serde(default)]
    pub on_invalid_transition: OnInvalidTransition,
    /// `store` mode: how long a conversation's record lives after its last change.
    #[serde(default = "default_conversation_ttl_secs")]
    pub conversation_ttl_secs: u64,
}

fn default_conversation_ttl_secs() -> u64 {
    7 * 24 * 3600
}

/// Where a conversation's workflow state comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StateSource {
    /// Derived from the history the client sends (and the state it names) on every request:
    /// no memory, so the client decides what it claims.
    #[default]
    Client,
    /// Kept by toolgate in the state store per tenant and conversation (recommended).
    Store,
}

pub(crate) struct ToolGroups {
    pub settings: GroupsSettings,
    pub catalog: Arc<ToolCatalog>,
    pub metrics: Arc<AccessMetrics>,
    pub store: Arc<dyn StateStore>,
    pub store_fail_mode: StoreFailMode,
}

impl ToolGroups {
    fn select(&self, exchange: &RequestExchange<'_>) -> Result<Selection, Refusal> {
        selection::read(
            exchange.headers,
            exchange.request,
            exchange.meta.tenant.as_deref(),
            &self.catalog,
        )
    }

    /// `store` mode: the selection with the state toolgate keeps for the conversation, moved
    /// by this request's latest turn once; or the verdict that refuses the request.
    async fn kept_state(
        &self,
        exchange: &RequestExchange<'_>,
        tenant: Option<&str>,
        selection: Selection,
    ) -> Result<Selection, Verdict<RequestEdit>> {
        let conversation = self
            .conversation_of(
                exchange.headers,
                selection.conversation.as_deref(),
                exchange.request.as_parsed(),
                tenant,
            )
            .await
            .map_err(|refusal| Verdict::Block(*refusal.rejection))?;
        let key = workflow::record_key(tenant, &conversation);
        let claimed = selection.claimed_state.clone();
        let applied = workflow::apply(
            self.store.as_ref(),
            &key,
            self.conversation_ttl(),
            exchange.request.as_parsed(),
            &self.catalog,
            self.settings.on_invalid_transition,
            claimed.as_deref(),
            selection.clone(),
        )
        .await;
        match applied {
            Ok(Applied::Settled(selection)) => {
                if !selection.ignored_results.is_empty() {
                    self.count_escalation(exchange.meta);
                }
                Ok(selection)
            }
            Ok(Applied::Invalid(refusal)) => {
                match refusal
                    .rejection
                    .violations
                    .first()
                    .map(|v| v.code.as_str())
                {
                    Some("invalid_transition") => {
                        self.metrics.invalid_state_transitions.inc();
                    }
                    Some("undelivered_call") => self.count_escalation(exchange.meta),
                    _ => {}
                }
                Err(Verdict::Block(*refusal.rejection))
            }
            Err(error) => {
                tracing::warn!(request_id = %exchange.meta.request_id, store = %self.store.describe(), %error, "the workflow state could not be read or kept");
                match self.store_fail_mode {
                    // The state the history gives, as in `client` mode.
                    StoreFailMode::Allow => Ok(selection),
                    StoreFailMode::Block => Err(Verdict::Block(Unavailable::Store.rejection(
                        vec![Unavailable::Store.violation(
                            Check::State,
                            "the workflow state cannot be kept right now: the state store did not answer",
                        )],
                    ))),
                }
            }
        }
    }

    /// The conversation a request names; or, when it names none but answers calls of a stored
    /// response (a Responses continuation), the one those calls were delivered in.
    async fn conversation_of(
        &self,
        headers: &http::HeaderMap,
        named_in_body: Option<&str>,
        request: Option<&toolgate_plugin::ToolRequest>,
        tenant: Option<&str>,
    ) -> Result<String, Refusal> {
        let refusal = match workflow::conversation(headers, named_in_body) {
            Ok(conversation) => return Ok(conversation),
            Err(refusal) => refusal,
        };
        let missing = refusal
            .rejection
            .violations
            .first()
            .is_some_and(|violation| violation.code == "missing_conversation");
        if !missing {
            return Err(refusal);
        }
        match workflow::continued_conversation(self.store.as_ref(), tenant, request).await {
            Ok(Some(conversation)) => Ok(conversation),
            Ok(None) => Err(refusal),
            Err(error) => {
                tracing::warn!(store = %self.store.describe(), %error, "a continued conversation could not be looked up");
                Err(refusal)
            }
        }
    }

    fn conversation_ttl(&self) -> Duration {
        Duration::from_secs(self.settings.conversation_ttl_secs.max(1))
    }

    /// `store` mode: records the calls the client is about to get in the conversation's
    /// record, so their results can move the state later. A failure is logged: those results
    /// will then be refused as undelivered, which errs on the safe side.
    async fn record_delivery(&self, exchange: &ResponseExchange<'_>) {
        let Some(delivered) = exchange.response.as_parsed() else {
            return;
        };
        let named_in_body = exchange
            .request
            .as_parsed()
            .and_then(|request| request.directives().ok().flatten())
            .and_then(|directives| directives.conversation);
        let tenant = exchange
            .meta
            .tenant
            .as_deref()
            .map(|tenant| tenant.name.as_str());
        // pre_request refused a request without a conversation it could find, so there is one.
        let Ok(conversation) = self
            .conversation_of(
                exchange.request_headers,
                named_in_body.as_deref(),
                exchange.request.as_parsed(),
                tenant,
            )
            .await
        else {
            return;
        };
        let key = workflow::record_key(tenant, &conversation);
        let ttl = self.conversation_ttl();
        let mut recorded =
            workflow::record_delivery(self.store.as_ref(), &key, ttl, &delivered.calls).await;
        // Only the Responses API continues a conversation kept on the server by outputs alone:
        // the calls of other formats need no way back to their conversation by id.
        let responses = exchange
            .request
            .as_parsed()
            .is_some_and(|request| request.format == Some(toolgate_plugin::WireFormat::Responses));
        if recorded.is_ok() && responses {
            recorded = workflow::remember_calls(
                self.store.as_ref(),
                (tenant, &conversation),
                ttl,
                &delivered.calls,
            )
            .await;
        }
        if let Err(error) = recorded {
            tracing::warn!(request_id = %exchange.meta.request_id, store = %self.store.describe(), %error, "the delivered calls could not be recorded: their results will not move the workflow state");
        }
    }

    fn count_escalation(&self, meta: &ExchangeMeta) {
        self.metrics
            .privilege_escalation_attempts
            .get_or_create(&TenantLabel {
                tenant: meta
                    .tenant
                    .as_ref()
                    .map(|tenant| tenant.name.clone())
                    .unwrap_or_default(),
            })
            .inc();
    }

    fn group_label(&self, group: &str) -> GroupLabel {
        GroupLabel {
            group: known_or_other(group, |group| self.catalog.knows_group(group)),
        }
    }

    fn state_label(&self, state: &str) -> String {
        known_or_other(state, |state| self.catalog.knows_state(state))
    }

    fn count_refusal(&self, refusal: &Refusal, tenant: Option<&str>) {
        if refusal.denied_groups.is_empty() {
            return;
        }
        for group in &refusal.denied_groups {
            self.metrics
                .group_access_denied
                .get_or_create(&self.group_label(group))
                .inc();
        }
        self.metrics
            .privilege_escalation_attempts
            .get_or_create(&TenantLabel {
                tenant: tenant.unwrap_or_default().to_owned(),
            })
            .inc();
    }

    fn count_selection(&self, selection: &Selection) {
        for group in &selection.groups {
            self.metrics
                .group_requests
                .get_or_create(&self.group_label(group))
                .inc();
        }
        for transition in &selection.transitions {
            self.metrics
                .state_transitions
                .get_or_create(&TransitionLabels {
                    tool: transition.tool.clone(),
                    from: self.state_label(&transition.from),
                    to: self.state_label(&transition.to),
                })
                .inc();
        }
        self.metrics
            .invalid_state_transitions
            .inc_by(selection.invalid_transitions as u64);
    }
}

#[async_trait]
impl Plugin for ToolGroups {
    fn body_needs(&self) -> BodyNeeds {
        BodyNeeds::BOTH
    }

    async fn pre_request(&self, exchange: &RequestExchange<'_>) -> Verdict<RequestEdit> {
        let tenant = exchange
            .meta
            .tenant
            .as_deref()
            .map(|tenant| tenant.name.as_str());
        let selection = match self.select(exchange) {
            Ok(selection) => selection,
            Err(refusal) => {
                self.count_refusal(&refusal, tenant);
                return Verdict::Block(*refusal.rejection);
            }
        };
        let selection = match self.settings.state_source {
            StateSource::Client => selection,
            StateSource::Store => match self.kept_state(exchange, tenant, selection).await {
                Ok(selection) => selection,
                Err(verdict) => return verdict,
            },
        };
        self.count_selection(&selection);
        // The first settling wins: a chain runs tool_groups once per exchange.
        let _ = exchange.meta.workflow_state.set(selection.state.clone());

        let mut available = Vec::new();
        let (mut filtered_by_group, mut filtered_by_state) = (Vec::new(), Vec::new());
        for tool in exchange.declared_tools() {
            let mut fallback = None;
            let entry = entry_of(&self.catalog, &tool.name, &mut fallback);
            if !selection.in_groups(entry) {
                filtered_by_group.push(tool.name.clone());
            } else if !entry.available_in(&selection.state) {
                filtered_by_state.push(tool.name.clone());
            } else {
                available.push(tool.name.clone());
            }
        }
        self.metrics.filtered_tools.observe(available.len() as f64);

        let mut edits = vec![
            RequestEdit::Annotate("requested_groups".into(), json!(selection.groups)),
            RequestEdit::Annotate("initial_state".into(), json!(selection.initial_state)),
            RequestEdit::Annotate("state".into(), json!(selection.state)),
            RequestEdit::Annotate("state_transitions".into(), json!(selection.transitions)),
            RequestEdit::Annotate("available_tools".into(), json!(available)),
            RequestEdit::Annotate("filtered_by_group".into(), json!(filtered_by_group)),
            RequestEdit::Annotate("filtered_by_state".into(), json!(filtered_by_state)),
        ];
        if !selection.ignored_results.is_empty() {
            edits.push(RequestEdit::Annotate(
                "ignored_results".into(),
                json!(selection.ignored_results),
            ));
        }
        if let Ok(state) = HeaderValue::from_str(&selection.state) {
            edits.push(RequestEdit::SetResponseHeader(
                http::HeaderName::from_static(STATE_HEADER),
                state,
            ));
        }
        let removed: Vec<String> = filtered_by_group
            .into_iter()
            .chain(filtered_by_state)
            .collect();
        tool_removal::verdict(
            exchange.declared_tools(),
            removed,
            self.settings.on_empty,
            Check::Group,
            edits,
        )
    }

    async fn pre_response(&self, exchange: &ResponseExchange<'_>) -> Verdict<ResponseEdit> {
        if exchange.calls().is_empty() {
            return Verdict::Continue;
        }
        // The request passed pre_request, so its selection reads again without a refusal.
        let Ok(mut selection) = selection::read(
            exchange.request_headers,
            exchange.request,
            exchange.meta.tenant.as_deref(),
            &self.catalog,
        ) else {
            return Verdict::Continue;
        };
        // The state pre_request settled (toolgate's own, in `store` mode) is the one that holds.
        if let Some(state) = exchange.meta.workflow_state.get() {
            selection.state = state.clone();
        }
        let mut violations = Vec::new();
        for call in exchange.calls() {
            let mut fallback = None;
            let entry = entry_of(&self.catalog, &call.name, &mut fallback);
            if !selection.in_groups(entry) {
                violations.push(Violation::on_call(
                    Check::Group,
                    "tool_not_in_requested_groups",
                    call,
                    format!(
                        "'{}' is in groups {:?}, none of which the request asked for ({:?})",
                        call.name, entry.groups, selection.groups
                    ),
                ));
            } else if !entry.available_in(&selection.state) {
                violations.push(Violation::on_call(
                    Check::State,
                    "tool_not_available_in_state",
                    call,
                    format!(
                        "'{}' is available in states {:?}, not in the current state '{}'",
                        call.name, entry.available_in_states, selection.state
                    ),
                ));
            }
        }
        if violations.is_empty() {
            return Verdict::Continue;
        }
        self.count_escalation(exchange.meta);
        Verdict::Block(toolgate_plugin::Rejection::forbidden(violations))
    }

    /// Only a state toolgate keeps binds results to the calls it delivered.
    async fn on_delivery(&self, exchange: &ResponseExchange<'_>) -> StageWork {
        if self.settings.state_source != StateSource::Store {
            return StageWork::Nothing;
        }
        self.record_delivery(exchange).await;
        StageWork::Done
    }

    /// `store` mode: a query naming a conversation is answered for the state kept for it (a
    /// conversation toolgate has not seen is in the initial state), whatever state it named.
    async fn resolve_availability(&self, query: &mut AvailabilityQuery) -> Result<(), String> {
        if self.settings.state_source != StateSource::Store {
            return Ok(());
        }
        let Some(conversation) = query.conversation.as_deref() else {
            return Ok(());
        };
        let tenant = query.tenant.as_ref().map(|tenant| tenant.name.as_str());
        let key = workflow::record_key(tenant, conversation);
        let stored = self.store.read_record(&key).await.map_err(|error| {
            format!("the conversation's workflow state could not be read: {error}")
        })?;
        query.state = Some(workflow::stored_state(stored.as_deref()));
        Ok(())
    }

    fn unavailability(&self, query: &AvailabilityQuery, tool: &str) -> Option<Violation> {
        let mut headers = http::HeaderMap::new();
        if let Some(groups) = &query.groups
            && let Ok(value) = HeaderValue::from_str(&groups.join(","))
        {
            headers.insert(toolgate_plugin::directives::GROUP_HEADER, value);
        }
        if let Some(state) = &query.state
            && let Ok(value) = HeaderValue::from_str(state)
        {
            headers.insert(STATE_HEADER, value);
        }
        let selection = match selection::read(
            &headers,
            &toolgate_plugin::Parsed::Absent,
            query.tenant.as_deref(),
            &self.catalog,
        ) {
            Ok(selection) => selection,
            Err(refusal) => return refusal.rejection.violations.into_iter().next(),
        };
        let mut fallback = None;
        let entry = entry_of(&self.catalog, tool, &mut fallback);
        if !selection.in_groups(entry) {
            Some(Violation::new(
                Check::Group,
                "tool_not_in_requested_groups",
                format!(
                    "in groups {:?}, none of {:?}",
                    entry.groups, selection.groups
                ),
            ))
        } else if !entry.available_in(&selection.state) {
            Some(Violation::new(
                Check::State,
                "tool_not_available_in_state",
                format!(
                    "available in states {:?}, not in '{}'",
                    entry.available_in_states, selection.state
                ),
            ))
        } else {
            None
        }
    }
}
