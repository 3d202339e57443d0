//! An exchange under progressive tool disclosure (`tool_disclosure`, docs/disclosure.md): the
//! request the model is shown (the index, the discovery tools, the loaded definitions), and
//! the rounds in which the gateway answers the model's discovery calls and asks it again. The
//! client's own declaration is untouched in `request`, so every check of the calls that reach
//! the client judges them against what the client declared.

use bytes::Bytes;
use toolgate_formats::disclosure::DisclosedTools;
use toolgate_formats::on_block::CallFeedback;
use toolgate_plugin::directives::{GROUP_HEADER, split_list};
use toolgate_plugin::{
    AvailabilityQuery, Check, DisclosureSession, DiscoveryLimits, Parsed, Rejection,
    RequestExchange, ToolCall, ToolDefinition, Violation,
};

use super::Exchange;
use crate::error::GatewayError;
use crate::on_block::OnBlock;

/// The disclosure of one exchange, once opened.
pub struct Disclosing {
    session: Box<dyn DisclosureSession>,
    /// The names the gateway answers.
    discovery: Vec<toolgate_plugin::DiscoveryTool>,
    limits: DiscoveryLimits,
    /// What the disclosure entry's block does (a round limit reached).
    on_block: OnBlock,
    /// The conversation with every declared tool hidden, continued by each round: each
    /// round's request is this, shown with the latest view (hidden once: a round's cost does
    /// not grow with what the client declared).
    conversation: Bytes,
    /// Declared tools hiding left in the conversation (one its `tool_choice` forces): never
    /// declared a second time when loaded.
    kept: Vec<String>,
    rounds: u32,
}

/// What a round of the model's discovery calls comes to.
pub enum Discovered {
    /// The conversation, with the discovery calls answered, goes upstream again.
    Again(Bytes),
    /// The model may not discover any further: blocked, as the disclosure entry's `on_block`
    /// says (a `message` or the 403; never a retry of the same conversation).
    Refused(Rejection, Option<OnBlock>),
}

impl Exchange {
    /// Whether the model is shown a disclosed view of the tools.
    pub fn discloses(&self) -> bool {
        self.disclosure.is_some()
    }

    /// Opens the route's disclosure over the request about to go upstream (after every
    /// `pre_request`): `body` becomes what the model is shown. A request the disclosure
    /// refuses (a declared tool named like a discovery tool, the store down) is refused.
    pub async fn disclose(&mut self, body: &mut Bytes) -> Result<(), Rejection> {
        let route = self.route.clone();
        let Some((disclosure, on_block)) = route.chain.disclosure() else {
            return Ok(());
        };
        let Parsed::Parsed(_) = &self.request else {
            return Ok(());
        };
        let Ok(definitions) = self.format.tool_definitions(body) else {
            return Ok(());
        };
        let declared: Vec<String> = definitions.iter().map(|tool| tool.name.clone()).collect();
        let declared: Vec<&str> = declared.iter().map(String::as_str).collect();
        let Ok(conversation) = self.format.hide_tools(body, &declared) else {
            return Ok(());
        };
        let kept = (self.format.tool_definitions(&conversation))
            .map(|tools| tools.into_iter().map(|tool| tool.name).collect())
            .unwrap_or_default();
        let permitted = self.permitted(definitions);
        let view = RequestExchange {
            meta: &self.meta,
            headers: &self.request_headers,
            request: &self.request,
        };
        let Some(session) = disclosure.open(&view, permitted).await? else {
            return Ok(());
        };
        let disclosing = Disclosing {
            session,
            discovery: disclosure.discovery_tools().to_vec(),
            limits: disclosure.limits(),
            on_block,
            conversation,
            kept,
            rounds: 0,
        };
        match disclosing.shown(self.format) {
            Ok(shown) => {
                *body = shown;
                self.disclosure = Some(Box::new(disclosing));
                Ok(())
            }
            Err(error) => {
                // Shown as declared: more tokens, nothing unchecked.
                tracing::warn!(request_id = %self.meta.request_id, %error, "the request could not be disclosed; it goes as declared");
                Ok(())
            }
        }
    }

    /// The declared tools the route's enforcing plugins would leave the request: disclosure
    /// never shows the model a tool it could not call.
    fn permitted(&self, definitions: Vec<ToolDefinition>) -> Vec<ToolDefinition> {
        let directives = self
            .request
            .as_parsed()
            .and_then(|request| request.directives().ok().flatten())
            .unwrap_or_default();
        let header_groups = (self.request_headers.get(GROUP_HEADER))
            .and_then(|value| value.to_str().ok())
            .map(split_list);
        let query = AvailabilityQuery {
            groups: header_groups.or(directives.group),
            state: (self.meta.workflow_state.get().cloned()).or(directives.state),
            tenant: self.meta.tenant.clone(),
            conversation: None,
        };
        definitions
            .into_iter()
            .filter(|tool| {
                self.route
                    .chain
                    .unavailability(&query, &tool.name)
                    .is_empty()
            })
            .collect()
    }

