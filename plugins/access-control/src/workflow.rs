//! Workflow state kept by toolgate (`state_source = "store"`): one record per tenant and
//! conversation in the state store (memory, or Redis so replicas agree), moved by the results
//! of the model's latest turn exactly once, whatever the client claims or re-sends.
//!
//! A conversation is named by `x-toolgate-conversation` or `toolgate.conversation`. The record
//! holds the state, how many model turns of the conversation it has applied, each transition
//! with its time, and the last 64 calls toolgate delivered to the client that are not answered
//! yet. A request applies its latest turn when that turn is past the record's, or, wherever it
//! sits, when it answers one of those delivered calls (a client that trimmed or summarised its
//! history sends its latest turn at a smaller position); only results of delivered calls (same
//! id, same tool) count, each once, as the first result taken off the list: a retried or
//! replayed request, a call the client made up, or a delivered one answered again under a
//! reused id, moves nothing. Writes are compare-and-set, so two replicas never both apply one
//! turn.

use std::time::Duration;

use http::HeaderMap;
use serde::{Deserialize, Serialize};
use toolgate_plugin::catalog::INITIAL_STATE;
use toolgate_plugin::directives::CONVERSATION_HEADER;
use toolgate_plugin::{
    CallOutcome, Check, HistoryCall, StateStore, StoreError, ToolCall, ToolCatalog, ToolRequest,
};

use crate::selection::{
    CallRef, Refusal, Selection, Transition, bad_request, entry_of, follow_transition, forbidden,
    header_text,
};

/// Transitions kept in a record: enough for an audit of a long conversation, bounded in size.
const KEPT_TRANSITIONS: usize = 200;
/// Delivered calls a record keeps unanswered: the parallel calls of many turns; past that, the
/// oldest go (their results then move nothing).
const KEPT_DELIVERIES: usize = 64;
/// Attempts at a compare-and-set before the request is refused as contended.
const ATTEMPTS: usize = 4;

/// What happens to a call in the latest turn that the state it ran in did not offer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnInvalidTransition {
    /// Refuse the request (403, `check: state`), and record nothing. A result of a call
    /// toolgate never delivered is refused the same way.
    #[default]
    Block,
    /// Count it and apply its transition anyway; a result of a call toolgate never delivered
    /// is ignored (it moves nothing) and named in the audit.
    Allow,
}

/// One conversation's record, as stored (JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WorkflowRecord {
    pub state: String,
    /// Model turns of the conversation whose results are applied (the next turn to apply).
    pub turns_applied: usize,
    pub transitions: Vec<Transition>,
    /// Calls toolgate delivered to the client whose results have not come back: the only
    /// results that may move the state, each once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delivered: Vec<CallRef>,
}

impl WorkflowRecord {
    /// The record as stored, or a new conversation's. A record toolgate cannot read is not
    /// trusted: the conversation starts over.
    fn read(stored: Option<&str>) -> WorkflowRecord {
        match stored.map(serde_json::from_str::<WorkflowRecord>) {
            Some(Ok(record)) => record,
            Some(Err(_)) | None => WorkflowRecord {
                state: INITIAL_STATE.to_owned(),
                ..WorkflowRecord::default()
            },
        }
    }

    /// Whether `result` answers a delivered call still waiting for its result.
    fn is_delivered(&self, result: &HistoryCall) -> bool {
        self.delivered.iter().any(|call| answers(call, result))
    }

    /// Takes the delivered call `result` answers, if one is waiting, and returns its tool.
    fn take_delivered(&mut self, result: &HistoryCall) -> Option<String> {
        let position = self
            .delivered
            .iter()
            .position(|call| answers(call, result))?;
        Some(self.delivered.remove(position).tool)
    }
}

/// Whether `result` answers the delivered `call`: same id and same tool, or, for a result whose
/// call the request does not hold (a Responses continuation by `previous_response_id`), the
/// same id — ids toolgate delivered are the ones it matches.
fn answers(call: &CallRef, result: &HistoryCall) -> bool {
    call.tool_call_id == result.id
        && (call.tool == result.name || (result.name.is_empty() && result.id.is_some()))
}

/// The state a stored record keeps (the initial state for none, or one toolgate cannot read).
pub(crate) fn stored_state(stored: Option<&str>) -> String {
    WorkflowRecord::read(stored).state
}

/// The conversation a request names, checked: 1–128 of `A-Za-z0-9_.:-`.
pub(crate) fn conversation(
    headers: &HeaderMap,
    named_in_body: Option<&str>,
) -> Result<String, Refusal> {
    let header = header_text(headers, CONVERSATION_HEADER)?.map(|text| text.trim().to_owned());
    let name = match (header, named_in_body) {
        (Some(header), Some(body)) if header != body => {
            return Err(bad_request(
                Check::State,
                "conflicting_directives",
                format!(
                    "the {CONVERSATION_HEADER} header and the toolgate.conversation field disagree; send one"
                ),
            ));
        }
        (Some(name), _) => name,
        (None, Some(name)) => name.to_owned(),
        (None, None) => {
            return Err(bad_request(
                Check::State,
                "missing_conversation",
                format!(
                    "this route keeps the workflow state per conversation: name it with the {CONVERSATION_HEADER} header or toolgate.conversation"
                ),
            ));
        }
    };
    if !toolgate_plugin::directives::is_valid_conversation(&name) {
        return Err(bad_request(
            Check::State,
            "invalid_conversation",
            toolgate_plugin::directives::invalid_conversation_message(&name),
        ));
    }
    Ok(name)
}

