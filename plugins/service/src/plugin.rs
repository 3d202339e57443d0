//! The `service` plugin itself: which stages and calls an instance covers, the envelope it sends
//! for them, and how the service's answer (or its silence) becomes a verdict.

use std::sync::Arc;

use async_trait::async_trait;
use toolgate_plugin::plugin::BodyNeeds;
use toolgate_plugin::{
    Check, ExchangeMeta, Parsed, Plugin, Rejection, RequestEdit, RequestExchange, ResponseEdit,
    ResponseExchange, ToolCall, ToolRequest, Unavailable, Verdict,
};

use crate::client::ServiceClient;
use crate::envelope::{Decision, DeclaredToolView, Envelope, EnvelopeContext, StageEdit};
use crate::failure::{Failure, FailureKind};
use crate::metrics::{CallOutcome, Metrics};
use crate::settings::{FailMode, Settings, Stage};

/// One configured instance (one per chain entry and config load).
pub struct ServicePlugin {
    settings: Settings,
    client: Arc<ServiceClient>,
    metrics: Metrics,
}

impl ServicePlugin {
    pub fn new(settings: Settings, client: Arc<ServiceClient>, metrics: Metrics) -> Self {
        ServicePlugin {
            settings,
            client,
            metrics,
        }
    }

    fn service(&self) -> &str {
        &self.settings.service.name
    }

    fn envelope<'a>(
        &'a self,
        stage: Stage,
        meta: &'a ExchangeMeta,
        request: Option<&'a ToolRequest>,
        calls: Vec<&'a ToolCall>,
        reasoning: Option<&'a str>,
    ) -> Envelope<'a> {
        Envelope {
            user: meta.tenant.as_deref().map(|tenant| tenant.name.as_str()),
            config: &self.settings.config,
            stage: stage.as_str(),
            format: request.and_then(|request| request.format),
            declared_tools: request
                .map(|request| {
                    request
                        .declared_tools
                        .iter()
                        .map(DeclaredToolView::from)
                        .collect()
                })
                .unwrap_or_default(),
            tool_calls: calls,
            context: EnvelopeContext {
                request_id: &meta.request_id,
                route: &meta.route,
                model: request.and_then(|request| request.model.as_deref()),
                stream: request.is_some_and(|request| request.stream),
                user_request: request.and_then(ToolRequest::user_request),
                reasoning,
                tenant_groups: meta
                    .tenant
                    .as_deref()
                    .map(|tenant| tenant.groups.as_slice()),
                access_level: meta
                    .tenant
                    .as_deref()
                    .and_then(|tenant| tenant.access_level.as_deref()),
                workflow_state: meta.workflow_state.get().map(String::as_str),
            },
        }
    }

    /// Sends the envelope and turns the answer into a verdict; a failure goes to the fail mode.
    /// `E` is the stage's edit type, which decides what a `modify` answer may change.
    async fn consult<E: StageEdit>(&self, envelope: Envelope<'_>) -> Verdict<E> {
        let request_id = envelope.context.request_id;
        let calls = envelope.tool_calls.clone();
        let declared = &envelope.declared_tools;
        let answered = match serde_json::to_vec(&envelope) {
            Ok(body) => self.client.call(body).await,
            Err(error) => Err(Failure::new(
                FailureKind::InvalidAnswer,
                format!("cannot encode the envelope: {error}"),
            )),
        };
        let verdict = answered.and_then(|answer| match answer.decision() {
            Decision::Allow => Ok((Verdict::Continue, CallOutcome::Allow)),
            Decision::Deny => match answer.violations(self.service(), &calls, declared) {
                Ok(violations) => Ok((
                    Verdict::Block(Rejection::forbidden(violations)),
                    CallOutcome::Deny,
                )),
                Err(failure) => {
                    // As for a patch below: the call succeeded, its content is unusable.
                    self.metrics.error(self.service(), failure.kind);
                    Err(failure)
                }
            },
            Decision::Modify => match answer.edits::<E>(declared) {
                Ok(edits) => Ok((Verdict::Modify(edits), CallOutcome::Modify)),
                Err(failure) => {
                    // The call itself succeeded (the breaker counted it so); the answer's
                    // content is what cannot be used.
                    self.metrics.error(self.service(), failure.kind);
                    Err(failure)
                }
            },
        });
        match verdict {
            Ok((verdict, outcome)) => {
                self.metrics.call(self.service(), outcome);
                verdict
            }
            Err(failure) => {
                self.metrics.call(self.service(), CallOutcome::Unavailable);
                tracing::warn!(
                    %request_id,
                    service = %self.service(),
                    kind = failure.kind.as_str(),
                    detail = %failure.detail,
                    fail_mode = ?self.settings.fail_mode,
                    "validator service gave no usable answer"
                );
                match self.settings.fail_mode {
                    FailMode::Allow => Verdict::Continue,
                    FailMode::Block => {
                        let message = format!(
                            "validator service '{}' could not answer ({}); blocked by its fail mode",
                            self.service(),
                            failure.kind.as_str()
                        );
                        let violation = Unavailable::Service.violation(Check::Service, message);
                        Verdict::Block(Unavailable::Service.rejection(vec![violation]))
                    }
                }
            }
        }
    }
}

#[async_trait]
impl Plugin for ServicePlugin {
    fn body_needs(&self) -> BodyNeeds {
        BodyNeeds {
            request: true,
            response: self.settings.pre_response,
        }
    }

    /// Asks the service about the declared tools when one of them is in scope.
    async fn pre_request(&self, exchange: &RequestExchange<'_>) -> Verdict<RequestEdit> {
        if !self.settings.pre_request {
            return Verdict::Continue;
        }
        let Parsed::Parsed(request) = exchange.request else {
            return Verdict::Continue;
        };
        if !request
            .declared_tools
            .iter()
            .any(|tool| self.settings.tools.matches(&tool.key()))
        {
            return Verdict::Continue;
        }
        let envelope = self.envelope(
            Stage::PreRequest,
            exchange.meta,
            Some(request),
            Vec::new(),
            None,
        );
        self.consult(envelope).await
    }

    /// Asks the service about every call in scope, all in one request.
    async fn pre_response(&self, exchange: &ResponseExchange<'_>) -> Verdict<ResponseEdit> {
        if !self.settings.pre_response {
            return Verdict::Continue;
        }
        let Parsed::Parsed(response) = exchange.response else {
            return Verdict::Continue;
        };
        let calls: Vec<&ToolCall> = response
            .calls
            .iter()
            .filter(|call| self.settings.tools.matches(&call.key()))
            .collect();
        if calls.is_empty() {
            return Verdict::Continue;
        }
        let envelope = self.envelope(
            Stage::PreResponse,
            exchange.meta,
            exchange.request.as_parsed(),
            calls,
            response.reasoning.as_deref(),
        );
        self.consult(envelope).await
    }
}