    /// The discovery calls of an answer (`calls`), answered: the conversation goes upstream
    /// again with them answered, or the model may not discover further. `None` when the answer
    /// calls no discovery tool (or the exchange discloses nothing). `nothing_sent`: no byte of
    /// this answer has reached the client (a stream's text may have); `usage`, what the
    /// upstream billed for it.
    pub async fn discovery_round(
        &mut self,
        calls: &[ToolCall],
        usage: Option<serde_json::Value>,
        nothing_sent: bool,
    ) -> Option<Discovered> {
        let disclosing = self.disclosure.as_mut()?;
        let discovers =
            |call: &ToolCall| (disclosing.discovery.iter()).any(|tool| tool.name == call.name);
        let first = calls.iter().find(|call| discovers(call))?;
        // The turn of one choice goes back: the one the first discovery call is in.
        let turn: Vec<&ToolCall> = calls
            .iter()
            .filter(|call| call.choice == first.choice)
            .collect();
        let on_block = match disclosing.on_block {
            OnBlock::Retry(_) => OnBlock::Error,
            other => other,
        };
        let refusal = if !nothing_sent {
            Some(("discovery_after_release", "the model called a discovery tool after part of its answer reached the client; only a call before any text can be answered".to_owned()))
        } else if disclosing.rounds >= disclosing.limits.max_rounds {
            Some((
                "discovery_rounds_exhausted",
                format!(
                    "the model was still discovering tools after {} rounds, the most this route answers",
                    disclosing.limits.max_rounds
                ),
            ))
        } else if self.started.elapsed() >= disclosing.limits.deadline {
            Some((
                "discovery_deadline",
                format!(
                    "the model was still discovering tools after {} ms, past this route's round deadline",
                    disclosing.limits.deadline.as_millis()
                ),
            ))
        } else {
            None
        };
        if let Some((code, message)) = refusal {
            let violations = turn
                .iter()
                .filter(|call| discovers(call))
                .map(|call| {
                    Violation::on_call(Check::Custom("disclosure"), code, call, message.clone())
                })
                .collect();
            return Some(Discovered::Refused(
                Rejection::forbidden(violations),
                Some(on_block),
            ));
        }
        let discovery_calls: Vec<&ToolCall> = turn
            .iter()
            .copied()
            .filter(|call| discovers(call))
            .collect();
        let mut answers = disclosing
            .session
            .answer(&discovery_calls)
            .await
            .into_iter();
        let feedback: Vec<CallFeedback> = turn
            .iter()
            .map(|call| CallFeedback {
                call,
                result: if discovers(call) {
                    answers.next().unwrap_or_default()
                } else {
                    "Not run yet: toolgate answered this turn's discovery calls first. Make this call again if it is still needed.".to_owned()
                },
            })
            .collect();
        disclosing.rounds += 1;
        let continued = match self
            .format
            .retry_request(&disclosing.conversation, &feedback)
        {
            Ok(continued) => continued,
            Err(error) => {
                let violation = Violation::new(
                    Check::Custom("disclosure"),
                    "discovery_unanswerable",
                    format!(
                        "the model's discovery calls could not be answered in this conversation: {error}"
                    ),
                );
                return Some(Discovered::Refused(
                    Rejection::forbidden(vec![violation]),
                    Some(OnBlock::Error),
                ));
            }
        };
        disclosing.conversation = continued;
        let shown = match disclosing.shown(self.format) {
            Ok(shown) => shown,
            Err(error) => {
                let violation = Violation::new(
                    Check::Custom("disclosure"),
                    "discovery_unanswerable",
                    format!("the next round's request could not be written: {error}"),
                );
                return Some(Discovered::Refused(
                    Rejection::forbidden(vec![violation]),
                    Some(OnBlock::Error),
                ));
            }
        };
        if let Some(recovery) = self.recovery.as_mut() {
            recovery.add_usage(usage);
            recovery.body = shown.clone();
        }
        Some(Discovered::Again(shown))
    }

    /// The request of a retry after a block (`on_block = "retry"`) under disclosure: the
    /// blocked turn continues the client's conversation, shown with the latest view.
    pub(super) fn disclosed_retry(
        &mut self,
        feedback: &[CallFeedback<'_>],
    ) -> Option<Result<Bytes, toolgate_plugin::ParseError>> {
        let disclosing = self.disclosure.as_mut()?;
        Some(
            self.format
                .retry_request(&disclosing.conversation, feedback)
                .and_then(|continued| {
                    disclosing.conversation = continued;
                    disclosing.shown(self.format)
                }),
        )
    }

    /// Ends the disclosure: the loaded tools are kept for the conversation, and the audit line
    /// gets what happened.
    pub(super) async fn close_disclosure(&mut self) {
        let Some(mut disclosing) = self.disclosure.take() else {
            return;
        };
        disclosing.session.close().await;
        let mut record = disclosing.session.record();
        if let Some(fields) = record.as_object_mut() {
            fields.insert("rounds".into(), disclosing.rounds.into());
        }
        self.annotations.insert("disclosure".into(), record);
    }

    /// A discovery round's answer that is not one to read (an error status, another kind of
    /// body): the client gets it as the upstream gave it, or this failure.
    pub fn discovery_failed(status: http::StatusCode) -> GatewayError {
        GatewayError::upstream_failed(format!(
            "the upstream answered a discovery round with {status}, not a stream"
        ))
    }
}

impl Disclosing {
    /// The conversation as the model is shown it now.
    fn shown(
        &self,
        format: toolgate_plugin::WireFormat,
    ) -> Result<Bytes, toolgate_plugin::ParseError> {
        let view = self.session.view();
        let shown: Vec<&str> = (view.loaded.iter().zip(&view.definitions))
            .filter(|(name, _)| !self.kept.contains(name))
            .map(|(_, definition)| definition.as_str())
            .collect();
        format.disclose(
            &self.conversation,
            &DisclosedTools {
                shown: &shown,
                discovery: &self.discovery,
                instructions: &view.index,
            },
        )
    }
}