/// The store key of a conversation: tenant and conversation length-prefixed, so no pair of
/// names can spell another pair's key.
pub(crate) fn record_key(tenant: Option<&str>, conversation: &str) -> String {
    let tenant = tenant.unwrap_or_default();
    format!("toolgate:workflow:{}:{tenant}:{conversation}", tenant.len())
}

/// The store key that names the conversation a delivered call (by its id) belongs to, so that
/// a Responses continuation by `previous_response_id`, which sends only its outputs, finds its
/// conversation without naming it.
pub(crate) fn call_key(tenant: Option<&str>, call_id: &str) -> String {
    let tenant = tenant.unwrap_or_default();
    format!("toolgate:workflow-call:{}:{tenant}:{call_id}", tenant.len())
}

/// The conversation of a request that names none but answers calls of a stored response: the
/// one toolgate delivered the first of those calls in. `None` when it answers none it knows.
pub(crate) async fn continued_conversation(
    store: &dyn StateStore,
    tenant: Option<&str>,
    request: Option<&ToolRequest>,
) -> Result<Option<String>, StoreError> {
    let Some(request) = request else {
        return Ok(None);
    };
    for call in request.history() {
        if !call.name.is_empty() || !call.latest_turn {
            continue;
        }
        let Some(id) = call.id.as_deref() else {
            continue;
        };
        if let Some(conversation) = store.read_record(&call_key(tenant, id)).await? {
            return Ok(Some(conversation));
        }
    }
    Ok(None)
}

/// What applying a request to a conversation's record decided.
pub(crate) enum Applied {
    /// The selection to run the request under (its transitions are the newly recorded ones).
    Settled(Selection),
    /// The latest turn called a tool its state did not offer, and the route refuses that.
    Invalid(Refusal),
}

/// Moves the record at `key` by the request's latest turn, once, and returns the selection
/// with the stored state. `selection` carries the groups already checked and the state the
/// client named, if it named one.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn apply(
    store: &dyn StateStore,
    key: &str,
    ttl: Duration,
    request: Option<&ToolRequest>,
    catalog: &ToolCatalog,
    on_invalid: OnInvalidTransition,
    claimed_state: Option<&str>,
    mut selection: Selection,
) -> Result<Applied, StoreError> {
    let history = request.map(ToolRequest::history).unwrap_or_default();
    let latest_turn = history
        .iter()
        .find(|call| call.latest_turn)
        .map(|call| call.turn);
    for _ in 0..ATTEMPTS {
        let stored = store.read_record(key).await?;
        let record = WorkflowRecord::read(stored.as_deref());
        let before = record.state.clone();
        let mut next = record.clone();
        let mut applied = TurnApplied::default();
        let settled = history
            .iter()
            .filter(|call| call.latest_turn)
            .all(|call| call.outcome != CallOutcome::Pending);
        // A turn applies when it is past the record's, or when it carries the result of a call
        // toolgate delivered and no result has answered yet: a client that trimmed or
        // summarised its history sends its latest turn at a smaller position than it had.
        let answers_delivered = history
            .iter()
            .filter(|call| call.latest_turn && call.outcome == CallOutcome::Completed)
            .any(|call| record.is_delivered(call));
        if let Some(turn) = latest_turn
            .filter(|turn| settled && (*turn >= record.turns_applied || answers_delivered))
        {
            let fresh_turn = turn >= record.turns_applied;
            applied = match apply_turn(
                &history, fresh_turn, &record, &mut next, catalog, on_invalid,
            ) {
                Ok(applied) => applied,
                Err(refusal) => return Ok(Applied::Invalid(refusal)),
            };
            // One more turn applied, wherever the client's history placed it: a full history
            // sent after a trimmed one then shows this turn as already applied.
            next.turns_applied = (turn + 1).max(record.turns_applied + 1);
            next.transitions.extend(applied.transitions.iter().cloned());
            let excess = next.transitions.len().saturating_sub(KEPT_TRANSITIONS);
            next.transitions.drain(..excess);
        }
        if let Some(claimed) = claimed_state
            && claimed != before
            && claimed != next.state
        {
            return Ok(Applied::Invalid(forbidden(
                Check::State,
                "forged_state",
                format!(
                    "the request names state '{claimed}', but toolgate keeps this conversation in '{}'",
                    next.state
                ),
            )));
        }
        if next != record || stored.is_none() {
            let text = serde_json::to_string(&next).map_err(|error| {
                StoreError::new(format!("a record would not serialise: {error}"))
            })?;
            if !store
                .replace_record(key, stored.as_deref(), &text, ttl)
                .await?
            {
                continue;
            }
        }
        selection.initial_state = before;
        selection.state = next.state;
        selection.transitions = applied.transitions;
        selection.invalid_transitions = applied.invalid;
        selection.ignored_results = applied.ignored;
        return Ok(Applied::Settled(selection));
    }
    Err(StoreError::new(
        "the conversation's record kept changing under concurrent requests",
    ))
}

/// What the latest turn's results did to the record: the transitions they made, how many
/// ran in a state that did not offer them, the results of calls toolgate never delivered.
#[derive(Default)]
struct TurnApplied {
    transitions: Vec<Transition>,
    invalid: usize,
    ignored: Vec<CallRef>,
}

/// Applies the results of the latest turn: each moves the state when it answers a call toolgate
/// delivered and has not seen answered (`fresh_turn`: the turn is past the record's, so a
/// result of a call never delivered is one, not an older turn's again).
fn apply_turn(
    history: &[HistoryCall],
    fresh_turn: bool,
    record: &WorkflowRecord,
    next: &mut WorkflowRecord,
    catalog: &ToolCatalog,
    on_invalid: OnInvalidTransition,
) -> Result<TurnApplied, Refusal> {
    let mut turn = TurnApplied::default();
    for call in history.iter().filter(|call| call.latest_turn) {
        if call.outcome != CallOutcome::Completed {
            continue;
        }
        let Some(delivered_tool) = next.take_delivered(call) else {
            // In a turn at or before the record's, a result toolgate does not wait
            // for is one already applied (a trimmed history's older turn): it moves
            // nothing. Past it, it is a result of a call toolgate never delivered.
            if !fresh_turn {
                continue;
            }
            if on_invalid == OnInvalidTransition::Block {
                return Err(undelivered(call, &record.state));
            }
            turn.ignored.push(CallRef {
                tool_call_id: call.id.clone(),
                tool: call.name.clone(),
            });
            continue;
        };
        let mut fallback = None;
        let tool = entry_of(catalog, &delivered_tool, &mut fallback);
        if !tool.available_in(&next.state) {
            turn.invalid += 1;
            if on_invalid == OnInvalidTransition::Block {
                return Err(forbidden(
                    Check::State,
                    "invalid_transition",
                    format!(
                        "'{}' ran in state '{}', which does not offer it: the conversation's state stays '{}'",
                        tool.name, next.state, record.state
                    ),
                ));
            }
        }
        follow_transition(tool, &mut next.state, Some(&mut turn.transitions), true);
    }
    Ok(turn)
}

/// The refusal of a result that answers no call toolgate delivered (or one already answered).
fn undelivered(result: &HistoryCall, state: &str) -> Refusal {
    let id = result.id.as_deref().map_or_else(String::new, |id| {
        format!(" (tool_call_id '{}')", id.escape_debug())
    });
    forbidden(
        Check::State,
        "undelivered_call",
        format!(
            "the result of '{}'{id} answers a call toolgate never delivered in this conversation, or one already answered: it cannot move the workflow, whose state stays '{state}'",
            result.name.escape_debug()
        ),
    )
}

/// Remembers, by each delivered call's id, which conversation it belongs to ([`call_key`]), so
/// a Responses continuation that sends only its outputs finds the conversation.
pub(crate) async fn remember_calls(
    store: &dyn StateStore,
    (tenant, conversation): (Option<&str>, &str),
    ttl: Duration,
    calls: &[ToolCall],
) -> Result<(), StoreError> {
    for id in calls.iter().filter_map(|call| call.id.as_deref()) {
        let key = call_key(tenant, id);
        let stored = store.read_record(&key).await?;
        // A lost race leaves the other writer's conversation, for a reused id: either is one
        // this tenant delivered the id in.
        store
            .replace_record(&key, stored.as_deref(), conversation, ttl)
            .await?;
    }
    Ok(())
}

/// Records calls delivered to the client in the conversation's record at `key`, so their
/// results (and only theirs) may move the state, each once.
pub(crate) async fn record_delivery(
    store: &dyn StateStore,
    key: &str,
    ttl: Duration,
    calls: &[ToolCall],
) -> Result<(), StoreError> {
    for _ in 0..ATTEMPTS {
        let stored = store.read_record(key).await?;
        let mut record = WorkflowRecord::read(stored.as_deref());
        record.delivered.extend(calls.iter().map(|call| CallRef {
            tool_call_id: call.id.clone(),
            tool: call.name.clone(),
        }));
        let excess = record.delivered.len().saturating_sub(KEPT_DELIVERIES);
        record.delivered.drain(..excess);
        let text = serde_json::to_string(&record)
            .map_err(|error| StoreError::new(format!("a record would not serialise: {error}")))?;
        if store
            .replace_record(key, stored.as_deref(), &text, ttl)
            .await?
        {
            return Ok(());
        }
    }
    Err(StoreError::new(
        "the conversation's record kept changing under concurrent requests",
    ))
}
